"""``cudagraph-bench launch-report RUN [-o DIR] [--forward RUN ...] [--graphs-cu JSON] [--sanitizer LOG ...]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cudagraph_bench.errors import UsageError
from cudagraph_bench.fsio import check_input_file, written_verb
from cudagraph_bench.options import parse_count, parse_path
from cudagraph_bench.report.launch_data import (REFERENCE_N, check_forward_runs, check_reference_n, launch_rows,
                                                load_json_object, read_sanitizer_logs)
from cudagraph_bench.report.launch_page import DEFAULT_OUT_DIR, PAGE_NAME, PLOT_NAME, write_launch_page
from cudagraph_bench.results.runfile import check_one_gpu, load_run


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``cudagraph-bench launch-report RUN``."""
    parser.add_argument("run", metavar="RUN",
                        help="pytest-benchmark JSON with launch-suite benchmarks (a path, or a saved-run id such as "
                        "0001)")
    parser.add_argument("-o", "--output-dir", dest="out_dir", type=parse_path, default=DEFAULT_OUT_DIR, metavar="DIR",
                        help=f"folder for {PAGE_NAME} and {PLOT_NAME}, created when missing (one level under a folder "
                        "that exists, or anywhere under the working directory); both are written "
                        "or neither (default: %(default)s; the committed page is regenerated with -o docs)")
    parser.add_argument("--graphs-cu", metavar="JSON", help="stdout of a full perf_tests/cuda/graphs.cu run")
    parser.add_argument("--sanitizer", metavar="LOG", action="append", default=[],
                        help="compute-sanitizer log of graphs --baked-pointer-only (repeatable); the program's "
                        "stdout, if saved next to it as the same name with .json, adds the outcome")
    parser.add_argument("--forward", metavar="RUN", action="append", default=[],
                        help="another run whose forward benchmarks (eager with n_kernels, graph) feed the "
                        "predicted-vs-measured table (repeatable; RUN's own forward benchmarks count too). "
                        "Each forward case (model, dtype, tokens, variant) must be in one run only")
    parser.add_argument("--reference-n", type=parse_count, default=None, metavar="N",
                        help=f"N (launches, a whole number >= 1) whose µs/launch feeds the model; it must be "
                        f"measured with loop and graph (default: {REFERENCE_N}, else the largest such N)")


#: ``--allow`` words of launch-report -> what each accepts (cli adds ``interrupted``).
ALLOWANCES = {
    "gpu-mismatch": "take --forward runs of another GPU than RUN's (the prediction then uses RUN's cost per launch "
                    "for the other GPU's forwards; default: an error)",
}


def main(args: argparse.Namespace) -> int:
    """Write the page and plot into ``args.out_dir``; returns 0. UsageError for bad input or an unwritable folder."""
    run = load_run(args.run)
    forward_runs = [run, *(load_run(ref) for ref in args.forward)]
    if not args.allow_gpu_mismatch:  # the predicted saving applies RUN's cost per launch to the forward runs
        check_one_gpu(forward_runs, "give --forward runs of RUN's GPU, or pass --allow gpu-mismatch")
    check_forward_runs(forward_runs)
    if args.reference_n is not None and (rows := launch_rows(run)):   # without any: the page says the suite is missing
        check_reference_n(rows, args.reference_n)
    for flag, path in [("--graphs-cu", args.graphs_cu), *(("--sanitizer", log) for log in args.sanitizer)]:
        if path:  # before reading: a device or a pipe would never end, a huge file fill the memory
            check_input_file(path, flag, f"give the file {flag} names (see cudagraph-bench launch-report --help)")
    graphs_cu = load_json_object(args.graphs_cu, "graphs.cu output") if args.graphs_cu else None
    logs, outcomes = read_sanitizer_logs(args.sanitizer)
    earlier = all(written_verb(Path(args.out_dir) / name) == "replaced" for name in (PAGE_NAME, PLOT_NAME))
    verb = "replaced" if earlier else "wrote"
    try:
        page, plot = write_launch_page(run, args.out_dir, source=" + ".join(str(r.path) for r in forward_runs),
                                       reference_n=REFERENCE_N if args.reference_n is None else args.reference_n,
                                       graphs_cu=graphs_cu, sanitizer=logs, sanitizer_outcomes=outcomes,
                                       forward_runs=forward_runs)
    except OSError as exc:
        where = exc.filename or args.out_dir
        raise UsageError(f"cannot write {PAGE_NAME} and {PLOT_NAME} into {args.out_dir} ({where}: "
                         f"{exc.strerror or exc}); no file was written: choose a writable folder with -o") from None
    print(f"{verb} {page} and {plot}", file=sys.stderr)   # as every command that writes files: stdout is for results
    return 0

