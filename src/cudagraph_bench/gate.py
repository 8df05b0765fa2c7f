"""``cudagraph-bench gate RUN``: the regression gate (no torch; runs on any machine).

For each forward case ``(model, dtype, seq_len)`` of a pytest-benchmark run it pairs the ``eager`` and
``graph`` benchmarks and computes the median latency reduction ``(eager - graph) / eager`` with a 95%
percentile-bootstrap interval (:mod:`cudagraph_bench.stats`). Exit 1 when

- a gated case (default: prompt length <= 128 tokens) reduces latency by less than its threshold
  (default 30%; per-case ``min_reduction_pct`` / ``gated`` may come from the baseline), or
- a case's graph median is slower than the baseline's by more than ``--max-regression`` percent (the run's
  median is first rounded as the baseline file stores medians, :func:`~cudagraph_bench.baseline.stored_ms`,
  so a run gated against the baseline written from it changes by exactly 0%).

A case is *marginal* when its interval straddles the threshold (the verdict still follows the median).
Other variants (padded, bucketed, compile, compile+graph) are shown against eager but never gated.
Without ``--baseline`` the gate uses ``baselines/<gpu_slug>.json`` when it exists. Gating a run against
another GPU's baseline is refused unless ``--allow-gpu-mismatch``, and so is a baseline that holds none
of the run's cases (it would check nothing).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from pathlib import Path

from cudagraph_bench.options import parse_count, parse_path, parse_reduction_pct, parse_regression_pct
from cudagraph_bench.baseline import (DEFAULT_MAX_GATED_LEN, DEFAULT_MAX_REGRESSION_PCT,
                                      DEFAULT_MIN_REDUCTION_PCT, Baseline, load_baseline, pair_reduction,
                                      stored_ms)
from cudagraph_bench.errors import InputFileError, UsageError
from cudagraph_bench.runfile import (DEFAULT_STORAGE, Run, forward_cases, forward_groups, load_run,
                                     refuse_overwriting_inputs, write_text_atomic)
from cudagraph_bench.stats import MIN_BOOTSTRAP_ROUNDS, relative_change
from cudagraph_bench.table import Column, render_table

BASELINE_DIR = "baselines"
#: Labels named in a summary line before "..." (the table shows every case).
SHOWN_LABELS = 3


def plural(n: int, noun: str) -> str:
    """``"1 case"``, ``"2 cases"``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _first_labels(labels: list[str]) -> str:
    return ", ".join(labels[:SHOWN_LABELS]) + (", ..." if len(labels) > SHOWN_LABELS else "")


@dataclass(frozen=True)
class CaseResult:
    """Gate verdict of one variant of one case (times in ms, reductions and changes in percent)."""

    model: str
    dtype: str
    seq_len: int
    variant: str
    eager_median_ms: float
    median_ms: float
    reduction_pct: float
    ci_pct: tuple[float, float] | None
    gated: bool
    min_reduction_pct: float | None
    baseline_median_ms: float | None = None
    change_pct: float | None = None
    max_regression_pct: float | None = None

    @property
    def label(self) -> str:
        return f"{self.model} {self.dtype} L={self.seq_len}"

    @property
    def below(self) -> bool:
        """Gated and the median reduction is below the threshold (fails the gate)."""
        return self.gated and self.reduction_pct < self.min_reduction_pct

    @property
    def marginal(self) -> bool:
        """Gated and the 95% interval straddles the threshold."""
        return bool(self.gated and self.ci_pct and self.ci_pct[0] < self.min_reduction_pct < self.ci_pct[1])

    @property
    def regressed(self) -> bool:
        """The median is slower than the baseline's by more than the allowed percent (fails the gate)."""
        return self.change_pct is not None and self.change_pct > self.max_regression_pct

    @property
    def status(self) -> str:
        parts = [("FAIL" if self.below else "pass") if self.gated else "info"]
        if self.marginal:
            parts.append("marginal")
        if self.regressed:
            parts.append("REGRESSION")
        return ", ".join(parts)


