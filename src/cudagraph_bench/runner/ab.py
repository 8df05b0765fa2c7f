"""``cudagraph-bench ab``'s measurement: ``--base`` and ``--head`` in temporary git worktrees, forward benchmarks run
``k`` times per side in separate processes interleaved ABBA, so both sides share clock, temperature and load drift."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from cudagraph_bench.errors import UsageError
from cudagraph_bench.runner.matrix_processes import FORWARD_MODULE
from cudagraph_bench.runner.process import PytestRun, run_pytest
from cudagraph_bench.table import plural

DEFAULT_RUNS = 5
DEFAULT_OUT = "out/ab"
#: Fewest runs per side for the one-sided Mann-Whitney U test to get below alpha 0.05 (1 / C(2k, k)).
MIN_RANK_RUNS = 4


def schedule(k: int, sides: tuple[str, ...] = ("base", "head")) -> list[tuple[str, int]]:
    """``[("base", 1), ("head", 1), ("head", 2), ("base", 2), ...]``; with more sides every other round mirrored."""
    return [(side, i) for i in range(1, k + 1) for side in (sides if i % 2 else sides[::-1])]


def _git(repo: Path, *args: str, refusal: str | None = None) -> str:
    """git's output; UsageError (``refusal``, else git's last line of error) when it fails."""
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise UsageError(refusal or f"git {' '.join(args)} failed in {repo}: {last}: give --repo a git checkout")
    return proc.stdout.strip()


def resolve_commit(repo: Path, ref: str, flag: str) -> str:
    """UsageError (naming ``flag``) when git does not know ``ref``."""
    return _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}",
                refusal=f"{flag} {ref}: not a commit of {repo}: give a branch, tag or commit (git fetch it first)")


def measure(trees: dict[str, Path], out: Path, k: int, pytest_args: list[str]) -> dict[str, list[Path]]:
    """Run the schedule (a failed run is reported, the others go on); returns each side's JSON files."""
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
    """UsageError when ``path`` is in no git checkout."""
    return Path(_git(path, "rev-parse", "--show-toplevel"))


def measure_in_worktrees(repo: Path, commits: dict[str, str], out: Path, k: int,
                         pytest_args: list[str]) -> dict[str, list[Path]]:
    """:func:`measure` in a temporary worktree per side's commit, removed whatever happens; returns the JSON files."""
    with tempfile.TemporaryDirectory(prefix="cgb-ab-") as tmp:
        trees = {side: Path(tmp) / side for side in commits}
        try:
            for side, sha in commits.items():
                _git(repo, "worktree", "add", "--detach", str(trees[side]), sha)
            print(f"ab: base {commits['base'][:12]}, head {commits['head'][:12]}, {plural(k, 'run')} each, "
                  f"interleaved; output in {out}", flush=True)
            return measure(trees, out, k, pytest_args)
        finally:
            for tree in trees.values():
                if tree.exists():
                    subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)],
                                   capture_output=True)
