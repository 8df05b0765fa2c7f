"""GPU checks of the roofline (:mod:`cudagraph_bench.measure.roofline`): the peak memory bandwidth and the raw
NVML values it comes from, the memory bandwidth a graphed decode reaches (positive, below the peak), and
the GPU busy time of one eager forward (positive, below the graph replay's median; both taken while no other test of
the session runs, ``gpu_timing``).

Run with ``-s`` to see the values: NVML's maximum memory clock, bus width and current memory clock next to
the datasheet's peak, and per decode case the bytes per token, ms/token and GB/s. The busy-time test is marked
``profiles``: it runs after every timed test of the session (:mod:`cudagraph_bench.plugin.profiles`), timing the
replay before it profiles the case.
"""

import statistics

import pytest

# BUSY_TIME_NOISE: how far a profiled busy time may exceed the replay median of a forward whose kernels alone
# fill its replay (tinyllama-1.1b float32 at 128 tokens)
from cudagraph_bench.measure.roofline import BUSY_TIME_NOISE

pytestmark = pytest.mark.gpu

#: Graph replays timed per forward case (after warmup replays).
REPLAYS, REPLAY_WARMUP = 50, 5
#: Whole decode requests timed per decode case.
REQUESTS = 5


def test_peak_memory_bandwidth_from_nvml_or_the_datasheet():
    import torch

    from cudagraph_bench.measure.gpustate import nvml_handle
    from cudagraph_bench.measure.roofline import nvml_memory_readings, peak_memory_bandwidth_gbps
    from cudagraph_bench.results.roofline_arithmetic import choose_peak, table_peak_gbps

    name = torch.cuda.get_device_name(0)
    found = nvml_handle(0)
    raw = nvml_memory_readings(*found) if found is not None else {}
    peak = peak_memory_bandwidth_gbps(0)
    print(f"\n{name}: NVML raw {raw}; datasheet {table_peak_gbps(name)} GB/s; peak {peak}")
    if not raw.get("max_mem_clock_mhz") and table_peak_gbps(name) is None:
        pytest.skip(f"neither NVML nor the datasheet table gives the peak memory bandwidth of {name}")
    assert peak is not None and peak["gbps"] > 0
    expected = choose_peak(name, raw.get("max_mem_clock_mhz"), raw.get("bus_width_bits"))
    assert peak == {**expected, "nvml_mem_clock_mhz": raw.get("mem_clock_mhz")}
    if raw.get("max_mem_clock_mhz") and raw.get("mem_clock_mhz"):
        assert raw["mem_clock_mhz"] <= raw["max_mem_clock_mhz"], "the current memory clock is above NVML's maximum"


def test_graphed_decode_bandwidth_is_positive_and_below_the_peak(cgb, causal_model):
    from cudagraph_bench.capture.decode import GreedyDecoder
    from cudagraph_bench.errors import NotGraphableError
    from cudagraph_bench.measure.roofline import peak_memory_bandwidth_gbps, request_bytes_per_token
    from cudagraph_bench.measure.timing import time_call
    from cudagraph_bench.models.presets import max_positions
    from cudagraph_bench.measure.decode_case import DECODE_PROMPT_SEED, decode_cache_len
    from cudagraph_bench.results.roofline_arithmetic import achieved_gbps, pct_of_peak

    dtype, prompt = cgb.option("decode_dtypes")[0], cgb.option("decode_prompt_lengths")[0]
    new_tokens = min(cgb.option("new_tokens"))
    cgb.skip_if_too_long(causal_model, prompt + new_tokens)
    model = cgb.model(causal_model, dtype)
    (ids,) = cgb.inputs(model, prompt, n=1, seed=DECODE_PROMPT_SEED)
    try:
        need = prompt + max(cgb.option("new_tokens"))
        decoder = GreedyDecoder(model, decode_cache_len(prompt, cgb.option("new_tokens"),
                                                        max_positions(model, bound=need)))
    except NotGraphableError as exc:
        pytest.skip(f"{causal_model} cannot be graphed: {exc}")
    try:
        timing = time_call(lambda: decoder.generate(ids, new_tokens), rounds=REQUESTS, warmup=1)
    finally:
        decoder.close()
        cgb.release()
    ms_per_token = statistics.median(timing.wall_ms) / new_tokens
    counted = request_bytes_per_token(model, prompt, new_tokens)
    gbps = achieved_gbps(counted["bytes_per_token"], ms_per_token)
    peak = peak_memory_bandwidth_gbps(0)
    peak_gbps = peak["gbps"] if peak else None
    print(f"\n{causal_model} {dtype} prompt {prompt} new {new_tokens} graph: {counted}; {ms_per_token:.4f} ms/token, "
          f"{gbps} GB/s; peak {peak_gbps} GB/s ({peak and peak['source']}): {pct_of_peak(gbps, peak_gbps)} % of peak")
    assert gbps is not None and gbps > 0
    if peak is not None:
        assert gbps < peak["gbps"], "more useful bytes per second than the GPU's peak: the byte count is too high"


def _launch_bound(seq_len: int) -> bool:
    from cudagraph_bench.results.baseline import DEFAULT_MAX_GATED_LEN

    return seq_len <= DEFAULT_MAX_GATED_LEN


@pytest.mark.profiles
@pytest.mark.gpu_timing           # the busy time and the replay median are both timed with the GPU to themselves
def test_eager_busy_time_is_positive_and_not_above_the_graph_replay_median(cgb, corr_case):
    from cudagraph_bench.capture.graphed import GraphedForward
    from cudagraph_bench.errors import NotGraphableError
    from cudagraph_bench.measure.kernel_counts import count_case
    from cudagraph_bench.measure.timing import time_call
    from cudagraph_bench.results.roofline_arithmetic import overhead

    case = corr_case
    if not _launch_bound(case.seq_len):
        pytest.skip(f"L={case.seq_len} is above the gated lengths: a compute-bound forward's replay is within "
                    "run-to-run noise of its busy time, so the order of the two says nothing there")
    cgb.skip_if_too_long(case.model, case.seq_len)
    model = cgb.model(case.model, case.dtype)
    (ids,) = cgb.inputs(model, case.seq_len, n=1)
    try:
        graph = GraphedForward(model, case.seq_len)
    except NotGraphableError as exc:
        pytest.skip(f"{case.model} cannot be graphed: {exc}")
    try:
        replay_ms = statistics.median(time_call(lambda: graph(ids), rounds=REPLAYS, warmup=REPLAY_WARMUP).wall_ms)
    finally:
        graph.close()
        cgb.release()
    got = count_case(*case.without_variant(), cgb.model)    # profiled now, right after the replay was timed
    assert got.status == "ok", f"{case.test_id}: not profiled ({got.phase}): {got.reason}"
    over_ms, us_per_node = overhead(replay_ms, got.gpu_busy_ms, got.n_kernels)
    print(f"\n{case.test_id}: busy {got.gpu_busy_ms:.4f} ms ({got.n_kernels} kernels), graph replay median "
          f"{replay_ms:.4f} ms, overhead {over_ms:.4f} ms = {us_per_node:.2f} µs per node")
    assert 0 < got.gpu_busy_ms < replay_ms * (1 + BUSY_TIME_NOISE), \
        f"{case.test_id}: the kernels alone took {got.gpu_busy_ms:.4f} ms, more than the whole replay ({replay_ms:.4f} ms)"
