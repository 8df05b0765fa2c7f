"""Launch-overhead microbenchmarks (docs/launch-overhead.md): a one-element kernel (``counter.add_(1.0)``) launched N
times, eagerly and as one graph replay; host vs device clocks; the baked-pointer hazard; kernel counting. torch is
imported inside functions only."""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from typing import Callable, Iterable

from cudagraph_bench import variants
from cudagraph_bench.capture.graphed import Closing
from cudagraph_bench.errors import CudaUnavailableError, UsageError
from cudagraph_bench.results.launch_model import LoopVsGraph, clock_ordering_violations, expected_count, median_ms

#: Default sequence lengths of the N sweep (kernel launches per sequence).
SWEEP_N = (8, 64, 512, 4096)
#: Names of device events that are not kernels (used only when the profiler gives no activity type).
_NON_KERNEL_PREFIXES = ("memcpy", "memset", "stream sync", "event sync", "context sync",
                        "device sync", "stream wait event", "cuda sync", "profilerstep")


def _device_type_name(device_type) -> str:
    """``DeviceType.CUDA`` -> ``"cuda"`` (plain strings too, for tests)."""
    name = getattr(device_type, "name", None) or str(device_type)
    return name.rsplit(".", 1)[-1].lower()


def is_kernel_event(e) -> bool:
    """Whether a profiler ``FunctionEvent``-like ``e`` (``device_type``, ``name``, optional ``activity_type`` and
    ``is_user_annotation``) is a device kernel: a CUDA event of kineto activity type ``"kernel"``; without an activity
    type (older torch), a CUDA event that is no user annotation and has no non-kernel name prefix."""
    if _device_type_name(e.device_type) != "cuda":
        return False
    activity_type = getattr(e, "activity_type", None)
    if activity_type:
        return activity_type.lower() == "kernel"
    return not getattr(e, "is_user_annotation", False) and not e.name.strip().lower().startswith(_NON_KERNEL_PREFIXES)


def count_kernel_events(events: Iterable) -> int:
    """Number of kernel events among profiler ``FunctionEvent``-like objects."""
    return sum(1 for e in events if is_kernel_event(e))


def profile_calls(fn: Callable[[], object], *, calls: int = 1):
    """The finished ``torch.profiler`` window (CPU and CUDA activity) of ``calls`` calls of ``fn``, after one profiled
    call that warms CUPTI (kineto may drop the first records). Profile after timing: CUPTI left attached slows later
    launches (pytorch/pytorch#144455). CudaUnavailableError without a GPU; ValueError for ``calls < 1``."""
    torch = _require_cuda()
    from torch.profiler import ProfilerActivity, profile, schedule

    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=0, warmup=1, active=calls, repeat=1)) as prof:
        for _ in range(1 + calls):
            fn()
            torch.cuda.synchronize()
            prof.step()
    return prof


def count_kernel_launches(fn: Callable[[], object], *, warmup: int = 1) -> int:
    """Device kernels one call of ``fn`` launches (graph replays' included), by :func:`profile_calls` after ``warmup``
    calls; 0 when CUPTI is unavailable. CudaUnavailableError without a GPU, ValueError for ``warmup < 0``."""
    _require_cuda()
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    for _ in range(warmup):
        fn()
    return count_kernel_events(profile_calls(fn).events())


def _require_cuda():
    import torch

    if not torch.cuda.is_available():
        raise CudaUnavailableError("launch-overhead benchmarks need a CUDA GPU (torch.cuda.is_available() is "
                                   "False): run them on a GPU machine")
    return torch


def _launch_variant(name: str) -> variants.Variant:
    """UsageError for an unknown name."""
    kind = variants.find(variants.LAUNCH, name)
    if kind is None:
        raise UsageError(f"unknown launch variant {name!r}: use {' or '.join(variants.LAUNCH_NAMES)}")
    return kind


