"""A Ctrl-C at any moment leaves no process and no half-written or mixed output: the run of an interrupted pytest
session is marked and refused by the readers unless allowed, the pytest processes of ``run`` are stopped and waited
for (their children too), files written together are all replaced or none, and an interrupted ``report`` leaves the
earlier report as it was."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from cudagraph_bench import cli
from cudagraph_bench.errors import InputFileError
from cudagraph_bench.fsio import interrupt_after, write_files_atomic
from cudagraph_bench.results.runfile import interrupted_runs_allowed, load_run
from cudagraph_bench.runner import process

INTERRUPTED_SESSION = """
def test_measured(benchmark):
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)

def test_ctrl_c():
    raise KeyboardInterrupt

def test_never_reached(benchmark):
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
"""


#: The same session with the Ctrl-C in the first round of a benchmark, which has no round to write.
CUT_OFF_IN_A_BENCHMARK = """
def test_measured(benchmark):
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)

def test_ctrl_c(benchmark):
    def call():
        raise KeyboardInterrupt
    benchmark.pedantic(call, rounds=1, iterations=1)

def test_never_reached(benchmark):
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
"""


@pytest.mark.parametrize("interrupted", [INTERRUPTED_SESSION, CUT_OFF_IN_A_BENCHMARK],
                         ids=["between-tests", "inside-a-benchmark"])
def test_the_run_of_an_interrupted_session_is_marked_and_refused_unless_allowed(interrupted, pytester, tmp_path,
                                                                               capsys, monkeypatch):
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):   # pytest-benchmark measures in no worker
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(interrupted)
    out = tmp_path / "run.json"
    result = pytester.runpytest_inprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider",
                                          f"--benchmark-json={out}", no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    doc = json.loads(out.read_text())
    assert len(doc["benchmarks"]) == 1 and doc["cudagraph_bench"]["interrupted"] == "Ctrl-C after 1 benchmark"
    # the suite's last line, before pytest's KeyboardInterrupt banner, says so
    lines = result.stdout.lines
    last = lines[next(i for i, line in enumerate(lines) if "KeyboardInterrupt" in line) - 1]
    assert last == (f"session interrupted ({doc['cudagraph_bench']['interrupted']}): its run JSON {out} is marked "
                    "interrupted, which cudagraph-bench's commands refuse unless given --allow interrupted")
    unsaved = pytester.runpytest_inprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider",
                                           no_reraise_ctrlc=True).stdout.lines
    assert unsaved[next(i for i, line in enumerate(unsaved) if "KeyboardInterrupt" in line) - 1] == \
        "session interrupted (Ctrl-C after 1 benchmark): no run JSON was written"
    with pytest.raises(InputFileError, match="is the run of an interrupted session .*--allow interrupted"):
        load_run(str(out))
    with interrupted_runs_allowed():
        assert len(load_run(str(out)).benchmarks) == 1
    # a reader told to read it keeps the mark: the merged run is refused like the run
    merged = tmp_path / "merged.json"
    assert cli.main(["merge", "-o", str(merged), str(out), "--allow", "interrupted"]) == 0
    assert cli.main(["merge", "-o", str(tmp_path / "again.json"), str(merged)]) == 2
    assert "interrupted session" in capsys.readouterr().err


def test_a_session_stopped_by_a_collection_error_is_not_called_a_ctrl_c(pytester, monkeypatch):
    """pytest stops a session whose collection failed with a Ctrl-C's exit status (2): the summary names the errors,
    and a collection error under --continue-on-collection-errors (the tests run) is no interruption at all."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_a="def test_a():\n    pass\n", test_b="import no_such_module_anywhere\n")
    result = pytester.runpytest_inprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "session interrupted (stopped by 1 error during collection): no run JSON was written" in result.stdout.lines
    assert not any("Ctrl-C" in line for line in result.stdout.lines)
    going_on = pytester.runpytest_inprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider",
                                            "--continue-on-collection-errors")
    assert going_on.ret == pytest.ExitCode.TESTS_FAILED and "session interrupted" not in going_on.stdout.str()


