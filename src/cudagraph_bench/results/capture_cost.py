"""What capturing a graph costs per forward case, in the baseline and the gate (no torch): ``capture_ms`` in eager
calls, judged as latency is (failing only where the rank test agrees; one run beyond is a warning), and
``pool_left_mib``, the reserved memory a released graph left behind, failing above the baseline's by more than
``max(MEMORY_FLOOR_MIB, MEMORY_FLOOR_PCT, the baseline's range)``. Both move with torch releases, not replay latency."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cudagraph_bench.results import noise
from cudagraph_bench.results.benchmark_values import is_finite, is_number, is_whole
from cudagraph_bench.table import Column
from cudagraph_bench.variants import GATED

#: Smallest capture-time tolerance (percent): capture is host-side work and moves with the host.
CAPTURE_FLOOR_PCT = 20.0
#: Smallest memory tolerance (MiB): the caching allocator reserves whole segments of 2 MiB or more.
MEMORY_FLOOR_MIB = 1.0
#: Smallest memory tolerance relative to the baseline (percent).
MEMORY_FLOOR_PCT = 5.0
#: The baseline's thresholds of this module and their defaults.
THRESHOLDS = {"capture_floor_pct": CAPTURE_FLOOR_PCT, "memory_floor_mib": MEMORY_FLOOR_MIB,
              "memory_floor_pct": MEMORY_FLOOR_PCT}
#: A case's field in a baseline of schema 4.
FIELD = "capture_cost"
#: The gate table's columns of the capture cost (its rows: :func:`cudagraph_bench.results.gate.rows`).
COLUMNS = [Column("capture_ms", "capture ms", ".1f"),
           Column("capture_change_pct", "capture/eager vs baseline %", "+z.0f"),
           Column("capture_tolerance_pct", "capture tol %", ".0f"), Column("pool_left_mib", "left MiB", "g")]
#: What the gate's page says of these columns.
PAGE_NOTE = ("capture ms: the graph's warmup + capture (median of the runs), gated loosely in eager calls (over the "
             "same run's eager median, since both move with the host): a tolerance of at least 20%, failing only "
             "where the rank test applies (2+ runs), since one run's capture of one case can land far out; left MiB: "
             "GPU memory the graph left reserved after its release (the session's first graph case not read), gated "
             "within 1 MiB.")


def ledger_id(key: tuple[str, str, int]) -> str:
    """The memory ledger's name of a forward case's graph (``Case.test_id``)."""
    return "{}-{}-L{}-{}".format(*key, GATED)


def memory_left(run) -> dict[str, float]:
    """``{ledger case id: MiB left reserved}`` of the graph cases, each session's first left out (it keeps the cuBLAS
    workspace); malformed entries skipped."""
    section = run.data.get("cudagraph_bench") or {}
    cases, parts = section.get("cases"), section.get("parts")
    if not isinstance(cases, list):
        return {}
    counts = [p.get("graph_cases") if isinstance(p, dict) else None for p in parts or [{"graph_cases": len(cases)}]]
    if not all(is_whole(n) and n >= 0 for n in counts) or sum(counts) != len(cases):
        return {}
    firsts = set(np.cumsum([0, *counts[:-1]]).tolist())
    return {e["case"]: float(e["reserved_after_mib"]) - float(e["reserved_before_mib"]) for i, e in enumerate(cases)
            if i not in firsts and isinstance(e, dict) and isinstance(e.get("case"), str)
            and is_finite(e.get("reserved_before_mib")) and is_finite(e.get("reserved_after_mib"))}


def run_figures(key: tuple, pairs: list, left: list[dict[str, float]]):
    """``(memory left per run that recorded it, capture values)`` of one graph case's ``(eager, graph)`` pairs; capture
    values: ``(capture_ms, capture_ms / eager wall median)`` per run, or None when a run lacks ``capture_ms`` > 0."""
    memory = [r[ledger_id(key)] for r in left if ledger_id(key) in r]
    values = [g.extra_info.get("capture_ms") for _, g in pairs]
    if not values or any(not (is_number(v) and v > 0) for v in values):
        return memory, None
    return memory, ([float(v) for v in values], [float(v) / e.summary.median_ms for v, (e, _) in zip(values, pairs)])


def baseline_point(key: tuple, pairs: list, runs_left: list[dict[str, float]]) -> dict | None:
    """A baseline case's ``capture_cost`` (``pool_left_mib`` None under 2 runs), or None."""
    left, got = run_figures(key, pairs, runs_left)
    if got is None:
        return None
    values, calls = got
    return {"capture_ms": {"median_ms": float(np.median(values)), "run_values_ms": values,
                           "eager_calls": float(np.median(calls)), "run_eager_calls": calls,
                           "spread_pct": noise.spread_pct(calls)},
            "pool_left_mib": ({"median_mib": float(np.median(left)), "run_values_mib": left} if len(left) >= 2
                              else None)}