class TinyKernelSequence(Closing):
    """``n_launches`` launches of ``counter.add_(1.0)`` (``counter: [1] float32``, from 0) on :attr:`stream`, eagerly
    and as one CUDA graph. Raises CudaUnavailableError without a GPU, UsageError for ``n_launches < 1``."""

    def __init__(self, n_launches: int, *, device="cuda"):
        torch = _require_cuda()
        if n_launches < 1:
            raise UsageError(f"n_launches must be >= 1, got {n_launches}")
        self._torch = torch
        self.n_launches = int(n_launches)
        self.device = torch.device(device)
        self.stream = torch.cuda.Stream(device=self.device)
        self.counter = torch.zeros(1, dtype=torch.float32, device=self.device)
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)
        # the zeros kernel ran on the current stream; order the side stream after it
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        self.graph = None
        self.run_loop()
        self.stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=self.stream):
            self.run_loop()
        self.graph = graph
        self.reset()

    def run_loop(self) -> None:
        """No synchronize."""
        counter = self.counter
        with self._torch.cuda.stream(self.stream):
            for _ in range(self.n_launches):
                counter.add_(1.0)

    def replay(self) -> None:
        """Issue one replay of the captured graph (all ``n_launches`` kernels) on :attr:`stream`."""
        if self.graph is None:
            raise RuntimeError("this TinyKernelSequence was closed")
        with self._torch.cuda.stream(self.stream):
            self.graph.replay()

    def timed(self, variant: str) -> float:
        """One sequence (``"loop"`` or ``"graph"``) timed by CUDA events, in ms (synchronized)."""
        return self.clocked(variant)[2]

    def clocked(self, variant: str) -> tuple[float, float, float]:
        """``(issue_ms, synced_wall_ms, event_ms)`` of one sequence from a drained stream."""
        fn = self.run_loop if _launch_variant(variant).is_reference else self.replay
        self.stream.synchronize()
        t0 = time.perf_counter()
        self._start.record(self.stream)
        fn()
        self._end.record(self.stream)
        t1 = time.perf_counter()
        self.stream.synchronize()
        t2 = time.perf_counter()
        return (t1 - t0) * 1e3, (t2 - t0) * 1e3, self._start.elapsed_time(self._end)

    def reset(self) -> None:
        """Set the counter to 0 (on :attr:`stream`) and wait for it."""
        with self._torch.cuda.stream(self.stream):
            self.counter.zero_()
        self.stream.synchronize()

    def value(self) -> float:
        """Synchronize :attr:`stream` and return the counter as a Python float."""
        self.stream.synchronize()
        return float(self.counter.item())

    def close(self) -> None:
        """Drop the graph (its baked pointer refers to :attr:`counter`)."""
        if self.graph is not None:
            self.graph.reset()
        self.graph = None


@dataclass(frozen=True)
class SweepResult(LoopVsGraph):
    """Loop vs graph for one N: per-repeat CUDA-event ms ``[repeats]``; ``count_observed == count_expected`` shows every
    loop and replay ran all its kernels (exact below 2**24)."""

    n_launches: int
    loop_event_ms: tuple[float, ...]
    graph_event_ms: tuple[float, ...]
    count_expected: int
    count_observed: float

    @property
    def loop_ms(self) -> float:
        return median_ms(self.loop_event_ms)

    @property
    def graph_ms(self) -> float:
        return median_ms(self.graph_event_ms)

    @property
    def count_ok(self) -> bool:
        return self.count_observed == float(self.count_expected)

    def as_dict(self) -> dict:
        """Medians and derived numbers (ms, µs) plus the per-repeat lists, JSON-ready."""
        return {"n_launches": self.n_launches, "loop_ms": self.loop_ms, "graph_ms": self.graph_ms,
                "speedup": self.speedup, "us_per_launch_loop": self.us_per_launch_loop,
                "us_per_launch_graph": self.us_per_launch_graph, "count_ok": self.count_ok,
                "count_expected": self.count_expected, "count_observed": self.count_observed,
                "loop_event_ms": list(self.loop_event_ms), "graph_event_ms": list(self.graph_event_ms)}


def measure_loop_vs_graph(n_launches: int, *, repeats: int = 50, warmup: int = 5, device="cuda") -> SweepResult:
    """Time ``n_launches`` tiny launches as an eager loop and as one graph replay, alternating per repeat so clock drift
    affects both alike. Raises CudaUnavailableError without a GPU; UsageError for ``repeats < 1``, ``warmup < 0``, or a
    count above 2**24."""
    if repeats < 1 or warmup < 0:
        raise UsageError(f"repeats must be >= 1 and warmup >= 0 (got {repeats}, {warmup})")
    expected = expected_count(n_launches, 2 * (warmup + repeats))
    with TinyKernelSequence(n_launches, device=device) as seq:
        pairs = [(seq.timed(variants.LAUNCH_REFERENCE), seq.timed(variants.LAUNCH_GRAPH))
                 for _ in range(warmup + repeats)][warmup:]
        observed = seq.value()
    loop_ms, graph_ms = zip(*pairs)
    return SweepResult(n_launches=n_launches, loop_event_ms=loop_ms, graph_event_ms=graph_ms,
                       count_expected=expected, count_observed=observed)