def find_baseline(run: Run, explicit: str | None, allow_gpu_mismatch: bool = False) -> Baseline | None:
    """The baseline to gate ``run`` against: ``explicit`` if given, else ``baselines/<gpu_slug>.json``
    (relative to the working directory) if it exists, else None.

    Raises UsageError when the baseline is for another GPU and not ``allow_gpu_mismatch``, or when it
    holds none of the run's forward cases (the regression check would compare nothing);
    InputFileError when the baseline file is missing, a folder or invalid.
    """
    picked = explicit is None
    if explicit is None:
        auto = Path(BASELINE_DIR) / f"{run.gpu_slug}.json" if run.gpu_slug else None
        if auto is None or not auto.is_file():
            return None
        explicit = str(auto)
    if Path(explicit).is_dir():
        raise InputFileError(f"--baseline {explicit} is a folder: give a baseline file such as "
                             f"{Path(explicit) / ((run.gpu_slug or '<gpu-slug>') + '.json')}")
    baseline = load_baseline(explicit)
    if baseline.gpu_slug != run.gpu_slug and not allow_gpu_mismatch:
        raise UsageError(f"baseline {baseline.path} is for GPU {baseline.gpu_slug} but the run is from "
                         f"{run.gpu_slug or 'no GPU'}: gate against baselines/{run.gpu_slug}.json, "
                         "or pass --allow-gpu-mismatch to compare anyway")
    keys = list(forward_groups(run))
    if not set(keys) & set(baseline.cases):
        fix = ("pass --baseline FILE written from a run of this matrix (cudagraph-bench baseline RUN -o FILE)"
               if picked else f"regenerate the baseline from a run of this matrix (cudagraph-bench baseline "
                              f"{run.path} -o {baseline.path}) or drop --baseline")
        where = f"baseline {baseline.path}" + (" (picked from the run's GPU)" if picked else "")
        first = "{} {} L={}".format(*keys[0])
        raise UsageError(f"no case of {run.path} ({plural(len(keys), 'case')}, first {first}) is in {where}: {fix}")
    return baseline


def require_graph_variant(run: Run) -> None:
    """Raise InputFileError when the run's forward benchmarks hold no ``graph`` variant at all (an
    eager-only run, e.g. ``cudagraph-bench run --device cpu``): there is nothing to gate."""
    cases = forward_cases(run)
    if not cases or any(case.variant == "graph" for case in cases):
        return
    cpu = run.gpu_slug is None or any(m.extra_info.get("device") == "cpu" for m in cases.values())
    what = ("it is a CPU run, and cudagraph-bench run --device cpu measures eager only" if cpu else
            f"only {', '.join(sorted({c.variant for c in cases}))}")
    raise InputFileError(f"{run.path} has no graph variant ({what}); gating needs a GPU run with eager and "
                         "graph (cudagraph-bench run --variants eager,graph, or pytest perf_tests --benchmark-only "
                         "on a GPU)")


def evaluate(run: Run, baseline: Baseline | None = None, *, min_reduction_pct: float | None = None,
             max_regression_pct: float | None = None, max_gated_len: int | None = None) -> list[CaseResult]:
    """Gate results of every non-eager forward variant of ``run``, sorted by case.

    A threshold given here overrides the baseline's; one left None comes from the baseline's case
    (``gated``, ``min_reduction_pct``), then the baseline's thresholds, then the defaults (30%, 10%,
    128 tokens). The change vs the baseline (percent) compares the baseline's stored graph median with
    the run's graph median rounded the same way (:func:`~cudagraph_bench.baseline.stored_ms`, 6 decimals
    of a ms); the ``median_ms`` shown stays exact. Raises InputFileError for a run without forward
    benchmarks or with eager but no graph.
    """
    th = baseline.thresholds if baseline else {}
    max_reg = max_regression_pct if max_regression_pct is not None else float(
        th.get("max_regression_pct", DEFAULT_MAX_REGRESSION_PCT))
    results = []
    for key, variants in forward_groups(run).items():
        eager = variants["eager"]
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
        for variant, m in variants.items():
            if variant == "eager":
                continue
            red, ci = pair_reduction(eager, m)
            base_ms = change = None
            if variant == "graph" and base_case is not None:
                base_ms = float(base_case["graph"]["median_ms"])
                change = 100.0 * relative_change(base_ms, stored_ms(m.summary.median_ms))
            is_graph = variant == "graph"
            results.append(CaseResult(
                *key, variant, eager_median_ms=eager.summary.median_ms, median_ms=m.summary.median_ms,
                reduction_pct=red, ci_pct=ci, gated=is_graph and gated,
                min_reduction_pct=threshold if is_graph and gated else None,
                baseline_median_ms=base_ms, change_pct=change, max_regression_pct=max_reg))
    return results


