"""One watched pytest process (:func:`cudagraph_bench.runner.process.run_pytest`): a test the process dies in is
recorded as failed with the reason, and pytest starts again without it (and without the tests a stopped session
finished), the attempts' runs merged. One real process that segfaults in a test; the restart rules with a
stand-in for the process."""

import json
import signal
from pathlib import Path

import pytest

from cudagraph_bench.cases import Case
from cudagraph_bench.journal import EXIT_CUDA_BROKEN
from cudagraph_bench.runner import process
from cudagraph_bench.runner.process import MAX_RESTARTS, PytestRun, crash_reason, run_pytest

pytestmark = pytest.mark.transformers_free

#: Eager forward cases at 8 and 16 tokens (the 16-token one segfaults the process) and a plain benchmark after.
CRASHING_SUITE = """
import os
import signal

def test_forward(benchmark, fwd_case):
    if fwd_case.seq_len == 16:
        os.kill(os.getpid(), signal.SIGSEGV)
    benchmark.extra_info.update(fwd_case.extra_info())
    benchmark.pedantic(sum, args=(range(10),), rounds=2)

def test_after(benchmark):
    benchmark.pedantic(sum, args=(range(10),), rounds=2)
"""
#: ``--device cpu``: the plugin imports no torch to skip GPU tests, so each attempt starts in about a second.
ARGS = ("test_suite.py", "-p", "cudagraph_bench.plugin", "--device", "cpu", "--models", "gpt2", "--dtypes", "fp32",
        "--prompt-lengths", "8,16", "--variants", "eager", "-p", "no:faulthandler")
CRASHED = "test_suite.py::test_forward[gpt2-float32-L16-eager]"


def test_a_test_the_process_dies_in_is_recorded_and_the_others_are_measured(tmp_path):
    (tmp_path / "test_suite.py").write_text(CRASHING_SUITE)
    out = tmp_path / "out" / "run.json"
    out.parent.mkdir()
    outcome = run_pytest(PytestRun(tmp_path, out, ARGS))
    assert outcome.returncode == 1 and outcome.json_path == out and not outcome.ok
    (crash,) = outcome.crashes
    assert crash == {**Case("gpt2", "float32", 16, "eager").extra_info(), "status": "failed", "phase": "process",
                     "reason": crash["reason"], "fullname": CRASHED}
    assert crash["reason"].startswith("the pytest process died in this test (killed by SIGSEGV)")
    doc = json.loads(out.read_text())
    assert [b["name"] for b in doc["benchmarks"]] == ["test_forward[gpt2-float32-L8-eager]", "test_after"]
    assert doc["cudagraph_bench"]["failures"] == [crash]
    log = out.with_suffix(".log").read_text()
    assert f"run.json: {CRASHED}: the pytest process died" in log and "starting pytest again without it" in log
    assert sorted(p.name for p in out.parent.iterdir()) == ["run.json", "run.log"]   # no attempt or journal left


class StandInProcess:
    """``run_process`` of scripted attempts: each a function ``(attempt, deselected) -> (exit code, journal events,
    benchmark names)`` whose journal and run JSON (benchmarks named so) it writes as the real process would."""

    def __init__(self, script):
        self.script, self.deselected = script, []

    def __call__(self, cmd, cwd, env, log):
        arg = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in cmd if a.startswith("--") and "=" in a}
        deselected = [a.split("=", 1)[1] for a in cmd if a.startswith("--deselect=")]
        self.deselected.append(deselected)
        rc, events, names = self.script(len(self.deselected) - 1, deselected)
        with open(arg["--journal"], "w") as fh:
            fh.writelines(json.dumps(e) + "\n" for e in events)
        if names:
            doc = {"machine_info": {"gpu": None}, "commit_info": {}, "datetime": "2026-01-01T00:00:00",
                   "version": "5.1.0", "benchmarks": [{"name": n, "fullname": n, "params": None, "group": None,
                                                        "extra_info": {}, "stats": {"median": 1.0}} for n in names]}
            with open(arg["--benchmark-json"], "w") as fh:
                json.dump(doc, fh)
        log.write(f"attempt {len(self.deselected)}\nlast words of attempt {len(self.deselected)}\n")
        return rc


def started(*ids):
    return [{"start": i} for i in ids]


def done(*ids):
    return [e for i in ids for e in ({"start": i}, {"finish": i})]


def run_with(monkeypatch, tmp_path, script):
    stand_in = StandInProcess(script)
    monkeypatch.setattr(process, "run_process", stand_in)
    return run_pytest(PytestRun(tmp_path, tmp_path / "run.json", ("suite",))), stand_in


