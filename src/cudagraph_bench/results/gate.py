"""``cudagraph-bench gate RUN...``: the regression gate (no torch). Fails (docs/gate.md) on a failed correctness check
(a peer's known failure is reported like an xfail), a gated case without a check, a gated reduction below its threshold,
or a regression against the GPU's baseline. Other variants' reductions are shown, never gated."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from cudagraph_bench.variants import FORWARD_REFERENCE as REF
from cudagraph_bench.variants import GATED
from cudagraph_bench.results import capture_cost, noise
from cudagraph_bench.results.baseline import (DEFAULT_MIN_REDUCTION_PCT, Baseline, case_tolerance,
                                              check_baseline_gpu, gated_case, load_baseline)
from cudagraph_bench.errors import InputFileError, UsageError
from cudagraph_bench.results.baseline_values import case_name
from cudagraph_bench.paths import default_baseline
from cudagraph_bench.results.checks import FailedCheck, failed_checks, own_and_peer, peer_notes
from cudagraph_bench.results.runfile import (Run, check_one_gpu, distinct_runs, forward_cases, forward_groups,
                                             load_run, merged_forward_groups, pairs_reduction_pct)
from cudagraph_bench.results.stats import MIN_BOOTSTRAP_ROUNDS
from cudagraph_bench.table import Column, first_items, plural, render_table, verdict_heading, verdict_line

#: A gated case whose reduction clears its threshold by fewer points than this is named in a warning (no failure).
MARGIN_WARN_POINTS = 10.0


@dataclass(frozen=True)
class GateVerdict:
    """Gate verdict of one variant of one case over ``n_runs`` runs (ms, percent). ``median_ms`` / ``eager_median_ms``:
    medians of run medians (wall); ``device_median_ms``: None where a run lacks it; ``ci_pct``: one run's 95% bootstrap
    interval, or the range of per-run reductions; ``regression``: graph variant with a baseline only."""

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
    device_median_ms: float | None = None
    capture: capture_cost.CaptureCheck | None = None
    capture_ms: float | None = None
    pool_left_mib: float | None = None

    @property
    def label(self) -> str:
        return f"{self.model} {self.dtype} L={self.seq_len}"

    @property
    def below(self) -> bool:
        """Gated and the median reduction is below the threshold (fails the gate)."""
        return self.gated and self.reduction_pct < self.min_reduction_pct

    @property
    def wrong(self) -> bool:
        """A failed correctness check (fails the gate, gated or not)."""
        return self.variant != REF and self.check == "fail"

    @property
    def unchecked(self) -> bool:
        """Gated, no check recorded, and not ``--allow unchecked`` (fails the gate)."""
        return self.gated and self.check == "unchecked" and not self.allow_unchecked

    @property
    def margin_pts(self) -> float | None:
        """Gated: reduction minus threshold in percentage points; else None."""
        return self.reduction_pct - self.min_reduction_pct if self.gated else None

    @property
    def marginal(self) -> bool:
        """Gated and the 95% interval straddles the threshold."""
        return bool(self.gated and self.ci_pct and self.ci_pct[0] < self.min_reduction_pct < self.ci_pct[1])

    @property
    def regressed(self) -> bool:
        """Slower than the baseline beyond its tolerance (rank test agreeing), or its capture cost regressed."""
        return getattr(self.regression, "regressed", False) or getattr(self.capture, "regressed", False)

    @property
    def failed(self) -> bool:
        return self.below or self.wrong or self.unchecked or self.regressed

    @property
    def status(self) -> str:
        parts = [("FAIL" if self.failed else "pass") if self.gated or self.wrong else "info"]
        if self.wrong:
            parts.append("WRONG")
        elif self.check == "unchecked" and self.variant != REF:
            parts.append("UNCHECKED" if self.unchecked else "unchecked")
        flags = {"marginal": self.marginal, "REGRESSION": getattr(self.regression, "regressed", False),
                 "CAPTURE COST": getattr(self.capture, "regressed", False)}
        return ", ".join(parts + [flag for flag, on in flags.items() if on])


#: ``gate --baseline none``: no regression check.
NO_BASELINE = "none"


def find_baseline(run: Run, explicit: str | None, allow_gpu_mismatch: bool = False) -> Baseline | None:
    """None for :data:`NO_BASELINE`; ``explicit`` if given; else ``<gpu_slug>.json``. UsageError when none is found, it
    is for another GPU (without ``allow_gpu_mismatch``) or holds none of the run's cases; InputFileError when the file
    is missing, a folder or invalid."""
    if explicit == NO_BASELINE:
        return None
    picked = explicit is None
    if explicit is None:
        slug = run.environment.gpu_slug
        if not slug:
            raise UsageError(f"{run.path} records no GPU (no machine_info.cuda.gpu_slug, as this suite's plugin writes "
                             "on a GPU), so no baseline can be picked: pass --baseline FILE, or --baseline none to "
                             "check correctness and the reduction threshold only")
        found, tried = default_baseline(slug)
        if found is None:
            where = ", ".join(str(p) for p in tried) or "nowhere (an installed copy has no baselines/ folder)"
            raise UsageError(f"no baseline for GPU {slug}: looked in {where}; pass --baseline FILE, set "
                             f"$CUDAGRAPH_BENCH_BASELINES to a folder holding {slug}.json, or --baseline none "
                             "to check correctness and the reduction threshold only")
        explicit = str(found)
    if Path(explicit).is_dir():
        raise InputFileError(f"--baseline {explicit} is a folder: give a baseline file such as "
                             f"{Path(explicit) / ((run.environment.gpu_slug or '<gpu-slug>') + '.json')}")
    baseline = load_baseline(explicit)
    check_baseline_gpu(baseline, run.environment.gpu_slug, "gate", allow_gpu_mismatch)
    keys = list(forward_groups(run))
    if not set(keys) & set(baseline.cases):
        fix = ("pass --baseline FILE written from runs of this matrix (cudagraph-bench baseline RUN... -o FILE)"
               if picked else f"regenerate the baseline from runs of this matrix (cudagraph-bench baseline "
                              f"RUN... -o {baseline.path}) or drop --baseline")
        where = f"baseline {baseline.path}" + (" (picked from the run's GPU)" if picked else "")
        raise UsageError(f"no case of {run.path} ({plural(len(keys), 'case')}, first {case_name(keys[0])}) is in "
                         f"{where}: {fix}")
    return baseline


def require_baseline_figure(runs: list[Run], baseline: Baseline | None) -> None:
    """UsageError when a graph case the baseline holds lacks the baseline's figure (e.g. no ``device_median_ms``)."""
    if baseline is None:
        return
    for run in runs:
        missing = [case_name(key) for key, by_variant in forward_groups(run).items()
                   if (case := baseline.cases.get(key)) is not None and case[GATED].get("figure") == "device"
                   and GATED in by_variant and by_variant[GATED].device_ms is None]
        if missing:
            raise UsageError(f"{run.path}: {plural(len(missing), 'graph case')} ({first_items(missing)}) recorded no "
                             f"device-side figure (extra_info.device_median_ms), which baseline {baseline.path} "
                             "compares: rerun with this version of the suite, or give --baseline of runs recorded "
                             "like this one")


