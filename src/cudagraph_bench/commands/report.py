"""``cudagraph-bench report RUN [RUN ...] -o DIR [--readme README.md]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cudagraph_bench.errors import UsageError
from cudagraph_bench.fsio import (check_output_folder, interrupt_after, read_input_bytes, write_files_atomic,
                                  written_verb)
from cudagraph_bench.options import parse_path, parse_markdown_path
from cudagraph_bench.report.pages import (MARKER_END, MARKER_START, PLOT_NAMES, RESULTS_MD, plot_makers,
                                          render_plots, render_readme_section, render_results_markdown,
                                          replace_between_markers, stale_plots)
from cudagraph_bench.report.runs import load_runs, supersede
from cudagraph_bench.report.suite_timing import render_suite_timing
from cudagraph_bench.results.runfile import check_one_gpu, require_suite_benchmarks


#: Where ``report`` writes without ``-o``: not ``docs/``, which holds the committed H200 pages.
DEFAULT_REPORT_DIR = "out/report"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN",
                        help="pytest-benchmark JSON files or saved-run ids (several are merged)")
    parser.add_argument("-o", "--output-dir", dest="outdir", type=parse_path, default=DEFAULT_REPORT_DIR, metavar="DIR",
                        help="folder for results.md and the PNGs (default: %(default)s; the committed docs/ "
                             "are written by scripts/regenerate_docs.sh)")
    parser.add_argument("--readme", type=parse_markdown_path, default=None,
                        help="also replace the block between <!-- results:start --> and <!-- results:end --> "
                             "in this file")
    parser.add_argument("--suite-timing", action="append", default=[], metavar="RUN",
                        help="a whole-suite run (one pytest session over perf_tests, on one GPU or with "
                             "cudagraph-bench run --gpus) whose time per test module and wall time are shown as a "
                             "table, one column per run; repeat for several (its benchmarks are not added to the "
                             "tables)")
    parser.add_argument("--no-plots", action="store_true",
                        help="write results.md (and the README block) only: the pages link the plots a full report "
                             "draws, and the PNGs in DIR are left as they are (a quick check of the text; run "
                             "without it to redraw them)")


#: ``--allow`` words of report -> what each accepts (cli adds ``interrupted``).
ALLOWANCES = {
    "overlap": "runs that hold the same cases: take each forward prompt length (all its variants) and each other "
               "benchmark from the newest run, and list what was replaced (default: an overlap is an error)",
    "gpu-mismatch": "put runs of different GPUs (or of a GPU and the CPU) on one page; their rows share tables "
                    "without a GPU column (default: an error; make one report per GPU)",
}


def main(args: argparse.Namespace) -> int:
    """Write results.md, the PNGs and the README block; returns 0. UsageError before any write."""
    runs = load_runs(args.runs)
    suite_runs = load_runs(args.suite_timing) if args.suite_timing else []
    if suite_runs:
        render_suite_timing(suite_runs)      # a run without a time per part fails here, before anything is written
    require_suite_benchmarks(runs)   # plain pytest-benchmark output would give a page with a header only
    if not args.allow_gpu_mismatch:  # the latency tables have no GPU column (--suite-timing's table has one)
        check_one_gpu(runs, "report one GPU's runs per page (one report per GPU), or pass --allow gpu-mismatch")
    runs, superseded = supersede(runs) if args.allow_overlap else (runs, [])
    for line in superseded:
        if "(drops " in line:
            print(f"warning: {line}", file=sys.stderr)
    outdir = Path(args.outdir)
    readme, readme_text = (Path(args.readme) if args.readme else None), None
    if readme:
        fix = f"give an existing markdown file with the marker lines {MARKER_START} and {MARKER_END}"
        raw = read_input_bytes(args.readme, "--readme", fix)   # never a device or a pipe: its read would not end
        try:
            readme_text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError(f"--readme {args.readme} is not UTF-8 text: {fix}") from None
        replace_between_markers(readme_text, "", where=args.readme)  # fail before writing anything
    results_md = check_output_folder(outdir, [RESULTS_MD, *PLOT_NAMES], command="report") / RESULTS_MD
    # render every text once before writing anything: bad data fails here, with nothing half-written
    render_results_markdown(runs, outdir, [], superseded, suite_runs)
    if readme:
        render_readme_section(runs, outdir, readme.resolve().parent, [], suite_runs)
    verbs = {name: written_verb(outdir / name) for name in [RESULTS_MD, *PLOT_NAMES]}
    plots = {} if args.no_plots else render_plots(runs)   # drawn aside: DIR changes once the report is whole
    written = [outdir / name for name in (plot_makers(runs) if args.no_plots else plots)]
    files: dict[Path, bytes | str] = {outdir / name: png for name, png in plots.items()}
    files[results_md] = render_results_markdown(runs, outdir, written, superseded, suite_runs)
    if readme:
        section = render_readme_section(runs, outdir, readme.resolve().parent, [p.resolve() for p in written],
                                        suite_runs)
        files[readme] = replace_between_markers(readme_text, section, where=args.readme)
    stale = stale_plots(outdir, written) if not args.no_plots else []
    # one write of every file, then the earlier report's plots gone: a Ctrl-C leaves the old report or the new one
    with interrupt_after(f"writing {outdir}"):
        write_files_atomic(files)
        for path in stale:
            path.unlink()
    for path in [*(outdir / name for name in plots), results_md]:
        print(f"{verbs[Path(path).name]} {path}", file=sys.stderr)
    for path in stale:
        print(f"removed {path}: an earlier report's plot, for which these runs have no data", file=sys.stderr)
    if readme:
        print(f"updated {readme}", file=sys.stderr)
    return 0

