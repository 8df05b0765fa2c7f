"""``cudagraph-bench baseline``: the versioned per-GPU baseline file, written atomically."""

import copy
import hashlib
import json
import os

import numpy as np
import pytest

from cudagraph_bench.baseline import SCHEMA_VERSION, load_baseline
from cudagraph_bench.errors import InputFileError

from h200_fixture import DOC, FIXTURE, run_cli, write  # noqa: E402


def rounds_ms(model, dtype, seq_len, variant):
    for b in DOC["benchmarks"]:
        i = b["extra_info"]
        if i.get("suite") == "forward" and (i["model"], i["dtype"], i["seq_len"], i["variant"]) == (
                model, dtype, seq_len, variant):
            return np.asarray(b["stats"]["data"]) * 1000.0
    raise KeyError((model, dtype, seq_len, variant))


def test_baseline_records_cases_environment_source_and_thresholds(tmp_path, capsys):
    out_path = tmp_path / "baselines" / "nvidia-h200.json"
    rc, out, err = run_cli(capsys, "baseline", FIXTURE, "-o", out_path, "--min-reduction", 35)
    assert rc == 0, err
    doc = json.loads(out_path.read_text())
    assert doc["schema_version"] == SCHEMA_VERSION == 1
    assert doc["gpu_slug"] == DOC["machine_info"]["cuda"]["gpu_slug"]
    assert doc["source"] == {"file": FIXTURE.name, "sha256": hashlib.sha256(FIXTURE.read_bytes()).hexdigest()}
    assert doc["thresholds"] == {"min_reduction_pct": 35.0, "max_regression_pct": 10.0, "max_gated_len": 128}
    env = doc["environment"]
    assert env["cuda"] == DOC["machine_info"]["cuda"]
    assert env["commit_info"] == DOC["commit_info"] and env["run_datetime"] == DOC["datetime"]
    assert env["python"] == DOC["machine_info"]["python_version"]
    groups = {(b["extra_info"]["model"], b["extra_info"]["dtype"], b["extra_info"]["seq_len"])
              for b in DOC["benchmarks"] if b["extra_info"].get("suite") == "forward"}
    assert {(c["model"], c["dtype"], c["seq_len"]) for c in doc["cases"]} == groups
    for c in doc["cases"]:
        key = (c["model"], c["dtype"], c["seq_len"])
        eager, graph = rounds_ms(*key, "eager"), rounds_ms(*key, "graph")
        assert c["eager"]["median_ms"] == pytest.approx(np.median(eager), abs=1e-6)
        assert c["graph"]["p95_ms"] == pytest.approx(np.percentile(graph, 95), abs=1e-6)
        assert c["graph"]["n"] == graph.size
        red = 100 * (np.median(eager) - np.median(graph)) / np.median(eager)
        assert c["reduction_pct"] == pytest.approx(red, abs=1e-3)
        low, high = c["reduction_ci95_pct"]
        assert low <= c["reduction_pct"] <= high
        assert c["gated"] == (c["seq_len"] <= 128) and c["min_reduction_pct"] == 35.0
    assert f"wrote {out_path}: {len(groups)} cases" in out
    assert os.listdir(out_path.parent) == ["nvidia-h200.json"]  # no temp file left behind


def test_max_gated_len_sets_the_gated_flags_and_load_round_trips(tmp_path, capsys):
    out_path = tmp_path / "b.json"
    rc, _, _ = run_cli(capsys, "baseline", FIXTURE, "-o", out_path, "--max-gated-len", 50)
    assert rc == 0
    b = load_baseline(out_path)
    assert b.gpu_slug == DOC["machine_info"]["cuda"]["gpu_slug"]
    assert b.cases and all(c["gated"] == (key[2] <= 50) for key, c in b.cases.items())


