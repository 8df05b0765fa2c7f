"""``cudagraph-bench ab --base REF --head REF``: measure both commits (:mod:`cudagraph_bench.runner.ab`), then
compare the two groups of runs as ``compare --old ... --new ...`` does. No torch in this process."""

from __future__ import annotations

import argparse
from pathlib import Path

from cudagraph_bench.commands import compare_command
from cudagraph_bench.errors import UsageError
from cudagraph_bench.fsio import check_output_file, check_output_folder
from cudagraph_bench.options import (PYTEST_ARGS_METAVAR, add_regression_floor_option, parse_baseline_path,
                                     parse_count, parse_markdown_path, parse_path, parse_pytest_matrix)
from cudagraph_bench.paths import checkout_root
from cudagraph_bench.runner.ab import (DEFAULT_OUT, DEFAULT_RUNS, MIN_RANK_RUNS, measure_in_worktrees, repository_root,
                                      resolve_commit)
from cudagraph_bench.runner import process
from cudagraph_bench.results.baseline import load_baseline


#: pytest options ab sets itself in each run: given after ``--`` they are refused, with why.
OWN_OPTIONS = {"--benchmark-json": "ab writes each run's JSON into -o", "--journal": "ab keeps each run's journal"}


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``cudagraph-bench ab``."""
    parser.add_argument("--base", required=True, metavar="REF", help="commit the pull request goes into")
    parser.add_argument("--head", required=True, metavar="REF", help="commit to check")
    parser.add_argument("-k", "--runs", type=parse_count, default=DEFAULT_RUNS, metavar="K",
                        help=f"separate runs per side (default: %(default)s; the rank test needs {MIN_RANK_RUNS}+ "
                             "per side to get below alpha 0.05)")
    parser.add_argument("-o", "--output-dir", dest="out", type=parse_path, default=DEFAULT_OUT, metavar="DIR",
                        help="folder for the run JSONs and logs; must be new or empty (default: %(default)s)")
    parser.add_argument("--repo", type=parse_path, metavar="DIR",
                        help="git repository (default: the checkout this package runs from, else the working "
                             "directory)")
    parser.add_argument("pytest_args", nargs="*", metavar=PYTEST_ARGS_METAVAR,
                        help="pytest arguments for every run, after --, e.g. -- --models gpt2 --prompt-lengths 16,50")
    parser.add_argument("--baseline", type=parse_baseline_path, metavar="FILE",
                        help="noise model for the tolerance (as compare)")
    add_regression_floor_option(parser)
    parser.add_argument("--markdown", type=parse_markdown_path, metavar="FILE",
                        help="also write the comparison as markdown")


def main(args: argparse.Namespace) -> int:
    """Returns compare's exit code; 2 for bad input or a side without runs."""
    repo = repository_root(Path(args.repo) if args.repo else (checkout_root() or Path.cwd()))
    commits = {"base": resolve_commit(repo, args.base, "--base"), "head": resolve_commit(repo, args.head, "--head")}
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"-o {out} exists and is not an empty folder: choose a new folder (runs are never "
                         "overwritten)")
    parse_pytest_matrix(args.pytest_args, "ab --", OWN_OPTIONS)     # a bad value is refused before any run starts
    if args.baseline:
        load_baseline(args.baseline)  # a bad noise model is refused before any benchmark runs
    check_output_folder(out, [], "-o", command="ab")
    check_output_file(args.markdown, "--markdown", "ab.md", command="compare")   # compare writes the page
    if (problem := process.cuda_problem()) is not None:  # before any worktree or benchmark process
        raise UsageError(f"ab measures on a CUDA GPU, but {problem}: run it on a GPU machine")
    check_output_folder(out, [], "-o", command="ab", create=True)
    done = measure_in_worktrees(repo, commits, out, args.runs, args.pytest_args)
    empty = [side for side, files in done.items() if not files]
    if empty:
        raise UsageError(f"no {' or '.join(empty)} run succeeded: see the logs in {out}")
    cmp_args = argparse.Namespace(runs=[], old=[str(p) for p in done["base"]], new=[str(p) for p in done["head"]],
                                  baseline=args.baseline, max_regression=args.max_regression, markdown=args.markdown,
                                  gate_references=False, allow_missing=False, allow_gpu_mismatch=False)
    return compare_command.main(cmp_args)
