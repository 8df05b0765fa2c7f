"""``cudagraph-bench baseline RUN... -o FILE``: the versioned per-GPU baseline (schema 2), built from k >= 5
separate runs, written atomically. Runs are copies of the real H200 fixture scaled by per-run factors the
tests choose; every expectation is computed here from the fixture's rounds and those factors."""

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
from unittest.mock import ANY
from scipy.stats import median_abs_deviation, t

from cudagraph_bench.results import capture_cost, noise
from cudagraph_bench.results.baseline import SCHEMA_VERSION, load_baseline
from cudagraph_bench.errors import InputFileError
from h200_fixture import (copy_doc, DOC, bench, checked, committed_doc, committed_run, forward_benches,
                          no_default_baseline_fixture, read_json, run_cli, scaled, write, write_runs)

pytestmark = pytest.mark.transformers_free

ROOT = Path(__file__).resolve().parents[1]

GPU = DOC["machine_info"]["cuda"]["gpu_slug"]
CHECKED = checked(DOC)
EAGER_FACTORS = (1.0, 1.02, 0.97, 1.05, 0.99)
GRAPH_FACTORS = (1.01, 0.96, 1.0, 1.04, 0.98)


@pytest.fixture(autouse=True)
def no_default_baseline(tmp_path, monkeypatch):
    return no_default_baseline_fixture(tmp_path, monkeypatch)


def rounds_ms(doc, key, variant):
    return np.asarray(bench(doc, *key, variant)["stats"]["data"]) * 1000.0


def make_runs(folder, eager_factors=EAGER_FACTORS, graph_factors=GRAPH_FACTORS, doc=None):
    """Runs whose eager and graph times are scaled by their own per-run factors; run i is dated i minutes
    after the fixture's time so the newest is the last."""
    doc = CHECKED if doc is None else doc
    paths = []
    for i, (fe, fg) in enumerate(zip(eager_factors, graph_factors)):
        run = scaled(scaled(doc, fe, {"eager"}), fg, {"graph"})
        run["datetime"] = f"2026-11-29T11:{10 + i:02d}:00+00:00"
        run["machine_info"]["node"] = f"node-{i}"
        paths.append(write(run, folder / f"run-{i + 1}.json"))
    return paths


@pytest.fixture
def runs(tmp_path):
    return make_runs(tmp_path / "runs")


@pytest.fixture
def good(tmp_path, capsys, runs):
    path = tmp_path / "good.json"
    rc, _, err = run_cli(capsys, "baseline", *runs, "-o", path)
    assert rc == 0, err
    return path


