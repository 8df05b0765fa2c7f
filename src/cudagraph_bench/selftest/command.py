"""``cudagraph-bench selftest``: plant known faults into the real pipeline on this GPU and show that the gate fails on
each and passes on unmodified reruns (docs/gate.md). No torch in this process."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from cudagraph_bench.errors import UsageError
from cudagraph_bench.fsio import check_output_file, print_verdict
from cudagraph_bench.options import (DEFAULT_DTYPES, DEFAULT_MODELS, DEFAULT_PROMPT_LENGTHS, PYTEST_ARGS_METAVAR,
                                     parse_baseline_path, parse_count, parse_markdown_path, parse_nonneg, parse_path,
                                     parse_pytest_matrix, show_default)

DEFAULT_OUT = "out/selftest"
#: Runs of the plain capture/replay loop (``scripts/device/plain_loop``) in the folder: ``plain-<i>.json``.
PLAIN_PREFIX = "plain-"
#: Most unmodified runs (each takes about a minute on one GPU).
MAX_RUNS = 20
#: What a run stopped mid-way leaves beside its log (``NAME.part<K>.json``): not a run, ``--from`` passes over it.
_PART = re.compile(r"\.part\d+\.json(\.gz)?$")


#: Fewest unmodified runs: 5 when they are the baseline, 2 with ``--baseline`` (their false alarms).
MIN_RUNS, MIN_RUNS_WITH_BASELINE = 5, 2


def _runs(text: str) -> int:
    value = parse_count(text)
    if not MIN_RUNS_WITH_BASELINE <= value <= MAX_RUNS:
        raise argparse.ArgumentTypeError(f"expected {MIN_RUNS_WITH_BASELINE} to {MAX_RUNS} unmodified runs, "
                                         f"got {value}")
    return value


def _delays(text: str) -> tuple[float, ...]:
    out = []
    for item in text.split(","):
        try:
            value = float(item)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected percents such as 3,5,10, got {item!r}") from None
        if not 0 < value <= 100:
            raise argparse.ArgumentTypeError(f"a planted delay is a percent in (0, 100], got {item!r}")
        out.append(value)
    return tuple(sorted(set(out)))


def _percent(text: str) -> float:
    if "," in text:
        raise argparse.ArgumentTypeError(f"expected one percent such as 3, got {text!r}")
    return _delays(text)[0]


def configure_parser(parser: argparse.ArgumentParser) -> None:
    from cudagraph_bench.runner.ab import MIN_RANK_RUNS
    from cudagraph_bench.selftest.planned_runs import DEFAULT_AB_DELAY_PCT, DEFAULT_DELAYS_PCT, DEFAULT_UNMODIFIED_RUNS

    parser.add_argument("-o", "--output-dir", dest="out", type=parse_path, default=DEFAULT_OUT, metavar="DIR",
                        help="folder for the runs and their logs; must be new or empty (default: %(default)s)")
    parser.add_argument("--from", dest="source", type=parse_path, default=None, metavar="DIR",
                        help="evaluate the runs of an earlier self-test in DIR instead of running (no GPU needed)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the self-test in the -o folder: keep its finished runs, run the others")
    parser.add_argument("--baseline", type=parse_baseline_path, default=None, metavar="FILE",
                        help="gate the runs against this baseline (e.g. baselines/<gpu>.json, built on other machines) "
                             "instead of one built from the unmodified runs")
    parser.add_argument("--runs", type=_runs, default=None, metavar="N",
                        help=f"unmodified runs, the baseline of the verdicts, at least {MIN_RUNS}; with --baseline "
                             f"at least {MIN_RUNS_WITH_BASELINE}, their false alarms; not with --from, which reads the "
                             f"runs its folder holds (default: {DEFAULT_UNMODIFIED_RUNS})")
    parser.add_argument("--delays", type=_delays, default=DEFAULT_DELAYS_PCT, metavar="PCTS",
                        help="GPU delays to plant, percent of each case's own graph time (default: "
                             f"{show_default(DEFAULT_DELAYS_PCT)})")
    parser.add_argument("--ab", type=parse_nonneg, default=0, metavar="K",
                        help="also measure the pull-request mode (ab): K runs each of base, head (both unmodified) "
                             f"and head with --ab-delay planted, interleaved; {MIN_RANK_RUNS} to {MAX_RUNS} (the rank "
                             f"test needs {MIN_RANK_RUNS} per side); its A/A false alarms fail the self-test, its "
                             "detection is reported (default: 0, off)")
    parser.add_argument("--ab-delay", type=_percent, default=None, metavar="PCT",
                        help="GPU delay planted on head in the ab runs, percent of each case's own graph time "
                             f"(default: {DEFAULT_AB_DELAY_PCT:g})")
    parser.add_argument("pytest_args", nargs="*", metavar=PYTEST_ARGS_METAVAR,
                        help="pytest arguments for every run, after --, e.g. -- --models gpt2 --benchmark-max-time 0.3")
    parser.add_argument("--markdown", type=parse_markdown_path, metavar="FILE",
                        help="also write the page (docs/gate-selftest.md)")


#: pytest options the self-test sets itself in its runs: given after ``--`` they are refused, with why.
OWN_OPTIONS = {
    "--variants": "each run of the self-test chooses its variants",
    "--plant-fault": "the self-test plants its faults itself",
    "--benchmark-json": "each run writes its own JSON into -o",
    "--journal": "each run keeps its own journal",
    "--replay-proof": "the runs that need the replay proof take it",
}


def forward_matrix(pytest_args: list[str]):
    """``(Matrix, other pytest arguments)``: default models, dtypes and lengths, then ``pytest_args``' matrix options.
    UsageError: a refused value, a round option's TOML name, an :data:`OWN_OPTIONS` flag or a device but ``cuda``."""
    from cudagraph_bench.runner.matrix_processes import Matrix

    given, rest = parse_pytest_matrix(pytest_args, "selftest --", OWN_OPTIONS)
    values = {"models": DEFAULT_MODELS, "dtypes": DEFAULT_DTYPES, "prompt_lengths": DEFAULT_PROMPT_LENGTHS, **given}
    if values.get("device", "cuda") != "cuda":
        raise UsageError(f"selftest --: --device {values['device']}: the self-test measures graphs on the GPU: "
                         "leave --device out")
    return Matrix(tuple(values.items()), ()), rest