def require_graph_variant(run: Run) -> None:
    """InputFileError when the run's forward benchmarks hold no ``graph`` variant."""
    cases = forward_cases(run)
    if not cases or any(case.variant == GATED for case in cases):
        return
    what = ("it is a CPU run, which measures eager only: graph replay needs a CUDA GPU" if run.on_cpu else
            f"only {', '.join(sorted({c.variant for c in cases}))}")
    raise InputFileError(f"{run.path} has no graph variant ({what}); gating needs a GPU run with eager and "
                         "graph (cudagraph-bench run --variants eager,graph, or pytest perf_tests --benchmark-only "
                         "on a GPU)")


def evaluate(runs: Run | list[Run], baseline: Baseline | None = None, *, min_reduction_pct: float | None = None,
             max_regression_pct: float | None = None, max_gated_len: int | None = None,
             allow_unchecked: bool = False) -> list[GateVerdict]:
    """Gate results of every non-eager forward variant of ``runs``, by case. A threshold left None comes from the
    baseline's case, the baseline, then the defaults (30%, 128 tokens). InputFileError for a run without forward
    benchmarks or with eager but no graph."""
    runs = [runs] if isinstance(runs, Run) else runs
    th = baseline.thresholds if baseline else {}
    results = []
    per_run = [forward_groups(run) for run in runs]
    left = [capture_cost.memory_left(run) for run in runs]
    for key, by_variant in merged_forward_groups(runs).items():
        base_case = baseline.cases.get(key) if baseline else None
        own = base_case or {}
        gated = gated_case(key, baseline, max_gated_len)
        threshold = float(next(v for v in (min_reduction_pct, own.get("min_reduction_pct"),
                                           th.get("min_reduction_pct"), DEFAULT_MIN_REDUCTION_PCT) if v is not None))
        for variant, ms in by_variant.items():
            if variant == REF:
                continue
            pairs = [(g[key][REF], g[key][variant]) for g in per_run if variant in g.get(key, {})]
            red, ci = pairs_reduction_pct(pairs)
            is_graph = variant == GATED
            new = [m.figure_ms(base_case[GATED].get("figure", "wall")) for m in ms] if base_case and is_graph else []
            regression = (case_tolerance(base_case, th, new, floor_pct=max_regression_pct)   # None: a run lacks it
                          if new and None not in new else None)
            # over runs: any failed check, else any missing one, else the common one
            worst = next((m for status in ("fail", "unchecked") for m in ms if m.check.status == status), ms[0]).check
            mem, captures = capture_cost.run_figures(key, pairs, left) if is_graph else ([], None)
            results.append(GateVerdict(
                *key, variant, n_runs=len(ms),
                eager_median_ms=float(np.median([e.summary.median_ms for e, _ in pairs])),
                median_ms=float(np.median([m.summary.median_ms for m in ms])), reduction_pct=red, ci_pct=ci,
                gated=is_graph and gated, min_reduction_pct=threshold if is_graph and gated else None,
                check=worst.status, check_detail=worst.detail, allow_unchecked=allow_unchecked, regression=regression,
                device_median_ms=(float(np.median([m.device_ms for m in ms]))
                                  if all(m.device_ms is not None for m in ms) else None),
                capture=capture_cost.check_case(base_case, th, captures and captures[1], mem) if is_graph else None,
                capture_ms=float(np.median(captures[0])) if captures else None,
                pool_left_mib=float(np.median(mem)) if mem else None))
    return results