def test_same_run_gives_the_same_baseline(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert run_cli(capsys, "baseline", FIXTURE, "-o", a)[0] == 0
    assert run_cli(capsys, "baseline", FIXTURE, "-o", b)[0] == 0
    assert a.read_text() == b.read_text()


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(schema_version=2), "unknown schema_version 2"),
    (lambda d: d.pop("schema_version"), "not a cudagraph-bench baseline"),
    (lambda d: d["cases"][0].pop("graph"), "malformed"),
    (lambda d: d["cases"][0]["graph"].update(median_ms=0), "malformed"),
    (lambda d: d["thresholds"].update(max_gated_len="lots"), "malformed"),
    (lambda d: d["thresholds"].update(min_reduction_pct=float("nan")), "thresholds.min_reduction_pct: .*finite"),
    (lambda d: d["thresholds"].update(max_regression_pct=-5), "thresholds.max_regression_pct: an allowed regression"),
    (lambda d: d["thresholds"].update(min_reduction_pct="30"), "thresholds.min_reduction_pct must be a number"),
    (lambda d: d.update(thresholds=None), "thresholds must be an object"),
    (lambda d: d.update(cases=[]), "holds no cases"),
])
def test_loader_refuses_unknown_schema_and_malformed_files(tmp_path, capsys, mutate, message):
    good = tmp_path / "good.json"
    assert run_cli(capsys, "baseline", FIXTURE, "-o", good)[0] == 0
    doc = json.loads(good.read_text())
    mutate(doc)
    with pytest.raises(InputFileError, match=message):
        load_baseline(write(doc, tmp_path / "bad.json"))


def test_loader_errors_for_missing_empty_and_truncated(tmp_path):
    with pytest.raises(InputFileError, match="no such baseline file"):
        load_baseline(tmp_path / "missing.json")
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(InputFileError, match="is empty"):
        load_baseline(tmp_path / "empty.json")
    (tmp_path / "trunc.json").write_text('{"schema_version": 1, "cases": [')
    with pytest.raises(InputFileError, match="not valid JSON"):
        load_baseline(tmp_path / "trunc.json")


def _bad_run(tmp_path, case):
    if case == "missing file":
        return tmp_path / "missing.json", "no such file"
    if case == "empty file":
        (tmp_path / "empty.json").write_text("")
        return tmp_path / "empty.json", "is empty"
    if case == "truncated JSON":
        (tmp_path / "trunc.json").write_bytes(FIXTURE.read_bytes()[:777])
        return tmp_path / "trunc.json", "not valid JSON"
    if case == "not pytest-benchmark":
        return write({"name": "x"}, tmp_path / "x.json"), "not pytest-benchmark output"
    doc = copy.deepcopy(DOC)
    if case == "no benchmarks":
        doc["benchmarks"] = []
        return write(doc, tmp_path / "none.json"), "holds no benchmarks"
    if case == "no GPU fingerprint":
        doc["machine_info"]["cuda"] = None
        return write(doc, tmp_path / "cpu.json"), "baselines are per GPU"
    assert case == "eager without graph"
    doc["benchmarks"] = [b for b in doc["benchmarks"] if b["extra_info"].get("variant") != "graph"]
    return write(doc, tmp_path / "eager.json"), "has eager but no graph"


@pytest.mark.parametrize("case", ["missing file", "empty file", "truncated JSON", "not pytest-benchmark",
                                  "no benchmarks", "no GPU fingerprint", "eager without graph"])
def test_bad_runs_exit_2_and_write_nothing(tmp_path, capsys, case):
    path, message = _bad_run(tmp_path, case)
    out_path = tmp_path / "baselines" / "nvidia-h200.json"
    rc, out, err = run_cli(capsys, "baseline", path, "-o", out_path)
    assert rc == 2 and out == ""
    assert message in err and len(err.splitlines()) == 1
    assert not out_path.parent.exists()


def test_output_that_is_a_directory_is_refused(tmp_path, capsys):
    rc, _, err = run_cli(capsys, "baseline", FIXTURE, "-o", tmp_path)
    assert rc == 2 and "is a directory" in err
    assert os.listdir(tmp_path) == []