def main(args: argparse.Namespace) -> int:
    """Run the self-test (or evaluate ``--from DIR``). Returns 0 when every target is met, else 1. UsageError before any
    run or write: contradicting options, ``--ab`` out of range, ``--from`` without unmodified runs, ``--markdown``
    naming a run or the ``--baseline``."""
    from cudagraph_bench.results.baseline import load_baseline
    from cudagraph_bench.results.runfile import load_run
    from cudagraph_bench.selftest.verdicts import ab_table, evaluate_selftest, render_markdown, summary, table
    from cudagraph_bench.selftest.planned_runs import DEFAULT_UNMODIFIED_RUNS

    if args.resume and args.source:
        raise UsageError("--resume continues a self-test in its -o folder, --from evaluates one: give one of them")
    ab = f"--ab {args.ab}" if args.ab else f"--ab-delay {args.ab_delay:g}" if args.ab_delay is not None else ""
    for given, what, drop in ((args.pytest_args, "pytest's arguments after -- go to the runs", "them"),
                              (args.runs is not None, f"--runs {args.runs} sets the unmodified runs", "--runs"),
                              (ab, f"{ab} sets the ab runs", ab.split(" ")[0])):
        if given and args.source:
            held = " (its ab-* runs among them)" if drop.startswith("--ab") else ""
            raise UsageError(f"{what} of a new self-test, but --from evaluates the runs {args.source} holds{held}: "
                             f"drop {drop}")
    _check_ab(args)
    args.runs = DEFAULT_UNMODIFIED_RUNS if args.runs is None else args.runs
    if args.runs < MIN_RUNS and args.baseline is None:
        raise UsageError(f"--runs {args.runs}: the unmodified runs are the baseline, which needs {MIN_RUNS}; give "
                         f"--runs {MIN_RUNS} or more, or --baseline FILE")
    baseline = load_baseline(args.baseline) if args.baseline is not None else None
    if args.source:
        folder = Path(args.source)
        if not folder.is_dir():
            what = "is not a folder" if folder.exists() else "no such folder"
            raise UsageError(f"--from {folder}: {what}: give the -o folder of an earlier selftest")
        paths = sorted(p for p in [*folder.glob("*.json"), *folder.glob("*.json.gz")] if not _PART.search(p.name))
        if not any(p.name.startswith("unmodified-") for p in paths):
            raise UsageError(f"--from {folder} holds no unmodified runs (unmodified-1.json[.gz], "
                             "unmodified-2.json[.gz], ..., as selftest -o writes them): give the -o folder of an "
                             "earlier selftest")
        check_output_file(args.markdown, "--markdown", "gate-selftest.md", [*paths, args.baseline],
                          command="selftest")
    else:
        planned = _plan(args)
        check_output_file(args.markdown, "--markdown", "gate-selftest.md", [
            args.baseline, *(Path(args.out) / f"{r.name}{ext}" for r in planned for ext in (".json", ".json.gz"))],
            command="selftest")
        paths = _measure(args, planned)
    loaded = {p.name.split(".json")[0]: load_run(str(p)) for p in paths}
    plain = [r for name, r in sorted(loaded.items()) if name.startswith(PLAIN_PREFIX)]
    runs = {name: r for name, r in loaded.items() if not name.startswith(PLAIN_PREFIX)}
    result = evaluate_selftest(runs, baseline)
    line = summary(result)
    ab_lines = [ab_table(result.ab, "text")] if result.ab is not None and result.ab.cases else []
    wrong = [f"{name}: {'the gate fails' if ok else 'the gate PASSES'}: {why}"
             for name, (ok, why) in result.wrong.items()]
    page = render_markdown(runs, result, line, plain) if args.markdown else None
    print_verdict("\n".join([table(result, "text"), *ab_lines, *wrong, line]), args.markdown, page)
    return 0 if result.passed_targets else 1