def check_count(seq: TinyKernelSequence, *, loops: int, replays: int) -> tuple[float, int]:
    """``(observed, expected)`` after ``loops`` eager sequences and ``replays`` replays from 0. Raises UsageError when
    the expected count is above 2**24 (not exact in float32)."""
    expected = expected_count(seq.n_launches, loops + replays)
    seq.reset()
    for _ in range(loops):
        seq.run_loop()
    for _ in range(replays):
        seq.replay()
    return seq.value(), expected


@dataclass(frozen=True)
class ClockResult:
    """Per-repeat times ``[repeats]`` (ms) of one variant by three clocks."""

    n_launches: int
    variant: str
    issue_ms: tuple[float, ...]
    synced_wall_ms: tuple[float, ...]
    event_ms: tuple[float, ...]

    def medians(self) -> dict:
        """Medians in ms."""
        return {k: median_ms(getattr(self, k)) for k in ("issue_ms", "synced_wall_ms", "event_ms")}

    def violations(self) -> list[str]:
        """Guaranteed orderings that failed; empty when fine."""
        return clock_ordering_violations(self.issue_ms, self.synced_wall_ms, self.event_ms)


def measure_clocks(n_launches: int, variant: str = variants.LAUNCH_REFERENCE, *, repeats: int = 50, warmup: int = 5,
                   seq: TinyKernelSequence | None = None, device="cuda") -> ClockResult:
    """Time one variant (``"loop"``/``"graph"``) by three clocks, on ``seq`` or a new sequence. Raises
    CudaUnavailableError without a GPU; UsageError for an unknown variant, ``repeats < 1`` or ``warmup < 0``."""
    if repeats < 1 or warmup < 0:
        raise UsageError(f"repeats must be >= 1 and warmup >= 0 (got {repeats}, {warmup})")
    build = _launch_variant(variant).build_callable()
    with build(n_launches, device=device) if seq is None else nullcontext(seq) as seq:
        for _ in range(warmup):
            seq.clocked(variant)
        rows = [seq.clocked(variant) for _ in range(repeats)]
    return ClockResult(seq.n_launches, variant, *zip(*rows))     # issue, synced wall and event ms


@dataclass(frozen=True)
class BakedPointerResult:
    """What a replay writes after the captured buffer was replaced (counter floats). Rebind: the graph still writes
    ``old`` (``old_value == 2 * n_launches``, ``new_value == 0``). Free then allocate: when the allocator hands back the
    address (``same_address``, reported, not assumed) the replay writes into ``realloc``."""

    n_launches: int
    old_ptr: int
    new_ptr: int
    old_value: float
    new_value: float
    freed_ptr: int
    realloc_ptr: int
    realloc_value: float

    @property
    def same_address(self) -> bool:
        return self.freed_ptr == self.realloc_ptr

    @property
    def rebind_ok(self) -> bool:
        """The graph updated the old buffer (twice) and not the new one."""
        return self.old_value == 2.0 * self.n_launches and self.new_value == 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "rebind_ok": self.rebind_ok, "same_address": self.same_address}


def baked_pointer_demo(n_launches: int = 8, *, device="cuda") -> BakedPointerResult:
    """Show that a graph keeps writing the address it captured. Nothing empties the allocator's cache between the free
    and the replay, so the stray write lands in mapped memory (the ``cudaFree`` case: ``perf_tests/cuda/graphs.cu``).
    Raises CudaUnavailableError without a GPU, UsageError for ``n_launches < 1``."""
    import torch

    with TinyKernelSequence(n_launches, device=device) as seq:     # rebind: the old buffer stays alive
        old = seq.counter
        seq.replay()
        seq.counter = torch.zeros_like(old)                         # "counter = new buffer": the graph never sees it
        seq.replay()
        new_value = seq.value()
        rebind = {"old_ptr": old.data_ptr(), "new_ptr": seq.counter.data_ptr(), "old_value": float(old.item()),
                  "new_value": new_value}
    del old, seq
    with TinyKernelSequence(n_launches, device=device) as seq:     # free, then allocate
        freed_ptr = seq.counter.data_ptr()
        seq.counter = None                                          # the last reference: the block goes back
        realloc = torch.zeros(1, dtype=torch.float32, device=seq.device)
        seq.stream.wait_stream(torch.cuda.current_stream(seq.device))
        seq.replay()
        seq.stream.synchronize()
    return BakedPointerResult(n_launches=n_launches, **rebind, freed_ptr=freed_ptr, realloc_ptr=realloc.data_ptr(),
                              realloc_value=float(realloc.item()))
