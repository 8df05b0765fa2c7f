"""``cudagraph-bench compare OLD NEW``: per-benchmark median change with an interval; exit 1 on regression."""

import copy
import random

import pytest


from h200_fixture import DOC, FIXTURE, TIME_FIELDS, run_cli, write  # noqa: E402


def scale(b, factor):
    s = b["stats"]
    s["data"] = [x * factor for x in s["data"]]
    for f in TIME_FIELDS:
        if isinstance(s.get(f), (int, float)):
            s[f] *= factor


def forward_label(b):
    i = b["extra_info"]
    return f"{i['model']} {i['dtype']} L={i['seq_len']} {i['variant']}"


def row_of(out, label):
    """The table line of one benchmark (labels like 'gpt2 ...' are substrings of 'distilgpt2 ...')."""
    return next(line for line in out.splitlines() if f" {label} " in line)


def forward(doc):
    return [b for b in doc["benchmarks"] if b["extra_info"].get("suite") == "forward"]


def n_benchmarks(doc):
    return len(doc["benchmarks"])


def test_identical_runs_pass(tmp_path, capsys):
    md = tmp_path / "cmp.md"
    rc, out, _ = run_cli(capsys, "compare", FIXTURE, FIXTURE, "--markdown", md)
    assert rc == 0
    assert f"compare PASS: {n_benchmarks(DOC)} benchmarks in both runs" in out
    assert "note: OLD and NEW are the same run" in out
    assert "REGRESSION" not in out
    text = md.read_text()
    assert text.startswith("## cudagraph-bench compare: PASS") and "| suite | benchmark |" in text


def test_regression_beyond_threshold_fails_and_names_the_benchmark(tmp_path, capsys):
    new = copy.deepcopy(DOC)
    victim = random.Random(0).choice([b for b in forward(new) if b["extra_info"]["variant"] == "graph"])
    scale(victim, 1.15)
    path = write(new, tmp_path / "new.json")
    rc, out, _ = run_cli(capsys, "compare", FIXTURE, path)
    assert rc == 1
    assert f"compare FAIL: 1 of {n_benchmarks(DOC)} benchmarks slower by more than 10%: " \
           f"{forward_label(victim)} (+15.0%)" in out
    row = row_of(out, forward_label(victim))
    assert "+15.0" in row and row.rstrip().endswith("REGRESSION")
    rc, out, _ = run_cli(capsys, "compare", FIXTURE, path, "--max-regression", 16)
    assert rc == 0 and "+15.0%" in out


def test_a_slower_reference_variant_is_reported_not_failed(tmp_path, capsys):
    new = copy.deepcopy(DOC)
    eager = next(b for b in forward(new) if b["extra_info"]["variant"] == "eager")
    scale(eager, 1.5)
    path = write(new, tmp_path / "new.json")
    rc, out, _ = run_cli(capsys, "compare", FIXTURE, path)
    assert rc == 0 and row_of(out, forward_label(eager)).rstrip().endswith("slower (reference)")
    rc, out, _ = run_cli(capsys, "compare", FIXTURE, path, "--gate-references")
    assert rc == 1 and row_of(out, forward_label(eager)).rstrip().endswith("REGRESSION")


def test_faster_and_noise_are_not_failures(tmp_path, capsys):
    new = copy.deepcopy(DOC)
    faster = forward(new)[0]
    scale(faster, 0.7)
    rng = random.Random(1)
    for b in new["benchmarks"]:
        if b is not faster:
            rng.shuffle(b["stats"]["data"])
    rc, out, _ = run_cli(capsys, "compare", FIXTURE, write(new, tmp_path / "new.json"))
    assert rc == 0
    row = row_of(out, forward_label(faster))
    assert "-30.0" in row and row.rstrip().endswith("faster")