def test_printed_values_are_rounded_once_like_gate_and_report(tmp_path, capsys):
    """forward-checked.json (committed H200 run): gpt2 float32 L=50 reduces latency by 78.7495%; the file
    stores 78.75, but the table prints 78.7 as gate and the README do (not 78.8 from rounding twice)."""
    run = FIXTURE.parent.parent.parent / "baselines" / "nvidia-h200" / "forward-checked.json"
    out_path = tmp_path / "b.json"
    rc, out, _ = run_cli(capsys, "baseline", run, "-o", out_path)
    assert rc == 0
    row = next(line.split() for line in out.splitlines() if line.split()[:3] == ["gpt2", "float32", "50"])
    assert row[3:9] == ["8.379", "12.976", "1.781", "1.904", "78.7", "[77.4,"]
    case = next(c for c in json.loads(out_path.read_text())["cases"]
                if (c["model"], c["dtype"], c["seq_len"]) == ("gpt2", "float32", 50))
    assert case["reduction_pct"] == 78.75  # stored to 3 decimals, as before
    rc, out, _ = run_cli(capsys, "gate", run, "--baseline", out_path)
    gate_row = next(line.split() for line in out.splitlines() if line.split()[:4] == ["gpt2", "float32", "50", "graph"])
    assert gate_row[6] == "78.7"


def test_the_committed_baseline_is_reproduced_byte_for_byte(tmp_path, capsys):
    root = FIXTURE.parent.parent.parent / "baselines"
    out_path = tmp_path / "nvidia-h200.json"
    assert run_cli(capsys, "baseline", root / "nvidia-h200" / "forward.json", "-o", out_path)[0] == 0
    assert out_path.read_bytes() == (root / "nvidia-h200.json").read_bytes()


def test_loader_names_a_folder(tmp_path):
    with pytest.raises(InputFileError, match=r"is a folder: give a baseline file such as .*<gpu-slug>\.json"):
        load_baseline(tmp_path)


def _case(doc, model, dtype, seq_len):
    return next(c for c in doc["cases"] if (c["model"], c["dtype"], c["seq_len"]) == (model, dtype, seq_len))


@pytest.mark.parametrize("mutate, message", [
    (lambda d: _case(d, "gpt2", "float32", 50).update(min_reduction_pct=150),
     r"case gpt2 float32 L=50: min_reduction_pct: a reduction threshold is a percent in \[0, 100\), got 150: "
     r"write a percent in \[0, 100\) such as 30"),
    (lambda d: _case(d, "gpt2", "float32", 50).update(min_reduction_pct=100),
     r"case gpt2 float32 L=50: min_reduction_pct: .*got 100: write a percent"),
    (lambda d: _case(d, "gpt2", "float32", 50).update(min_reduction_pct=-1),
     r"case gpt2 float32 L=50: min_reduction_pct: .*got -1: write a percent"),
    (lambda d: _case(d, "gpt2", "float32", 50).update(min_reduction_pct="30"),
     r"case gpt2 float32 L=50: min_reduction_pct must be a number, got \"30\": write a percent"),
    (lambda d: _case(d, "gpt2", "float32", 50).update(min_reduction_pct=True),
     r"case gpt2 float32 L=50: min_reduction_pct must be a number, got true"),
    (lambda d: _case(d, "gpt2", "float32", 50).update(gated="no"),
     r"case gpt2 float32 L=50: gated is \"no\", not true or false: write \"gated\": true or \"gated\": false"),
    (lambda d: _case(d, "gpt2", "float32", 50).update(gated=0),
     r"case gpt2 float32 L=50: gated is 0, not true or false"),
    (lambda d: _case(d, "gpt2", "float32", 50).update(gated=None),
     r"case gpt2 float32 L=50: gated is null, not true or false"),
    (lambda d: d["cases"].append(copy.deepcopy(_case(d, "gpt2", "float32", 50))),
     r"lists case gpt2 float32 L=50 twice \(cases\[\d+\] and cases\[\d+\]\): delete one of them"),
    (lambda d: _case(d, "gpt2", "float32", 50).update(seq_len=16),  # now equal to the L=16 entry
     r"lists case gpt2 float32 L=16 twice .*: delete one of them"),
    (lambda d: _case(d, "gpt2", "float32", 50).update(seq_len="50"),
     r"cases\[\d+\] has seq_len \"50\": a prompt length is a whole number of tokens >= 1"),
    (lambda d: _case(d, "gpt2", "float32", 50).update(seq_len=0), r"has seq_len 0: a prompt length"),
])
def test_hand_edited_cases_are_validated_like_the_cli_flags(tmp_path, capsys, mutate, message):
    """A case's gated/min_reduction_pct are checked as --max-gated-len/--min-reduction are; a case listed
    twice is refused. The error is one line naming the file, the case and the fix, and gate exits 2."""
    good = tmp_path / "good.json"
    assert run_cli(capsys, "baseline", FIXTURE, "-o", good)[0] == 0
    doc = json.loads(good.read_text())
    mutate(doc)
    bad = write(doc, tmp_path / "bad.json")
    with pytest.raises(InputFileError, match=message) as info:
        load_baseline(bad)
    assert str(info.value).startswith(f"baseline {bad}") and "\n" not in str(info.value)
    rc, out, err = run_cli(capsys, "gate", FIXTURE, "--baseline", bad)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1 and str(bad) in err