def test_baseline_records_cases_environment_sources_and_thresholds(tmp_path, capsys, runs):
    out_path = tmp_path / "baselines" / f"{GPU}.json"
    rc, out, err = run_cli(capsys, "baseline", *runs, "-o", out_path, "--min-reduction", 35)
    assert rc == 0, err
    doc = json.loads(out_path.read_text())
    assert doc["schema_version"] == SCHEMA_VERSION == 4 and doc["kind"] == "cudagraph-bench-baseline"
    assert doc["gpu_slug"] == GPU
    assert doc["sources"] == [{"file": p.name, "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
                               "run_datetime": json.loads(p.read_text())["datetime"], "node": f"node-{i}",
                               "host": DOC["machine_info"]["cuda"].get("gpu_uuid"), "cpu": ANY}
                              for i, p in enumerate(runs)]
    # the fixture's runs record no GPU UUID: one host at most, no cross-host spread measured
    assert doc["thresholds"] == {"min_reduction_pct": 35.0, "max_gated_len": 128,
                                 "regression_floor_pct": noise.DEFAULT_FLOOR_PCT,
                                 "noise_multiplier": None, "alpha": noise.DEFAULT_ALPHA,
                                 "cross_host_spread_pct": None, "cross_host_df": None,
                                 **capture_cost.THRESHOLDS}
    newest = json.loads(runs[-1].read_text())
    env = doc["environment"]
    assert env["cuda"] == DOC["machine_info"]["cuda"] and env["run_datetime"] == newest["datetime"]
    assert env["commit_info"] == DOC["commit_info"] and env["python"] == DOC["machine_info"]["python_version"]
    groups = {(b["extra_info"]["model"], b["extra_info"]["dtype"], b["extra_info"]["seq_len"])
              for b in forward_benches(DOC)}
    assert {(c["model"], c["dtype"], c["seq_len"]) for c in doc["cases"]} == groups
    for c in doc["cases"]:
        key = (c["model"], c["dtype"], c["seq_len"])
        eager = [np.median(rounds_ms(DOC, key, "eager") * f) for f in EAGER_FACTORS]
        graph = [np.median(rounds_ms(DOC, key, "graph") * f) for f in GRAPH_FACTORS]
        assert c["n_runs"] == len(runs)
        assert c["eager"]["run_medians_ms"] == pytest.approx(eager, abs=1e-6)
        assert c["graph"]["run_medians_ms"] == pytest.approx(graph, abs=1e-6)
        assert c["eager"]["median_ms"] == pytest.approx(np.median(eager), abs=1e-6)
        assert c["graph"]["median_ms"] == pytest.approx(np.median(graph), abs=1e-6)
        p95 = [np.percentile(rounds_ms(DOC, key, "graph") * f, 95) for f in GRAPH_FACTORS]
        assert c["graph"]["p95_ms"] == pytest.approx(np.median(p95), abs=1e-6)
        spread = 100 * median_abs_deviation(np.log(graph), scale="normal")
        assert c["graph"]["spread_pct"] == pytest.approx(spread, abs=1e-3)
        red = 100 * (1 - np.median(graph) / np.median(eager))
        assert c["reduction_pct"] == pytest.approx(red, abs=1e-3)
        per_run = [100 * (1 - g / e) for e, g in zip(eager, graph)]
        assert c["reduction_range_pct"] == pytest.approx([min(per_run), max(per_run)], abs=1e-3)
        assert c["gated"] == (c["seq_len"] <= 128) and c["min_reduction_pct"] == 35.0
    assert f"wrote {out_path}: {len(groups)} cases" in out and f"from {len(runs)} runs" in out
    assert os.listdir(out_path.parent) == [f"{GPU}.json"]  # no temp file left behind
    rc, again, _ = run_cli(capsys, "baseline", *runs, "-o", out_path, "--min-reduction", 35)
    assert rc == 0 and f"replaced {out_path}: {len(groups)} cases" in again  # a refresh replaces it, and says so
    assert os.listdir(out_path.parent) == [f"{GPU}.json"]


def test_the_printed_tolerance_is_one_run_against_the_baseline(tmp_path, capsys, runs):
    rc, out, _ = run_cli(capsys, "baseline", *runs, "-o", tmp_path / "b.json")
    assert rc == 0
    key = ("gpt2", "float32", 16)
    graph = [np.median(rounds_ms(DOC, key, "graph") * f) for f in GRAPH_FACTORS]
    spread = 100 * median_abs_deviation(np.log(graph), scale="normal")
    # t-based multiplier: Student's t (one-sided tail 0.001) of the spread's k - 1 degrees of freedom
    tol = max(noise.DEFAULT_FLOOR_PCT, t.ppf(1 - 0.001, len(runs) - 1) * spread * np.sqrt(1 / len(runs) + 1))
    row = next(line.split() for line in out.splitlines() if line.split()[:3] == ["gpt2", "float32", "16"])
    assert row[3] == "5" and row[6] == "wall" and row[8] == f"{spread:.2f}" and row[9] == "-"   # one host
    assert row[10] == f"{tol:.2f}"


@pytest.mark.parametrize("n", [1, 4])
def test_fewer_than_five_runs_are_refused(tmp_path, capsys, runs, n):
    out_path = tmp_path / "b.json"
    rc, out, err = run_cli(capsys, "baseline", *runs[:n], "-o", out_path)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert f"at least {noise.MIN_BASELINE_RUNS} separate runs" in err and f"got {n}" in err
    assert not out_path.exists()


def test_min_runs_lowers_the_requirement(tmp_path, capsys, runs):
    out_path = tmp_path / "b.json"
    rc, _, err = run_cli(capsys, "baseline", *runs[:3], "-o", out_path, "--min-runs", 3)
    assert rc == 0, err
    assert all(c["n_runs"] == 3 for c in json.loads(out_path.read_text())["cases"])