def test_saved_run_ids_from_storage(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    slower = copy.deepcopy(DOC)
    for b in slower["benchmarks"]:
        scale(b, 1.2)
    machine = tmp_path / ".benchmarks" / "Linux-CPython-3.12-64bit"
    write(DOC, machine / "0001_aaaa_20260101_000000.json")
    write(slower, machine / "0002_bbbb_20260102_000000.json")
    rc, out, _ = run_cli(capsys, "compare", "0001", "0002_bbbb_20260102_000000")
    assert rc == 1 and f"of {n_benchmarks(DOC)} benchmarks slower by more than 10%" in out
    rc, _, _ = run_cli(capsys, "compare", "0002", "0001")
    assert rc == 0
    md = tmp_path / "cmp.md"
    rc, out, err = run_cli(capsys, "compare", "0001", "0003", "--markdown", md)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert "unknown saved-run id '0003'" in err and "0001, 0002" in err
    assert not md.exists()
    rc, _, _ = run_cli(capsys, "compare", "0001", "0002", "--storage", tmp_path / "elsewhere")
    assert rc == 2


def _suites_doc():
    """A run with decode, launch and plain (non-cudagraph-bench) benchmarks, built from real rounds."""
    doc = copy.deepcopy(DOC)
    src = doc["benchmarks"][:3]
    decode, launch, plain = (copy.deepcopy(b) for b in src)
    decode["extra_info"] = {"suite": "decode", "model": "gpt2", "dtype": "float32", "seq_len": 3,
                            "new_tokens": 7, "variant": "graph", "ms_per_token": 1.0, "tokens_per_s": 1000.0}
    launch["extra_info"] = {"suite": "launch", "n_launches": 7, "variant": "loop", "us_per_launch": 5.0}
    plain["extra_info"] = {}
    plain["fullname"] = "perf_tests/test_misc.py::test_something"
    doc["benchmarks"] = [decode, launch, plain]
    return doc


def test_decode_launch_and_plain_benchmarks_are_keyed(tmp_path, capsys):
    old = _suites_doc()
    new = copy.deepcopy(old)
    scale(new["benchmarks"][0], 1.5)
    rc, out, _ = run_cli(capsys, "compare", write(old, tmp_path / "old.json"), write(new, tmp_path / "new.json"))
    assert rc == 1
    assert "gpt2 float32 L=3 +7 graph (+50.0%)" in out
    assert "launch n=7 loop" in out and "perf_tests/test_misc.py::test_something" in out
    assert "compare FAIL: 1 of 3 benchmarks" in out


def test_only_in_one_run_is_reported_and_disjoint_runs_are_an_error(tmp_path, capsys):
    new = copy.deepcopy(DOC)
    lost = new["benchmarks"].pop()
    rc, out, _ = run_cli(capsys, "compare", FIXTURE, write(new, tmp_path / "new.json"))
    assert rc == 0 and "; 1 only in OLD" in out
    assert f"; 1 gated benchmark of OLD missing in NEW, not compared: {forward_label(lost)}; " in out
    other = _suites_doc()
    rc, _, err = run_cli(capsys, "compare", FIXTURE, write(other, tmp_path / "other.json"))
    assert rc == 2 and "share no benchmark" in err


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("", "is empty"),
    ('{"machine_info": {"cpu": {}}, "benchmarks": [', "not valid JSON"),
    ('{"version": "5.3.1"}', "not pytest-benchmark output"),
    ('{"machine_info": {}, "benchmarks": [], "version": "5.3.1"}', "holds no benchmarks"),
])
def test_bad_inputs_exit_2_and_write_nothing(tmp_path, capsys, content, message):
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    md = tmp_path / "cmp.md"
    for argv in ((FIXTURE, bad), (bad, FIXTURE)):
        rc, out, err = run_cli(capsys, "compare", *argv, "--markdown", md)
        assert rc == 2 and out == ""
        assert message in err and len(err.splitlines()) == 1
        assert not md.exists()


