"""``cudagraph-bench gate RUN...``."""

from __future__ import annotations

import argparse
import functools
import sys

from cudagraph_bench.fsio import check_output_file, print_verdict
from cudagraph_bench.options import (add_regression_floor_option, MAX_CONFIRM, parse_baseline_path, parse_confirm,
                                     parse_count, parse_markdown_path, parse_reduction_pct)
from cudagraph_bench.results.baseline import DEFAULT_MAX_GATED_LEN, DEFAULT_MIN_REDUCTION_PCT
from cudagraph_bench.runner.confirm import confirm_regressions
from cudagraph_bench.results.gate import (COLUMNS, evaluate, find_baseline, header, load_runs_of_one_gpu,
                                          other_failed_checks, render_markdown, require_baseline_figure,
                                          require_graph_variant, rows, summary)
from cudagraph_bench.results.checks import replay_note
from cudagraph_bench.results.runfile import forward_groups
from cudagraph_bench.table import first_items, plural, render_table, verdict_line
from cudagraph_bench.variants import GATED


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``cudagraph-bench gate RUN...``."""
    parser.add_argument("runs", nargs="+", metavar="RUN",
                        help="pytest-benchmark JSON of one run, or of several separate runs of the same code "
                             "(paths or saved-run ids, e.g. 0001)")
    parser.add_argument("--baseline", type=parse_baseline_path, metavar="FILE",
                        help="baseline file, or none: gate correctness and the reduction threshold only, without a "
                             "regression check (default: <gpu_slug>.json in $CUDAGRAPH_BENCH_BASELINES, else in the "
                             "checkout's baselines/, whatever the working directory; a file named none: ./none)")
    parser.add_argument("--min-reduction", type=parse_reduction_pct, metavar="PCT",
                        help=f"minimum median latency reduction of gated cases in percent, overriding the "
                             f"baseline's per-case values (default: baseline's, else {DEFAULT_MIN_REDUCTION_PCT:g})")
    add_regression_floor_option(parser)
    parser.add_argument("--max-gated-len", type=parse_count, metavar="TOKENS",
                        help="gate cases with prompt length <= TOKENS, overriding the baseline's gated flags "
                             f"(default: baseline's, else {DEFAULT_MAX_GATED_LEN})")
    parser.add_argument("--confirm", type=parse_confirm, default=0, metavar="K",
                        help=f"when regressions are the only failures, rerun the regressed cases K times, at most "
                             f"{MAX_CONFIRM} (separate "
                             "pytest processes in the checkout, GPU needed) and judge them on all runs with the rank "
                             "test; the runs are written next to RUN as <RUN>.confirm-<i>.json (default: 0, off)")
    parser.add_argument("--markdown", type=parse_markdown_path, metavar="FILE",
                        help="also write a markdown report (for a CI job summary)")


#: ``--allow`` words of gate -> what each accepts (cli adds ``interrupted``).
ALLOWANCES = {
    "unchecked": "do not fail gated cases whose run recorded no correctness check (runs recorded before checks "
                 "existed); a failed check always fails",
    "gpu-mismatch": "gate against a baseline recorded on another GPU",
    "missing": "do not fail when gated cases of the baseline are missing from the run while gated cases of the run "
               "have no baseline entry (renamed cases, which the regression check would not see); both are still "
               "named",
}


def unmatched_gated_cases(results, baseline) -> tuple[list[str], list[str]]:
    """``(baseline's gated cases the run lacks, run's gated cases the baseline lacks)`` when both are non-empty (renamed
    cases the regression check would skip), else two empty lists."""
    if baseline is None:
        return [], []
    in_run = {(r.model, r.dtype, r.seq_len) for r in results}
    missing = ["{} {} L={}".format(*key) for key, case in sorted(baseline.cases.items())
               if case.get("gated") and key not in in_run]
    new = [r.label for r in results if r.variant == GATED and r.gated and r.regression is None]
    return (missing, new) if missing and new else ([], [])


def main(args: argparse.Namespace) -> int:
    """Returns 0 (pass) or 1 (fail); UsageError before anything is written."""
    runs = load_runs_of_one_gpu(args.runs)  # a folder as RUN is refused there, with the file to give
    for run in runs:
        require_graph_variant(run)
        forward_groups(run)  # no forward benchmarks (a decode or launch run, another tool's): say so, not "no baseline"
    baseline = find_baseline(runs[0], args.baseline, args.allow_gpu_mismatch)
    require_baseline_figure(runs, baseline)
    check_output_file(args.markdown, "--markdown", "gate.md",
                      [*(r.path for r in runs), baseline.path if baseline is not None else None], command="gate")
    judge = functools.partial(evaluate, baseline=baseline, min_reduction_pct=args.min_reduction,
                              max_regression_pct=args.max_regression, max_gated_len=args.max_gated_len,
                              allow_unchecked=args.allow_unchecked)
    results = judge(runs)
    others = other_failed_checks(runs)   # decode and unmeasured cases: every recorded check is in the verdict
    passed, line = summary(results, baseline, others)
    only_regressions = not passed and not any(r.wrong or r.unchecked or r.below for r in results) and all(
        f.peer for f in others)
    if args.confirm and only_regressions:
        extra = confirm_regressions(runs, results, args.confirm)
        runs = runs + extra
        results = judge(runs)
        passed, line = summary(results, baseline, others)
        if not extra:
            line += (f" (none of the {args.confirm} confirmation reruns produced a run, see the logs next to "
                     f"{runs[0].path}: the regression stands, unconfirmed)")
        else:
            line += (f" (after {len(extra)} of {args.confirm} confirmation reruns of the regressed cases: "
                     f"{'regression confirmed' if not passed else 'not confirmed, the first run was an outlier'})")
    missing, new = unmatched_gated_cases(results, baseline)
    if missing:
        part = (f"{plural(len(missing), 'gated baseline case')} not in this run ({first_items(missing)}) while "
                f"{plural(len(new), 'gated case')} of this run {'has' if len(new) == 1 else 'have'} no baseline entry "
                f"({first_items(new)}): renamed cases escape the regression check; rebuild the baseline for the new "
                "names" + (" (--allow missing: not failed)" if args.allow_missing else ", or pass --allow missing"))
        fail = passed and not args.allow_missing
        line = verdict_line("gate", False, [part, line.split(": ", 1)[1]]) if fail else f"{line}; {part}"
        passed = passed and args.allow_missing
    markdown = render_markdown(runs, baseline, results, line, passed) if args.markdown else None
    print_verdict("\n".join([*header(runs, baseline, results), render_table(COLUMNS, rows(results)), line]),
                  args.markdown, markdown)
    if note := replay_note(runs):
        print(f"note: {note}", file=sys.stderr)
    return 0 if passed else 1

