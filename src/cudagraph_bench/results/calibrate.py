"""``cudagraph-bench calibrate RUN...``: measure the regression rule on repeated runs of the same code
(no torch).

Given N >= 6 separate runs of the same forward matrix on one GPU type (nothing changed between them,
so every regression the rule reports is a false alarm), for every gated case's graph median:

- **gate, leave one out**: each run in turn is gated against a baseline built from the other N-1 runs
  (:func:`cudagraph_bench.results.noise.check_regression` with that baseline's spread): false alarms out of N;
  then the held-out run's graph median is planted ``+p%`` slower (``--plant``): detection rate;
- **compare, every ordered pair** of single runs (OLD, NEW), with the noise model of a baseline built
  from the other N-2 runs: false alarms out of N(N-1), detection of ``+p%`` planted on NEW;
- **A/B, k against k** (``--ab-runs``, when N >= 2k): every split of the runs into a base and a head
  group of k, the spread pooled from the two groups and the rank test at ``alpha``: false alarms,
  detection of ``+p%`` planted on every head run;
- the **smallest detectable change** of each mode: the smallest planted change (0.5% steps) that
  every held-out run / pair / split reports.

The output is a table per case and a summary line; ``--markdown FILE`` writes it as a page. The
planted change multiplies a run's median, which is what a uniformly slower graph does to it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from cudagraph_bench.variants import GATED
from cudagraph_bench.results import noise
from cudagraph_bench.results.baseline import DEFAULT_MAX_GATED_LEN, refuse_wrong_cases
from cudagraph_bench.errors import UsageError
from cudagraph_bench.results.runfile import Run, distinct_runs, merged_forward_groups
from cudagraph_bench.table import Column, render_table

DEFAULT_PLANTS_PCT = (5.0, 10.0, 15.0, 30.0)
DEFAULT_AB_RUNS = 5
#: Largest planted change searched for the smallest detectable one, and its step (percent).
SEARCH_MAX_PCT, SEARCH_STEP_PCT = 100.0, 0.5
#: Cap on the A/B splits evaluated (all of them up to this; a fixed-seed sample beyond).
MAX_SPLITS = 500


@dataclass
class ModeResult:
    """False alarms and detections of one mode for one case: ``trials`` comparisons of unchanged runs,
    ``alarms`` of them regressions; ``detected[p]`` comparisons flagged with ``+p%`` planted;
    ``smallest_pct`` the smallest planted change every trial flags (None: above the search range)."""

    trials: int = 0
    alarms: int = 0
    detected: dict[float, int] = field(default_factory=dict)
    smallest_pct: float | None = None


def _verdicts(trials: list[tuple[np.ndarray, np.ndarray, float | None, int | None]], plant_pct: float,
              floor_pct: float, multiplier: float | None, alpha: float) -> list[bool]:
    """Regression verdicts of (old medians, new medians, spread or None, its degrees of freedom) with
    the new medians planted ``+plant_pct``."""
    factor = 1.0 + plant_pct / 100.0
    return [noise.check_regression(old, new * factor, spread=spread, floor_pct=floor_pct, multiplier=multiplier,
                                   alpha=alpha, df=df).regressed for old, new, spread, df in trials]


def _mode(pairs, plants, floor_pct, multiplier, alpha) -> ModeResult:
    out = ModeResult(trials=len(pairs))
    if not pairs:
        return out
    out.alarms = sum(_verdicts(pairs, 0.0, floor_pct, multiplier, alpha))
    out.detected = {p: sum(_verdicts(pairs, p, floor_pct, multiplier, alpha)) for p in plants}
    grid = np.arange(SEARCH_STEP_PCT, SEARCH_MAX_PCT + SEARCH_STEP_PCT / 2, SEARCH_STEP_PCT)
    # detection grows with the planted change: bisect on the grid for the first level every trial flags
    lo, hi = 0, len(grid)
    while lo < hi:
        mid = (lo + hi) // 2
        if all(_verdicts(pairs, float(grid[mid]), floor_pct, multiplier, alpha)):
            hi = mid
        else:
            lo = mid + 1
    out.smallest_pct = float(grid[lo]) if lo < len(grid) else None
    return out


def _spread(medians: np.ndarray) -> float | None:
    return noise.spread_pct(medians) if medians.size >= 2 else None


def _splits(n: int, k: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Ordered (base, head) splits of ``n`` runs into two disjoint groups of ``k`` (all of them, or a
    fixed-seed sample of :data:`MAX_SPLITS`)."""
    combos = []
    for base in itertools.combinations(range(n), k):
        rest = [i for i in range(n) if i not in base]
        combos += [(base, head) for head in itertools.combinations(rest, k)]
    if len(combos) > MAX_SPLITS:
        rng = np.random.default_rng(0)
        combos = [combos[i] for i in sorted(rng.choice(len(combos), MAX_SPLITS, replace=False))]
    return combos


