"""The launch-overhead model (no GPU, no torch): arithmetic on measured launch times of three clocks:
``issue_ms`` (host clock, no synchronize), ``synced_wall_ms`` (the same clock, stopped after
``stream.synchronize()``) and ``event_ms`` (CUDA events around the launches). ``issue <= synced_wall`` and
``event <= synced_wall`` hold (:func:`clock_ordering_violations`); ``issue`` vs ``event`` goes either way."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from cudagraph_bench.errors import UsageError

#: Largest count a float32 holds exactly: every integer <= 2**24 is representable, 2**24 + 1 is not.
FLOAT32_EXACT_LIMIT = 2**24
#: Tolerance of ``event_ms <= synced_wall_ms``: the event timer's ~0.5 µs resolution (``cudaEventElapsedTime``)
#: and two different oscillators.
EVENT_TOLERANCE_MS = 0.02
EVENT_TOLERANCE_REL = 0.02


def us_per_launch(total_ms: float, n_launches: int) -> float:
    """µs per launch of a sequence that took ``total_ms`` milliseconds for ``n_launches`` launches.

    Raises ``ValueError`` when ``n_launches < 1`` or ``total_ms`` is negative or not finite."""
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

    ``n_kernels * (loop_us_per_launch - graph_us_per_launch) / 1000``, assuming a launch-bound eager forward
    whose kernels cost as much host time as a tiny-kernel launch (real forwards also run Python, so the measured
    saving can exceed it). Negative when the graph is slower per launch.

    Raises ``ValueError`` for ``n_kernels < 0`` or a non-finite µs value."""
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

    Inputs are per-repeat times ``[repeats]`` in ms of the same calls. Checked: ``issue <= synced_wall`` exactly
    and ``event <= synced_wall * (1 + tol_rel) + tol_ms``; orderings that hold per repeat hold for the medians.

    Raises ``ValueError`` when the three sequences differ in length or are empty."""
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
