"""Exit codes never depend on where stdout goes: a reader that closes the pipe early (``| head -1``)
must not turn a command's verdict into a ``BrokenPipeError`` exit code 2."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from h200_fixture import copy_doc, DOC, FIXTURE, TIME_FIELDS, write  # noqa: E402

pytestmark = pytest.mark.transformers_free

SCRIPT = Path(sys.executable).parent / "cudagraph-bench"
PIPE_NOISE = ("Broken pipe", "BrokenPipeError", "Exception ignored", "cannot access")


def same_measurements(tmp_path):
    """A separate run with the fixture's measurements (its own datetime: not the same file, which compare
    refuses as OLD and NEW)."""
    return write({**copy_doc(DOC), "datetime": "2030-01-01T00:00:00"}, tmp_path / "same.json")


def slower_graphs(tmp_path, factor=1.5):
    """The fixture run with every graph benchmark's times scaled by ``factor`` (a regression)."""
    doc = copy_doc(DOC)
    for b in doc["benchmarks"]:
        if b["extra_info"].get("variant") == "graph":
            s = b["stats"]
            s["data"] = [x * factor for x in s["data"]]
            for f in TIME_FIELDS:
                if isinstance(s.get(f), (int, float)):
                    s[f] *= factor
    return write(doc, tmp_path / "slower.json")