@dataclass(frozen=True)
class CaseCalibration:
    """Calibration of one gated case: its between-run spread over all runs, the gate's tolerance for one
    run against the other N-1, and the three modes."""

    model: str
    dtype: str
    seq_len: int
    n_runs: int
    spread_pct: float | None
    gate_tolerance_pct: float
    gate: ModeResult
    pairs: ModeResult
    ab: ModeResult

    @property
    def label(self) -> str:
        return f"{self.model} {self.dtype} L={self.seq_len}"


def calibrate(runs: list[Run], *, plants: tuple[float, ...] = DEFAULT_PLANTS_PCT,
              floor_pct: float | None = None, multiplier: float | None = noise.DEFAULT_MULTIPLIER,
              alpha: float = noise.DEFAULT_ALPHA, ab_runs: int = DEFAULT_AB_RUNS,
              max_gated_len: int = DEFAULT_MAX_GATED_LEN) -> list[CaseCalibration]:
    """:class:`CaseCalibration` of every gated forward case (prompt length <= ``max_gated_len``) measured
    in all ``runs``. Raises UsageError for fewer than ``MIN_BASELINE_RUNS + 1`` runs, a run given twice,
    runs of different GPUs, or a graph benchmark that failed its correctness check."""
    need = noise.MIN_BASELINE_RUNS + 1
    if len(runs) < need:
        raise UsageError(f"calibration needs at least {need} separate runs (a baseline of {need - 1} plus one held "
                         f"out), got {len(runs)}")
    distinct_runs(runs, "calibrate")
    if len({r.environment.gpu_slug for r in runs}) > 1:
        raise UsageError("the runs are from different GPU types: calibrate one GPU type at a time")
    refuse_wrong_cases(runs, allow_unchecked=True, what="calibrate")
    n = len(runs)
    out = []
    groups = merged_forward_groups(runs)
    floor_pct = floor_for(runs) if floor_pct is None else floor_pct
    for (model, dtype, seq_len), by_variant in groups.items():
        graph = by_variant.get(GATED, [])
        if seq_len > max_gated_len or len(graph) < n:
            continue
        medians = np.array([m.gated_ms for m in graph])
        others = [np.delete(medians, i) for i in range(n)]
        gate_pairs = [(others[i], medians[i:i + 1], _spread(others[i]), n - 2) for i in range(n)]
        pair_trials = []
        for i, j in itertools.permutations(range(n), 2):
            rest = np.delete(medians, [i, j])
            pair_trials.append((medians[i:i + 1], medians[j:j + 1], _spread(rest), n - 3))
        ab_trials = ([(medians[list(b)], medians[list(h)], None, None) for b, h in _splits(n, ab_runs)]
                     if n >= 2 * ab_runs else [])
        spread_all = _spread(medians)
        out.append(CaseCalibration(
            model=model, dtype=dtype, seq_len=seq_len, n_runs=n, spread_pct=spread_all,
            gate_tolerance_pct=noise.tolerance_pct(spread_all, n - 1, 1, floor_pct=floor_pct, multiplier=multiplier),
            gate=_mode(gate_pairs, plants, floor_pct, multiplier, alpha),
            pairs=_mode(pair_trials, plants, floor_pct, multiplier, alpha),
            ab=_mode(ab_trials, plants, floor_pct, multiplier, alpha)))
    if not out:
        raise UsageError(f"no gated case (prompt length <= {max_gated_len}) is measured in all {n} runs: give runs "
                         "of the same matrix")
    return out


def floor_for(runs: list[Run]) -> float:
    """The tolerance floor of the gated figure these runs record (:data:`cudagraph_bench.results.noise.FLOORS_PCT`):
    the device-side one when every gated benchmark recorded it, else the wall median's."""
    ms = [m for g in merged_forward_groups(runs).values() for m in g.get(GATED, [])]
    return noise.FLOORS_PCT["device" if ms and all(m.device_ms is not None for m in ms) else "wall"]


def _rate(mode: ModeResult, p: float) -> str:
    return f"{mode.detected[p]}/{mode.trials}" if mode.trials else "-"


def _smallest(mode: ModeResult) -> str:
    if not mode.trials:
        return "-"
    return f"{mode.smallest_pct:g}%" if mode.smallest_pct is not None else f"> {SEARCH_MAX_PCT:g}%"