def test_a_gz_name_is_refused_since_a_baseline_is_plain_json(tmp_path, capsys, runs):
    rc, out, err = run_cli(capsys, "baseline", *runs[:3], "-o", tmp_path / "b.json.gz", "--min-runs", 3)
    assert (rc, out) == (2, "") and "a baseline is plain JSON, which gate reads: name it .json" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "b.json.gz").exists()


def test_a_case_in_fewer_than_min_runs_runs_is_left_out_with_a_warning(tmp_path, capsys):
    key = ("gpt2", "float32", 16)
    lacking = copy_doc(CHECKED)
    lacking["benchmarks"] = [b for b in lacking["benchmarks"]
                             if (b["extra_info"]["model"], b["extra_info"]["dtype"], b["extra_info"]["seq_len"]) != key]
    runs = make_runs(tmp_path / "a", EAGER_FACTORS[:4], GRAPH_FACTORS[:4])
    runs.append(write(scaled(lacking, 1.07), tmp_path / "a" / "lacking.json"))
    out_path = tmp_path / "b.json"
    rc, _, err = run_cli(capsys, "baseline", *runs, "-o", out_path)
    assert rc == 0
    assert (f"gpt2 float32 L=16 is in {len(runs) - 1} of {len(runs)} runs (< {noise.MIN_BASELINE_RUNS}): "
            "not stored") in err
    keys = {(c["model"], c["dtype"], c["seq_len"]) for c in json.loads(out_path.read_text())["cases"]}
    assert key not in keys and len(keys) == len(forward_benches(DOC, "graph")) - 1


def test_a_file_given_twice_is_refused(tmp_path, capsys, runs):
    rc, out, err = run_cli(capsys, "baseline", *runs, runs[0], "-o", tmp_path / "b.json")
    assert rc == 2 and out == "" and "same run" in err and str(runs[0]) in err


def test_runs_of_different_gpus_are_refused(tmp_path, capsys, runs):
    other = json.loads(runs[-1].read_text())
    other["machine_info"]["cuda"]["gpu_slug"] = "nvidia-a100-sxm4-80gb"
    write(other, runs[-1])
    rc, out, err = run_cli(capsys, "baseline", *runs, "-o", tmp_path / "b.json")
    assert rc == 2 and out == "" and "different GPUs" in err and "nvidia-a100-sxm4-80gb" in err


def test_a_run_with_a_failed_check_is_refused_naming_the_case_and_the_run(tmp_path, capsys, runs):
    bad = json.loads(runs[2].read_text())
    bench(bad, "gpt2", "float32", 16, "graph")["extra_info"].update(correct=False, max_abs_diff=3.5)
    write(bad, runs[2])
    out_path = tmp_path / "b.json"
    for extra in ([], ["--allow", "unchecked"]):
        rc, out, err = run_cli(capsys, "baseline", *runs, "-o", out_path, *extra)
        assert rc == 1 and out == "" and len(err.splitlines()) == 1
        assert "gpt2 float32 L=16 graph" in err and str(runs[2]) in err and "3.5" in err
        assert not out_path.exists()


def test_unchecked_runs_are_refused_unless_allowed(tmp_path, capsys):
    runs = make_runs(tmp_path / "runs", doc=DOC)  # the fixture as recorded: no checks
    out_path = tmp_path / "b.json"
    rc, out, err = run_cli(capsys, "baseline", *runs, "-o", out_path)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert "recorded no correctness check" in err and str(runs[0]) in err and "--allow unchecked" in err
    assert not out_path.exists()
    rc, _, err = run_cli(capsys, "baseline", *runs, "-o", out_path, "--allow", "unchecked")
    assert rc == 0, err
    assert len(json.loads(out_path.read_text())["cases"]) == len(forward_benches(DOC, "graph"))


