"""``make bench`` and ``make gpu-gate`` never destroy an output: pytest writes the run beside RUN_JSON and it is
renamed into place only when pytest ran to its end (exit 0, or 1 when a test failed); a usage error or a Ctrl-C
keeps the previous run, and a RUN_JSON that is no regular file, or a file that is no run this tool wrote, is refused
before anything runs. The venv's python
is a stand-in script (no install, no torch) that plays pytest's part: it writes ``$FAKE_RUN`` to
``--benchmark-json`` (when given: gpu-gate's session of correctness tests has none) and exits ``$FAKE_RC``, or waits for a Ctrl-C with ``$FAKE_WAIT``."""

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: A run this tool wrote, as far as the check of an existing RUN_JSON reads it (its first key).
PREVIOUS_RUN = '{"machine_info": {}, "benchmarks": [], "previous": true}'
STAND_IN = """#!/bin/sh
for a in "$@"; do case "$a" in --benchmark-json=*) out="${a#--benchmark-json=}";; --benchmark-skip) skip=1;; esac; done
if [ -n "${skip:-}" ]; then echo "correctness session"; exit "${FAKE_TESTS_RC:-0}"; fi
if [ "$1 $2" = "-m cudagraph_bench" ]; then exit 0; fi
if [ -n "$FAKE_WAIT" ]; then
  trap 'printf "%s" "$FAKE_RUN" > "$out"; exit 2' INT       # pytest writes what it measured, then exits 2
  : > "$FAKE_WAIT"; while :; do sleep 0.05; done
fi
if [ -n "$FAKE_RUN" ] && [ -n "${out:-}" ]; then printf "%s" "$FAKE_RUN" > "$out"; fi
exit "${FAKE_RC:-0}"
"""

pytestmark = [pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make"), pytest.mark.transformers_free]


@pytest.fixture
def venv(tmp_path):
    """A folder that the Makefile takes for an installed venv whose python is :data:`STAND_IN`."""
    folder = tmp_path / "venv"
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").write_text(STAND_IN)
    (folder / "bin" / "python").chmod(0o755)
    (folder / ".requirements").write_text("TORCH=torch TRANSFORMERS=\n")     # the Makefile's defaults: no reinstall
    (folder / ".installed").touch()
    return folder


#: The make command line of a test: the stand-in venv, the Makefile's defaults of TORCH and TRANSFORMERS (the venv's
#: record), whatever the make that runs these tests was given.
def make_argv(target: str, venv: Path, run_json, pytest_args: str = "--device cpu") -> list[str]:
    return ["make", "--no-print-directory", "-C", str(ROOT), target, f"VENV={venv}", f"RUN_JSON={run_json}",
            f"PYTEST_ARGS={pytest_args}", "TORCH=torch", "TRANSFORMERS="]


def make_env(**env) -> dict:
    """This process's environment without the variables of a make it runs under (``make test TORCH=...`` passes
    TORCH to every make below it through MAKEFLAGS), plus ``env``."""
    outer = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
    return {**{k: v for k, v in os.environ.items() if k not in outer}, **{k: str(v) for k, v in env.items()}}


def make(target: str, venv: Path, run_json, pytest_args: str = "--device cpu", **env) -> subprocess.CompletedProcess:
    return subprocess.run(make_argv(target, venv, run_json, pytest_args), env=make_env(**env), capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("target", ["bench", "gpu-gate"])
@pytest.mark.parametrize("rc, written, kept", [
    (0, "new run", False),          # a whole run replaces the previous one
    (1, "new run", False),          # a test failed: the run is whole, and records the failure
    (4, "", True),                  # a usage error (--prompt-lengths 0, --models nosuch): nothing measured
    (2, "cut short", True),         # interrupted: its partial run never replaces the previous one
    (3, "cut short", True),         # pytest's internal error
])
def test_the_previous_run_is_kept_unless_pytest_ran_to_its_end(tmp_path, venv, target, rc, written, kept):
    run_json = tmp_path / "out" / "bench.json"
    run_json.parent.mkdir()
    run_json.write_text(PREVIOUS_RUN)
    result = make(target, venv, run_json, FAKE_RC=rc, FAKE_RUN=written)
    assert result.returncode != 0 or rc == 0, result.stderr
    assert run_json.read_text() == (PREVIOUS_RUN if kept else "new run")
    assert os.listdir(run_json.parent) == ["bench.json"]                      # no temporary file left
    if kept:
        assert f"pytest exit {rc}" in result.stdout and "kept as it was" in result.stdout


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="make bench runs on a machine with nvidia-smi")
@pytest.mark.parametrize("pytest_args, runs", [
    ("--device cpu", True), ("--device=cpu", True), ("--models gpt2 --device=cpu --prompt-lengths 16", True),
    ("--models gpt2", False), ("--device cuda", False),
])
def test_make_bench_without_a_gpu_runs_only_a_cpu_run_in_either_spelling(tmp_path, venv, pytest_args, runs):
    """Without nvidia-smi, make bench runs when PYTEST_ARGS asks for the CPU (``--device cpu`` or ``--device=cpu``,
    anywhere), else says there is no GPU before anything runs."""
    run_json = tmp_path / "bench.json"
    result = make("bench", venv, run_json, pytest_args, FAKE_RUN="new run")
    assert (result.returncode == 0) == runs and ("no NVIDIA GPU here" in result.stdout) != runs, result.stdout
    assert run_json.exists() == runs


@pytest.mark.parametrize("tests_rc, make_rc", [(0, 0), (5, 0), (1, 1), (2, 2)])
def test_gpu_gate_keeps_the_benchmark_run_and_fails_on_its_correctness_tests(tmp_path, venv, tests_rc, make_rc):
    """gpu-gate's second session (the correctness tests, --benchmark-skip) fails the target when a test failed (1)
    or it stopped (2: before the gate), passes when it collected nothing (5: PYTEST_ARGS filters), and never
    touches the run the benchmark session wrote."""
    run_json = tmp_path / "bench.json"
    result = make("gpu-gate", venv, run_json, FAKE_RUN="new run", FAKE_TESTS_RC=tests_rc)
    assert "correctness session" in result.stdout
    assert (result.returncode != 0) == (make_rc != 0), result.stdout
    if make_rc:
        assert f"Error {make_rc}" in result.stderr, result.stderr
    assert run_json.read_text() == "new run"


@pytest.mark.parametrize("target", ["bench", "gpu-gate"])
def test_a_run_json_that_is_no_regular_file_is_refused_before_anything_runs(tmp_path, venv, target):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path, f"{tmp_path}/"):
        result = make(target, venv, path, FAKE_RUN="new run")
        assert result.returncode == 2 and "is not a regular file" in result.stdout, result.stdout
    assert Path(fifo).exists() and not Path(fifo).is_file() and sorted(os.listdir(tmp_path)) == ["pipe", "venv"]


