"""The launch-overhead model (no torch): arithmetic on launch times of three clocks, ``issue_ms`` (host, no
synchronize), ``synced_wall_ms`` (host, after ``stream.synchronize()``) and ``event_ms`` (CUDA events). ``issue <=
synced_wall`` and ``event <= synced_wall`` hold; ``issue`` vs ``event`` goes either way."""

from __future__ import annotations

import math
import statistics
from typing import Sequence

from cudagraph_bench.errors import UsageError

#: Largest count a float32 holds exactly: every integer <= 2**24 is representable, 2**24 + 1 is not.
FLOAT32_EXACT_LIMIT = 2**24
#: Tolerance of ``event_ms <= synced_wall_ms``: the event timer's ~0.5 µs resolution and two oscillators.
EVENT_TOLERANCE_MS = 0.02
EVENT_TOLERANCE_REL = 0.02


def us_per_launch(total_ms: float, n_launches: int) -> float:
    """µs per launch; ValueError when ``n_launches < 1`` or ``total_ms`` is negative or not finite."""
    if n_launches < 1:
        raise ValueError(f"n_launches must be >= 1, got {n_launches}")
    if not (math.isfinite(total_ms) and total_ms >= 0):
        raise ValueError(f"total_ms must be a finite number >= 0, got {total_ms}")
    return total_ms * 1000.0 / n_launches


def speedup(loop_ms: float, graph_ms: float) -> float:
    """``loop_ms / graph_ms``; ValueError when ``graph_ms <= 0``."""
    if not graph_ms > 0:
        raise ValueError(f"graph time must be > 0 ms, got {graph_ms}")
    return loop_ms / graph_ms


class LoopVsGraph:
    """Loop vs graph medians ``loop_ms`` / ``graph_ms`` (ms, None when not measured) of ``n_launches`` launches, and
    the numbers derived from them (None where a median is missing)."""

    @property
    def complete(self) -> bool:
        return self.loop_ms is not None and self.graph_ms is not None

    @property
    def speedup(self) -> float | None:
        """``loop_ms / graph_ms``; None when a median is missing or the graph's is not > 0."""
        return speedup(self.loop_ms, self.graph_ms) if self.complete and self.graph_ms > 0 else None

    @property
    def us_per_launch_loop(self) -> float | None:
        return None if self.loop_ms is None else self.loop_ms * 1000.0 / self.n_launches

    @property
    def us_per_launch_graph(self) -> float | None:
        return None if self.graph_ms is None else self.graph_ms * 1000.0 / self.n_launches


def predicted_saving_ms(n_kernels: int, loop_us_per_launch: float, graph_us_per_launch: float) -> float:
    """Ms a graph should save on a forward of ``n_kernels`` kernels: ``n_kernels * (loop_us_per_launch -
    graph_us_per_launch) / 1000``, assuming each kernel costs a tiny-kernel launch of host time (real forwards also run
    Python, so the measured saving can exceed it). ValueError for ``n_kernels < 0`` or a non-finite µs value."""
    if n_kernels < 0:
        raise ValueError(f"n_kernels must be >= 0, got {n_kernels}")
    for name, value in (("loop_us_per_launch", loop_us_per_launch), ("graph_us_per_launch", graph_us_per_launch)):
        if not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number of µs, got {value}")
    return n_kernels * (loop_us_per_launch - graph_us_per_launch) / 1000.0


def median_ms(values_ms: Sequence[float]) -> float:
    """The median (ms); ValueError (``statistics.StatisticsError``) for an empty sequence."""
    return float(statistics.median(values_ms))


def expected_count(n_launches: int, n_calls: int) -> int:
    """The counter after ``n_calls`` sequences of ``n_launches`` ``+1`` launches from zero. UsageError when the count
    would not be exact in float32 (> 2**24)."""
    count = n_launches * n_calls
    if count > FLOAT32_EXACT_LIMIT:
        raise UsageError(f"{n_calls} calls x {n_launches} launches = {count} is above 2**24, where float32 "
                         "stops counting exactly: use fewer repeats")
    return count


def clock_ordering_violations(issue_ms: Sequence[float], synced_wall_ms: Sequence[float],
                              event_ms: Sequence[float], *, tol_ms: float = EVENT_TOLERANCE_MS,
                              tol_rel: float = EVENT_TOLERANCE_REL) -> list[str]:
    """One message per violated ordering of per-repeat times ``[repeats]`` (ms; empty = ok): ``issue <= synced_wall``
    exactly and ``event <= synced_wall * (1 + tol_rel) + tol_ms``. ValueError when the lengths differ or are 0."""
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