def test_after_a_broken_cuda_context_the_rest_runs_without_the_finished_and_the_broken_test(monkeypatch, tmp_path):
    def script(attempt, deselected):
        if attempt == 0:
            return (EXIT_CUDA_BROKEN, [*done("t::a"), *started("t::b"), {"stop": "t::b", "reason": "CUDA error: boom"}],
                    ["t::a"])
        return 0, done("t::c"), ["t::c"]

    outcome, stand_in = run_with(monkeypatch, tmp_path, script)
    assert stand_in.deselected == [[], ["t::a", "t::b"]]
    assert outcome.returncode == 1 and [c["fullname"] for c in outcome.crashes] == ["t::b"]
    assert outcome.crashes[0]["reason"] == "CUDA error: boom"
    doc = json.loads((tmp_path / "run.json").read_text())
    assert [b["name"] for b in doc["benchmarks"]] == ["t::a", "t::c"]
    assert [f["fullname"] for f in doc["cudagraph_bench"]["failures"]] == ["t::b"]


def test_a_process_that_keeps_dying_is_given_up_after_the_restarts(monkeypatch, tmp_path):
    def script(attempt, deselected):
        return -signal.SIGABRT, started(f"t::{attempt}"), []

    outcome, stand_in = run_with(monkeypatch, tmp_path, script)
    assert len(stand_in.deselected) == MAX_RESTARTS + 1
    assert [c["fullname"] for c in outcome.crashes] == [f"t::{i}" for i in range(MAX_RESTARTS + 1)]
    assert all("killed by SIGABRT" in c["reason"] for c in outcome.crashes)
    assert outcome.json_path is None and not outcome.ok            # crashes, but no attempt wrote a run


def test_a_process_that_ends_outside_any_test_is_not_restarted(monkeypatch, tmp_path):
    outcome, stand_in = run_with(monkeypatch, tmp_path, lambda attempt, deselected: (-signal.SIGKILL, [], []))
    assert len(stand_in.deselected) == 1 and (outcome.returncode, outcome.json_path, outcome.crashes) == (-9, None, [])
    assert "pytest ended outside any test: the pytest process died in this test (killed by SIGKILL)" in \
        (tmp_path / "run.log").read_text()


def test_a_normal_end_is_one_attempt_and_its_exit_code(monkeypatch, tmp_path):
    outcome, stand_in = run_with(monkeypatch, tmp_path, lambda attempt, deselected: (1, done("t::a"), ["t::a"]))
    assert len(stand_in.deselected) == 1 and outcome.returncode == 1 and outcome.crashes == []
    assert [b["name"] for b in json.loads(outcome.json_path.read_text())["benchmarks"]] == ["t::a"]


@pytest.mark.parametrize("rc, tail, words", [
    (-signal.SIGSEGV, "collected 3 items\nFatal Python error: Segmentation fault\n\n",
     "(killed by SIGSEGV): Fatal Python error: Segmentation fault"),
    (3, "", "(exit code 3)"),
    (-99, "x", "(killed by signal 99): x"),
])
def test_crash_reason_names_the_signal_or_exit_code_and_the_last_line(rc, tail, words):
    assert crash_reason(rc, tail) == f"the pytest process died in this test {words}"


def test_the_command_writes_its_journal_and_leaves_out_what_was_done():
    run = PytestRun(Path("/tree"), Path("/out/run.json"), ("perf_tests", "--benchmark-only"))
    cmd = process.command(run, Path("/out/run.part1.json"), ["t::a", "t::b"])
    assert cmd[1:5] == ["-m", "pytest", "perf_tests", "--benchmark-only"]
    assert "--benchmark-json=/out/run.part1.json" in cmd and "--journal=/out/run.journal" in cmd
    assert cmd[-2:] == ["--deselect=t::a", "--deselect=t::b"] and "no:cacheprovider" in cmd and "-q" in cmd
    assert process.REPORT_CHARS in cmd          # the log says why tests were skipped


def test_a_relative_run_path_is_made_absolute_since_pytest_runs_in_the_checkout(tmp_path, monkeypatch):
    from pathlib import Path

    from cudagraph_bench.runner.process import PytestRun

    monkeypatch.chdir(tmp_path)
    run = PytestRun(tree=Path("/elsewhere"), json_path=Path("out/zoo/zoo.json"))
    assert run.json_path == tmp_path / "out" / "zoo" / "zoo.json"
    assert run.journal_path == tmp_path / "out" / "zoo" / "zoo.journal" and run.log_path.is_absolute()