def run_with_closed_stdout(argv):
    """``python -m cudagraph_bench ARGV`` whose stdout is a pipe closed before the first write
    -> (exit code, stderr)."""
    proc = subprocess.Popen([sys.executable, "-m", "cudagraph_bench", *map(str, argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()   # the reader is gone: every write to stdout hits a broken pipe
    err = proc.stderr.read().decode()
    proc.stderr.close()
    return proc.wait(timeout=120), err


@pytest.mark.parametrize("verdict, expected", [("PASS", 0), ("FAIL", 1)])
def test_compare_exit_code_is_its_verdict_when_the_reader_closes_the_pipe(tmp_path, verdict, expected):
    new = same_measurements(tmp_path) if verdict == "PASS" else slower_graphs(tmp_path)
    rc, err = run_with_closed_stdout(["compare", FIXTURE, new])
    assert rc == expected, err
    assert not [n for n in PIPE_NOISE if n in err], err


def test_usage_errors_stay_exit_code_2_with_a_closed_pipe(tmp_path):
    rc, err = run_with_closed_stdout(["compare", FIXTURE, tmp_path / "missing.json"])
    assert rc == 2 and "Broken pipe" not in err and "Exception ignored" not in err


@pytest.mark.skipif(shutil.which("bash") is None or not SCRIPT.exists(), reason="needs bash and the console script")
@pytest.mark.parametrize("verdict, expected", [("PASS", 0), ("FAIL", 1)])
def test_console_script_piped_into_head_keeps_its_exit_code(tmp_path, verdict, expected):
    new = same_measurements(tmp_path) if verdict == "PASS" else slower_graphs(tmp_path)
    # head exits after one byte; the rest of the table (several KiB) hits the closed pipe
    proc = subprocess.run(["bash", "-c", 'set -o pipefail; "$0" compare "$1" "$2" | head -c1 >/dev/null',
                           str(SCRIPT), str(FIXTURE), str(new)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == expected, proc.stderr
    assert not [n for n in PIPE_NOISE if n in proc.stderr], proc.stderr


def test_pipe_safe_stdout_drops_output_after_a_broken_pipe():
    from cudagraph_bench.cli import PipeSafeStream

    class Closed:
        def __init__(self):
            self.calls = 0

        def write(self, text):
            self.calls += 1
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self):
            raise ValueError("no file descriptor")

    stream = Closed()
    out = PipeSafeStream(stream)
    assert out.write("abc") == 3 and out.broken
    assert out.write("more") == 4 and stream.calls == 1   # nothing reaches the closed stream again
    out.flush()


def test_help_into_a_closed_pipe_exits_0_quietly():
    rc, err = run_with_closed_stdout(["run", "--help"])
    assert rc == 0 and not [n for n in PIPE_NOISE if n in err], err


def _is_full_device(path):
    import stat
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False


@pytest.mark.skipif(not _is_full_device("/dev/full"), reason="needs /dev/full")
def test_stdout_on_a_full_disk_is_one_line_naming_standard_output(tmp_path):
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "cudagraph_bench", "compare", str(FIXTURE),
                               str(same_measurements(tmp_path))],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    try:
        with open("/dev/full", "w") as full:
            full.write("x" * 10)
    except OSError as exc:
        reason = exc.strerror
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == proc.stderr.strip().splitlines()[0]   # one line
    assert f"writing to standard output failed: {reason}" in proc.stderr
    assert "cannot access" not in proc.stderr and "Traceback" not in proc.stderr
    assert "Exception ignored" not in proc.stderr


def test_a_stdout_error_other_than_a_closed_pipe_fails_the_command(capsys, monkeypatch, tmp_path):
    from cudagraph_bench import cli

    class Full:
        def write(self, text):
            raise OSError(28, "No space left on device")

        def flush(self):
            pass

        def fileno(self):
            raise ValueError("no file descriptor")

    monkeypatch.setattr(sys, "stdout", Full())
    rc = cli.main(["compare", str(FIXTURE), str(same_measurements(tmp_path))])
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert rc == 2 and err == ("cudagraph-bench compare: error: writing to standard output failed: "
                               "No space left on device: redirect it to a writable file or pipe\n")


def test_an_unwritable_markdown_path_is_named_as_given(tmp_path, capsys):
    from cudagraph_bench import cli

    if not os.path.isdir("/proc/self"):
        pytest.skip("needs /proc")
    rc = cli.main(["gate", str(FIXTURE), "--baseline", "none", "--markdown", "/proc/x.md"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1
    # refused before the verdict is printed (the path checked first), named as given, never as a temporary file
    assert "--markdown /proc/x.md cannot be written: " in err and ".tmp" not in err and "/proc/.x.md" not in err


@pytest.mark.skipif(not _is_full_device("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command", ["merge", "gate"])     # one path in cli.main serves every command
def test_a_stdout_that_cannot_be_written_fails_the_command_before_its_file_is_written(tmp_path, command):
    out = tmp_path / "out.json"
    argv = {"merge": ["merge", "-o", str(out), str(FIXTURE)],
            "gate": ["gate", str(FIXTURE), "--baseline", "none", "--markdown", str(out)],
            "compare": ["compare", str(FIXTURE), str(same_measurements(tmp_path)), "--markdown", str(out)]}[command]
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "cudagraph_bench", *argv], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    assert proc.returncode == 2 and "writing to standard output failed" in proc.stderr, proc.stderr
    assert not out.exists()


def run_with_stdout_closed_by_the_shell(argv):
    """``python -m cudagraph_bench ARGV >&-``: file descriptor 1 is not open at all -> (exit code, stderr)."""
    proc = subprocess.run(["bash", "-c", '"$0" -m cudagraph_bench "$@" >&-', sys.executable, *map(str, argv)],
                          stderr=subprocess.PIPE, text=True, timeout=120)
    return proc.returncode, proc.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("command", ["merge", "gate-markdown", "compare-markdown", "help"])
def test_a_closed_stdout_is_one_line_exit_2_and_no_file_is_written(tmp_path, command):
    out = tmp_path / "out.json"
    argv = {"merge": ["merge", "-o", out, FIXTURE],
            "gate": ["gate", FIXTURE, "--baseline", "none"],
            "compare": ["compare", FIXTURE, same_measurements(tmp_path)],
            "gate-markdown": ["gate", FIXTURE, "--baseline", "none", "--markdown", out],
            "compare-markdown": ["compare", FIXTURE, same_measurements(tmp_path), "--markdown", out],
            "help": ["gate", "--help"]}[command]
    rc, err = run_with_stdout_closed_by_the_shell(argv)
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "writing to standard output failed: standard output is closed" in err, err
    assert not out.exists()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_closed_stdout_leaves_an_existing_output_as_it_was(tmp_path):
    out = tmp_path / "merged.json"
    earlier = '{"machine_info": {"shards": []}, "benchmarks": []}\n'      # an earlier merge's run
    out.write_text(earlier)
    rc, err = run_with_stdout_closed_by_the_shell(["merge", "-o", out, FIXTURE])
    assert rc == 2 and "standard output is closed" in err, err
    assert out.read_text() == earlier


@pytest.mark.skipif(not _is_full_device("/dev/full"), reason="needs /dev/full")
def test_help_on_a_full_disk_is_one_line_exit_2():
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "cudagraph_bench", "gate", "--help"], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "writing to standard output failed" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("verdict, expected", [("PASS", 0), ("FAIL", 1), ("missing", 2)])
@pytest.mark.parametrize("stderr_to", ["closed pipe", "full disk"])
def test_the_exit_code_does_not_depend_on_where_stderr_goes(tmp_path, verdict, expected, stderr_to):
    """Diagnostics never change the verdict: stderr into a pipe whose reader is gone (``2>&1 | head``) or onto a
    full disk (``2>/dev/full``) leaves compare's exit code as it is, with no traceback on stdout."""
    new = {"PASS": lambda: same_measurements(tmp_path), "FAIL": lambda: slower_graphs(tmp_path),
           "missing": lambda: tmp_path / "missing.json"}[verdict]()
    argv = [sys.executable, "-m", "cudagraph_bench", "compare", str(FIXTURE), str(new)]
    if stderr_to == "full disk":
        if not os.path.exists("/dev/full"):
            pytest.skip("no /dev/full here")
        with open("/dev/full", "w") as full:
            proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=full, text=True, timeout=120)
        rc, out = proc.returncode, proc.stdout
    else:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        proc.stderr.close()
        out = proc.stdout.read()
        rc = proc.wait(timeout=120)
    assert rc == expected and "Traceback" not in out, out
