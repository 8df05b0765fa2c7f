"""``cudagraph-bench zoo``: the architecture zoo in a watched pytest process, its run and ``docs/architectures.md`` in
``-o DIR``; ``--from RUN...``: the page from earlier runs, no torch."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cudagraph_bench.errors import UsageError
from cudagraph_bench.fsio import check_output_file, check_output_folder, print_verdict
from cudagraph_bench.parsers import (ZooTypes, parse_markdown_path, parse_path, parse_run_path, parse_timeout_s,
                                     parse_zoo_types)
from cudagraph_bench.zoo_keys import FAILED

#: The run JSON of run mode, in ``-o DIR``.
RUN_JSON = "zoo.json"
#: The page written next to it unless ``--markdown`` names another file.
PAGE = "architectures.md"
DEFAULT_OUT = "out/zoo"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--types", type=parse_zoo_types, default=ZooTypes(), metavar="TYPES",
                        help="model types: all, K/N (every N-th type from the K-th: N device commands) or "
                             "type,type,... (default: all)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cuda: check and time every graph; cpu: the classification a CPU can make "
                             "(default: cuda)")
    parser.add_argument("--with-compile", action="store_true",
                        help="also check and time the decode step compiled by inductor and captured (compile+graph)")
    parser.add_argument("--deadline-s", type=parse_timeout_s, default=0.0, metavar="S",
                        help="skip the types whose tests would start later than S seconds into the run (they stay "
                             "out of it), so that a run under a time limit still writes its file; 0: none "
                             "(default: 0)")
    parser.add_argument("-o", "--output-dir", dest="out", type=parse_path, default=DEFAULT_OUT, metavar="DIR",
                        help=f"run mode: where {RUN_JSON}, its log and {PAGE} go (default: {DEFAULT_OUT})")
    parser.add_argument("--from", dest="source", nargs="+", type=parse_run_path, default=None, metavar="RUN",
                        help="write the page from these zoo runs instead of running (no GPU, no torch)")
    parser.add_argument("--markdown", type=parse_markdown_path, default=None, metavar="FILE",
                        help=f"where the page goes (default: DIR/{PAGE} in run mode; required with --from)")


def write_page(paths, markdown, command: str | None = None) -> int:
    """Write the page and print counts; 1 when a part failed, else 0. UsageError / InputFileError: an unreadable run,
    one given twice or without zoo entries, or ``markdown`` naming a run."""
    from cudagraph_bench.report.architectures import merge_entries, render_markdown, run_entries, status_counts
    from cudagraph_bench.results.runfile import load_run

    check_output_file(markdown, "--markdown", PAGE, list(paths), command="zoo")
    same = sorted({str(p) for p in paths if sum(Path(q).resolve() == Path(p).resolve() for q in paths) > 1})
    if same:
        raise UsageError(f"{', '.join(same)} given more than once: give each zoo run once")
    runs = sorted((load_run(str(p), records_only=True) for p in paths),
                  key=lambda r: r.environment.started_at)     # a later run's cell wins
    empty = [str(r.path) for r in runs if not run_entries(r)]
    if empty:
        raise UsageError(f"{', '.join(empty)}: no zoo entries (not a run of perf_tests/test_zoo.py --zoo): give the "
                         f"{RUN_JSON} of cudagraph-bench zoo")
    merged = merge_entries([e for run in runs for e in run_entries(run)])
    counts = [f"transformers {version} {part}: {', '.join(f'{n} {status}' for status, n in counts.items() if n)}"
              for (version, part), counts in sorted(status_counts(merged).items())]
    print_verdict("\n".join(counts), markdown, render_markdown(runs, command=command))
    return 1 if any(e.status == FAILED for e in merged.values()) else 0


def main(args: argparse.Namespace) -> int:
    """Returns 0, or 1 (a part failed or killed its process, or no run written); UsageError: exit 2."""
    if args.source:
        ignored = [name for name, given in (("--types", args.types != ZooTypes()), ("--device", args.device != "cuda"),
                                            ("--with-compile", args.with_compile), ("--deadline-s", args.deadline_s),
                                            ("-o", str(args.out) != DEFAULT_OUT)) if given]
        if ignored:
            raise UsageError(f"--from writes the page from earlier runs and runs nothing: drop {', '.join(ignored)}")
        if args.markdown is None:
            raise UsageError("--from writes the page: give --markdown FILE (e.g. docs/architectures.md)")
        return write_page(args.source, args.markdown)
    from cudagraph_bench.paths import checkout_root
    from cudagraph_bench.runner.process import PytestRun, cuda_problem, run_pytest, zoo_types

    tree = checkout_root()
    if tree is None or not (tree / "perf_tests" / "test_zoo.py").is_file():
        raise UsageError("cudagraph-bench zoo runs the checkout's perf_tests/test_zoo.py: run it from a "
                         "cudagraph-bench checkout (an editable install)")
    if args.device == "cuda" and (problem := cuda_problem()):
        raise UsageError(f"no CUDA GPU ({problem}): run on a GPU, or --device cpu for the CPU classification")
    out = Path(args.out)
    markdown = Path(args.markdown) if args.markdown else out / PAGE
    if args.markdown:       # else the page is one of -o's files
        check_output_file(markdown, "--markdown", PAGE, [out / RUN_JSON], command="zoo")   # never the page's run
    own = [p.name for p in PytestRun(tree, out / RUN_JSON).files()] + ([] if args.markdown else [PAGE])   # log, journal
    check_output_folder(out, own, command="zoo")
    if args.types != ZooTypes():      # names and K/N against the release the zoo's pytest process runs
        release, installed = zoo_types(tree)
        try:
            args.types.pick(list(installed), "--types", release)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    check_output_folder(out, own, command="zoo", create=True)
    deadline = f"{time.time() + args.deadline_s:.0f}" if args.deadline_s else "0"
    pytest_args = ("perf_tests/test_zoo.py", "--zoo", str(args.types), "--device", args.device,
                   "--zoo-deadline-at", deadline, *(("--with-compile",) if args.with_compile else ()))
    outcome = run_pytest(PytestRun(tree=tree, json_path=out / RUN_JSON, args=pytest_args))
    if outcome.json_path is None:
        print(f"the zoo's pytest process wrote no run (see {outcome.log_path})", file=sys.stderr)
        return 1
    command = " ".join(["cudagraph-bench zoo", f"--types {args.types}", f"--device {args.device}",
                        *([f"--deadline-s {args.deadline_s:g}"] if args.deadline_s else []),
                        *(["--with-compile"] if args.with_compile else [])])
    status = write_page([outcome.json_path], markdown, command)
    return 1 if outcome.crashes else status