def test_the_committed_repeated_h200_runs_make_a_baseline(tmp_path, capsys):
    """Real separate runs of the same code on one H200; the older ones recorded no check."""
    names = ("forward", "forward-2", "forward-3", "forward-checked", "gpu-gate")
    runs = [committed_run(n) for n in names]
    out_path = tmp_path / "b.json"
    rc, _, err = run_cli(capsys, "baseline", *runs, "-o", out_path)
    assert rc == 2 and "recorded no correctness check" in err
    rc, _, err = run_cli(capsys, "baseline", *runs, "-o", out_path, "--allow", "unchecked")
    assert rc == 0, err
    medians = {}
    for p in runs:
        for b in forward_benches(read_json(p), "graph"):
            i = b["extra_info"]
            medians.setdefault((i["model"], i["dtype"], i["seq_len"]), []).append(
                float(np.median(b["stats"]["data"])) * 1000.0)
    expected = {k: v for k, v in medians.items() if len(v) >= noise.MIN_BASELINE_RUNS}
    cases = {(c["model"], c["dtype"], c["seq_len"]): c for c in json.loads(out_path.read_text())["cases"]}
    assert set(cases) == set(expected) and expected
    for key, values in expected.items():
        assert cases[key]["graph"]["run_medians_ms"] == pytest.approx(values, abs=1e-6)
        spread = 100 * median_abs_deviation(np.log(values), scale="normal")
        assert cases[key]["graph"]["spread_pct"] == pytest.approx(spread, abs=1e-3)


def test_max_gated_len_sets_the_gated_flags_and_load_round_trips(tmp_path, capsys, runs):
    out_path = tmp_path / "b.json"
    rc, _, _ = run_cli(capsys, "baseline", *runs, "-o", out_path, "--max-gated-len", 50)
    assert rc == 0
    b = load_baseline(out_path)
    assert b.gpu_slug == GPU and b.n_runs == len(runs)
    assert b.cases and all(c["gated"] == (key[2] <= 50) for key, c in b.cases.items())


def test_same_runs_give_the_same_baseline(tmp_path, capsys, runs):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert run_cli(capsys, "baseline", *runs, "-o", a)[0] == 0
    assert run_cli(capsys, "baseline", *runs, "-o", b)[0] == 0
    assert a.read_text() == b.read_text()


def test_baseline_replaces_a_baseline_and_never_a_run(tmp_path, capsys, runs, good):
    rc, out, _ = run_cli(capsys, "baseline", *runs, "-o", good)
    assert rc == 0 and f"replaced {good}" in out
    run = tmp_path / "myrun.json"
    run.write_bytes(runs[0].read_bytes())
    rc, out, err = run_cli(capsys, "baseline", *runs, "-o", run)
    assert rc == 2 and err.count("\n") == 1 and run.read_bytes() == runs[0].read_bytes()
    assert f"-o {run} is not a baseline that cudagraph-bench wrote, the only file it replaces" in err


