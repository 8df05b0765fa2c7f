"""``cudagraph-bench compare OLD NEW`` (or ``--old RUN... --new RUN...``)."""

from __future__ import annotations

import argparse

from cudagraph_bench.errors import UsageError
from cudagraph_bench.fsio import check_output_file, print_verdict
from cudagraph_bench.options import add_regression_floor_option, parse_baseline_path, parse_markdown_path
from cudagraph_bench.paths import default_baseline
from cudagraph_bench.results.baseline import check_baseline_gpu, load_baseline
from cudagraph_bench.results.compare import (COLUMNS, compare_runs, gated_missing_in_new,
                                             rows, summary, unmeasured_failures)
from cudagraph_bench.results.identity import same_run_reason, shared_runs
from cudagraph_bench.results.runfile import check_one_gpu, distinct_runs, load_run
from cudagraph_bench.table import render_table, verdict_heading


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``cudagraph-bench compare OLD NEW`` / ``--old RUN... --new RUN...``."""
    parser.usage = ("%(prog)s [options] OLD NEW\n"
                    "       %(prog)s [options] --old RUN [RUN ...] --new RUN [RUN ...]")
    parser.add_argument("runs", nargs="*", metavar="OLD NEW",
                        help="reference run and run to check: JSON paths or saved-run ids (e.g. 0001 0002)")
    parser.add_argument("--old", nargs="+", metavar="RUN", help="several separate reference runs (instead of OLD)")
    parser.add_argument("--new", nargs="+", metavar="RUN", help="several separate runs to check (instead of NEW)")
    parser.add_argument("--baseline", type=parse_baseline_path, metavar="FILE",
                        help="baseline whose between-run spread sets the tolerance of forward eager/graph cases "
                             "(default: the GPU's baseline where one is found, as for gate)")
    add_regression_floor_option(parser)
    parser.add_argument("--markdown", type=parse_markdown_path, metavar="FILE", help="also write a markdown report")
    parser.add_argument("--gate-references", action="store_true",
                        help="also fail when a reference variant (eager, generate, static-eager, loop) is slower; "
                             "by default they are reported only")


#: ``--allow`` words of compare -> what each accepts (cli adds ``interrupted``).
ALLOWANCES = {
    "missing": "do not fail when a gated benchmark of OLD is missing in NEW (it is still named)",
    "gpu-mismatch": "compare runs recorded on different GPUs (or a GPU run with one that recorded none); the verdict "
                    "then reflects the hardware, not the change",
}


def _sides(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    if args.old or args.new:
        if args.runs:
            raise UsageError("give either OLD NEW, or --old RUN... and --new RUN... (not both forms)")
        if not (args.old and args.new):
            raise UsageError(f"{'--new' if args.old else '--old'} is missing: give --old RUN... and --new RUN...")
        return args.old, args.new
    if len(args.runs) != 2:
        raise UsageError(f"expected OLD NEW (two runs), got {len(args.runs)}: for several runs per side use "
                         "--old RUN... --new RUN...")
    return [args.runs[0]], [args.runs[1]]


def main(args: argparse.Namespace) -> int:
    """Returns 0 (pass) or 1 (fail). UsageError before anything is written: different GPUs without ``--allow
    gpu-mismatch``, or OLD and NEW the same runs."""
    old_refs, new_refs = _sides(args)
    old = distinct_runs([load_run(r) for r in old_refs], "compare --old")
    new = distinct_runs([load_run(r) for r in new_refs], "compare --new")
    shared = shared_runs(old, new)       # (groups that share some runs get a note below)
    if len(shared) == len(old) and len(shared_runs(new, old)) == len(new):
        what = (f"OLD {old[0].path} and NEW {new[0].path} are the same run ({same_run_reason(old[0], new[0])})"
                if len(old) == len(new) == 1 else "--old and --new are the same runs")
        raise UsageError(f"{what}: a comparison of a run with itself cannot fail; compare separate runs")
    if not args.allow_gpu_mismatch:
        check_one_gpu([*old, *new], "compare runs of one GPU, or pass --allow gpu-mismatch to compare them anyway")
    baseline = None
    if args.baseline:
        baseline = load_baseline(args.baseline)
        check_baseline_gpu(baseline, new[0].environment.gpu_slug, "compare", args.allow_gpu_mismatch)
    elif new[0].environment.gpu_slug:
        found, _ = default_baseline(new[0].environment.gpu_slug)
        baseline = load_baseline(found) if found else None
    check_output_file(args.markdown, "--markdown", "compare.md",
                      [r.path for r in (*old, *new)] + [baseline.path if baseline else None], command="compare")
    changes, only_old, only_new = compare_runs(old, new, args.max_regression, args.gate_references, baseline)
    passed, line = summary(changes, only_old, only_new, gated_missing_in_new(old, new, baseline, args.gate_references),
                           args.allow_missing, unmeasured_failures(new))
    def names(runs):
        return ", ".join(str(r.path) for r in runs)
    old_gpu, new_gpu = old[0].environment.gpu_slug, new[0].environment.gpu_slug
    head = f"OLD {names(old)} ({old_gpu or 'no GPU'})  NEW {names(new)} ({new_gpu or 'no GPU'})"
    head += (f"  noise model: {baseline.path}" if baseline else
             "  noise model: the runs' own spread where a side has 2+ runs, else the flat floor")
    if old_gpu != new_gpu:
        head += "  note: the runs are from different GPUs"
    if shared:
        head += f"  note: OLD and NEW share {len(shared)} of their runs, which cannot change"
    page = None
    if args.markdown:
        table = render_table(COLUMNS, rows(changes), fmt="markdown")
        page = "\n".join([verdict_heading("compare", passed), "", head, "", table, "", f"**{line}**", ""])
    print_verdict("\n".join([head, render_table(COLUMNS, rows(changes)), line]), args.markdown, page)
    return 0 if passed else 1

