"""``cudagraph-bench ab``'s measurement: ``--base`` and ``--head`` checked out into temporary git worktrees, the
forward benchmarks run ``k`` times per side in separate pytest processes, interleaved ABBA
(``OUT/base-<i>.json``, ``OUT/head-<i>.json``, each with its log), so that both sides share the drift of clocks,
temperature and host load and what is left between them is the code."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from cudagraph_bench.errors import UsageError
from cudagraph_bench.runner.matrix_processes import FORWARD_MODULE
from cudagraph_bench.runner.process import PytestRun, run_pytest

DEFAULT_RUNS = 5
DEFAULT_OUT = "out/ab"
#: Fewest runs per side for the one-sided Mann-Whitney U test to get below alpha 0.05: its smallest p-value for k
#: against k runs is 1 / C(2k, k), 0.05 at k = 3, 0.014 at k = 4.
MIN_RANK_RUNS = 4


def schedule(k: int, sides: tuple[str, ...] = ("base", "head")) -> list[tuple[str, int]]:
    """ABBA order of ``k`` runs per side: ``[("base", 1), ("head", 1), ("head", 2), ("base", 2), ...]``; with more
    ``sides``, every other round mirrored (A B C, C B A, ...), so each side's mean place is the same."""
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
    """The commit id of ``ref``.

    Raises:
        UsageError: git does not know it (naming ``flag``)."""
    proc = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise UsageError(f"{flag} {ref}: not a commit of {repo}: give a branch, tag or commit (git fetch it first)")
    return proc.stdout.strip()


def measure(trees: dict[str, Path], out: Path, k: int, pytest_args: list[str]) -> dict[str, list[Path]]:
    """Run the :func:`schedule` of ``k`` runs per side (a failed run is reported and the others go on); returns the
    JSON files each side produced."""
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
    """The top folder of the git checkout ``path`` is in.

    Raises:
        UsageError: it is in none."""
    return Path(_git(path, "rev-parse", "--show-toplevel"))


def measure_in_worktrees(repo: Path, commits: dict[str, str], out: Path, k: int,
                         pytest_args: list[str]) -> dict[str, list[Path]]:
    """Check out each side's commit (``{"base": sha, "head": sha}``) into a temporary git worktree of ``repo``,
    :func:`measure` there, and remove the worktrees again whatever happens; returns each side's JSON files."""
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