def test_a_schema_1_file_is_refused_in_one_line(tmp_path):
    old = write({"schema_version": 1, "gpu_slug": GPU, "cases": [], "thresholds": {}}, tmp_path / "old.json")
    with pytest.raises(InputFileError, match=r"schema 1, built from a single run") as info:
        load_baseline(old)
    assert "\n" not in str(info.value) and "RUN1 ... RUN5" in str(info.value)


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(schema_version=5), "unknown schema_version 5"),
    (lambda d: d.pop("schema_version"), "not a cudagraph-bench baseline"),
    (lambda d: d["cases"][0].pop("graph"), r"cases\[0\] \(.+ L=\d+\) has no graph"),
    (lambda d: d["cases"].__setitem__(0, None), r"cases\[0\] is null, not a case object"),
    (lambda d: d["cases"][0].update(n_runs=-3), r"n_runs is -3, not a whole number of runs >= 1"),
    (lambda d: d["cases"][0].update(n_runs="9"), r'n_runs is "9", not a whole number of runs >= 1'),
    (lambda d: d["cases"][0].update(n_runs=len(d["cases"][0]["graph"]["run_medians_ms"]) + 1),
     r"n_runs is \d+, but graph.run_medians_ms holds \d+ run medians"),
    (lambda d: d.update(gpu_slug=5), "gpu_slug is 5, not the GPU's key as text"),
    (lambda d: d["cases"][0]["graph"].update(median_ms=0), "malformed"),
    (lambda d: d["cases"][0]["graph"].update(run_medians_ms=[]), "run_medians_ms must be a list of positive finite ms"),
    (lambda d: d["cases"][0]["graph"].update(run_medians_ms=[1.0, -2.0]), "run_medians_ms must be a list"),
    (lambda d: d["cases"][0]["graph"].update(spread_pct=-1), "spread_pct must be a finite percent >= 0 from 2 or more run medians, or null"),
    (lambda d: d["cases"][0]["graph"].update(spread_pct="2"), "spread_pct must be a finite percent >= 0 from 2 or more run medians, or null"),
    (lambda d: d["thresholds"].update(max_gated_len="lots"), "malformed"),
    (lambda d: d["thresholds"].update(min_reduction_pct=float("nan")), "thresholds.min_reduction_pct: .*finite"),
    (lambda d: d["thresholds"].update(regression_floor_pct=-5),
     "thresholds.regression_floor_pct: an allowed regression"),
    (lambda d: d["thresholds"].update(alpha=1.5), "thresholds.alpha: a significance level is in"),
    (lambda d: d["thresholds"].update(min_reduction_pct="30"), "thresholds.min_reduction_pct must be a number"),
    (lambda d: d.update(thresholds=None), "thresholds must be an object"),
    (lambda d: d.update(cases=[]), "holds no cases"),
])
def test_loader_refuses_unknown_schema_and_malformed_files(tmp_path, good, mutate, message):
    doc = json.loads(good.read_text())
    mutate(doc)
    with pytest.raises(InputFileError, match=message):
        load_baseline(write(doc, tmp_path / "bad.json"))


def test_a_whole_float_n_runs_loads(tmp_path, good):
    doc = json.loads(good.read_text())
    doc["cases"][0]["n_runs"] = float(len(doc["cases"][0]["graph"]["run_medians_ms"]))
    assert load_baseline(write(doc, tmp_path / "b.json")).cases


def test_a_null_spread_loads(tmp_path, good):
    doc = json.loads(good.read_text())
    doc["cases"][0]["graph"]["spread_pct"] = None
    assert load_baseline(write(doc, tmp_path / "b.json")).cases


def test_loader_errors_for_missing_empty_and_truncated(tmp_path):
    with pytest.raises(InputFileError, match="no such baseline file"):
        load_baseline(tmp_path / "missing.json")
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(InputFileError, match="is empty"):
        load_baseline(tmp_path / "empty.json")
    (tmp_path / "trunc.json").write_text('{"schema_version": 2, "cases": [')
    with pytest.raises(InputFileError, match="not valid JSON"):
        load_baseline(tmp_path / "trunc.json")


def test_a_file_that_is_no_baseline_is_never_advised_to_be_overwritten(tmp_path):
    """A README or a gzipped baseline given as --baseline: the error says what the file is and how a baseline is
    written, never to write one over the file given."""
    import gzip

    committed = ROOT / "baselines" / "nvidia-h200.json"
    packed = tmp_path / "b.json.gz"
    packed.write_bytes(gzip.compress(committed.read_bytes()))
    for path, what in ((ROOT / "README.md", "not valid JSON"), (packed, "gzip-compressed")):
        with pytest.raises(InputFileError, match=what) as exc:
            load_baseline(path)
        assert f"-o {path}" not in str(exc.value) and "baselines/<gpu>.json" in str(exc.value)


def _bad_run(tmp_path, case):
    if case == "missing file":
        return tmp_path / "missing.json", "no such file"
    if case == "empty file":
        (tmp_path / "empty.json").write_text("")
        return tmp_path / "empty.json", "is empty"
    if case == "truncated JSON":
        (tmp_path / "trunc.json").write_text(json.dumps(DOC)[:777])
        return tmp_path / "trunc.json", "not valid JSON"
    if case == "not pytest-benchmark":
        return write({"name": "x"}, tmp_path / "x.json"), "not pytest-benchmark output"
    doc = scaled(CHECKED, 1.11)
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
def test_a_bad_run_among_good_ones_exits_2_and_writes_nothing(tmp_path, capsys, runs, case):
    path, message = _bad_run(tmp_path, case)
    out_path = tmp_path / "baselines" / f"{GPU}.json"
    rc, out, err = run_cli(capsys, "baseline", *runs[:4], path, "-o", out_path)
    assert rc == 2 and out == ""
    assert message in err and len(err.splitlines()) == 1
    assert not out_path.parent.exists()