COLUMNS = [
    Column("model", "model"), Column("dtype", "dtype"), Column("seq_len", "L", "d"), Column("variant", "variant"),
    Column("eager_median_ms", "eager ms", ".3f"), Column("median_ms", "median ms", ".3f"),
    Column("reduction_pct", "reduction %", ".1f"), Column("ci", "95% CI", align="right"),
    Column("min_reduction_pct", "min %", "g"), Column("baseline_median_ms", "baseline ms", ".3f"),
    Column("change_pct", "vs baseline %", "+z.1f"), Column("status", "status"),  # z: never "-0.0"
]


def rows(results: list[CaseResult]) -> list[dict]:
    """Table rows of gate results for :data:`COLUMNS`."""
    return [{**asdict(r), "ci": f"[{r.ci_pct[0]:z.1f}, {r.ci_pct[1]:z.1f}]" if r.ci_pct else None,
             "status": r.status} for r in results]


def summary(results: list[CaseResult], baseline: Baseline | None) -> tuple[bool, str]:
    """``(passed, one-line summary)`` naming every failing case, and with a baseline, the run's cases it
    lacks (not checked for regression) and how many of its cases are not in the run; gated cases
    without a bootstrap interval (no per-round data) are named too."""
    gated = [r for r in results if r.gated]
    below = [r for r in results if r.below]
    regressed = [r for r in results if r.regressed]
    marginal = [r for r in results if r.marginal]
    failed = bool(below or regressed)
    parts = []
    if below:
        parts += [f"{r.label} reduction {r.reduction_pct:.1f}% < {r.min_reduction_pct:g}%" for r in below]
    if regressed:
        parts += [f"{r.label} {r.variant} median {r.change_pct:+.1f}% vs baseline (> {r.max_regression_pct:g}%)"
                  for r in regressed]
    if not failed:
        if gated:
            low = min(gated, key=lambda r: r.reduction_pct)
            verb = "reaches its" if len(gated) == 1 else "reach their"
            parts.append(f"{plural(len(gated), 'gated case')} {verb} threshold (lowest {low.reduction_pct:.1f}%: "
                         f"{low.label})")
        else:
            parts.append("no gated cases in this run (nothing checked against the threshold)")
    if baseline is not None:
        in_run = {(r.model, r.dtype, r.seq_len) for r in results}
        not_in_run = len(set(baseline.cases) - in_run)
        note = f" ({plural(not_in_run, 'baseline case')} not in this run)" if not_in_run else ""
        if not failed:
            parts.append(f"no graph median regressed vs {baseline.path}{note}")
        elif note:
            parts.append(note.strip(" ()"))
        unchecked = [r.label for r in results if r.variant == "graph" and r.baseline_median_ms is None]
        if unchecked:
            parts.append(f"{plural(len(unchecked), 'case')} of this run {'has' if len(unchecked) == 1 else 'have'} "
                         f"no baseline entry, not checked for regression: {_first_labels(unchecked)}")
    if marginal:
        parts.append(f"{len(marginal)} marginal ({', '.join(r.label for r in marginal)})")
    no_interval = [r.label for r in gated if r.ci_pct is None]
    if no_interval:
        parts.append(f"{plural(len(no_interval), 'gated case')} without a 95% interval (fewer than "
                     f"{MIN_BOOTSTRAP_ROUNDS} rounds of per-round data: pytest --benchmark-json keeps them), so "
                     f"'marginal' cannot be judged: {_first_labels(no_interval)}")
    if baseline is None:
        parts.append("no baseline: regression check skipped")
    return not failed, f"gate {'FAIL' if failed else 'PASS'}: " + "; ".join(parts)


