"""``cudagraph-bench ab --base REF --head REF``: interleaved A/B runs in git worktrees, then compare. The
benchmark process (benchrun.run_one) is replaced by one that writes copies of the H200 fixture."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cudagraph_bench.results import ab, benchrun

from h200_fixture import checked, DOC, no_default_baseline_fixture, run_cli, scaled, write

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
CHECKED = checked(DOC)


@pytest.fixture(autouse=True)
def no_default_baseline(tmp_path, monkeypatch):
    return no_default_baseline_fixture(tmp_path, monkeypatch)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 8])
def test_schedule_is_abba(k):
    order = ab.schedule(k)
    sides = [side for side, _ in order]
    assert sides.count("base") == sides.count("head") == k
    assert order[0] == ("base", 1)
    assert all(len({sides[i], sides[i + 1], sides[i + 2]}) == 2 for i in range(len(sides) - 2))
    for side in ("base", "head"):
        assert [i for s, i in order if s == side] == list(range(1, k + 1))
    # consecutive pairs mirror each other: A B B A A B ...
    assert all(sides[2 * j: 2 * j + 2] == (["base", "head"] if j % 2 == 0 else ["head", "base"]) for j in range(k))


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """A git repository with two commits: 'base' (side.txt = base) and 'head' (side.txt = head)."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q")
    (path / "side.txt").write_text("base")
    git(path, "add", "side.txt")
    git(path, "commit", "-q", "-m", "base")
    git(path, "tag", "base")
    (path / "side.txt").write_text("head")
    git(path, "commit", "-q", "-am", "head")
    git(path, "tag", "head")
    return path


def fake_runs(monkeypatch, head_graph_factor=1.0, fail_side=None):
    """Replace benchrun.run_one with a writer of fixture copies; returns the list of (side, i, checked-out side)."""
    calls = []

    def run_one(cmd, cwd, env, log):
        json_path = Path(next(a.split("=", 1)[1] for a in cmd if a.startswith("--benchmark-json=")))
        side, i = re.fullmatch(r"(base|head)-(\d+)\.json", json_path.name).groups()
        calls.append((side, int(i), (Path(cwd) / "side.txt").read_text(), env["PYTHONPATH"] == str(Path(cwd) / "src"),
                      benchrun.BENCH_TARGET in cmd))
        log.write_text("fake run\n")
        if side == fail_side:
            return 1
        doc = scaled(CHECKED, 1.0 + 0.002 * int(i))  # separate runs differ a little
        if side == "head":
            doc = scaled(doc, head_graph_factor, {"graph"})
        write(doc, json_path)
        return 0

    monkeypatch.setattr(benchrun, "run_one", run_one)
    return calls


@needs_git
def test_a_slower_head_fails_and_runs_are_interleaved_in_their_worktrees(tmp_path, capsys, monkeypatch, repo):
    calls = fake_runs(monkeypatch, head_graph_factor=1.5)
    out_dir = tmp_path / "ab-out"
    rc, out, err = run_cli(capsys, "ab", "--repo", repo, "--base", "base", "--head", "head", "-k", 5, "-o", out_dir)
    assert rc == 1, out + err
    assert [(s, i) for s, i, *_ in calls] == ab.schedule(5)
    assert all(content == side and pythonpath and target for side, _, content, pythonpath, target in calls)
    n_graph = sum(1 for b in DOC["benchmarks"] if b["extra_info"].get("variant") == "graph")
    assert f"compare FAIL: {n_graph} of {len(DOC['benchmarks'])} benchmarks slower beyond their tolerance" in out
    assert sorted(p.name for p in out_dir.glob("*.json")) == sorted(f"{s}-{i}.json" for s, i in ab.schedule(5))
    assert git(repo, "worktree", "list").count("\n") == 0  # the temporary worktrees are gone


@needs_git
def test_an_unchanged_head_passes(tmp_path, capsys, monkeypatch, repo):
    fake_runs(monkeypatch, head_graph_factor=1.0)
    rc, out, err = run_cli(capsys, "ab", "--repo", repo, "--base", "base", "--head", "head", "-k", 5,
                           "-o", tmp_path / "ab-out")
    assert rc == 0, out + err
    assert out.splitlines()[-1].startswith("compare PASS")


@needs_git
def test_an_unknown_base_ref_is_a_usage_error(tmp_path, capsys, monkeypatch, repo):
    calls = fake_runs(monkeypatch)
    out_dir = tmp_path / "ab-out"
    rc, out, err = run_cli(capsys, "ab", "--repo", repo, "--base", "no-such-ref", "--head", "head", "-o", out_dir)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert "--base no-such-ref: not a commit" in err
    assert calls == [] and not out_dir.exists()


@needs_git
def test_a_non_empty_output_folder_is_a_usage_error(tmp_path, capsys, monkeypatch, repo):
    calls = fake_runs(monkeypatch)
    out_dir = tmp_path / "ab-out"
    out_dir.mkdir()
    (out_dir / "base-1.json").write_text("{}")
    rc, out, err = run_cli(capsys, "ab", "--repo", repo, "--base", "base", "--head", "head", "-o", out_dir)
    assert rc == 2 and out == "" and "is not an empty folder" in err
    assert calls == [] and [p.name for p in out_dir.iterdir()] == ["base-1.json"]


@needs_git
def test_a_side_without_a_successful_run_is_a_usage_error(tmp_path, capsys, monkeypatch, repo):
    fake_runs(monkeypatch, fail_side="head")
    out_dir = tmp_path / "ab-out"
    rc, out, err = run_cli(capsys, "ab", "--repo", repo, "--base", "base", "--head", "head", "-k", 2, "-o", out_dir)
    assert rc == 2 and "no head run succeeded" in err
    assert "ab: head run 1/2: FAILED" in out and "head-1.json FAILED (exit 1)" in err


def test_a_folder_that_is_not_a_git_repository_is_a_usage_error(tmp_path, capsys):
    if shutil.which("git") is None:
        pytest.skip("needs git")
    plain = tmp_path / "plain"
    plain.mkdir()
    rc, out, err = run_cli(capsys, "ab", "--repo", plain, "--base", "a", "--head", "b", "-o", tmp_path / "o")
    assert rc == 2 and out == "" and "rev-parse" in err


@needs_git
@pytest.mark.parametrize("bad", ["unclosed quote", "bad baseline", "markdown into a folder"])
def test_bad_options_are_refused_before_any_run_and_leave_no_output_folder(tmp_path, capsys, monkeypatch, repo, bad):
    calls = fake_runs(monkeypatch)
    out_dir = tmp_path / "ab-out"
    extra = {"unclosed quote": ["--pytest-args", '"--models gpt2'],
             "bad baseline": ["--baseline", tmp_path / "missing.json"],
             "markdown into a folder": ["--markdown", tmp_path]}[bad]
    rc, out, err = run_cli(capsys, "ab", "--repo", repo, "--base", "base", "--head", "head", "-k", 2, "-o", out_dir,
                           *extra)
    assert rc == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not calls and not out_dir.exists()
