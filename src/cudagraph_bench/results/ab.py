"""``cudagraph-bench ab --base REF --head REF``: a same-job A/B comparison for pull requests (no torch
in this process; the benchmarks run in child processes).

Workflow:

1. check out ``--base`` and ``--head`` into two temporary git worktrees of the repository;
2. run the forward benchmarks (``pytest perf_tests/test_forward_bench.py --benchmark-only``, plus
   ``--pytest-args``) ``-k`` times for each side, interleaved ABBA (base, head, head, base, ...), each
   run a separate process on the same GPU, writing ``OUT/base-<i>.json`` / ``OUT/head-<i>.json`` and a
   log next to it. A run that fails is recorded (its log says why) and the others go on;
3. compare the two groups with :mod:`cudagraph_bench.results.compare` (``--old`` base runs ``--new`` head runs):
   a benchmark regressed only when the change of the median of run medians exceeds its tolerance and
   the one-sided Mann-Whitney U test of the run medians agrees (:mod:`cudagraph_bench.results.noise`); a check
   that went from pass to fail fails too.

Interleaving puts both sides under the same drift of clocks, temperature and host load, so what is
left between them is the code. It does not pin CPUs or lock clocks (``--pytest-args "--cpus 0-7"``
pins through the plugin). Exit codes: 0 pass, 1 regression or broken check, 2 bad input or a side with
no successful run.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import tempfile
from pathlib import Path

from cudagraph_bench.results import benchrun, compare
from cudagraph_bench.results.baseline import load_baseline
from cudagraph_bench.errors import UsageError
from cudagraph_bench.fsio import check_output_file
from cudagraph_bench.options import parse_count, parse_path, parse_regression_pct
from cudagraph_bench.paths import checkout_root

DEFAULT_RUNS = 5
DEFAULT_OUT = "out/ab"


def schedule(k: int) -> list[tuple[str, int]]:
    """ABBA order of ``k`` runs per side: ``[("base", 1), ("head", 1), ("head", 2), ("base", 2), ...]``."""
    order = []
    for i in range(1, k + 1):
        pair = [("base", i), ("head", i)]
        order += pair if i % 2 else pair[::-1]
    return order


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise UsageError(f"git {' '.join(args)} failed in {repo}: {last}: give --repo a git checkout")
    return proc.stdout.strip()


def resolve_commit(repo: Path, ref: str, flag: str) -> str:
    """The commit id of ``ref``; raises UsageError naming ``flag`` when git does not know it."""
    proc = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise UsageError(f"{flag} {ref}: not a commit of {repo}: give a branch, tag or commit (git fetch it first)")
    return proc.stdout.strip()


def measure(trees: dict[str, Path], out: Path, k: int, pytest_args: list[str]) -> dict[str, list[Path]]:
    """Run the :func:`schedule` of ``k`` runs per side; returns the JSON files each side produced."""
    done: dict[str, list[Path]] = {"base": [], "head": []}
    for side, i in schedule(k):
        json_path = out / f"{side}-{i}.json"
        ok = benchrun.run_forward(trees[side], json_path, pytest_args=pytest_args)
        print(f"ab: {side} run {i}/{k}: {'ok' if ok else 'FAILED'}", flush=True)
        if ok:
            done[side].append(json_path)
    return done


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``cudagraph-bench ab``."""
    parser.add_argument("--base", required=True, metavar="REF", help="commit the pull request goes into")
    parser.add_argument("--head", required=True, metavar="REF", help="commit to check")
    parser.add_argument("-k", "--runs", type=parse_count, default=DEFAULT_RUNS, metavar="K",
                        help="separate runs per side (default: %(default)s; the rank test needs 4+ per side "
                             "to get below alpha 0.05)")
    parser.add_argument("-o", "--output-dir", dest="out", type=parse_path, default=DEFAULT_OUT, metavar="DIR",
                        help="folder for the run JSONs and logs; must be new or empty (default: %(default)s)")
    # the earlier spelling, kept working for existing scripts (not shown in --help)
    parser.add_argument("--out", dest="out", type=parse_path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    parser.add_argument("--repo", type=parse_path, metavar="DIR",
                        help="git repository (default: the checkout this package runs from, else the working "
                             "directory)")
    parser.add_argument("--pytest-args", default="", metavar="ARGS",
                        help="extra pytest arguments for every run, e.g. \"--models gpt2 --prompt-lengths 16,50\"")
    parser.add_argument("--baseline", metavar="FILE", help="noise model for the tolerance (as compare)")
    parser.add_argument("--max-regression", type=parse_regression_pct, default=compare.DEFAULT_MAX_REGRESSION_PCT,
                        metavar="PCT", help="floor of every benchmark's tolerance (default: %(default)s)")
    parser.add_argument("--markdown", type=parse_path, metavar="FILE", help="also write the comparison as markdown")


def main(args: argparse.Namespace) -> int:
    """Run ``cudagraph-bench ab``. Returns compare's exit code; 2 for bad input or a side without runs."""
    repo = Path(args.repo) if args.repo else (checkout_root() or Path.cwd())
    repo = Path(_git(repo, "rev-parse", "--show-toplevel"))
    commits = {"base": resolve_commit(repo, args.base, "--base"), "head": resolve_commit(repo, args.head, "--head")}
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"-o {out} exists and is not an empty folder: choose a new folder (runs are never "
                         "overwritten)")
    try:
        pytest_args = shlex.split(args.pytest_args)
    except ValueError as exc:
        raise UsageError(f"--pytest-args {args.pytest_args!r}: {exc}: quote it as a shell would") from None
    if args.baseline:
        load_baseline(args.baseline)  # a bad noise model is refused before any benchmark runs
    if args.markdown:
        check_output_file(args.markdown, "--markdown", "ab.md")
    problem = benchrun.cuda_problem()  # before any worktree or benchmark process
    if problem is not None:
        raise UsageError(f"ab measures on a CUDA GPU, but {problem}: run it on a GPU machine")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cgb-ab-") as tmp:
        trees = {side: Path(tmp) / side for side in commits}
        try:
            for side, sha in commits.items():
                _git(repo, "worktree", "add", "--detach", str(trees[side]), sha)
            print(f"ab: base {commits['base'][:12]}, head {commits['head'][:12]}, {args.runs} runs each, "
                  f"interleaved; output in {out}", flush=True)
            done = measure(trees, out, args.runs, pytest_args)
        finally:
            for tree in trees.values():
                if tree.exists():
                    subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)],
                                   capture_output=True)
    empty = [side for side, files in done.items() if not files]
    if empty:
        raise UsageError(f"no {' or '.join(empty)} run succeeded: see the logs in {out}")
    cmp_args = argparse.Namespace(runs=[], old=[str(p) for p in done["base"]], new=[str(p) for p in done["head"]],
                                  baseline=args.baseline, max_regression=args.max_regression, storage=None,
                                  markdown=args.markdown, gate_references=False, allow_missing=False)
    return compare.main(cmp_args)