def test_output_that_is_a_directory_is_refused(tmp_path, capsys, runs):
    target = tmp_path / "target"
    target.mkdir()
    rc, _, err = run_cli(capsys, "baseline", *runs, "-o", target)
    assert rc == 2 and "is a directory" in err
    assert os.listdir(target) == []


def test_printed_values_are_rounded_once_like_gate(tmp_path, capsys):
    """Copies of forward-checked.json (a committed H200 run with checks): the table prints the reduction
    rounded once from the exact value, as gate does, and the file stores it to 3 decimals."""
    src = committed_doc("forward-checked")
    runs = write_runs(tmp_path / "runs", (1.0, 1.0 + 1e-9, 1.0 - 1e-9, 1.0 + 2e-9, 1.0 - 2e-9), doc=src)
    key = ("gpt2", "float32", 50)
    e, g = np.median(rounds_ms(src, key, "eager")), np.median(rounds_ms(src, key, "graph"))
    red = 100 * (e - g) / e
    out_path = tmp_path / "b.json"
    rc, out, _ = run_cli(capsys, "baseline", *runs, "-o", out_path)
    assert rc == 0
    row = next(line.split() for line in out.splitlines() if line.split()[:3] == ["gpt2", "float32", "50"])
    assert row[4:6] == [f"{e:.3f}", f"{g:.3f}"] and row[11] == f"{red:.1f}"
    case = next(c for c in json.loads(out_path.read_text())["cases"]
                if (c["model"], c["dtype"], c["seq_len"]) == key)
    assert case["reduction_pct"] == pytest.approx(round(red, 3), abs=1.5e-3)
    rc, out, _ = run_cli(capsys, "gate", runs[0], "--baseline", out_path)
    gate_row = next(line.split() for line in out.splitlines() if line.split()[:4] == ["gpt2", "float32", "50", "graph"])
    assert gate_row[7] == "-" and gate_row[8] == f"{red:.1f}"     # no device ms in these runs; the reduction


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
    (lambda d: d["cases"].append(copy_doc(_case(d, "gpt2", "float32", 50))),
     r"lists case gpt2 float32 L=50 twice \(cases\[\d+\] and cases\[\d+\]\): delete one of them"),
    (lambda d: _case(d, "gpt2", "float32", 50).update(seq_len=16),  # now equal to the L=16 entry
     r"lists case gpt2 float32 L=16 twice .*: delete one of them"),
    (lambda d: _case(d, "gpt2", "float32", 50).update(seq_len="50"),
     r"cases\[\d+\] has seq_len \"50\": a prompt length is a whole number of tokens >= 1"),
    (lambda d: _case(d, "gpt2", "float32", 50).update(seq_len=0), r"has seq_len 0: a prompt length"),
])
def test_hand_edited_cases_are_validated_like_the_cli_flags(tmp_path, capsys, good, runs, mutate, message):
    """A case's gated/min_reduction_pct are checked as --max-gated-len/--min-reduction are; a case listed
    twice is refused. The error is one line naming the file, the case and the fix, and gate exits 2."""
    doc = json.loads(good.read_text())
    mutate(doc)
    bad = write(doc, tmp_path / "bad.json")
    with pytest.raises(InputFileError, match=message) as info:
        load_baseline(bad)
    assert str(info.value).startswith(f"baseline {bad}") and "\n" not in str(info.value)
    rc, out, err = run_cli(capsys, "gate", runs[0], "--baseline", bad)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1 and str(bad) in err