COLUMNS = [
    Column("model", "model"), Column("dtype", "dtype"), Column("seq_len", "L", "d"), Column("variant", "variant"),
    Column("n_runs", "runs", "d"),
    Column("eager_median_ms", "eager ms", ".3f"), Column("median_ms", "median ms", ".3f"),
    Column("device_median_ms", "device ms", ".3f"),
    Column("reduction_pct", "reduction %", ".1f"), Column("ci", "95% CI / run range", align="right"),
    Column("min_reduction_pct", "min %", "g"), Column("margin_pts", "margin pts", "+z.1f"), Column("check", "check"),
    Column("baseline_median_ms", "baseline ms", ".3f"),
    Column("change_pct", "vs baseline %", "+z.1f"), Column("tolerance_pct", "tolerance %", ".1f"),
    Column("p_value", "rank p", ".3f"), *capture_cost.COLUMNS, Column("status", "status"),  # z: never "-0.0"
]


#: Cells of :data:`COLUMNS` read from the regression check and from the capture time's check: (column, attribute).
REGRESSION_CELLS = (("baseline_median_ms", "old_median_ms"), ("change_pct", "change_pct"),
                    ("tolerance_pct", "tolerance_pct"), ("p_value", "p_value"))
CAPTURE_CELLS = (("capture_change_pct", "change_pct"), ("capture_tolerance_pct", "tolerance_pct"))


