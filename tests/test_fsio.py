"""Atomic file writing and output-path checks (cudagraph_bench.fsio)."""

import os
import re
from pathlib import Path

import pytest

from cudagraph_bench import fsio
from cudagraph_bench.errors import UsageError
from cudagraph_bench.fsio import (check_output_file, check_output_folder, refuse_overwriting_inputs,
                                  write_files_atomic, write_text_atomic)

pytestmark = pytest.mark.transformers_free


def test_write_text_atomic_replaces_and_leaves_no_temp_files(tmp_path):
    target = tmp_path / "sub" / "report.md"
    write_text_atomic(target, "one\n")
    write_text_atomic(target, "two\n")
    assert target.read_text() == "two\n"
    assert os.listdir(target.parent) == ["report.md"]
    assert (target.stat().st_mode & 0o777) == 0o644
    with pytest.raises(UsageError, match="is a folder: give a file path"):
        write_text_atomic(target.parent, "x")
    with pytest.raises(UsageError, match="report.md is a file, not a folder"):
        write_text_atomic(target / "deeper" / "x.md", "x")
    assert target.read_text() == "two\n"


def test_a_failing_write_keeps_the_old_file_and_leaves_no_temp_file(tmp_path, monkeypatch):
    target = tmp_path / "run.json"
    target.write_text("old\n")

    class Unencodable(str):                      # a serializer that fails half-way through writing
        def encode(self, *args, **kwargs):
            raise ValueError("cannot serialize")

    with pytest.raises(ValueError, match="cannot serialize"):
        write_text_atomic(target, Unencodable("new\n"))
    assert target.read_text() == "old\n" and os.listdir(tmp_path) == ["run.json"]

    def full_disk(path, mode):                   # the bytes cannot be finished on disk
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(fsio.os, "chmod", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_text_atomic(target, "new\n")
    monkeypatch.undo()
    assert target.read_text() == "old\n" and os.listdir(tmp_path) == ["run.json"]


def test_several_files_are_written_all_or_nothing(tmp_path, monkeypatch):
    page, plot = tmp_path / "page.md", tmp_path / "plot.png"
    page.write_text("old page")
    real_chmod, calls = os.chmod, []

    def second_fails(path, mode):                # the first file is written, the second is not
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device", str(path))
        return real_chmod(path, mode)

    monkeypatch.setattr(fsio.os, "chmod", second_fails)
    with pytest.raises(OSError, match="No space left"):
        write_files_atomic({plot: b"png", page: "new page"})
    monkeypatch.undo()
    assert page.read_text() == "old page" and sorted(os.listdir(tmp_path)) == ["page.md"]
    write_files_atomic({plot: b"png", page: "new page"})
    assert page.read_text() == "new page" and plot.read_bytes() == b"png"


def test_refuse_overwriting_inputs(tmp_path):
    run = tmp_path / "run.json"
    run.write_text("{}")
    refuse_overwriting_inputs(None, "-o", [run])
    refuse_overwriting_inputs(tmp_path / "other.md", "--markdown", [run, None])
    with pytest.raises(UsageError, match=r"--markdown .*run.json is the input file .*: write the output somewhere"):
        refuse_overwriting_inputs(run, "--markdown", [None, run])
    os.link(run, tmp_path / "alias.json")                     # the same file by another name
    with pytest.raises(UsageError, match="is the input file"):
        refuse_overwriting_inputs(tmp_path / "alias.json", "-o", [run])
    with pytest.raises(UsageError, match="is the input file"):
        refuse_overwriting_inputs(tmp_path / "missing" / ".." / "run.json", "-o", [run])


def test_check_output_file_refuses_folders_files_as_parents_and_unwritable_folders(tmp_path, monkeypatch):
    check_output_file(tmp_path / "new" / "b.json", "-o", "b.json", command="report")   # a missing last folder: fine
    deeper = tmp_path / "new" / "deeper" / "b.json"
    with pytest.raises(UsageError, match=re.escape(f"-o {deeper}: folder {tmp_path / 'new'} does not exist")):
        check_output_file(deeper, "-o", "b.json", command="report")   # two: never made
    assert os.listdir(tmp_path) == []                                             # nothing created, no probe left
    with pytest.raises(UsageError, match=r"-o .* is a directory: give a file such as .*b\.json"):
        check_output_file(tmp_path, "-o", "b.json", command="report")
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    with pytest.raises(UsageError, match=f"{blocker} is a file, not a folder: choose another path for b.json"):
        check_output_file(blocker / "sub" / "b.json", "-o", "b.json", command="report")

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(fsio.tempfile, "mkstemp", refuse)
    with pytest.raises(UsageError, match=r"cannot be written: .* does not take new files \(Permission denied\)"):
        check_output_file(tmp_path / "b.json", "--markdown", "b.md", command="report")


def test_check_output_folder(tmp_path, monkeypatch):
    out = tmp_path / "out"
    assert check_output_folder(out, ["results.md"], command="report") == out and not out.exists()   # made on write
    assert check_output_folder(out, ["run.json"], create=True, command="report") == out and os.listdir(out) == []
    (out / "run.json").mkdir()
    with pytest.raises(UsageError, match=r"run.json is a folder: remove it or give another -o folder"):
        check_output_folder(out, ["run.json"], command="report")
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    for bad in (blocker, blocker / "sub"):
        with pytest.raises(UsageError, match=f"{blocker} is a file, not a folder: give -o a folder for a.md, b.png "
                                             "and c.png$"):
            check_output_folder(bad, ["a.md", "b.png", "c.png"], create=True, command="report")
    assert blocker.read_text() == "x"
    monkeypatch.setattr(fsio.tempfile, "mkstemp", lambda **kw: (_ for _ in ()).throw(PermissionError(13, "denied")))
    with pytest.raises(UsageError, match="cannot write to output folder .*: denied: give a writable -o folder"):
        check_output_folder(tmp_path / "new", ["run.json"], create=True, command="report")


def test_an_existing_output_is_replaced_only_when_the_same_command_wrote_it_as_that_kind(tmp_path):
    """Pages whose generated-by line or verdict heading names the command, plots (by the text chunk figure_png
    writes), baselines by baseline, merged runs (machine_info.shards, read whole) by merge and any run by the other
    writers (also gzip-compressed), a pytest process's log (its first line) and journal (its first event) are
    replaced; any other file, another command's page included, is refused with the fix, for a file and in a folder; a
    kind the tool has no mark for (a .jsonl file), an empty file (mktemp's) and a missing file pass."""
    import gzip
    import json

    from matplotlib.figure import Figure

    merged = json.dumps({"machine_info": {"cpu": {"flags": ["x" * 9000]}, "shards": []}, "benchmarks": []})
    files = {"report.md": "# Results\n\n<!-- generated by `cudagraph-bench report`; edit the data -->\n",
             "gate.md": "## cudagraph-bench gate: FAIL\n\n- run x\n", "notes.md": "# my notes on cudagraph-bench\n",
             "run.json": '{\n    "machine_info": {}, "benchmarks": []}', "base.json": '{"schema_version": 4}',
             "merged.json": merged, "cut.json": merged[:-1], "page.json": "## cudagraph-bench gate: PASS\n",
             "empty.md": "", "own.log": f"{fsio.LOG_HEADER} zoo.json\n", "my.log": "my notes\n",
             "own.journal": '{"start": "t::a"}\n', "my.journal": "my notes\n", "stopped.journal": '{"stop": "x"}\n'}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "run.json.gz").write_bytes(gzip.compress(b'{"machine_info": {}}'))
    (tmp_path / "merged.json.gz").write_bytes(gzip.compress(merged.encode()))
    (tmp_path / "cut.json.gz").write_bytes(gzip.compress(b'{"machine_info": {}}')[:12])
    (tmp_path / "plot.png").write_bytes(fsio.figure_png(Figure(figsize=(1, 1)), 10))
    Figure(figsize=(1, 1)).savefig(tmp_path / "user.png", dpi=10)          # matplotlib's own mark only
    (tmp_path / "journal.jsonl").write_text("not JSON\n")
    own = {("report.md", "report"), ("gate.md", "gate"), ("run.json", "pytest"), ("run.json", "run"),
           ("merged.json", "run"), ("base.json", "baseline"), ("merged.json", "merge"), ("merged.json.gz", "merge"),
           ("run.json.gz", "zoo"), ("plot.png", "report"), ("plot.png", "run"), ("journal.jsonl", "pytest"),
           ("new.md", "gate"), ("empty.md", "compare"), ("empty.md", "merge"), ("own.log", "zoo"),
           ("own.journal", "zoo"), ("stopped.journal", "zoo")}
    for name, command in own:
        check_output_file(tmp_path / name, "-o", "r" + (Path(name).suffixes or [".md"])[0], command=command)
    foreign = [("notes.md", "page that cudagraph-bench report wrote", "report"),
               ("report.md", "page that cudagraph-bench compare wrote", "compare"),
               ("gate.md", "page that cudagraph-bench calibrate wrote", "calibrate"),
               ("run.json", "page that cudagraph-bench gate wrote", "gate"),
               ("page.json", "run that cudagraph-bench wrote", "pytest"),
               ("base.json", "run that cudagraph-bench wrote", "pytest"),
               ("run.json", "baseline that cudagraph-bench wrote", "baseline"),
               ("run.json", "merged run that cudagraph-bench merge wrote", "merge"),
               ("run.json.gz", "merged run that cudagraph-bench merge wrote", "merge"),
               ("base.json", "merged run that cudagraph-bench merge wrote", "merge"),
               ("cut.json", "merged run that cudagraph-bench merge wrote", "merge"),
               ("cut.json.gz", "run that cudagraph-bench wrote", "run"),
               ("user.png", "plot that cudagraph-bench wrote", "report"),
               ("my.log", "log that cudagraph-bench wrote", "zoo"),
               ("my.journal", "journal that cudagraph-bench wrote", "zoo")]
    for name, kind, command in foreign:
        example = {"page": "r.md", "plot": "r.png", "log": "r.log", "journal": "r.journal"}.get(kind.split()[0],
                                                                                           "r.json")
        with pytest.raises(UsageError, match=f"^-o {re.escape(str(tmp_path / name))} is not a {kind}, the only "
                                             "file it replaces: give another path, or remove that file first$"):
            check_output_file(tmp_path / name, "-o", example, command=command)
    check_output_folder(tmp_path, ["report.md", "plot.png", "missing.png", "run.json"], command="report")
    with pytest.raises(UsageError, match=f"^-o {re.escape(str(tmp_path))} holds gate.md, notes.md, user.png, "
                                         "which cudagraph-bench report did not write and never replaces: give "
                                         "another -o folder, or remove those files first$"):
        check_output_folder(tmp_path, ["report.md", "gate.md", "notes.md", "user.png"], command="report")
    with pytest.raises(UsageError, match="holds notes.md, which .*, or remove that file first$"):
        check_output_folder(tmp_path, ["notes.md"], command="report")
    assert (tmp_path / "notes.md").read_text() == files["notes.md"]