def test_two_real_h200_runs_fail_only_on_significant_regressions(capsys):
    """forward-2 vs forward-3 (two committed H200 runs): a change beyond the threshold fails only when its
    bootstrap interval lies above zero; the others are labelled marginal."""
    root = FIXTURE.parent.parent.parent / "baselines" / "nvidia-h200"
    rc, out, _ = run_cli(capsys, "compare", root / "forward-2.json", root / "forward-3.json")
    rows = [line for line in out.splitlines() if line.startswith("forward ")]
    assert rows
    regressions = [r for r in rows if r.rstrip().endswith("REGRESSION")]
    reference = [r for r in rows if r.rstrip().endswith("slower (reference)")]
    marginal = [r for r in rows if r.rstrip().endswith("marginal")]
    for row in regressions + reference + marginal:
        low = float(row.split("[")[1].split(",")[0])
        assert (low > 0) == (row in regressions + reference), row
    assert all(" eager " in r for r in reference) and not any(" eager " in r for r in regressions)
    assert rc == (1 if regressions else 0)


def test_an_output_never_replaces_an_input(tmp_path, capsys):
    import shutil

    run = tmp_path / "run.json"
    shutil.copy(FIXTURE, run)
    before = run.read_bytes()
    for argv in (["compare", FIXTURE, run, "--markdown", run], ["baseline", run, "-o", run],
                 ["gate", run, "--baseline", run, "--markdown", run]):
        rc, _, err = run_cli(capsys, *argv)
        assert rc == 2 and len(err.strip().splitlines()) == 1, err
        assert "write the output somewhere else" in err or "--baseline" in err
    assert run.read_bytes() == before


H200 = FIXTURE.parent.parent.parent / "baselines" / "nvidia-h200"


def test_pass_line_takes_the_largest_change_among_gated_benchmarks(capsys):
    """forward vs forward-checked (two committed H200 runs): an eager median +94.8% is a reference, not the
    largest change of what is gated; the slower references are named apart."""
    rc, out, _ = run_cli(capsys, "compare", H200 / "forward.json", H200 / "forward-checked.json")
    assert rc == 0
    line = out.splitlines()[-1]
    assert line.startswith("compare PASS: 76 benchmarks in both runs, no gated one slower by more than 10% "
                           "(largest gated change +8.2%: gpt2 bfloat16 L=128 graph); 13 reference variants "
                           "slower by more than 10%, not gated: ")
    assert "+94.8" in row_of(out, "gpt2 float32 L=50 eager") and "gpt2 float32 L=50 eager" not in line


def test_changes_within_the_tolerance_are_not_shown_as_slower(capsys):
    rc, out, _ = run_cli(capsys, "compare", H200 / "forward-2.json", H200 / "forward-3.json")
    row = row_of(out, "tinyllama-1.1b bfloat16 L=50 graph")
    assert "+0.3" in row and "[+0.2, +0.3]" in row and row.rstrip().endswith("within tolerance")
    statuses = {line.rsplit("]", 1)[-1].strip() for line in out.splitlines() if line.startswith("forward ")}
    assert statuses == {"ok", "faster", "within tolerance", "marginal", "slower (reference)", "REGRESSION"}


def test_one_benchmark_is_singular_and_a_reference_only_pass_says_so(tmp_path, capsys):
    doc = copy.deepcopy(DOC)
    doc["benchmarks"] = [next(b for b in forward(doc) if b["extra_info"]["variant"] == "eager")]
    old = write(doc, tmp_path / "old.json")
    rc, out, _ = run_cli(capsys, "compare", old, old)
    assert rc == 0
    assert (f"compare PASS: 1 benchmark in both runs, all reference variants, none gated (largest change +0.0%: "
            f"{forward_label(doc['benchmarks'][0])}, a reference; --gate-references gates them)") in out
    scale(doc["benchmarks"][0], 1.5)
    rc, out, _ = run_cli(capsys, "compare", old, write(doc, tmp_path / "new.json"), "--gate-references")
    assert rc == 1 and "compare FAIL: 1 of 1 benchmark slower by more than 10%" in out