def rows(results: list[GateVerdict]) -> list[dict]:
    """Table rows of gate results for :data:`COLUMNS` (a cell of a check not made: None)."""
    return [{**asdict(r), "ci": f"[{r.ci_pct[0]:z.1f}, {r.ci_pct[1]:z.1f}]" if r.ci_pct else None,
             "margin_pts": r.margin_pts, "status": r.status,
             **{col: getattr(r.regression, attr, None) for col, attr in REGRESSION_CELLS},
             **{col: getattr(r.capture and r.capture.capture, attr, None) for col, attr in CAPTURE_CELLS}}
            for r in results]


def other_failed_checks(runs: list[Run]) -> list[FailedCheck]:
    """Failed checks the forward table does not show (decode, launch, other, unmeasured cases), peers' among them."""
    return [f for f in failed_checks(runs) if not (f.measured and f.suite == "forward")]


def summary(results: list[GateVerdict], baseline: Baseline | None,
            other_failures: list[FailedCheck] = ()) -> tuple[bool, str]:
    """``(passed, one-line summary)`` naming every failing case, then cases the baseline or run lacks, gated cases
    without a bootstrap interval, and known peer failures (which do not fail)."""
    gated = [r for r in results if r.gated]
    unchecked = [r for r in results if r.unchecked]
    own, peer = own_and_peer(list(other_failures))
    failed = bool(own) or any(r.failed for r in results)
    parts = [f"{r.label} {r.variant} failed its correctness check ({r.check_detail})" for r in results if r.wrong]
    parts += [f.text for f in own]
    if unchecked:
        parts.append(f"{plural(len(unchecked), 'gated case')} recorded no correctness check "
                     f"({first_items([r.label for r in unchecked])}): rerun with the current plugin, or "
                     "--allow unchecked for runs recorded before checks existed")
    parts += [f"{r.label} reduction {r.reduction_pct:.1f}% < {r.min_reduction_pct:g}%" for r in results if r.below]
    cost_failures, cost_notes = capture_cost.verdict_parts(results)
    parts += cost_failures
    for r, reg in ((r, r.regression) for r in results if r.regression is not None and r.regression.regressed):
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
    thin = [r for r in results if r.gated and 0 <= r.margin_pts < MARGIN_WARN_POINTS]   # batch 1 moves with the CPU
    if thin:
        parts.append(f"warning: {plural(len(thin), 'gated case')} within {MARGIN_WARN_POINTS:g} points of the "
                     f"threshold ({first_items([f'{r.label} {r.margin_pts:+.1f}' for r in thin])}): eager is "
                     "host-bound at batch 1, so a slower runner CPU can take it below")
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
    parts += cost_notes
    marginal = [r.label for r in results if r.marginal]
    if marginal:
        parts.append(f"{len(marginal)} marginal ({', '.join(marginal)})")
    no_interval = [r.label for r in gated if r.ci_pct is None]
    if no_interval:
        parts.append(f"{plural(len(no_interval), 'gated case')} without a 95% interval (fewer than "
                     f"{MIN_BOOTSTRAP_ROUNDS} rounds of per-round data: pytest --benchmark-json keeps them), so "
                     f"'marginal' cannot be judged: {first_items(no_interval)}")
    if baseline is None:
        parts.append("--baseline none: regression check skipped")
    parts += peer_notes([f.text for f in peer])
    return not failed, verdict_line("gate", not failed, parts)