def test_valid_hand_edits_still_load(tmp_path, capsys):
    good = tmp_path / "good.json"
    assert run_cli(capsys, "baseline", FIXTURE, "-o", good)[0] == 0
    doc = json.loads(good.read_text())
    case = _case(doc, "gpt2", "float32", 50)
    case.update(gated=False, min_reduction_pct=0)
    _case(doc, "gpt2", "float32", 16).update(min_reduction_pct=None)  # null: the file's threshold
    _case(doc, "gpt2", "float32", 128).update(min_reduction_pct=99.5)
    b = load_baseline(write(doc, tmp_path / "edited.json"))
    assert b.cases[("gpt2", "float32", 50)]["gated"] is False
    assert len(b.cases) == len(doc["cases"])


def test_the_committed_baseline_loads():
    path = FIXTURE.parent.parent.parent / "baselines" / "nvidia-h200.json"
    b = load_baseline(path)
    assert b.gpu_slug == "nvidia-h200" and len(b.cases) == len(json.loads(path.read_text())["cases"]) == 38


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_output_path_is_refused(tmp_path, capsys, monkeypatch, empty):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:  # an argparse usage error
        run_cli(capsys, "baseline", FIXTURE, "-o", empty)
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and out == "" and len(err.splitlines()) == 1
    assert "argument -o/--output: expected a path, got an empty string" in err
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_an_unwritable_output_fails_before_the_table_is_printed(capsys):
    rc, out, err = run_cli(capsys, "baseline", FIXTURE, "-o", "/proc/x/y.json")
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert "-o /proc/x/y.json cannot be written: /proc does not take new files" in err
    assert "choose a path in a writable folder" in err


def test_a_folder_that_refuses_new_files_fails_before_printing(tmp_path, capsys, monkeypatch):
    """A read-only folder, simulated (root may write anywhere): nothing printed, nothing created."""
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    out_path = tmp_path / "baselines" / "nvidia-h200.json"
    rc, out, err = run_cli(capsys, "baseline", FIXTURE, "-o", out_path)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert f"-o {out_path} cannot be written: {tmp_path} does not take new files (Permission denied)" in err
    assert os.listdir(tmp_path) == []  # the missing baselines/ folder was not created


def test_a_parent_that_is_a_file_fails_before_printing(tmp_path, capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    rc, out, err = run_cli(capsys, "baseline", FIXTURE, "-o", blocker / "b.json")
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert f"{blocker} is a file, not a folder" in err


def test_the_output_check_leaves_no_probe_file(tmp_path, capsys):
    out_path = tmp_path / "b.json"
    assert run_cli(capsys, "baseline", FIXTURE, "-o", out_path)[0] == 0
    assert os.listdir(tmp_path) == ["b.json"]


def test_run_as_a_saved_run_id_from_storage(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    storage = tmp_path / "elsewhere"
    write(DOC, storage / "Linux-CPython-3.12-64bit" / "0007_abcd_20260101_000000.json")
    by_path, by_id = tmp_path / "a.json", tmp_path / "b.json"
    assert run_cli(capsys, "baseline", FIXTURE, "-o", by_path)[0] == 0
    rc, _, err = run_cli(capsys, "baseline", "0007", "--storage", storage, "-o", by_id)
    assert rc == 0, err
    a, b = json.loads(by_path.read_text()), json.loads(by_id.read_text())
    assert b["source"]["file"] == "0007_abcd_20260101_000000.json"
    assert {**a, "source": None} == {**b, "source": None}
    rc, out, err = run_cli(capsys, "baseline", "0007", "-o", tmp_path / "c.json")  # default .benchmarks: none
    assert rc == 2 and out == "" and "holds no saved runs" in err and not (tmp_path / "c.json").exists()