def test_valid_hand_edits_still_load(tmp_path, good):
    doc = json.loads(good.read_text())
    _case(doc, "gpt2", "float32", 50).update(gated=False, min_reduction_pct=0)
    _case(doc, "gpt2", "float32", 16).update(min_reduction_pct=None)  # null: the file's threshold
    _case(doc, "gpt2", "float32", 128).update(min_reduction_pct=99.5)
    b = load_baseline(write(doc, tmp_path / "edited.json"))
    assert b.cases[("gpt2", "float32", 50)]["gated"] is False
    assert len(b.cases) == len(doc["cases"])


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_output_path_is_refused(tmp_path, capsys, monkeypatch, runs, empty):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    with pytest.raises(SystemExit) as exc:  # an argparse usage error
        run_cli(capsys, "baseline", *runs, "-o", empty)
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and out == "" and len(err.splitlines()) == 1
    assert "argument -o/--output: expected a path, got an empty string" in err
    assert os.listdir(work) == []


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_an_unwritable_output_fails_before_the_table_is_printed(capsys, runs):
    rc, out, err = run_cli(capsys, "baseline", *runs, "-o", "/proc/x/y.json")
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert "-o /proc/x/y.json cannot be written: /proc does not take new files" in err
    assert "choose a path in a writable folder" in err


def test_a_folder_that_refuses_new_files_fails_before_printing(tmp_path, capsys, monkeypatch, runs):
    """A read-only folder, simulated (root may write anywhere): nothing printed, nothing created."""
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    target = tmp_path / "target"
    target.mkdir()
    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    out_path = target / "baselines" / f"{GPU}.json"
    rc, out, err = run_cli(capsys, "baseline", *runs, "-o", out_path)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert f"-o {out_path} cannot be written: {target} does not take new files (Permission denied)" in err
    assert os.listdir(target) == []  # the missing baselines/ folder was not created


def test_a_parent_that_is_a_file_fails_before_printing(tmp_path, capsys, runs):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    rc, out, err = run_cli(capsys, "baseline", *runs, "-o", blocker / "b.json")
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert f"{blocker} is a file, not a folder" in err


def test_the_output_check_leaves_no_probe_file(tmp_path, capsys, runs):
    target = tmp_path / "target"
    target.mkdir()
    assert run_cli(capsys, "baseline", *runs, "-o", target / "b.json")[0] == 0
    assert os.listdir(target) == ["b.json"]


def test_an_output_never_replaces_an_input(tmp_path, capsys, runs):
    before = runs[0].read_bytes()
    rc, _, err = run_cli(capsys, "baseline", *runs, "-o", runs[0])
    assert rc == 2 and "write the output somewhere else" in err and len(err.splitlines()) == 1
    assert runs[0].read_bytes() == before


def test_runs_as_saved_run_ids_from_storage(tmp_path, capsys, monkeypatch, runs):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    storage = tmp_path / "elsewhere"
    ids = []
    for i, p in enumerate(runs):
        name = f"000{i + 1}_abcd_20260101_00000{i}.json"
        (storage / "Linux-CPython-3.12-64bit").mkdir(parents=True, exist_ok=True)
        (storage / "Linux-CPython-3.12-64bit" / name).write_bytes(p.read_bytes())
        ids.append(f"000{i + 1}")
    by_path, by_id = tmp_path / "a.json", tmp_path / "b.json"
    assert run_cli(capsys, "baseline", *runs, "-o", by_path)[0] == 0
    monkeypatch.setenv("CUDAGRAPH_BENCH_STORAGE", str(storage))
    rc, _, err = run_cli(capsys, "baseline", *ids, "-o", by_id)
    assert rc == 0, err
    a, b = json.loads(by_path.read_text()), json.loads(by_id.read_text())
    assert [s["file"] for s in b["sources"]] == [f"{i}_abcd_20260101_00000{n}.json" for n, i in enumerate(ids)]
    assert [s["sha256"] for s in a["sources"]] == [s["sha256"] for s in b["sources"]]
    assert {**a, "sources": None} == {**b, "sources": None}
    monkeypatch.setenv("CUDAGRAPH_BENCH_STORAGE", str(tmp_path / "none"))
    rc, out, err = run_cli(capsys, "baseline", *ids, "-o", tmp_path / "c.json")
    assert rc == 2 and out == "" and "holds no saved runs" in err and not (tmp_path / "c.json").exists()