def header(runs: list[Run], baseline: Baseline | None, results: list[GateVerdict]) -> list[str]:
    """Two lines: what was gated (runs, GPU, versions, commit, CPUs) and the baseline with its rule."""
    env = runs[0].environment
    names = ", ".join(str(r.path) for r in runs)
    what = [f"run{'s' if len(runs) > 1 else ''} {names}", f"GPU {env.gpu_name or env.gpu_slug or 'none'}"]
    what += env.versions(("torch", "cuda_runtime"))
    if env.commit_id:
        what.append(f"commit {env.commit_id[:12]}{' (dirty)' if env.commit_dirty else ''}")
    cpus = sorted({r.environment.cpu_text for r in runs if r.environment.cpu_text})
    what.append(f"runner CPU {' / '.join(cpus) if cpus else 'not recorded'}")
    planted = sorted({r.environment.planted_fault for r in runs if r.environment.planted_fault})
    if planted:
        what.append(f"self-test run with the planted fault {', '.join(planted)}")
    if baseline is None:
        return [", ".join(what), "no baseline (--baseline none: regression check skipped)"]
    reg = next((r.regression for r in results if r.regression is not None), None)
    rule = reg.rule_text if reg else "no case in common"
    base = (f"baseline {baseline.path} (GPU {baseline.gpu_slug}, {plural(baseline.n_runs, 'run')} on "
            f"{_baseline_machines(runs, baseline)}; {rule})")
    return [", ".join(what), base]


def _baseline_machines(runs: list[Run], baseline: Baseline) -> str:
    """The baseline's machines and CPUs, and how many of the runs' machines are among them."""
    if not baseline.hosts:
        return "hosts not recorded"
    cpus = sorted({h["cpu"] for h in baseline.data["hosts"] if h.get("cpu")})
    text = f"{plural(len(baseline.hosts), 'host')} (CPU {' / '.join(cpus) if cpus else 'not recorded'})"
    machines = [r.environment.host for r in runs]
    among = sum(h in baseline.hosts for h in machines if h)
    if not any(machines):
        return text
    if len(runs) == 1:
        return text + (", this run's among them" if among else ", this run's not among them")
    every = "both" if len(runs) == 2 else f"all {len(runs)}"
    return text + (f", {every} runs' machines among them" if among == len(runs) else
                   f", {among} of the {len(runs)} runs' machines among them")


def render_markdown(runs: list[Run], baseline: Baseline | None, results: list[GateVerdict], line: str,
                    passed: bool) -> str:
    """Markdown report for a CI job summary."""
    head = header(runs, baseline, results)
    return "\n".join([
        verdict_heading("gate", passed), "",
        f"- {head[0]}", f"- {head[1]}", "",
        render_table(COLUMNS, rows(results), fmt="markdown"), "",
        f"**{line}**", "",
        "Reduction = (eager median - median) / eager median, synchronized wall time; device ms: CUDA events around "
        "replays queued behind a held stream, the figure compared with a device-side baseline; margin: reduction "
        "minus the threshold, in points (under 10: a warning); 95% CI: percentile bootstrap of one run's rounds "
        "(several runs: the range of the per-run reductions). marginal: the interval straddles the threshold. "
        "check: the correctness check recorded in the run (a failed one of any variant or suite fails the gate, "
        "but a known peer failure does not). vs baseline: change "
        "of the median of run medians; tolerance: calibrated on between-run noise; rank p: one-sided "
        "Mann-Whitney U of the run medians. Only the graph variant of gated cases is gated. " + capture_cost.PAGE_NOTE,
        ""])


def load_runs_of_one_gpu(refs: list[str], storage: str | None = None) -> list[Run]:
    """Load ``refs``; UsageError when a file is given twice, the runs are from different GPUs, or they record different
    commits (a change would be pooled into the noise)."""
    runs = distinct_runs([load_run(ref, storage) for ref in refs], "gate")
    check_one_gpu(runs, "gate runs of one GPU type at a time")
    commits = {}
    for run in runs:
        commits.setdefault(run.environment.known_commit, run)
    commits.pop(None, None)
    if len(commits) > 1:
        (a, first), (b, second) = list(commits.items())[:2]
        raise UsageError(f"the runs are of {len(commits)} commits ({a[:12]} in {first.path}, {b[:12]} in "
                         f"{second.path}): gate one commit's runs at a time; compare OLD NEW compares two")
    return runs