def _header(run: Run, baseline: Baseline | None, results: list[CaseResult]) -> list[str]:
    cuda = run.cuda or {}
    commit = run.data.get("commit_info") or {}
    what = [f"run {run.path}", f"GPU {cuda.get('gpu_name') or run.gpu_slug or 'none'}"]
    what += [f"{k} {cuda[k]}" for k in ("torch", "cuda_runtime") if cuda.get(k)]
    if commit.get("id"):
        what.append(f"commit {str(commit['id'])[:12]}{' (dirty)' if commit.get('dirty') else ''}")
    if run.machine_info.get("synthetic_standin"):
        what.append("SYNTHETIC STAND-IN DATA")
    base = (f"baseline {baseline.path} (GPU {baseline.gpu_slug}, max graph regression "
            f"{results[0].max_regression_pct:g}%)" if baseline else "no baseline (regression check skipped)")
    return [", ".join(what), base]


def render_markdown(run: Run, baseline: Baseline | None, results: list[CaseResult], line: str, passed: bool) -> str:
    """Markdown report for a CI job summary."""
    head = _header(run, baseline, results)
    return "\n".join([
        f"## cudagraph-bench gate: {'PASS' if passed else 'FAIL'}", "",
        f"- {head[0]}", f"- {head[1]}", "",
        render_table(COLUMNS, rows(results), fmt="markdown"), "",
        f"**{line}**", "",
        "Reduction = (eager median - median) / eager median; 95% CI: percentile bootstrap of the medians. "
        "marginal: the interval straddles the threshold. Only the graph variant of gated cases is gated.", ""])


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``cudagraph-bench gate RUN``."""
    parser.add_argument("run", metavar="RUN", help="pytest-benchmark JSON file (path or saved-run id, e.g. 0001)")
    parser.add_argument("--baseline", metavar="FILE",
                        help="baseline file (default: baselines/<gpu_slug>.json when it exists)")
    parser.add_argument("--min-reduction", type=parse_reduction_pct, metavar="PCT",
                        help=f"minimum median latency reduction of gated cases in percent, overriding the "
                             f"baseline's per-case values (default: baseline's, else {DEFAULT_MIN_REDUCTION_PCT:g})")
    parser.add_argument("--max-regression", type=parse_regression_pct, metavar="PCT",
                        help="allowed graph-median slow-down vs the baseline in percent "
                             f"(default: baseline's, else {DEFAULT_MAX_REGRESSION_PCT:g})")
    parser.add_argument("--max-gated-len", type=parse_count, metavar="TOKENS",
                        help="gate cases with prompt length <= TOKENS, overriding the baseline's gated flags "
                             f"(default: baseline's, else {DEFAULT_MAX_GATED_LEN})")
    parser.add_argument("--storage", default=DEFAULT_STORAGE, metavar="DIR",
                        help="where saved-run ids are looked up (default: %(default)s)")
    parser.add_argument("--allow-gpu-mismatch", action="store_true",
                        help="gate against a baseline recorded on another GPU")
    parser.add_argument("--markdown", type=parse_path, metavar="FILE",
                        help="also write a markdown report (for a CI job summary)")


def main(args: argparse.Namespace) -> int:
    """Run ``cudagraph-bench gate RUN``. Returns the exit code (0 pass, 1 fail); bad input raises
    :class:`~cudagraph_bench.errors.UsageError` (exit 2) before anything is written."""
    run = load_run(args.run, args.storage)  # a folder as RUN is refused there, with the file to give
    require_graph_variant(run)
    baseline = find_baseline(run, args.baseline, args.allow_gpu_mismatch)
    refuse_overwriting_inputs(args.markdown, "--markdown", [run.path, args.baseline,
                                                            baseline.path if baseline is not None else None])
    results = evaluate(run, baseline, min_reduction_pct=args.min_reduction,
                       max_regression_pct=args.max_regression, max_gated_len=args.max_gated_len)
    passed, line = summary(results, baseline)
    if args.markdown:
        write_text_atomic(args.markdown, render_markdown(run, baseline, results, line, passed))
    print("\n".join(_header(run, baseline, results)))
    print(render_table(COLUMNS, rows(results)))
    print(line)
    return 0 if passed else 1
