"""Launch-overhead benchmarks and GPU tests, torch implementation.

Benchmarks (``pytest perf_tests/test_launch.py --benchmark-only``): N in {8, 64, 512, 4096} tiny
launches (``counter.add_(1.0)`` on a ``[1]`` float32 tensor) on a non-default stream, as an eager loop
and as one replay of a graph of the same N launches. Loop and graph of one N share the group
``launch N=...`` so pytest-benchmark prints them side by side. Every round ends with a stream
synchronize. ``extra_info``: ``suite="launch"``, ``n_launches``, ``variant``, ``cuda_event_ms`` (the
measured rounds), ``event_median_ms``, ``us_per_launch`` (CUDA-event median / N, µs), and the three
clocks of :func:`cudagraph_bench.measure.launch_overhead.measure_clocks` (medians, ms).

Tests (``--benchmark-skip`` or no flag): exact counter check, clock ordering, the baked-pointer
hazard, GraphedForward refusing misuse, and kernel counting with torch.profiler.
"""

from __future__ import annotations

import textwrap

import pytest
from child_process import run_script

from cudagraph_bench import variants
from cudagraph_bench.measure import launch_overhead
from cudagraph_bench.results import launch_model
from cudagraph_bench.options import LAUNCH_VARIANTS

ROUNDS = 50            # at least this many measured rounds (more with --benchmark-min-rounds)
WARMUP_ROUNDS = 5      # at least this many warmup rounds (more with --benchmark-warmup-iterations)


@pytest.fixture
def rounds(request) -> tuple[int, int]:
    """``(rounds, warmup_rounds)``: the suite's ``--benchmark-min-rounds`` / ``--benchmark-warmup-iterations``, at least 50 and 5."""
    opt = request.config.getoption
    return max(ROUNDS, int(opt("rounds", default=ROUNDS))), max(WARMUP_ROUNDS, int(opt("warmup_rounds", default=WARMUP_ROUNDS)))


@pytest.fixture
def make_sequence():
    """Factory of :class:`~cudagraph_bench.measure.launch_overhead.TinyKernelSequence`, the registry's builder of a
    launch variant; closes every sequence (drops its graph) at teardown."""
    made = []

    def make(n_launches: int, variant: str = variants.LAUNCH_REFERENCE) -> launch_overhead.TinyKernelSequence:
        seq = variants.variant(variants.LAUNCH, variant).build_callable()(n_launches)
        made.append(seq)
        return seq

    yield make
    for seq in made:
        seq.close()


# ------------------------------------------------------------------------------------- benchmarks

@pytest.mark.gpu
@pytest.mark.parametrize("variant", LAUNCH_VARIANTS)
@pytest.mark.parametrize("n_launches", launch_overhead.SWEEP_N)
def test_launch_overhead(benchmark, make_sequence, rounds, n_launches, variant):
    n_rounds, n_warmup = rounds
    seq = make_sequence(n_launches, variant)
    event_ms: list[float] = []

    def one_sequence():
        # N launches (loop) or one replay of N kernels (graph), CUDA events on the stream, then
        # stream.synchronize(): pytest-benchmark's wall clock includes the device work.
        event_ms.append(seq.timed(variant))

    benchmark.group = f"launch N={n_launches}"
    benchmark.pedantic(one_sequence, rounds=n_rounds, warmup_rounds=n_warmup, iterations=1)

    # Every call (warmup included) ran all of its N kernels: the counter counts them exactly.
    assert seq.value() == float(launch_model.expected_count(n_launches, len(event_ms)))

    measured = event_ms[-n_rounds:]
    event_median = launch_model.median_ms(measured)
    clocks = launch_overhead.measure_clocks(n_launches, variant, repeats=n_rounds, warmup=n_warmup, seq=seq)
    info = {
        "suite": "launch",
        "n_launches": n_launches,
        "variant": variant,
        "cuda_event_ms": measured,
        "event_median_ms": event_median,
        "us_per_launch": launch_model.us_per_launch(event_median, n_launches),
        **{f"clock_{k}": v for k, v in clocks.medians().items()},
    }
    stats = getattr(getattr(benchmark, "stats", None), "stats", None)
    if stats is not None:
        info["us_per_launch_wall"] = launch_model.us_per_launch(stats.median * 1e3, n_launches)
    benchmark.extra_info.update(info)


# ------------------------------------------------------------------------------------------ tests

