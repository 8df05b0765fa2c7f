"""``cudagraph-bench ab --base REF --head REF``: a same-job A/B comparison for pull requests (no torch
in this process; the benchmarks run in child processes).

Workflow:

1. check out ``--base`` and ``--head`` into two temporary git worktrees of the repository;
2. run the forward benchmarks (``pytest perf_tests/test_forward_bench.py --benchmark-only``, plus
   ``--pytest-args``) ``-k`` times for each side, interleaved ABBA (base, head, head, base, ...), each
   run a separate process on the same GPU (:func:`cudagraph_bench.runner.process.run_pytest`), writing
   ``OUT/base-<i>.json`` / ``OUT/head-<i>.json`` and a log next to it. A run that fails is recorded (its log
   says why) and the others go on;
3. compare the two groups with :mod:`cudagraph_bench.results.compare` (``--old`` base runs ``--new`` head runs):
   a benchmark regressed only when the change of the median of run medians exceeds its tolerance and
   the one-sided Mann-Whitney U test of the run medians agrees (:mod:`cudagraph_bench.results.noise`); a check
   that went from pass to fail fails too.

Interleaving puts both sides under the same drift of clocks, temperature and host load, so what is
left between them is the code. It does not pin CPUs or lock clocks (``taskset -c 0-7 cudagraph-bench ab ...``
pins every process it starts). Exit codes: 0 pass, 1 regression or broken check, 2 bad input or a side with
no successful run.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from cudagraph_bench.errors import UsageError
from cudagraph_bench.runner.matrix_processes import FORWARD_MODULE
from cudagraph_bench.runner.process import PytestRun, run_pytest

DEFAULT_RUNS = 5
DEFAULT_OUT = "out/ab"
#: Fewest runs per side for the one-sided Mann-Whitney U test of the comparison to get below alpha 0.05: its
#: smallest p-value for k against k runs is 1 / C(2k, k) (:func:`cudagraph_bench.results.noise.smallest_rank_p`),
#: 0.05 at k = 3, 0.014 at k = 4.
MIN_RANK_RUNS = 4


def schedule(k: int, sides: tuple[str, ...] = ("base", "head")) -> list[tuple[str, int]]:
    """ABBA order of ``k`` runs per side: ``[("base", 1), ("head", 1), ("head", 2), ("base", 2), ...]``; with more
    ``sides``, each round of one run per side in their order, every other round mirrored (A B C, C B A, ...), so that
    every side's mean place in the job is the same after each pair of rounds."""
    order = []
    for i in range(1, k + 1):
        round_ = [(side, i) for side in sides]
        order += round_ if i % 2 else round_[::-1]
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
        outcome = run_pytest(PytestRun(trees[side], json_path, (FORWARD_MODULE, "--benchmark-only", *pytest_args)))
        print(f"ab: {side} run {i}/{k}: {'ok' if outcome.ok else 'FAILED, see ' + str(json_path.with_suffix('.log'))}",
              flush=True)
        if outcome.ok:
            done[side].append(json_path)
    return done


def repository_root(path: Path) -> Path:
    """The top folder of the git checkout ``path`` is in; raises UsageError when it is in none."""
    return Path(_git(path, "rev-parse", "--show-toplevel"))


def measure_in_worktrees(repo: Path, commits: dict[str, str], out: Path, k: int,
                         pytest_args: list[str]) -> dict[str, list[Path]]:
    """Check out each side's commit (``{"base": sha, "head": sha}``) into a temporary git worktree of
    ``repo``, :func:`measure` there, and remove the worktrees again, also when a run fails or the user
    interrupts; returns the JSON files each side produced."""
    with tempfile.TemporaryDirectory(prefix="cgb-ab-") as tmp:
        trees = {side: Path(tmp) / side for side in commits}
        try:
            for side, sha in commits.items():
                _git(repo, "worktree", "add", "--detach", str(trees[side]), sha)
            print(f"ab: base {commits['base'][:12]}, head {commits['head'][:12]}, {k} runs each, "
                  f"interleaved; output in {out}", flush=True)
            return measure(trees, out, k, pytest_args)
        finally:
            for tree in trees.values():
                if tree.exists():
                    subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)],
                                   capture_output=True)
