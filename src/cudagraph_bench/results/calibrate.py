"""``cudagraph-bench calibrate RUN...`` (no torch): the regression rule on N >= 6 runs of the same code, where every
regression is a false alarm: per gated case, false alarms and detection of a planted ``+p%`` for the gate (leave one
out), ``compare`` (ordered pairs) and A/B (k against k), and each mode's smallest detectable change."""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field

import numpy as np

from cudagraph_bench.variants import GATED
from cudagraph_bench.results import noise, process_spread
from cudagraph_bench.results.baseline import DEFAULT_MAX_GATED_LEN, build_baseline, case_tolerance, refuse_wrong_cases
from cudagraph_bench.errors import UsageError
from cudagraph_bench.results.runfile import Run, check_one_gpu, distinct_runs, merged_forward_groups
from cudagraph_bench.table import Column, render_table

DEFAULT_PLANTS_PCT = (5.0, 10.0, 15.0, 30.0)
DEFAULT_AB_RUNS = 5
#: Largest planted change searched for the smallest detectable one, and its step (percent).
SEARCH_MAX_PCT, SEARCH_STEP_PCT = 100.0, 0.5
#: Cap on the A/B splits evaluated (all of them up to this; a fixed-seed sample beyond).
MAX_SPLITS = 100


@dataclass(frozen=True)
class ModeResult:
    """One mode, one case: ``alarms`` of ``trials`` unchanged comparisons; ``detected[p]`` flagged with ``+p%``;
    ``smallest_pct`` the smallest change every trial flags (None: above the search range)."""

    trials: int = 0
    alarms: int = 0
    detected: dict[float, int] = field(default_factory=dict)
    smallest_pct: float | None = None

    def cell(self, count: int | None) -> str:
        """``"count/trials"``, or ``"-"`` for a mode not run."""
        return f"{count}/{self.trials}" if self.trials else "-"


def _flagged(trials: list, plant_pct: float) -> list[bool]:
    """Whether each trial (a function of the planted factor giving its check) reports a regression."""
    return [trial(1.0 + plant_pct / 100.0).regressed for trial in trials]


def _mode(trials: list, plants: tuple[float, ...]) -> ModeResult:
    if not trials:
        return ModeResult()
    grid = np.arange(SEARCH_STEP_PCT, SEARCH_MAX_PCT + SEARCH_STEP_PCT / 2, SEARCH_STEP_PCT)
    # detection grows with the planted change: bisect for the first level every trial flags
    lo = bisect.bisect_left(range(len(grid)), True, key=lambda i: all(_flagged(trials, float(grid[i]))))
    return ModeResult(len(trials), sum(_flagged(trials, 0.0)), {p: sum(_flagged(trials, p)) for p in plants},
                      float(grid[lo]) if lo < len(grid) else None)