@pytest.mark.gpu
@pytest.mark.parametrize("n_launches", launch_overhead.SWEEP_N)
@pytest.mark.parametrize("loops, replays", [(0, 1), (1, 0), (3, 5)], ids=["replay", "loop", "3loops+5replays"])
def test_counter_counts_every_launch(make_sequence, n_launches, loops, replays):
    seq = make_sequence(n_launches)
    observed, expected = launch_overhead.check_count(seq, loops=loops, replays=replays)
    # Integers below 2**24 are exact in float32, so the comparison is exact.
    assert expected == n_launches * (loops + replays)
    assert observed == float(expected)


@pytest.mark.gpu
@pytest.mark.gpu_timing
def test_loop_vs_graph_sweep_counts_and_speedup():
    result = launch_overhead.measure_loop_vs_graph(512, repeats=ROUNDS, warmup=WARMUP_ROUNDS)
    assert result.count_ok, (result.count_observed, result.count_expected)
    assert len(result.loop_event_ms) == len(result.graph_event_ms) == ROUNDS
    # 512 PyTorch dispatches + CUDA launches vs one cudaGraphLaunch: the replay must be faster.
    assert result.speedup > 1.0, result.as_dict()


@pytest.mark.gpu
@pytest.mark.parametrize("variant", LAUNCH_VARIANTS)
def test_clock_ordering(variant, record_property):
    result = launch_overhead.measure_clocks(512, variant, repeats=ROUNDS, warmup=WARMUP_ROUNDS)
    medians = result.medians()
    record_property("clock_medians_ms", medians)
    # Guaranteed per repeat, hence for the medians too:
    # - issue <= synced wall: one monotonic clock (perf_counter), same start t0, issue stops at t1
    #   before the synchronize, synced wall stops at t2 after it.
    # - events <= synced wall (+ timer resolution): the start event is queued after t0 and the end
    #   event has completed when synchronize returns at t2; the GPU clock and the host clock are
    #   different oscillators, hence the small tolerance.
    # Not asserted: issue vs events (launch-bound loops make them close; a replay issues in one call
    # while its kernels run afterwards, so there issue < events; neither order is guaranteed).
    assert result.violations() == []
    assert medians["issue_ms"] <= medians["synced_wall_ms"]


@pytest.mark.gpu
def test_graph_issues_faster_than_loop():
    # The point of a graph: 512 launches are submitted by one host call. Host issue time of the
    # replay must be below that of 512 eager launches (each pays dispatcher + launch).
    loop = launch_overhead.measure_clocks(512, "loop", repeats=ROUNDS, warmup=WARMUP_ROUNDS).medians()
    graph = launch_overhead.measure_clocks(512, "graph", repeats=ROUNDS, warmup=WARMUP_ROUNDS).medians()
    assert graph["issue_ms"] < loop["issue_ms"], (graph, loop)


@pytest.mark.gpu
def test_baked_pointer_hazard(record_property):
    n = 8
    result = launch_overhead.baked_pointer_demo(n_launches=n)
    record_property("baked_pointer", result.as_dict())
    # Rebinding: the old buffer is alive, so the new one must live at another address...
    assert result.new_ptr != result.old_ptr
    # ...and the graph wrote the captured (old) address twice (two replays of n "+1"), never the new buffer.
    assert result.old_value == 2 * n
    assert result.new_value == 0.0
    # Free then allocate: the caching allocator may return the freed block. Either way the replay
    # wrote the captured address: into the new tensor if it got that block, else nowhere visible.
    if result.same_address:
        assert result.realloc_value == n, "replay must hit the tensor that reuses the captured address"
    else:
        assert result.realloc_value == 0.0, "replay must not touch a tensor at another address"


# ---------------------------------------------------------------- GraphedForward cannot be misused

def _tiny_forward(model, input_ids, attention_mask=None):
    """``input_ids: [batch, seq_len]`` int64 -> ``[batch, seq_len, 16]`` float32."""
    return model(input_ids)


@pytest.fixture
def tiny_model():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(128, 32), torch.nn.Linear(32, 16)).cuda().eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


@pytest.fixture
def graphed(tiny_model):
    from cudagraph_bench.capture.graphed import GraphedForward

    made = []

    def make(**kwargs):
        gf = GraphedForward(tiny_model, 16, forward=_tiny_forward, **kwargs)
        made.append(gf)
        return gf

    yield make
    for gf in made:
        gf.close()