def test_a_failing_write_names_the_target_never_its_temporary_file(tmp_path, monkeypatch):
    from cudagraph_bench.errors import OutputWriteError

    target = tmp_path / "x.md"

    def full_disk(path, mode):                   # fails on the temporary file, as a full disk would
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(fsio.os, "chmod", full_disk)
    with pytest.raises(OutputWriteError) as raised:
        write_text_atomic(target, "text")
    monkeypatch.undo()
    assert raised.value.filename == str(target) and isinstance(raised.value, OSError)
    message = fsio.os_error_message(raised.value)
    assert message.startswith(f"cannot write {target}: No space left on device: ")
    assert ".tmp" not in message and "free space" in message
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_an_unwritable_folder_is_named_by_the_target(tmp_path):
    with pytest.raises(OSError) as raised:
        write_text_atomic("/proc/cudagraph-bench-x.md", "text")
    assert raised.value.filename == "/proc/cudagraph-bench-x.md"
    assert fsio.os_error_message(raised.value).startswith("cannot write /proc/cudagraph-bench-x.md: ")


def test_a_named_pipe_target_is_written_through_not_replaced(tmp_path):
    """``--markdown /dev/stdout`` or a FIFO: the target stays what it was (not a regular file put in its
    place) and the reader gets the content."""
    import stat
    import threading

    from cudagraph_bench.fsio import write_files_atomic

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_files_atomic({fifo: "report text\n", tmp_path / "page.md": "page\n"})
    reader.join(timeout=10)
    assert got == [b"report text\n"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert (tmp_path / "page.md").read_text() == "page\n"


def test_missing_folders_are_made_one_level_deep_or_under_the_working_directory(tmp_path, monkeypatch, capsys):
    from cudagraph_bench.fsio import check_new_folders, missing_folders

    assert missing_folders(tmp_path) == [] and missing_folders(tmp_path / "a" / "b") == [tmp_path / "a", tmp_path / "a" / "b"]
    check_new_folders(tmp_path / "a", "-o", tmp_path / "a")
    with pytest.raises(UsageError, match=r"mkdir -p .*a/b\) or give a path in an existing folder"):
        check_output_folder(tmp_path / "a" / "b", ["x.md"], command="report")
    monkeypatch.chdir(tmp_path)
    check_output_folder("a/b/c", ["x.md"], command="report")   # relative: under the working directory
    with pytest.raises(UsageError, match="does not exist"):
        check_output_folder("../escaped-by-the-test/b", ["x.md"], command="report")   # relative, but above it
    assert os.listdir(tmp_path) == [] and capsys.readouterr().err == ""
    write_text_atomic("a/b/x.md", "x")                                     # made on write, each one named
    assert capsys.readouterr().err.splitlines() == ["created folder a", f"created folder {os.path.join('a', 'b')}"]
    assert check_output_folder("a/c", [], create=True, command="report").is_dir()
    assert capsys.readouterr().err.splitlines() == [f"created folder {os.path.join('a', 'c')}"]


def test_an_input_that_is_no_regular_file_too_large_or_too_deep_is_refused_before_reading(tmp_path):
    from cudagraph_bench.errors import InputFileError
    from cudagraph_bench.fsio import MAX_JSON_DEPTH, parse_json, read_input_bytes

    os.mkfifo(tmp_path / "pipe")                                            # reading it would block forever
    for path, message in ((tmp_path / "pipe", r"is not a regular file \(a named pipe"),
                          ("/dev/zero", r"is not a regular file \(a character device"),
                          (tmp_path, "is a folder: FIX"), (tmp_path / "nope", "no such run file")):
        with pytest.raises(InputFileError, match=message):
            read_input_bytes(path, "run", "FIX")
    small = tmp_path / "small.json"
    small.write_text("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)
    assert read_input_bytes(small, "run", "FIX", max_bytes=small.stat().st_size) == small.read_bytes()
    with pytest.raises(InputFileError, match=f"larger than the {small.stat().st_size - 1:,} bytes"):
        read_input_bytes(small, "run", "FIX", max_bytes=small.stat().st_size - 1)
    assert parse_json(small.read_text(), small, "run", "FIX") is not None      # at the cap: read
    deeper = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)           # one level beyond: refused
    with pytest.raises(InputFileError, match=f"nests JSON deeper than {MAX_JSON_DEPTH} levels"):
        parse_json(deeper, small, "run", "FIX")


def test_the_working_folder_as_output_folder_has_no_parent_and_passes(tmp_path, monkeypatch):
    """``-o .``: a path without parents (as ``/``) is checked as the folder it is."""
    monkeypatch.chdir(tmp_path)
    assert check_output_folder(".", ["results.md"], command="report") == Path(".")
    assert fsio._blocking_file(Path(".")) is None and fsio._blocking_file(Path("/")) is None