def _splits(n: int, k: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Ordered (base, head) splits into groups of ``k`` (at most :data:`MAX_SPLITS`, fixed seed)."""
    combos = [(base, head) for base in itertools.combinations(range(n), k)
              for head in itertools.combinations([i for i in range(n) if i not in base], k)]
    if len(combos) > MAX_SPLITS:
        rng = np.random.default_rng(0)
        combos = [combos[i] for i in sorted(rng.choice(len(combos), MAX_SPLITS, replace=False))]
    return combos


@dataclass(frozen=True)
class CaseCalibration:
    """One gated case: its spread over all runs, the gate's tolerance for one run against N-1, and the three modes."""

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
    """Every gated forward case (prompt length <= ``max_gated_len``) measured in all ``runs``. UsageError for fewer than
    ``MIN_BASELINE_RUNS + 1`` runs, a run given twice, different GPUs, or a failed graph check."""
    need = noise.MIN_BASELINE_RUNS + 1
    if len(runs) < need:
        raise UsageError(f"calibration needs at least {need} separate runs (a baseline of {need - 1} plus one held "
                         f"out), got {len(runs)}")
    distinct_runs(runs, "calibrate")
    check_one_gpu(runs, "calibrate one GPU type at a time")
    refuse_wrong_cases(runs, allow_unchecked=True, what="calibrate")
    n = len(runs)
    out = []
    floor_pct = floor_for(runs) if floor_pct is None else floor_pct
    held_out = [build_baseline(runs[:i] + runs[i + 1:], min_runs=n - 1, allow_unchecked=True, rounded=False,
                               max_gated_len=max_gated_len, noise_multiplier=multiplier, alpha=alpha)
                for i in range(n)]   # each run's leave-one-out baseline, unrounded

    def trial(old, new, spread, df):
        """The check of ``new`` against ``old`` as a function of the factor planted in ``new``."""
        return lambda factor: noise.check_regression(old, new * factor, spread=spread, floor_pct=floor_pct,
                                                     multiplier=multiplier, alpha=alpha, df=df)

    def gate_trial(doc: dict, key: tuple, new_ms: float):
        """One held-out run against the others' baseline ``doc``, as :func:`trial`."""
        case = next(c for c in doc["cases"] if (c["model"], c["dtype"], c["seq_len"]) == key)
        return lambda factor: case_tolerance(case, doc["thresholds"], [new_ms * factor], floor_pct=floor_pct)

    for (model, dtype, seq_len), by_variant in merged_forward_groups(runs).items():
        graph = by_variant.get(GATED, [])
        if seq_len > max_gated_len or len(graph) < n:
            continue
        medians = np.array([m.device_ms if m.device_ms is not None else m.summary.median_ms for m in graph])
        gate_pairs = [gate_trial(held_out[i], (model, dtype, seq_len), float(medians[i])) for i in range(n)]
        pair_trials = [trial(medians[i:i + 1], medians[j:j + 1], noise.spread_pct(np.delete(medians, [i, j])), n - 3)
                       for i, j in itertools.permutations(range(n), 2)]
        # a planted factor shifts the head group's log medians alike: the pooled spread is computed once per split
        ab_trials = ([trial(medians[list(b)], medians[list(h)],
                            noise.pooled_spread_pct([medians[list(b)], medians[list(h)]]), 2 * ab_runs - 2)
                      for b, h in _splits(n, ab_runs)] if n >= 2 * ab_runs else [])
        out.append(CaseCalibration(
            model=model, dtype=dtype, seq_len=seq_len, n_runs=n, spread_pct=noise.spread_pct(medians),
            gate_tolerance_pct=float(np.median([t(1.0).tolerance_pct for t in gate_pairs])),
            gate=_mode(gate_pairs, plants), pairs=_mode(pair_trials, plants), ab=_mode(ab_trials, plants)))
    if not out:
        raise UsageError(f"no gated case (prompt length <= {max_gated_len}) is measured in all {n} runs: give runs "
                         "of the same matrix")
    return out


def floor_for(runs: list[Run]) -> float:
    """The device figure's floor when every gated benchmark recorded it, else the wall median's."""
    ms = [m for g in merged_forward_groups(runs).values() for m in g.get(GATED, [])]
    return noise.FLOORS_PCT["device" if ms and all(m.device_ms is not None for m in ms) else "wall"]


#: The three modes: (column key, :class:`CaseCalibration` attribute, name in headers, planted changes shown).
MODES = (("gate", "gate", "gate", True), ("pair", "pairs", "pair", False), ("ab", "ab", "A/B", True))


def columns(plants: tuple[float, ...]) -> list[Column]:
    """Table columns for :func:`rows`."""
    return [Column("label", "case"), Column("spread_pct", "between-run spread %", ".2f"),
            Column("tol", "gate tolerance %", ".1f"),
            *(Column(f"{key}_fa", f"{name} false alarms") for key, _, name, _ in MODES),
            *(Column(f"{key}_{p:g}", f"{name} +{p:g}%") for key, _, name, shown in MODES if shown for p in plants),
            *(Column(f"{key}_min", f"{name} detects from") for key, _, name, _ in MODES)]


def rows(results: list[CaseCalibration], plants: tuple[float, ...]) -> list[dict]:
    """One row per case for :func:`columns`."""
    out = []
    for r in results:
        row = {"label": r.label, "spread_pct": r.spread_pct, "tol": r.gate_tolerance_pct}
        for key, attr, _, shown in MODES:
            mode = getattr(r, attr)
            smallest = f"{mode.smallest_pct:g}%" if mode.smallest_pct is not None else f"> {SEARCH_MAX_PCT:g}%"
            row.update({f"{key}_fa": mode.cell(mode.alarms), f"{key}_min": smallest if mode.trials else "-"})
            row.update({f"{key}_{p:g}": mode.cell(mode.detected.get(p)) for p in plants if shown})
        out.append(row)
    return out


def summary(results: list[CaseCalibration], plants: tuple[float, ...]) -> str:
    """One line: false alarms per mode, and the cases every trial detects per planted change."""
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
                    floor_pct: float, multiplier: float | None, alpha: float, ab_runs: int,
                    plain: list[Run] = ()) -> str:
    """The calibration page; ``plain``: plain-loop runs for the spread table."""
    env = runs[0].environment
    hosts = process_spread.hosts_of(runs)
    sources = "\n".join(f"- `{r.path.name}` ({r.environment.run_datetime}, GPU "
                        f"`{process_spread.host_label(r.environment.host)}`, CPU {r.environment.cpu_text or '?'})"
                        for r in [*runs, *plain])
    k = results[0].n_runs
    spread = process_spread.spread_rows(runs, list(plain))
    cols, shown = process_spread.spread_table(spread, hosts)
    return "\n".join([
        "# How trustworthy the gate's regression rule is", "",
        f"Generated by `cudagraph-bench calibrate` from {len(runs)} separate runs of the same code and forward matrix "
        f"on {env.gpu_name or env.gpu_slug} (torch {env.torch}, transformers {env.transformers}), on {len(hosts)} "
        "machine(s) told apart by their GPU's UUID; never edited by hand. Nothing changed between the runs, so every "
        "regression reported below is a false alarm; the planted changes multiply a run's graph median.", "",
        "## Spread between processes and between machines", "",
        "The gated figure is the device-side time of a graph replay: CUDA events around blocks of replays queued "
        "behind a held stream (`cudagraph_bench.measure.timing.back_to_back_ms`), so the host's time to queue a call "
        "never enters it. Span = (max - min) / median of the run medians of one machine's processes; across machines: "
        "of the machines' medians. The plain loop (`scripts/device/plain_loop`: torch and pytest-benchmark only) ran "
        "in the same jobs.", "",
        render_table(cols, shown, fmt="markdown"), "", f"**{process_spread.verdict(spread)}.**", "",
        "## False alarms and detection", "",
        f"Rule (`cudagraph_bench.results.baseline.case_tolerance`): a graph median regressed when its change against "
        f"the baseline exceeds the case's tolerance and, where the run counts allow it, a one-sided Mann-Whitney U "
        f"test of the run medians gives p < {alpha:g}. A baseline of one machine: `max({floor_pct:g}%, m x spread x "
        "sqrt(1/n_old + 1/n_new))`, spread the normal-scaled MAD of the log run medians, m "
        + (f"{multiplier:g}" if multiplier is not None else
           f"Student's t quantile at {1 - noise.DEFAULT_TAIL:g} with the spread's degrees of freedom") +
        f". A baseline of several machines: `max({floor_pct:g}%, t x sqrt(cross^2 (1 + 1/machines) + within^2 (1/n_old "
        "+ 1/n_new)))`, the prediction interval of a run of another machine, cross the spread of the machines' "
        f"medians pooled over the gated cases, within the spread inside a machine, t at {1 - noise.DEFAULT_TAIL:g} "
        "with Welch-Satterthwaite degrees of freedom.", "",
        f"- gate: each run against a baseline of the other {k - 1} (leave one out, the gate's own rule): {k} trials "
        "per case; the tolerance shown is their median.",
        f"- pair: `compare OLD NEW` of every ordered pair of single runs, noise model from the other {k - 2}: "
        f"{k * (k - 1)} trials per case.",
        (f"- A/B: {ab_runs} base runs against {ab_runs} head runs, every split (at most {MAX_SPLITS}), spread pooled "
         "from the two groups, rank test applied." if results[0].ab.trials else
         f"- A/B: not run: {ab_runs} base runs against {ab_runs} head runs need {2 * ab_runs} runs, and {k} were "
         f"given (--ab-runs {max(k // 2, 1)} fits them)."),
        "- detects from: the smallest planted slow-down (0.5% steps) that every trial of the mode reports.", "",
        render_table(columns(plants), rows(results, plants), fmt="markdown"), "",
        f"**{line}**", "", "Source runs:", "", sources, ""])
