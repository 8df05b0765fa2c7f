"""``cudagraph-bench gate RUN...``: the regression gate (no torch; runs on any machine).

For each forward case ``(model, dtype, seq_len)`` of one or more pytest-benchmark runs of the same code
(separate processes) it pairs the ``eager`` and ``graph`` benchmarks. Exit 1 when

- the graph variant of any case recorded a failed correctness check (its
  :class:`~cudagraph_bench.results.record.CheckRecord` status ``fail``: a fast wrong graph is the worst
  result a gate can pass), or a gated case recorded no check at all
  (unless ``--allow-unchecked``, for runs recorded before checks existed);
- a gated case (default: prompt length <= 128 tokens) reduces the median latency by less than its
  threshold (default 30%; per-case ``min_reduction_pct`` / ``gated`` may come from the baseline);
- a case's graph median (the median of the runs' medians) is slower than the baseline's by more than
  the case's tolerance, calibrated on between-run noise, and, where enough runs are given, a one-sided
  Mann-Whitney U test of the run medians agrees (:mod:`cudagraph_bench.results.noise`).

A case is *marginal* when its 95% interval (one run: percentile bootstrap of its rounds; several runs:
the range of the per-run reductions) straddles the threshold; the verdict still follows the median.
Other variants (padded, bucketed, compile, compile+graph) are shown against eager but never gated.

One run can only be judged by the ratio, and a single run's median can land far out (another process
on the host, a different memory layout). With ``--confirm K``, when regressions are the only failures,
the regressed cases (eager and graph) are run K more times, each a separate pytest process in the
checkout (:mod:`cudagraph_bench.runner.confirm`), and judged again on all runs, where the rank test then takes
part: a regression must show in the repeated runs too.

The baseline is ``--baseline FILE``, else ``<gpu_slug>.json`` found by :func:`cudagraph_bench.paths.default_baseline`
(``$CUDAGRAPH_BENCH_BASELINES``, then the checkout's ``baselines/``), never looked up in the working
directory; when there is none the gate stops with exit 2 unless ``--no-baseline``. Gating against
another GPU's baseline is refused unless ``--allow-gpu-mismatch``, and so is a baseline that holds none
of the run's cases (it would check nothing).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from cudagraph_bench.results import noise
from cudagraph_bench.results.baseline import (DEFAULT_MAX_GATED_LEN, DEFAULT_MIN_REDUCTION_PCT, Baseline, load_baseline)
from cudagraph_bench.errors import InputFileError, UsageError
from cudagraph_bench.paths import checkout_root, default_baseline
from cudagraph_bench.results.runfile import (Measurement, Run, check_one_gpu, distinct_runs, forward_cases, forward_groups, load_run,
                                     merged_forward_groups, pairs_reduction_pct)
from cudagraph_bench.results.stats import MIN_BOOTSTRAP_ROUNDS
from cudagraph_bench.table import Column, first_items, plural, render_table, verdict_heading, verdict_line
from cudagraph_bench.variants import FORWARD_REFERENCE, GATED

def combined_check(ms: list[Measurement]) -> tuple[str, str | None]:
    """``(status, detail)`` of one variant over several runs: ``"fail"`` when any run's check failed
    (with that run's detail), else ``"unchecked"`` when any run recorded none, else the common status."""
    for status in ("fail", "unchecked"):
        bad = [m for m in ms if m.check.status == status]
        if bad:
            return status, bad[0].check.detail
    return ms[0].check.status, ms[0].check.detail


@dataclass(frozen=True)
class GateVerdict:
    """Gate verdict of one variant of one case over ``n_runs`` runs (times in ms, percents).

    ``median_ms`` / ``eager_median_ms`` are medians of the run medians; ``ci_pct`` the 95% bootstrap
    interval of one run's reduction, or the range of the per-run reductions of several runs;
    ``check`` the recorded correctness (``pass``/``fail``/``unchecked``); ``regression`` the check
    against the baseline (graph variant with a baseline case only)."""

    model: str
    dtype: str
    seq_len: int
    variant: str
    n_runs: int
    eager_median_ms: float
    median_ms: float
    reduction_pct: float
    ci_pct: tuple[float, float] | None
    gated: bool
    min_reduction_pct: float | None
    check: str
    check_detail: str | None = None
    allow_unchecked: bool = False
    regression: noise.RegressionCheck | None = None

    @property
    def label(self) -> str:
        return f"{self.model} {self.dtype} L={self.seq_len}"

    @property
    def below(self) -> bool:
        """Gated and the median reduction is below the threshold (fails the gate)."""
        return self.gated and self.reduction_pct < self.min_reduction_pct

    @property
    def wrong(self) -> bool:
        """The graph variant recorded a failed correctness check (fails the gate, gated or not)."""
        return self.variant == GATED and self.check == "fail"

    @property
    def unchecked(self) -> bool:
        """Gated, no correctness check recorded, and not ``--allow-unchecked`` (fails the gate)."""
        return self.gated and self.check == "unchecked" and not self.allow_unchecked

    @property
    def marginal(self) -> bool:
        """Gated and the 95% interval straddles the threshold."""
        return bool(self.gated and self.ci_pct and self.ci_pct[0] < self.min_reduction_pct < self.ci_pct[1])

    @property
    def regressed(self) -> bool:
        """Slower than the baseline by more than the case's tolerance, the rank test agreeing where it applies."""
        return self.regression is not None and self.regression.regressed

    @property
    def failed(self) -> bool:
        return self.below or self.wrong or self.unchecked or self.regressed

    @property
    def status(self) -> str:
        parts = [("FAIL" if self.failed else "pass") if self.gated or self.wrong else "info"]
        if self.wrong:
            parts.append("WRONG")
        elif self.check == "unchecked" and self.variant != FORWARD_REFERENCE:
            parts.append("UNCHECKED" if self.unchecked else "unchecked")
        if self.marginal:
            parts.append("marginal")
        if self.regressed:
            parts.append("REGRESSION")
        return ", ".join(parts)


def find_baseline(run: Run, explicit: str | None, allow_gpu_mismatch: bool = False,
                  no_baseline: bool = False) -> Baseline | None:
    """The baseline to gate ``run`` against: None with ``no_baseline``; ``explicit`` if given; else
    ``<gpu_slug>.json`` from :func:`cudagraph_bench.paths.default_baseline` (independent of the working
    directory).

    Raises UsageError when no baseline is found (naming where it looked and the fix), when both
    ``explicit`` and ``no_baseline`` are given, when the baseline is for another GPU and not
    ``allow_gpu_mismatch``, or when it holds none of the run's forward cases (the regression check
    would compare nothing); InputFileError when the baseline file is missing, a folder or invalid.
    """
    if no_baseline:
        if explicit is not None:
            raise UsageError("--baseline and --no-baseline contradict each other: give one")
        return None
    picked = explicit is None
    if explicit is None:
        slug = run.environment.gpu_slug
        if not slug:
            raise UsageError(f"{run.path} records no GPU (no machine_info.cuda.gpu_slug, as this suite's plugin writes "
                             "on a GPU), so no baseline can be picked: pass --baseline FILE, or --no-baseline to "
                             "check correctness and the reduction threshold only")
        found, tried = default_baseline(slug)
        if found is None:
            where = ", ".join(str(p) for p in tried) or "nowhere (an installed copy has no baselines/ folder)"
            raise UsageError(f"no baseline for GPU {slug}: looked in {where}; pass --baseline FILE, set "
                             f"$CUDAGRAPH_BENCH_BASELINES to a folder holding {slug}.json, or --no-baseline "
                             "to check correctness and the reduction threshold only")
        explicit = str(found)
    if Path(explicit).is_dir():
        raise InputFileError(f"--baseline {explicit} is a folder: give a baseline file such as "
                             f"{Path(explicit) / ((run.environment.gpu_slug or '<gpu-slug>') + '.json')}")
    baseline = load_baseline(explicit)
    slug = run.environment.gpu_slug
    if baseline.gpu_slug != slug and not allow_gpu_mismatch:
        raise UsageError(f"baseline {baseline.path} is for GPU {baseline.gpu_slug} but the run is from "
                         f"{slug or 'no GPU'}: gate against a baseline of {slug}, "
                         "or pass --allow-gpu-mismatch to compare anyway")
    keys = list(forward_groups(run))
    if not set(keys) & set(baseline.cases):
        fix = ("pass --baseline FILE written from runs of this matrix (cudagraph-bench baseline RUN... -o FILE)"
               if picked else f"regenerate the baseline from runs of this matrix (cudagraph-bench baseline "
                              f"RUN... -o {baseline.path}) or drop --baseline")
        where = f"baseline {baseline.path}" + (" (picked from the run's GPU)" if picked else "")
        first = "{} {} L={}".format(*keys[0])
        raise UsageError(f"no case of {run.path} ({plural(len(keys), 'case')}, first {first}) is in {where}: {fix}")
    return baseline


def require_graph_variant(run: Run) -> None:
    """Raise InputFileError when the run's forward benchmarks hold no ``graph`` variant at all (an
    eager-only run, e.g. ``cudagraph-bench run --device cpu``): there is nothing to gate."""
    cases = forward_cases(run)
    if not cases or any(case.variant == GATED for case in cases):
        return
    cpu = run.environment.gpu_slug is None or any(m.extra_info.get("device") == "cpu" for m in cases.values())
    what = ("it is a CPU run, and cudagraph-bench run --device cpu measures eager only" if cpu else
            f"only {', '.join(sorted({c.variant for c in cases}))}")
    raise InputFileError(f"{run.path} has no graph variant ({what}); gating needs a GPU run with eager and "
                         "graph (cudagraph-bench run --variants eager,graph, or pytest perf_tests --benchmark-only "
                         "on a GPU)")


def evaluate(runs: Run | list[Run], baseline: Baseline | None = None, *, min_reduction_pct: float | None = None,
             max_regression_pct: float | None = None, max_gated_len: int | None = None,
             allow_unchecked: bool = False) -> list[GateVerdict]:
    """Gate results of every non-eager forward variant of ``runs`` (one run or several separate runs of
    the same code), sorted by case.

    A threshold given here overrides the baseline's; one left None comes from the baseline's case
    (``gated``, ``min_reduction_pct``), then the baseline's thresholds, then the defaults (30%, 128
    tokens). ``max_regression_pct`` overrides the floor of the regression tolerance
    (:func:`cudagraph_bench.results.noise.tolerance_pct`). Raises InputFileError for a run without forward
    benchmarks or with eager but no graph.
    """
    runs = [runs] if isinstance(runs, Run) else runs
    th = baseline.thresholds if baseline else {}
    floor = max_regression_pct if max_regression_pct is not None else float(
        th.get("regression_floor_pct", noise.DEFAULT_FLOOR_PCT))
    results = []
    per_run = [forward_groups(run) for run in runs]
    for key, variants in merged_forward_groups(runs).items():
        base_case = baseline.cases.get(key) if baseline else None
        if max_gated_len is not None:
            gated = key[2] <= max_gated_len
        elif base_case is not None and "gated" in base_case:
            gated = bool(base_case["gated"])
        else:
            gated = key[2] <= int(th.get("max_gated_len", DEFAULT_MAX_GATED_LEN))
        if min_reduction_pct is not None:
            threshold = min_reduction_pct
        elif base_case is not None and base_case.get("min_reduction_pct") is not None:
            threshold = float(base_case["min_reduction_pct"])
        else:
            threshold = float(th.get("min_reduction_pct", DEFAULT_MIN_REDUCTION_PCT))
        for variant, ms in variants.items():
            if variant == FORWARD_REFERENCE:
                continue
            pairs = [(g[key]["eager"], g[key][variant]) for g in per_run if variant in g.get(key, {})]
            red, ci = pairs_reduction_pct(pairs)
            regression = None
            if variant == GATED and base_case is not None:
                regression = noise.check_regression(
                    base_case["graph"]["run_medians_ms"], [m.summary.median_ms for m in ms],
                    spread=base_case["graph"].get("spread_pct"), noise_source="baseline", floor_pct=floor,
                    multiplier=th.get("noise_multiplier", noise.DEFAULT_MULTIPLIER),
                    alpha=float(th.get("alpha", noise.DEFAULT_ALPHA)))
            is_graph = variant == GATED
            check, detail = combined_check(ms)
            results.append(GateVerdict(
                *key, variant, n_runs=len(ms), eager_median_ms=float(np.median([e.summary.median_ms for e, _ in pairs])),
                median_ms=float(np.median([m.summary.median_ms for m in ms])), reduction_pct=red, ci_pct=ci,
                gated=is_graph and gated, min_reduction_pct=threshold if is_graph and gated else None,
                check=check, check_detail=detail, allow_unchecked=allow_unchecked, regression=regression))
    return results


COLUMNS = [
    Column("model", "model"), Column("dtype", "dtype"), Column("seq_len", "L", "d"), Column("variant", "variant"),
    Column("n_runs", "runs", "d"),
    Column("eager_median_ms", "eager ms", ".3f"), Column("median_ms", "median ms", ".3f"),
    Column("reduction_pct", "reduction %", ".1f"), Column("ci", "95% CI / run range", align="right"),
    Column("min_reduction_pct", "min %", "g"), Column("check", "check"),
    Column("baseline_median_ms", "baseline ms", ".3f"),
    Column("change_pct", "vs baseline %", "+z.1f"), Column("tolerance_pct", "tolerance %", ".1f"),
    Column("p_value", "rank p", ".3f"), Column("status", "status"),  # z: never "-0.0"
]


def rows(results: list[GateVerdict]) -> list[dict]:
    """Table rows of gate results for :data:`COLUMNS`."""
    out = []
    for r in results:
        reg = r.regression
        row = {**asdict(r), "ci": f"[{r.ci_pct[0]:z.1f}, {r.ci_pct[1]:z.1f}]" if r.ci_pct else None,
               "status": r.status, "baseline_median_ms": reg.old_median_ms if reg else None,
               "change_pct": reg.change_pct if reg else None, "tolerance_pct": reg.tolerance_pct if reg else None,
               "p_value": reg.p_value if reg else None}
        out.append(row)
    return out


def summary(results: list[GateVerdict], baseline: Baseline | None) -> tuple[bool, str]:
    """``(passed, one-line summary)`` naming every failing case: a failed or missing correctness check,
    a reduction below its threshold, a regression against the baseline; then, with a baseline, the run's
    cases it lacks (not checked for regression) and how many of its cases are not in the run; gated
    cases without a bootstrap interval (no per-round data) are named too."""
    gated = [r for r in results if r.gated]
    wrong = [r for r in results if r.wrong]
    unchecked = [r for r in results if r.unchecked]
    below = [r for r in results if r.below]
    regressed = [r for r in results if r.regressed]
    marginal = [r for r in results if r.marginal]
    failed = bool(wrong or unchecked or below or regressed)
    parts = []
    parts += [f"{r.label} graph failed its correctness check ({r.check_detail})" for r in wrong]
    if unchecked:
        parts.append(f"{plural(len(unchecked), 'gated case')} recorded no correctness check "
                     f"({first_items([r.label for r in unchecked])}): rerun with the current plugin, or "
                     "--allow-unchecked for runs recorded before checks existed")
    parts += [f"{r.label} reduction {r.reduction_pct:.1f}% < {r.min_reduction_pct:g}%" for r in below]
    for r in regressed:
        reg = r.regression
        p = f", rank p={reg.p_value:.3f} < {reg.alpha:g}" if reg.p_value is not None else ""
        parts.append(f"{r.label} {r.variant} median {reg.change_pct:+.1f}% vs baseline "
                     f"(tolerance {reg.tolerance_pct:.1f}%{p})")
    if not failed:
        if gated:
            low = min(gated, key=lambda r: r.reduction_pct)
            verb = "reaches its threshold and matches" if len(gated) == 1 else "reach their threshold and match"
            parts.append(f"{plural(len(gated), 'gated case')} {verb} eager (lowest reduction "
                         f"{low.reduction_pct:.1f}%: {low.label})")
        else:
            parts.append("no gated cases in this run (nothing checked against the threshold)")
    if baseline is not None:
        in_run = {(r.model, r.dtype, r.seq_len) for r in results}
        not_in_run = len(set(baseline.cases) - in_run)
        note = f" ({plural(not_in_run, 'baseline case')} not in this run)" if not_in_run else ""
        if not failed:
            parts.append(f"no graph median regressed beyond its tolerance vs {baseline.path}{note}")
        elif note:
            parts.append(note.strip(" ()"))
        no_entry = [r.label for r in results if r.variant == GATED and r.regression is None]
        if no_entry:
            parts.append(f"{plural(len(no_entry), 'case')} of this run {'has' if len(no_entry) == 1 else 'have'} "
                         f"no baseline entry, not checked for regression: {first_items(no_entry)}")
    if marginal:
        parts.append(f"{len(marginal)} marginal ({', '.join(r.label for r in marginal)})")
    no_interval = [r.label for r in gated if r.ci_pct is None]
    if no_interval:
        parts.append(f"{plural(len(no_interval), 'gated case')} without a 95% interval (fewer than "
                     f"{MIN_BOOTSTRAP_ROUNDS} rounds of per-round data: pytest --benchmark-json keeps them), so "
                     f"'marginal' cannot be judged: {first_items(no_interval)}")
    if baseline is None:
        parts.append("--no-baseline: regression check skipped")
    return not failed, verdict_line("gate", not failed, parts)


def header(runs: list[Run], baseline: Baseline | None, results: list[GateVerdict]) -> list[str]:
    env = runs[0].environment
    names = ", ".join(str(r.path) for r in runs)
    what = [f"run{'s' if len(runs) > 1 else ''} {names}", f"GPU {env.gpu_name or env.gpu_slug or 'none'}"]
    what += env.versions(("torch", "cuda_runtime"))
    if env.commit_id:
        what.append(f"commit {env.commit_id[:12]}{' (dirty)' if env.commit_dirty else ''}")
    if baseline is None:
        return [", ".join(what), "no baseline (--no-baseline: regression check skipped)"]
    reg = next((r.regression for r in results if r.regression is not None), None)
    rule = reg.rule_text if reg else "no case in common"
    base = f"baseline {baseline.path} (GPU {baseline.gpu_slug}, {plural(baseline.n_runs, 'run')}; {rule})"
    return [", ".join(what), base]


def render_markdown(runs: list[Run], baseline: Baseline | None, results: list[GateVerdict], line: str,
                    passed: bool) -> str:
    """Markdown report for a CI job summary."""
    head = header(runs, baseline, results)
    return "\n".join([
        verdict_heading("gate", passed), "",
        f"- {head[0]}", f"- {head[1]}", "",
        render_table(COLUMNS, rows(results), fmt="markdown"), "",
        f"**{line}**", "",
        "Reduction = (eager median - median) / eager median; 95% CI: percentile bootstrap of one run's rounds "
        "(several runs: the range of the per-run reductions). marginal: the interval straddles the threshold. "
        "check: the correctness check recorded in the run (a failed one fails the gate). vs baseline: change "
        "of the median of run medians; tolerance: calibrated on between-run noise; rank p: one-sided "
        "Mann-Whitney U of the run medians. Only the graph variant of gated cases is gated.", ""])


def load_runs_of_one_gpu(refs: list[str], storage: str | None) -> list[Run]:
    """Load ``refs`` (separate runs of the same code); raises UsageError when a file is given twice or
    the runs are from different GPUs."""
    runs = distinct_runs([load_run(ref, storage) for ref in refs], "gate")
    check_one_gpu(runs, "gate runs of one GPU type at a time")
    return runs
