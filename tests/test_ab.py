"""``cudagraph-bench ab --base REF --head REF``: interleaved A/B runs in git worktrees, then compare. The
benchmark process (runner.process.run_process) is replaced by one that writes copies of the H200 fixture."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudagraph_bench.runner import ab
from cudagraph_bench.runner import process
from cudagraph_bench.runner.matrix_processes import FORWARD_MODULE

from h200_fixture import checked, DOC, no_default_baseline_fixture, run_cli, scaled, write

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
CHECKED = checked(DOC)


@pytest.fixture(autouse=True)
def no_default_baseline(tmp_path, monkeypatch):
    return no_default_baseline_fixture(tmp_path, monkeypatch)


REAL_CUDA_PROBLEM = process.cuda_problem


@pytest.fixture(autouse=True)
def a_gpu_is_present(monkeypatch):
    """The benchmark processes are fakes (fake_runs): they need no GPU, so ab's CUDA check passes."""
    monkeypatch.setattr(process, "cuda_problem", lambda: None)


def stub_python(tmp_path, torch_source: str) -> str:
    """An interpreter (a shell wrapper around this one) that imports a stub ``torch`` package whose
    ``__init__`` is ``torch_source``; returns its path."""
    if shutil.which("sh") is None:
        pytest.skip("needs sh")
    pkg = tmp_path / "stub" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(torch_source)
    wrapper = tmp_path / "python-stub"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{tmp_path / "stub"}" exec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


STUB_NO_GPU = "class cuda:\n    @staticmethod\n    def is_available():\n        return False\n"
STUB_GPU = STUB_NO_GPU.replace("False", "True")


@pytest.mark.parametrize("source, expect", [(STUB_GPU, None), (STUB_NO_GPU, "torch.cuda.is_available() is False"),
                                            ("raise ImportError('libcudart.so.12: cannot open')", "cannot import torch")])
def test_cuda_problem_asks_the_interpreter_the_runs_use(tmp_path, source, expect):
    python = stub_python(tmp_path, source)
    problem = REAL_CUDA_PROBLEM(python)
    if expect is None:
        assert problem is None
    else:
        assert expect in problem and python in problem and "\n" not in problem


@needs_git
def test_without_cuda_ab_refuses_before_any_worktree_or_run(tmp_path, capsys, monkeypatch, repo):
    calls = fake_runs(monkeypatch)
    python = stub_python(tmp_path, STUB_NO_GPU)
    monkeypatch.setattr(process, "cuda_problem", lambda: REAL_CUDA_PROBLEM(python))
    worktrees_before = git(repo, "worktree", "list")
    out_dir = tmp_path / "ab-out"
    rc, out, err = run_cli(capsys, "ab", "--repo", repo, "--base", "base", "--head", "head", "-k", 2, "-o", out_dir)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1 and "Traceback" not in err
    assert REAL_CUDA_PROBLEM(python) in err and "GPU" in err
    assert calls == [] and not out_dir.exists()
    assert git(repo, "worktree", "list") == worktrees_before


@needs_git
@pytest.mark.parametrize("flag", ["-o", "--output-dir"])
def test_every_spelling_of_the_output_folder_is_used(tmp_path, capsys, monkeypatch, repo, flag):
    fake_runs(monkeypatch)
    out_dir = tmp_path / "ab-out"
    rc, out, err = run_cli(capsys, "ab", "--repo", repo, "--base", "base", "--head", "head", "-k", 1, flag, out_dir)
    assert rc == 0, out + err
    assert sorted(p.name for p in out_dir.glob("*.json")) == ["base-1.json", "head-1.json"]


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
    """Replace the pytest process with a writer of fixture copies; returns the list of (side, i, checked-out side)."""
    calls = []

    def run_one(cmd, cwd, env, log):
        json_path = Path(next(a.split("=", 1)[1] for a in cmd if a.startswith("--benchmark-json=")))
        side, i = re.fullmatch(r"(base|head)-(\d+)\.part\d+\.json", json_path.name).groups()
        calls.append((side, int(i), (Path(cwd) / "side.txt").read_text(),
                      env["PYTHONPATH"].split(":")[0] == str(Path(cwd) / "src"), FORWARD_MODULE in cmd))
        log.write("fake run\n")
        if side == fail_side:
            return 1
        # separate runs differ a little, base-i and head-i too (identical runs on both sides are refused)
        doc = scaled(CHECKED, 1.0 + 0.002 * int(i) + (0.001 if side == "head" else 0.0))
        if side == "head":
            doc = scaled(doc, head_graph_factor, {"graph"})
        write(doc, json_path)
        return 0

    monkeypatch.setattr(process, "run_process", run_one)
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
    assert sorted(p.name for p in out_dir.glob("*.log")) == sorted(f"{s}-{i}.log" for s, i in ab.schedule(5))
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
    assert "ab: head run 1/2: FAILED, see" in out and "head-1.log" in out


def test_a_folder_that_is_not_a_git_repository_is_a_usage_error(tmp_path, capsys):
    if shutil.which("git") is None:
        pytest.skip("needs git")
    plain = tmp_path / "plain"
    plain.mkdir()
    rc, out, err = run_cli(capsys, "ab", "--repo", plain, "--base", "a", "--head", "b", "-o", tmp_path / "o")
    assert rc == 2 and out == "" and "rev-parse" in err


@needs_git
@pytest.mark.parametrize("bad", ["a path after --", "a bad value after --", "bad baseline", "markdown into a folder"])
def test_bad_options_are_refused_before_any_run_and_leave_no_output_folder(tmp_path, capsys, monkeypatch, repo, bad):
    calls = fake_runs(monkeypatch)
    out_dir = tmp_path / "ab-out"
    extra = {"a path after --": ["--", "tests"],
             "a bad value after --": ["--", "--models", "gpt2", "--benchmark-min-rounds", "0"],
             "bad baseline": ["--baseline", tmp_path / "missing.json"],
             "markdown into a folder": ["--markdown", tmp_path]}[bad]
    rc, out, err = run_cli(capsys, "ab", "--repo", repo, "--base", "base", "--head", "head", "-k", 2, "-o", out_dir,
                           *extra)
    assert rc == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not calls and not out_dir.exists()