def _check_ab(args: argparse.Namespace) -> None:
    """UsageError for an ``--ab`` / ``--ab-delay`` that cannot run; sets ``--ab-delay``'s default."""
    from cudagraph_bench.runner.ab import MIN_RANK_RUNS
    from cudagraph_bench.selftest.planned_runs import DEFAULT_AB_DELAY_PCT

    if args.ab_delay is not None and not args.ab:
        raise UsageError(f"--ab-delay {args.ab_delay:g} is planted into the ab runs, and there are none: add --ab "
                         f"{MIN_RANK_RUNS}, or drop --ab-delay")
    if args.ab and not MIN_RANK_RUNS <= args.ab <= MAX_RUNS:
        fix = f"give --ab {MIN_RANK_RUNS} or more, or 0 (off)" if args.ab < MIN_RANK_RUNS else f"give --ab {MAX_RUNS}"
        raise UsageError(f"--ab {args.ab}: expected {MIN_RANK_RUNS} to {MAX_RUNS} runs per group (ab's one-sided rank "
                         f"test needs {MIN_RANK_RUNS} per side to get below alpha 0.05): {fix}")
    args.ab_delay = DEFAULT_AB_DELAY_PCT if args.ab_delay is None else args.ab_delay


def _plan(args: argparse.Namespace) -> list:
    """The planned runs; planted and ``--ab`` runs at the gated prompt lengths only."""
    from cudagraph_bench.results.baseline import DEFAULT_MAX_GATED_LEN
    from cudagraph_bench.selftest.planned_runs import plan

    matrix, rest = forward_matrix(list(args.pytest_args))
    lengths = tuple(n for n in matrix.value("prompt_lengths") if n <= DEFAULT_MAX_GATED_LEN)
    if not lengths:
        raise UsageError(f"selftest --: --prompt-lengths {show_default(matrix.value('prompt_lengths'))}: no gated "
                         f"length (at most {DEFAULT_MAX_GATED_LEN} tokens) to plant the faults at: add one")
    return plan(matrix, extra_args=tuple(rest), gated_lengths=lengths, runs=args.runs, delays=args.delays,
                ab_runs=args.ab, ab_delay=args.ab_delay)


def _measure(args: argparse.Namespace, planned: list) -> list[Path]:
    from cudagraph_bench.paths import checkout_root
    from cudagraph_bench.runner import process
    from cudagraph_bench.selftest.planned_runs import run_all

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"-o {out} is not a folder: choose a new folder")
    if out.exists() and any(out.iterdir()) and not args.resume:
        raise UsageError(f"-o {out} exists and is not an empty folder: choose a new folder (runs are never "
                         "overwritten), or add --resume to continue the self-test in it")
    tree = checkout_root()
    if tree is None:
        raise UsageError("cudagraph-bench selftest launches the suite's perf_tests/: run it from a checkout")
    if (problem := process.cuda_problem()) is not None:
        raise UsageError(f"selftest plants faults on a CUDA GPU, but {problem}: run it on the GPU runner")
    out.mkdir(parents=True, exist_ok=True)
    done = run_all(tree, out, planned, log=lambda s: print(s, file=sys.stderr, flush=True), resume=args.resume)
    return [p for p in done.values() if p is not None]