@pytest.mark.gpu
def test_graphed_forward_copies_fresh_inputs(graphed, tiny_model):
    """A new input tensor per call (a new address each time) is copied into the static buffer, so the
    replay reads it: no baked-pointer hazard through inputs."""
    import torch

    from cudagraph_bench.measure.correctness import assert_matches_eager

    gf = graphed(check_data_ptrs=True)
    static_ptr = gf.static_input_ids.data_ptr()
    for seed in (1, 2, 3):
        g = torch.Generator(device="cuda").manual_seed(seed)
        ids = torch.randint(0, 128, (1, 16), device="cuda", generator=g)
        out = gf(ids).clone()
        torch.cuda.synchronize()
        assert gf.static_input_ids.data_ptr() == static_ptr
        assert ids.data_ptr() != static_ptr
        assert torch.equal(gf.static_input_ids, ids)
        with torch.inference_mode():
            expected = tiny_model(ids)
        assert_matches_eager(out, expected, "float32")


@pytest.mark.gpu
def test_graphed_forward_static_buffers_are_read_only(graphed):
    import torch

    gf = graphed()
    for name in ("static_input_ids", "static_output"):
        with pytest.raises(AttributeError):
            setattr(gf, name, torch.zeros_like(getattr(gf, name)))


@pytest.mark.gpu
def test_graphed_forward_refuses_repointed_buffer_set(graphed):
    import torch

    from cudagraph_bench.errors import StaticBufferError

    gf = graphed(check_data_ptrs=True)
    ids = torch.randint(0, 128, (1, 16), device="cuda")
    gf(ids)
    gf.static_input_ids.set_(torch.zeros_like(gf.static_input_ids))   # re-points the storage
    with pytest.raises(StaticBufferError):
        gf(ids)


@pytest.mark.gpu
def test_graphed_forward_refuses_repointed_buffer_resize(graphed):
    import torch

    from cudagraph_bench.errors import StaticBufferError

    gf = graphed(check_data_ptrs=True)
    ids = torch.randint(0, 128, (1, 16), device="cuda")
    buf = gf.static_input_ids
    old_ptr = buf.data_ptr()
    buf.resize_(1, 1 << 20)        # grows the storage: reallocated at a new address
    buf.resize_(1, 16)             # same shape again, still the new storage
    assert buf.data_ptr() != old_ptr
    with pytest.raises(StaticBufferError):
        gf(ids)


# ------------------------------------------------------------------------------- kernel counting

_COUNT_SCRIPT = textwrap.dedent("""
    import json, sys, torch
    from cudagraph_bench.measure.launch_overhead import TinyKernelSequence, count_kernel_launches
    from cudagraph_bench.measure.roofline import profile_forward
    N = int(sys.argv[1])
    x = torch.zeros(1, device="cuda")
    host = torch.ones(1024)                  # pageable host tensor: copy_ is a memcpy, not a kernel
    y = torch.empty(1024, device="cuda")
    def eager():
        for _ in range(N):
            x.add_(1.0)
    def eager_with_memcpy():
        y.copy_(host)
        eager()
    seq = TinyKernelSequence(N)
    print(json.dumps({
        "eager": count_kernel_launches(eager),
        "eager_with_memcpy": count_kernel_launches(eager_with_memcpy),
        "graph_replay": count_kernel_launches(seq.replay),
        "one_window": profile_forward(eager, repeats=3),    # [(kernels, busy ms)] per call, split at markers
    }))
""")


@pytest.mark.gpu
def test_count_kernel_launches(record_property):
    # In a child process: profiling can leave CUPTI active in the process (pytorch/pytorch#144455),
    # which must not slow the benchmarks of this session.
    n = 37                                   # add_ launches of the counted sequences
    counts = run_script(_COUNT_SCRIPT, str(n), timeout_s=300)
    record_property("kernel_counts", counts)
    assert counts["eager"] == n
    assert counts["eager_with_memcpy"] == n, "a memcpy is not a kernel launch"
    assert counts["graph_replay"] == n, "kernels replayed from a graph are still kernels"
    # the forward profile's one window: each call's kernels counted like a window of its own, no marker counted
    assert len(counts["one_window"]) == 3
    assert all(k == n and busy_ms > 0 for k, busy_ms in counts["one_window"]), counts["one_window"]
