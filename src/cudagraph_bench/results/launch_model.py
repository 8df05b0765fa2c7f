"""The launch-overhead model: arithmetic on measured launch times, no GPU and no torch.

Used by the launch microbenchmarks (:mod:`cudagraph_bench.measure.launch_overhead`) and by the launch-overhead
page (:mod:`cudagraph_bench.report.launch_page`), which predicts the saving of a graph on a real
forward from its kernel count.

What each clock measures (asserted by :func:`clock_ordering_violations`):

- ``issue_ms``: host ``time.perf_counter`` around the launches, **no** synchronize. Only the time the
  host took to queue the work (issue overhead); the GPU may still be running when it stops.
- ``synced_wall_ms``: the same clock started at the same instant, stopped after
  ``stream.synchronize()``: issue time plus waiting for the device to finish.
- ``event_ms``: CUDA events recorded on the stream before and after the launches: device-side time
  from when the stream reached the start event to when it reached the end event.

Guaranteed: ``issue_ms <= synced_wall_ms`` (same start, later stop, monotonic clock) and
``event_ms <= synced_wall_ms`` up to the event timer resolution (the start event is queued after the
wall clock started and the end event completes before the synchronize returns). Not guaranteed either
way: ``issue_ms`` vs ``event_ms``. For a launch-bound loop they are close (the GPU waits for each
launch); for a graph replay the issue time is one call while the event time covers all N kernels.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from cudagraph_bench.errors import UsageError

#: Largest count a float32 holds exactly: every integer <= 2**24 is representable, 2**24 + 1 is not.
FLOAT32_EXACT_LIMIT = 2**24
#: CUDA event timer resolution is about 0.5 µs (CUDA Runtime API, ``cudaEventElapsedTime``); the
#: tolerance of ``event_ms <= synced_wall_ms`` also allows for the GPU timer and the host clock being
#: different oscillators.
EVENT_TOLERANCE_MS = 0.02
EVENT_TOLERANCE_REL = 0.02


def us_per_launch(total_ms: float, n_launches: int) -> float:
    """µs per launch of a sequence that took ``total_ms`` milliseconds for ``n_launches`` launches.

    Raises ``ValueError`` when ``n_launches < 1`` or ``total_ms`` is negative or not finite.
    """
    if n_launches < 1:
        raise ValueError(f"n_launches must be >= 1, got {n_launches}")
    if not (math.isfinite(total_ms) and total_ms >= 0):
        raise ValueError(f"total_ms must be a finite number >= 0, got {total_ms}")
    return total_ms * 1000.0 / n_launches


def speedup(loop_ms: float, graph_ms: float) -> float:
    """``loop_ms / graph_ms`` (2.0 means the replay takes half the time). Raises ``ValueError`` when
    ``graph_ms <= 0``."""
    if not graph_ms > 0:
        raise ValueError(f"graph time must be > 0 ms, got {graph_ms}")
    return loop_ms / graph_ms


def predicted_saving_ms(n_kernels: int, loop_us_per_launch: float, graph_us_per_launch: float) -> float:
    """Launch-overhead model: milliseconds a graph should save on a forward of ``n_kernels`` kernels.

    ``n_kernels * (loop_us_per_launch - graph_us_per_launch) / 1000``: every kernel launched eagerly
    costs ``loop_us_per_launch`` µs of host issue (measured with the tiny-kernel loop), while inside a
    replayed graph it costs ``graph_us_per_launch`` µs. The model assumes the eager forward is
    launch-bound (the GPU waits for the host) and that each kernel of the forward costs as much host
    time as one tiny-kernel launch; real forwards also run Python module code and ops without kernels,
    so the measured saving can exceed the prediction. Negative when the graph is slower per launch.

    Raises ``ValueError`` for ``n_kernels < 0`` or a non-finite µs value.
    """
    if n_kernels < 0:
        raise ValueError(f"n_kernels must be >= 0, got {n_kernels}")
    for name, value in (("loop_us_per_launch", loop_us_per_launch), ("graph_us_per_launch", graph_us_per_launch)):
        if not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number of µs, got {value}")
    return n_kernels * (loop_us_per_launch - graph_us_per_launch) / 1000.0


def median_ms(values_ms: Sequence[float]) -> float:
    """Median (numpy's, the mean of the two middle values for an even count) of ``values_ms``.
    Raises ``ValueError`` for an empty sequence."""
    if len(values_ms) == 0:
        raise ValueError("need at least one time to take a median")
    return float(np.median(np.asarray(values_ms, dtype=np.float64)))


def expected_count(n_launches: int, n_calls: int) -> int:
    """Value of the counter after ``n_calls`` sequences (loops or replays) of ``n_launches`` ``+1`` launches
    from zero. Raises :class:`UsageError` when the count would not be exact in float32 (> 2**24)."""
    count = n_launches * n_calls
    if count > FLOAT32_EXACT_LIMIT:
        raise UsageError(f"{n_calls} calls x {n_launches} launches = {count} is above 2**24, where float32 "
                         "stops counting exactly: use fewer repeats")
    return count


def clock_ordering_violations(issue_ms: Sequence[float], synced_wall_ms: Sequence[float],
                              event_ms: Sequence[float], *, tol_ms: float = EVENT_TOLERANCE_MS,
                              tol_rel: float = EVENT_TOLERANCE_REL) -> list[str]:
    """Check the guaranteed clock orderings per repeat; returns one message per violation (empty = ok).

    Inputs are per-repeat times ``[repeats]`` in ms of the same calls, measured as in
    :meth:`TinyKernelSequence.clocked`. Checked: ``issue <= synced_wall`` exactly (same clock, same
    start, later stop) and ``event <= synced_wall * (1 + tol_rel) + tol_ms`` (different clocks; the
    event pair lies inside the synchronized wall interval). If every repeat satisfies an ordering, so
    do the medians (the k-th smallest of the smaller sample is <= the k-th smallest of the larger).
    ``issue`` vs ``event`` is not checked: neither order is guaranteed.

    Raises ``ValueError`` when the three sequences differ in length or are empty.
    """
    n = len(issue_ms)
    if n == 0 or len(synced_wall_ms) != n or len(event_ms) != n:
        raise ValueError(f"need the same, non-zero number of repeats per clock, got "
                         f"{len(issue_ms)}, {len(synced_wall_ms)}, {len(event_ms)}")
    out = []
    for i, (issue, wall, event) in enumerate(zip(issue_ms, synced_wall_ms, event_ms)):
        if issue > wall:
            out.append(f"repeat {i}: issue {issue:.6f} ms > synced wall {wall:.6f} ms")
        if event > wall * (1.0 + tol_rel) + tol_ms:
            out.append(f"repeat {i}: CUDA events {event:.6f} ms > synced wall {wall:.6f} ms (+ tolerance)")
    return out