CHILD = """
import signal, subprocess, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)        # a child that does not end on Ctrl-C: killed after the grace
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open(sys.argv[1], "w").write(str(grandchild.pid))
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:           # a zombie is no longer running
        return fh.read().split(")")[-1].split()[0] != "Z"


def test_stop_children_ends_every_process_of_the_group_and_no_new_one_starts(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    outcome = {}

    def attempt():
        with open(tmp_path / "log", "w") as log:
            try:
                outcome["rc"] = process.run_process([sys.executable, "-c", CHILD, str(pid_file)], tmp_path,
                                                    dict(os.environ), log)
            except process.Stopped:
                outcome["stopped"] = True

    thread = threading.Thread(target=attempt)
    thread.start()
    deadline = time.monotonic() + 30
    while not (pid_file.is_file() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.02)
    grandchild = int(pid_file.read_text())
    try:
        assert process.stop_children(grace_s=0.5) == 1
        thread.join(10)
        assert outcome == {"stopped": True} and not _alive(grandchild)
        with pytest.raises(process.Stopped):                     # nothing starts while the command stops
            process.run_process([sys.executable, "-c", "pass"], tmp_path, dict(os.environ), None)
    finally:
        process.allow_new_children()
        if _alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)


@pytest.fixture
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt during the test, as in a terminal, whatever handler the process inherited (a
    test runner's worker may hold another)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals reach the main thread")
def test_files_written_together_are_all_replaced_when_ctrl_c_comes_between_them(tmp_path, monkeypatch, capsys,
                                                                               ctrl_c_raises):
    a, b = tmp_path / "a.md", tmp_path / "b.png"
    a.write_text("old")
    b.write_text("old")
    replace = os.replace

    def interrupted_replace(src, dst):
        if dst == a:
            signal.raise_signal(signal.SIGINT)                   # Ctrl-C after the first file of two (this thread)
        replace(src, dst)

    monkeypatch.setattr(os, "replace", interrupted_replace)
    with pytest.raises(KeyboardInterrupt):
        write_files_atomic({a: "new", b: "new"})
    assert (a.read_text(), b.read_text()) == ("new", "new") and sorted(os.listdir(tmp_path)) == ["a.md", "b.png"]
    assert "interrupted: finishing writing the output files first" in capsys.readouterr().err
    done = []
    with pytest.raises(KeyboardInterrupt):
        with interrupt_after("the outer block"):                  # nested: the outer one holds it to its end
            with interrupt_after("the inner block"):
                signal.raise_signal(signal.SIGINT)
            done.append("after the inner block")
    assert done == ["after the inner block"]


def test_an_interrupted_report_leaves_the_earlier_report_as_it_was(tmp_path, monkeypatch):
    from h200_fixture import committed_doc

    from cudagraph_bench.commands import report

    doc = committed_doc("forward-checked")
    run = tmp_path / "run.json"
    run.write_text(json.dumps({**doc, "benchmarks": [b for b in doc["benchmarks"]
                                                     if b["extra_info"]["model"] == "bert-tiny"]}))
    out = tmp_path / "report"
    out.mkdir()
    from matplotlib.figure import Figure

    from cudagraph_bench.fsio import figure_png

    (out / "results.md").write_text("<!-- generated by `cudagraph-bench report` -->\nearlier report")
    for name in ("latency_comparison.png", "speedup_vs_length.png"):         # an earlier report's plots
        (out / name).write_bytes(figure_png(Figure(figsize=(1, 1)), 10))
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def ctrl_c_while_drawing(runs):
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "render_plots", ctrl_c_while_drawing)
    assert cli.main(["report", str(run), "-o", str(out)]) == 130
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals reach the main thread")
def test_sigterm_stops_the_commands_pytest_processes_as_ctrl_c_does(tmp_path, monkeypatch, capsys):
    """``timeout`` and a cancelled CI job send SIGTERM: the command stops its process group (and the grandchild) as
    for Ctrl-C, says so in one line and exits 143; the handler it had before is back afterwards."""
    from cudagraph_bench.commands import run

    pid_file = tmp_path / "grandchild.pid"

    def terminate_once_the_grandchild_runs():
        deadline = time.monotonic() + 30
        while not (pid_file.is_file() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGTERM)

    def a_run_that_is_terminated(args):
        threading.Thread(target=terminate_once_the_grandchild_runs).start()
        child = CHILD.replace("signal.signal(signal.SIGINT, signal.SIG_IGN)", "")     # ends on SIGINT
        with open(tmp_path / "log", "w") as log:
            process.run_process([sys.executable, "-c", child, str(pid_file)], tmp_path, dict(os.environ), log)
        raise AssertionError("SIGTERM did not stop the command")

    monkeypatch.setattr(run, "main", a_run_that_is_terminated)
    before = signal.getsignal(signal.SIGTERM)
    try:
        assert cli.main(["run", "--device", "cpu"]) == 128 + signal.SIGTERM
    finally:
        process.allow_new_children()
    assert capsys.readouterr().err.strip().splitlines()[-1] == "cudagraph-bench: terminated (SIGTERM)"
    assert signal.getsignal(signal.SIGTERM) == before
    grandchild = int(pid_file.read_text())
    assert not _alive(grandchild)