@dataclass(frozen=True)
class CaptureCheck:
    """One graph case's capture cost against its baseline; ``capture`` None: no ``capture_ms``; memory fields (MiB) None
    when not recorded on a side."""

    capture: noise.RegressionCheck | None
    memory_mib: float | None = None
    memory_base_mib: float | None = None
    memory_tolerance_mib: float | None = None

    @property
    def capture_regressed(self) -> bool:
        """Beyond the tolerance, and the rank test applies and agrees."""
        return self.capture is not None and self.capture.regressed and self.capture.p_value is not None

    @property
    def capture_warning(self) -> bool:
        """Beyond the tolerance where the rank test cannot judge (one run): a warning."""
        return self.capture is not None and self.capture.regressed and self.capture.p_value is None

    @property
    def memory_change_mib(self) -> float | None:
        return None if self.memory_mib is None else self.memory_mib - self.memory_base_mib   # both or neither

    @property
    def memory_regressed(self) -> bool:
        change = self.memory_change_mib
        return change is not None and change > self.memory_tolerance_mib

    @property
    def regressed(self) -> bool:
        return self.capture_regressed or self.memory_regressed


def check_case(base_case: dict | None, thresholds: dict, calls: list[float] | None,
               left: list[float]) -> CaptureCheck | None:
    """``calls``: capture time in eager calls per run or None; ``left``: MiB left reserved. None without a baseline
    ``capture_cost``."""
    point = (base_case or {}).get(FIELD)
    if not point:
        return None
    th = {k: float(thresholds.get(k, v)) for k, v in THRESHOLDS.items()}
    cap = point["capture_ms"]
    capture = None if calls is None else noise.check_regression(
        cap["run_eager_calls"], calls, spread=cap.get("spread_pct"), floor_pct=th["capture_floor_pct"],
        alpha=float(thresholds.get("alpha", noise.DEFAULT_ALPHA)))
    mem = point.get("pool_left_mib")
    if mem is None or not left:
        return CaptureCheck(capture)
    base, runs = float(mem["median_mib"]), mem["run_values_mib"]
    tolerance = max(th["memory_floor_mib"], th["memory_floor_pct"] / 100.0 * abs(base), max(runs) - min(runs))
    return CaptureCheck(capture, float(np.median(left)), base, tolerance)


def verdict_parts(results) -> tuple[list[str], list[str]]:
    """``(failures, notes)``: a line per regressed figure; notes for warnings, old baselines."""
    failures, notes = [], []
    for r, c in ((r, r.capture) for r in results if r.capture is not None):
        if c.capture_regressed:
            failures.append(f"{r.label} {r.variant} capture_ms {c.capture.change_pct:+.0f}% vs baseline in eager calls "
                            f"(tolerance {c.capture.tolerance_pct:.0f}%, rank p={c.capture.p_value:.3f})")
        if c.memory_regressed:
            failures.append(f"{r.label} {r.variant} memory left reserved {c.memory_change_mib:+.0f} MiB vs "
                            f"baseline (tolerance {c.memory_tolerance_mib:g} MiB)")
    warned = [r for r in results if r.capture is not None and r.capture.capture_warning]
    if warned:
        shown = ", ".join(f"{r.label} {r.capture.capture.change_pct:+.0f}% (tolerance "
                          f"{r.capture.capture.tolerance_pct:.0f}%)" for r in warned[:3])
        more = f" and {len(warned) - 3} more" if len(warned) > 3 else ""
        notes.append(f"warning: capture_ms (in eager calls) beyond its tolerance in one run, not failed (one run's "
                     f"capture of one case can land far out; gate 2 or more runs): {shown}{more}")
    graphs = [r for r in results if r.variant == GATED and r.regression is not None]
    if graphs and all(r.capture is None for r in graphs):
        notes.append("capture cost not in the baseline (capture_ms and graph memory not checked): rebuild it with "
                     "cudagraph-bench baseline")
    return failures, notes