def columns(plants: tuple[float, ...]) -> list[Column]:
    """Table columns for :func:`rows`."""
    cols = [Column("label", "case"), Column("spread_pct", "between-run spread %", ".2f"),
            Column("tol", "gate tolerance %", ".1f"),
            Column("gate_fa", "gate false alarms"), Column("pair_fa", "pair false alarms"),
            Column("ab_fa", "A/B false alarms")]
    cols += [Column(f"gate_{p:g}", f"gate +{p:g}%") for p in plants]
    cols += [Column(f"ab_{p:g}", f"A/B +{p:g}%") for p in plants]
    cols += [Column("gate_min", "gate detects from"), Column("pair_min", "pair detects from"),
             Column("ab_min", "A/B detects from")]
    return cols


def rows(results: list[CaseCalibration], plants: tuple[float, ...]) -> list[dict]:
    """One row per case for :func:`columns`."""
    out = []
    for r in results:
        row = {"label": r.label, "spread_pct": r.spread_pct, "tol": r.gate_tolerance_pct,
               "gate_fa": f"{r.gate.alarms}/{r.gate.trials}", "pair_fa": f"{r.pairs.alarms}/{r.pairs.trials}",
               "ab_fa": f"{r.ab.alarms}/{r.ab.trials}" if r.ab.trials else "-",
               "gate_min": _smallest(r.gate), "pair_min": _smallest(r.pairs), "ab_min": _smallest(r.ab)}
        row.update({f"gate_{p:g}": _rate(r.gate, p) for p in plants})
        row.update({f"ab_{p:g}": _rate(r.ab, p) for p in plants})
        out.append(row)
    return out


def summary(results: list[CaseCalibration], plants: tuple[float, ...]) -> str:
    """One line: false alarms of each mode over all cases, and the cases every trial detects at each
    planted change."""
    def total(attr):
        modes = [getattr(r, attr) for r in results]
        return f"{sum(m.alarms for m in modes)}/{sum(m.trials for m in modes)}"

    parts = [f"{len(results)} gated cases, {results[0].n_runs} runs: false alarms gate {total('gate')}, "
             f"pairs {total('pairs')}, A/B {total('ab') if results[0].ab.trials else 'not run (too few runs)'}"]
    for p in plants:
        full = sum(r.gate.detected[p] == r.gate.trials for r in results)
        text = f"+{p:g}%: gate detects every held-out run on {full}/{len(results)} cases"
        if results[0].ab.trials:
            text += f", A/B on {sum(r.ab.detected[p] == r.ab.trials for r in results)}/{len(results)}"
        parts.append(text)
    return "calibrate: " + "; ".join(parts)


def render_markdown(runs: list[Run], results: list[CaseCalibration], plants: tuple[float, ...], line: str,
                    floor_pct: float, multiplier: float | None, alpha: float, ab_runs: int) -> str:
    """The calibration page."""
    env = runs[0].environment
    sources = "\n".join(f"- `{r.path.name}` ({r.environment.run_datetime}, host `{r.environment.node}`)"
                        for r in runs)
    k = results[0].n_runs
    return "\n".join([
        "# How trustworthy the gate's regression rule is", "",
        f"Generated by `cudagraph-bench calibrate` from {len(runs)} separate runs of the same code and forward "
        f"matrix on {env.gpu_name or env.gpu_slug} (torch {env.torch}, transformers "
        f"{env.transformers}); never edited by hand. Nothing changed between the runs, so every "
        "regression reported below is a false alarm; the planted changes multiply a run's graph median.", "",
        f"Rule ({'`cudagraph_bench.results.noise`'}): a graph median regressed when its change exceeds "
        f"`max({floor_pct:g}%, m x spread x sqrt(1/n_old + 1/n_new))` and, where the run counts allow "
        f"it, a one-sided Mann-Whitney U test of the run medians gives p < {alpha:g}. spread: normal-scaled MAD "
        "of the log run medians; m: "
        + (f"{multiplier:g}" if multiplier is not None else
           f"Student's t quantile at {1 - noise.DEFAULT_TAIL:g} with the spread's degrees of freedom "
           "(runs - 1; pooled A/B groups: runs - 2)") + ".", "",
        f"- gate: each run against a baseline of the other {k - 1} (leave one out): {k} trials per case.",
        f"- pair: `compare OLD NEW` of every ordered pair of single runs, noise model from the other {k - 2}: "
        f"{k * (k - 1)} trials per case.",
        f"- A/B: {ab_runs} base runs against {ab_runs} head runs, every split (at most {MAX_SPLITS}), spread pooled "
        "from the two groups, rank test applied.",
        "- detects from: the smallest planted slow-down (0.5% steps) that every trial of the mode reports.", "",
        render_table(columns(plants), rows(results, plants), fmt="markdown"), "",
        f"**{line}**", "", "Source runs:", "", sources, ""])