@pytest.mark.parametrize("target", ["bench", "gpu-gate"])
def test_a_run_json_that_this_tool_did_not_write_is_refused_before_pytest_runs(tmp_path, venv, target):
    precious = tmp_path / "precious.txt"
    precious.write_text("my notes")
    result = make(target, venv, precious, FAKE_RUN="new run")
    assert result.returncode == 2 and "correctness session" not in result.stdout
    refusal = [line for line in result.stdout.splitlines() if "is not a run" in line]
    assert refusal == [f"make {target}: RUN_JSON={precious} is not a run that cudagraph-bench wrote, and make never "
                       "replaces another file: give RUN_JSON another path, or remove that file first"], result.stdout
    assert precious.read_text() == "my notes" and sorted(os.listdir(tmp_path)) == ["precious.txt", "venv"]


def test_ctrl_c_during_make_bench_keeps_the_previous_run_and_leaves_nothing_behind(tmp_path, venv):
    run_json = tmp_path / "bench.json"
    run_json.write_text(PREVIOUS_RUN)
    waiting = tmp_path / "waiting"
    proc = subprocess.Popen(make_argv("bench", venv, run_json), env=make_env(FAKE_WAIT=waiting, FAKE_RUN="cut short"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 30
    while not waiting.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)                         # what a terminal's Ctrl-C sends
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert f"make bench: interrupted: {run_json} kept as it was" in out.decode(), out   # not the temporary run's name
    assert run_json.read_text() == PREVIOUS_RUN
    assert sorted(os.listdir(tmp_path)) == ["bench.json", "venv", "waiting"]   # no temporary run left


def test_gpu_gate_removes_only_the_earlier_confirmation_runs_this_tool_wrote(tmp_path, venv):
    """An earlier gate's confirmation runs beside RUN_JSON are removed before the new run is gated (``gate --confirm``
    never overwrites one); a file of that pattern the tool did not write is refused before pytest runs (exit 2, one
    line), every file kept."""
    run_json = tmp_path / "bench.json"
    (tmp_path / "bench.confirm-1.json").write_text(PREVIOUS_RUN)
    (tmp_path / "bench.confirm-notes.json").write_text("my notes")
    result = make("gpu-gate", venv, run_json, FAKE_RUN="new run")
    assert result.returncode == 2 and "correctness session" not in result.stdout
    refusal = [line for line in result.stdout.splitlines() if "is not a run" in line]
    assert refusal == [f"make gpu-gate: {tmp_path / 'bench.confirm-notes.json'} is not a run that cudagraph-bench "
                       "wrote, and make never removes another file: move it away, or give RUN_JSON another path"]
    assert sorted(os.listdir(tmp_path)) == ["bench.confirm-1.json", "bench.confirm-notes.json", "venv"]
    assert (tmp_path / "bench.confirm-notes.json").read_text() == "my notes"
    (tmp_path / "bench.confirm-notes.json").unlink()
    result = make("gpu-gate", venv, run_json, FAKE_RUN="new run")
    assert result.returncode == 0 and "correctness session" in result.stdout, result.stdout + result.stderr
    assert sorted(os.listdir(tmp_path)) == ["bench.json", "venv"] and run_json.read_text() == "new run"
