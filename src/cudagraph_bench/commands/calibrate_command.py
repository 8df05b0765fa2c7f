"""``cudagraph-bench calibrate RUN...``."""

from __future__ import annotations

import argparse

from cudagraph_bench.errors import UsageError
from cudagraph_bench.fsio import check_output_file, print_verdict
from cudagraph_bench.options import (add_regression_floor_option, parse_count, parse_multiplier, parse_markdown_path,
                                     parse_regression_pct)
from cudagraph_bench.results import noise
from cudagraph_bench.results.calibrate import (DEFAULT_AB_RUNS, floor_for, DEFAULT_PLANTS_PCT, calibrate, columns,
                                               render_markdown, rows, summary)
from cudagraph_bench.results.runfile import (PLAIN_LOOP_RUN, distinct_runs, forward_cases, is_plain_loop_run,
                                             load_run)
from cudagraph_bench.table import render_table


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``cudagraph-bench calibrate RUN...``."""
    parser.add_argument("runs", nargs="+", metavar="RUN",
                        help=f"at least {noise.MIN_BASELINE_RUNS + 1} separate runs of the same code and forward "
                             "matrix on one GPU type (paths or saved-run ids)")
    parser.add_argument("--plant", type=_parse_plants, default=DEFAULT_PLANTS_PCT, metavar="PCTS",
                        help="planted graph slow-downs in percent (default: %(default)s)")
    add_regression_floor_option(parser)
    parser.add_argument("--noise-multiplier", type=parse_multiplier, default=noise.DEFAULT_MULTIPLIER, metavar="X",
                        help="spreads a change must exceed (default: Student's t quantile of the spread's "
                             "degrees of freedom)")
    parser.add_argument("--ab-runs", type=parse_count, default=None, metavar="K",
                        help=f"runs per side of the A/B mode (default: {DEFAULT_AB_RUNS}, left out with fewer than "
                             "2K runs; a K given needs 2K runs)")
    parser.add_argument("--plain", nargs="+", default=[], metavar="RUN",
                        help="runs of the plain capture/replay loop (scripts/device/plain_loop) of the same jobs: the "
                             "page shows their spread beside the harness's")
    parser.add_argument("--markdown", type=parse_markdown_path, metavar="FILE", help="also write the page")


def _parse_plants(text: str) -> tuple[float, ...]:
    out = []
    for item in text.split(","):
        try:
            value = parse_regression_pct(item.strip())
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(f"a planted change is a percent > 0 such as 5,10, got {item!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"a planted change is a percent > 0, got {item!r}")
        out.append(value)
    return tuple(sorted(set(out)))


def refuse_misplaced_runs(runs: list, plain: list) -> None:
    """UsageError when a run is given twice, a RUN is a plain-loop run or a ``--plain`` run is not: the loop has no
    eager benchmark, and would make the harness look as steady as the loop."""
    distinct_runs([*runs, *plain], "calibrate")
    for run in runs:
        if is_plain_loop_run(run):
            raise UsageError(f"RUN {run.path} is {PLAIN_LOOP_RUN}: pass it with --plain, and runs of the suite as RUN")
    from cudagraph_bench.report.architectures import run_entries

    for run in plain:
        if not is_plain_loop_run(run):
            what = ("a run of the suite's forward benchmarks" if forward_cases(run) else
                    "a run of the architecture zoo" if run_entries(run) else "no run of forward benchmarks")
            raise UsageError(f"--plain {run.path} is not a run of the plain capture/replay loop (it is {what}): give "
                             "--plain the runs of scripts/device/plain_loop, and runs of the suite as RUN")


def main(args: argparse.Namespace) -> int:
    """Returns 0 when no mode raised a false alarm, else 1; UsageError before anything is written."""
    runs = [load_run(ref) for ref in args.runs]
    plain = [load_run(ref, records_only=True) for ref in args.plain]
    refuse_misplaced_runs(runs, plain)
    if args.ab_runs is not None and 2 * args.ab_runs > len(runs):
        raise UsageError(f"--ab-runs {args.ab_runs} needs {2 * args.ab_runs} runs (K per side), got {len(runs)}: "
                         f"give at most --ab-runs {len(runs) // 2}")
    args.ab_runs = DEFAULT_AB_RUNS if args.ab_runs is None else args.ab_runs
    check_output_file(args.markdown, "--markdown", "calibrate.md", [r.path for r in [*runs, *plain]],
                      command="calibrate")
    floor = args.max_regression if args.max_regression is not None else floor_for(runs)
    results = calibrate(runs, plants=args.plant, floor_pct=floor, multiplier=args.noise_multiplier,
                        ab_runs=args.ab_runs)
    line = summary(results, args.plant)
    page = render_markdown(runs, results, args.plant, line, floor, args.noise_multiplier, noise.DEFAULT_ALPHA,
                           args.ab_runs, plain) if args.markdown else None
    print_verdict(f"{render_table(columns(args.plant), rows(results, args.plant))}\n{line}", args.markdown, page)
    return 1 if any(r.gate.alarms + r.pairs.alarms + r.ab.alarms for r in results) else 0