def test_a_tiny_speed_up_reads_plus_zero_not_minus_zero(tmp_path, capsys):
    new = copy.deepcopy(DOC)
    victim = forward(new)[0]
    scale(victim, 0.9999)  # -0.01%
    rc, out, _ = run_cli(capsys, "compare", FIXTURE, write(new, tmp_path / "new.json"))
    assert rc == 0
    assert row_of(out, forward_label(victim)).split()[-4] == "+0.0" and " -0.0 " not in out


def _without(doc, label):
    out = copy.deepcopy(doc)
    out["benchmarks"] = [b for b in out["benchmarks"]
                         if not (b["extra_info"].get("suite") == "forward" and forward_label(b) == label)]
    assert len(out["benchmarks"]) == len(doc["benchmarks"]) - 1
    return out


def test_a_gated_benchmark_missing_in_new_is_named_not_silent(tmp_path, capsys):
    """NEW lost its gpt2 float32 L=50 graph benchmark and gained another: the summary names the lost one
    (the README defines failure as a regression only, so the exit code stays 0), in the markdown too."""
    new = _without(DOC, "gpt2 float32 L=50 graph")
    extra = copy.deepcopy(next(b for b in forward(new) if forward_label(b) == "gpt2 float32 L=50 eager"))
    extra["extra_info"]["seq_len"] = 77
    new["benchmarks"].append(extra)
    md = tmp_path / "cmp.md"
    rc, out, _ = run_cli(capsys, "compare", FIXTURE, write(new, tmp_path / "new.json"), "--markdown", md)
    assert rc == 0
    line = out.splitlines()[-1]
    assert line.startswith("compare PASS: ")
    assert line.endswith("; 1 gated benchmark of OLD missing in NEW, not compared: gpt2 float32 L=50 graph; "
                         "1 only in OLD; 1 only in NEW")
    assert "missing in NEW, not compared: gpt2 float32 L=50 graph" in md.read_text()


def test_several_missing_gated_benchmarks_are_each_named_and_a_failure_still_fails(tmp_path, capsys):
    new = _without(_without(DOC, "gpt2 float32 L=50 graph"), "bert-tiny float32 L=16 graph")
    scale(next(b for b in forward(new) if forward_label(b) == "gpt2 float32 L=16 graph"), 1.5)
    rc, out, _ = run_cli(capsys, "compare", FIXTURE, write(new, tmp_path / "new.json"))
    assert rc == 1
    line = out.splitlines()[-1]
    assert line.startswith("compare FAIL: 1 of 74 benchmarks slower by more than 10%: gpt2 float32 L=16 graph")
    assert ("; 2 gated benchmarks of OLD missing in NEW, not compared: bert-tiny float32 L=16 graph, "
            "gpt2 float32 L=50 graph; 2 only in OLD") in line


def test_a_missing_reference_is_counted_and_named_only_with_gate_references(tmp_path, capsys):
    path = write(_without(DOC, "gpt2 float32 L=50 eager"), tmp_path / "new.json")
    rc, out, _ = run_cli(capsys, "compare", FIXTURE, path)
    assert rc == 0 and out.splitlines()[-1].endswith("; 1 only in OLD") and "missing in NEW" not in out
    rc, out, _ = run_cli(capsys, "compare", FIXTURE, path, "--gate-references")
    assert rc == 0
    assert out.splitlines()[-1].endswith("; 1 gated benchmark of OLD missing in NEW, not compared: "
                                         "gpt2 float32 L=50 eager; 1 only in OLD")


@pytest.mark.parametrize("empty", ["", " "])
def test_an_empty_markdown_path_is_a_usage_error(tmp_path, capsys, monkeypatch, empty):
    from cudagraph_bench.cli import main as cli_main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        cli_main(["compare", str(FIXTURE), str(FIXTURE), "--markdown", empty])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and out == "" and len(err.splitlines()) == 1
    assert "argument --markdown: expected a path, got an empty string" in err
    assert list(tmp_path.iterdir()) == []
