"""The 30% gate on the real H200 run (tests/data/h200-forward.json), copied and scaled where a test
needs a failure. Expectations are derived from the fixture's numbers, never typed in."""

import copy
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest


from h200_fixture import DOC, FIXTURE, TIME_FIELDS, run_cli, write  # noqa: E402

from cudagraph_bench.cli import main as cli_main
from cudagraph_bench.stats import MIN_BOOTSTRAP_ROUNDS


def bench(doc, model, dtype, seq_len, variant):
    for b in doc["benchmarks"]:
        i = b["extra_info"]
        if (i.get("suite"), i.get("model"), i.get("dtype"), i.get("seq_len"), i.get("variant")) == (
                "forward", model, dtype, seq_len, variant):
            return b
    raise KeyError((model, dtype, seq_len, variant))


def scale(b, factor):
    """Scale every time of one benchmark (rounds, stats, CUDA-event ms) by ``factor``."""
    s = b["stats"]
    s["data"] = [x * factor for x in s["data"]]
    for f in TIME_FIELDS:
        if isinstance(s.get(f), (int, float)):
            s[f] *= factor
    s["ops"] = s["ops"] / factor
    if "cuda_event_ms" in b["extra_info"]:
        b["extra_info"]["cuda_event_ms"] = [x * factor for x in b["extra_info"]["cuda_event_ms"]]


def median_ms(b):
    return float(np.median(b["stats"]["data"])) * 1000.0


def reductions(doc):
    """{(model, dtype, seq_len): median reduction in percent} of graph vs eager, from the raw rounds."""
    out = {}
    for b in doc["benchmarks"]:
        i = b["extra_info"]
        if i.get("suite") == "forward" and i["variant"] == "graph":
            e = median_ms(bench(doc, i["model"], i["dtype"], i["seq_len"], "eager"))
            out[(i["model"], i["dtype"], i["seq_len"])] = 100.0 * (e - median_ms(b)) / e
    return out


RED = reductions(DOC)
GATED = {k: v for k, v in RED.items() if k[2] <= 128}


def label(key):
    return f"{key[0]} {key[1]} L={key[2]}"


@pytest.fixture
def baseline(tmp_path, capsys):
    path = tmp_path / "baselines" / f"{DOC['machine_info']['cuda']['gpu_slug']}.json"
    rc, _, err = run_cli(capsys, "baseline", FIXTURE, "-o", path)
    assert rc == 0, err
    return path


def test_fixture_has_gated_cases():
    assert GATED, "the fixture must contain forward cases with prompt length <= 128"


def test_gate_passes_on_the_real_run(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no baselines/ here: the gate says it skips the regression check
    md = tmp_path / "report.md"
    rc, out, err = run_cli(capsys, "gate", FIXTURE, "--markdown", md)
    assert rc == 0, out + err
    assert "gate PASS" in out and "no baseline" in out
    lowest = min(GATED, key=GATED.get)
    assert f"lowest {GATED[lowest]:.1f}%: {label(lowest)}" in out
    text = md.read_text()
    assert text.startswith("## cudagraph-bench gate: PASS")
    assert "| model | dtype | L | variant |" in text
    shown = [b for b in DOC["benchmarks"] if b["extra_info"].get("suite") == "forward"
             and b["extra_info"]["variant"] != "eager"]
    assert sum(line.startswith("| ") for line in text.splitlines()) == 1 + len(shown)


def test_gate_fails_when_a_gated_case_drops_below_30_percent(tmp_path, capsys):
    doc = copy.deepcopy(DOC)
    key = max(GATED, key=GATED.get)
    eager, graph = bench(doc, *key, "eager"), bench(doc, *key, "graph")
    scale(graph, 0.8 * median_ms(eager) / median_ms(graph))  # graph median -> 80% of eager: 20% reduction
    md = tmp_path / "report.md"
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "run.json"), "--markdown", md)
    assert rc == 1
    assert f"gate FAIL: {label(key)} reduction 20.0% < 30%" in out
    failing = [line.split()[:4] for line in out.splitlines()[:-1] if "FAIL" in line]
    assert failing == [[key[0], key[1], str(key[2]), "graph"]]
    assert md.read_text().startswith("## cudagraph-bench gate: FAIL")  # report written even on failure


def test_inflating_every_gated_graph_fails_and_names_each_case(tmp_path, capsys):
    doc = copy.deepcopy(DOC)
    for key in GATED:
        eager, graph = bench(doc, *key, "eager"), bench(doc, *key, "graph")
        scale(graph, 0.75 * median_ms(eager) / median_ms(graph))
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "run.json"))
    assert rc == 1
    summary = out.splitlines()[-1]
    assert all(f"{label(k)} reduction 25.0% < 30%" in summary for k in GATED)


def test_threshold_override_and_marginal_label(tmp_path, capsys):
    from cudagraph_bench import stats
    key = min(GATED, key=GATED.get)
    eager, graph = bench(DOC, *key, "eager"), bench(DOC, *key, "graph")
    lo, hi = stats.reduction_ci(np.asarray(eager["stats"]["data"]) * 1e3, np.asarray(graph["stats"]["data"]) * 1e3)
    threshold = GATED[key] - 1e-6  # just below this case's reduction: passes, interval straddles it
    assert 100 * lo < threshold < 100 * hi
    rc, out, _ = run_cli(capsys, "gate", FIXTURE, "--min-reduction", threshold)
    assert rc == 0
    marginal = re.search(r"(\d+) marginal \(([^)]*)\)", out.splitlines()[-1])
    assert marginal and label(key) in marginal.group(2).split(", ")
    rc, out, _ = run_cli(capsys, "gate", FIXTURE, "--min-reduction", GATED[key] + 1e-6)
    assert rc == 1 and label(key) in out.splitlines()[-1]


def test_max_gated_len_extends_the_gate_to_long_prompts(tmp_path, capsys):
    long = {k: v for k, v in RED.items() if k[2] > 128}
    if not long:
        pytest.skip("fixture has no prompt length > 128")
    worst = min(long, key=long.get)
    if not long[worst] < min(GATED.values()):
        pytest.skip("no long prompt reduces latency less than every short one")
    threshold = (long[worst] + min(GATED.values())) / 2
    rc, _, _ = run_cli(capsys, "gate", FIXTURE, "--min-reduction", threshold)
    assert rc == 0  # long prompts are not gated by default
    rc, out, _ = run_cli(capsys, "gate", FIXTURE, "--min-reduction", threshold, "--max-gated-len", worst[2])
    assert rc == 1 and f"{label(worst)} reduction" in out.splitlines()[-1]


def test_graph_regression_against_baseline_fails(tmp_path, capsys, baseline):
    doc = copy.deepcopy(DOC)
    key = max(GATED, key=GATED.get)
    graph = bench(doc, *key, "graph")
    assert 100 - (100 - GATED[key]) * 1.15 > 30  # still above the threshold: only the regression fails
    scale(graph, 1.15)
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "run.json"), "--baseline", baseline)
    assert rc == 1
    assert f"{label(key)} graph median +15.0% vs baseline (> 10%)" in out
    assert "REGRESSION" in out
    rc, _, _ = run_cli(capsys, "gate", tmp_path / "run.json", "--baseline", baseline, "--max-regression", 20)
    assert rc == 0


def test_regression_of_an_ungated_long_case_also_fails(tmp_path, capsys, baseline):
    long = [k for k in RED if k[2] > 128]
    if not long:
        pytest.skip("fixture has no prompt length > 128")
    doc = copy.deepcopy(DOC)
    scale(bench(doc, *long[0], "graph"), 1.15)
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "run.json"), "--baseline", baseline)
    assert rc == 1 and f"{label(long[0])} graph median +15.0% vs baseline" in out


def test_identical_rerun_passes_against_its_baseline(tmp_path, capsys, baseline):
    doc = copy.deepcopy(DOC)
    rng = random.Random(0)
    for b in doc["benchmarks"]:
        rng.shuffle(b["stats"]["data"])  # same rounds, another order: a rerun with identical timings
    random.Random(1).shuffle(doc["benchmarks"])
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "rerun.json"), "--baseline", baseline)
    assert rc == 0, out
    assert f"no graph median regressed vs {baseline}" in out
    assert "REGRESSION" not in out


def test_baseline_is_picked_from_the_gpu_slug(tmp_path, capsys, baseline, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, _ = run_cli(capsys, "gate", FIXTURE)
    assert rc == 0
    assert f"baseline {Path('baselines') / baseline.name}" in out


def test_per_case_thresholds_in_the_baseline(tmp_path, capsys, baseline):
    key = min(GATED, key=GATED.get)
    doc = json.loads(baseline.read_text())
    case = next(c for c in doc["cases"] if (c["model"], c["dtype"], c["seq_len"]) == key)
    case["min_reduction_pct"] = GATED[key] + 5.0
    write(doc, baseline)
    rc, out, _ = run_cli(capsys, "gate", FIXTURE, "--baseline", baseline)
    assert rc == 1 and f"{label(key)} reduction {GATED[key]:.1f}% < {GATED[key] + 5.0:g}%" in out
    case["gated"] = False
    write(doc, baseline)
    rc, out, _ = run_cli(capsys, "gate", FIXTURE, "--baseline", baseline)
    assert rc == 0, out


def test_other_gpu_baseline_is_refused_unless_allowed(tmp_path, capsys, baseline):
    doc = copy.deepcopy(DOC)
    doc["machine_info"]["cuda"]["gpu_slug"] = "nvidia-a100-sxm4-80gb"
    doc["machine_info"]["cuda"]["gpu_name"] = "NVIDIA A100-SXM4-80GB"
    run = write(doc, tmp_path / "a100.json")
    md = tmp_path / "report.md"
    rc, out, err = run_cli(capsys, "gate", run, "--baseline", baseline, "--markdown", md)
    assert rc == 2 and out == ""
    assert "--allow-gpu-mismatch" in err and "nvidia-a100-sxm4-80gb" in err and len(err.splitlines()) == 1
    assert not md.exists()
    rc, _, _ = run_cli(capsys, "gate", run, "--baseline", baseline, "--allow-gpu-mismatch")
    assert rc == 0


def test_other_variants_are_shown_but_not_gated(tmp_path, capsys):
    doc = copy.deepcopy(DOC)
    key = next(iter(GATED))
    present = {b["extra_info"]["variant"] for b in doc["benchmarks"] if b["extra_info"].get("suite") == "forward"
               and (b["extra_info"]["model"], b["extra_info"]["dtype"], b["extra_info"]["seq_len"]) == key}
    variant = next(v for v in ("padded", "bucketed", "compile", "compile+graph") if v not in present)
    extra = copy.deepcopy(bench(doc, *key, "eager"))  # as slow as eager: 0% reduction
    extra["extra_info"]["variant"] = variant
    extra["fullname"] += "-" + variant
    doc["benchmarks"].append(extra)
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "run.json"))
    assert rc == 0, out
    rows = [line.split() for line in out.splitlines() if line.split()[:3] == [key[0], key[1], str(key[2])]]
    assert rows[0][3] == "graph" and variant in [r[3] for r in rows[1:]]
    row = next(r for r in rows if r[3] == variant)
    assert row[6] == "0.0" and row[-1] == "info"


def _bad_input(tmp_path, case):
    """(path, expected message) of one bad run file."""
    if case == "missing file":
        return tmp_path / "nope.json", "no such file"
    if case == "empty file":
        (tmp_path / "empty.json").write_text("")
        return tmp_path / "empty.json", "is empty"
    if case == "truncated JSON":
        (tmp_path / "trunc.json").write_bytes(FIXTURE.read_bytes()[:5000])
        return tmp_path / "trunc.json", "not valid JSON"
    if case == "not pytest-benchmark":
        return write({"results": [1, 2]}, tmp_path / "other.json"), "not pytest-benchmark output"
    doc = copy.deepcopy(DOC)
    if case == "no benchmarks":
        doc["benchmarks"] = []
        return write(doc, tmp_path / "none.json"), "holds no benchmarks"
    assert case == "eager without graph"
    doc["benchmarks"].remove(bench(doc, *next(iter(GATED)), "graph"))
    return write(doc, tmp_path / "nograph.json"), "has eager but no graph"


@pytest.mark.parametrize("case", ["missing file", "empty file", "truncated JSON", "not pytest-benchmark",
                                  "no benchmarks", "eager without graph"])
def test_bad_inputs_exit_2_with_one_line_and_write_nothing(tmp_path, capsys, case):
    path, message = _bad_input(tmp_path, case)
    md = tmp_path / "out" / "report.md"
    rc, out, err = run_cli(capsys, "gate", path, "--markdown", md)
    assert rc == 2
    assert out == "" and len(err.splitlines()) == 1 and message in err
    assert not md.exists() and not md.parent.exists()


def test_unknown_schema_version_and_unknown_saved_run_id(tmp_path, capsys, baseline, monkeypatch):
    doc = json.loads(baseline.read_text())
    doc["schema_version"] = 99
    bad = write(doc, tmp_path / "future.json")
    md = tmp_path / "report.md"
    rc, _, err = run_cli(capsys, "gate", FIXTURE, "--baseline", bad, "--markdown", md)
    assert rc == 2 and "unknown schema_version 99" in err and len(err.splitlines()) == 1
    assert not md.exists()
    monkeypatch.chdir(tmp_path)
    write(DOC, tmp_path / ".benchmarks" / "Linux-CPython-3.12-64bit" / "0001_abc_20260101_000000.json")
    rc, out, _ = run_cli(capsys, "gate", "0001", "--baseline", baseline)
    assert rc == 0, out
    rc, _, err = run_cli(capsys, "gate", "0042", "--markdown", md)
    assert rc == 2 and "unknown saved-run id '0042'" in err and "0001" in err
    assert not md.exists()


def test_gate_compare_baseline_import_no_torch():
    code = ("import sys, cudagraph_bench.gate, cudagraph_bench.compare, cudagraph_bench.baseline; "
            "bad = [m for m in ('torch', 'transformers') if m in sys.modules]; assert not bad, bad")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("flag, value, message", [
    ("--min-reduction", "nan", "expected a finite number"),
    ("--min-reduction", "150", "a reduction threshold is a percent in [0, 100)"),
    ("--min-reduction", "-5", "a reduction threshold is a percent in [0, 100)"),
    ("--max-regression", "-1", "an allowed regression is a percent >= 0"),
    ("--max-regression", "inf", "expected a finite number"),
    ("--max-gated-len", "0", "expected a number >= 1"),
])
def test_bad_thresholds_are_usage_errors(capsys, flag, value, message):
    with pytest.raises(SystemExit) as exc:
        cli_main(["gate", str(FIXTURE), flag, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_unwritable_markdown_path_is_a_one_line_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc, out, err = run_cli(capsys, "gate", FIXTURE, "--markdown", blocker / "report.md")
    assert rc == 2 and len(err.splitlines()) == 1
    assert "is a file, not a folder" in err and "Traceback" not in err
    rc, out, err = run_cli(capsys, "gate", FIXTURE, "--markdown", tmp_path)
    assert rc == 2 and len(err.splitlines()) == 1 and "is a folder: give a file path" in err


def _relabel(doc, keep, dtype):
    """Copy of ``doc`` with the forward benchmarks of dtype ``keep`` only, relabelled as ``dtype``."""
    doc = copy.deepcopy(doc)
    doc["benchmarks"] = [b for b in doc["benchmarks"] if b["extra_info"].get("dtype") == keep]
    for b in doc["benchmarks"]:
        b["extra_info"]["dtype"] = dtype
        b["fullname"] = b["fullname"].replace(keep, dtype)
    return doc


def test_a_baseline_holding_no_case_of_the_run_is_a_usage_error(tmp_path, capsys, baseline, monkeypatch):
    run = write(_relabel(DOC, "bfloat16", "float16"), tmp_path / "fp16.json")  # baseline: float32 + bfloat16
    md = tmp_path / "report.md"
    rc, out, err = run_cli(capsys, "gate", run, "--baseline", baseline, "--markdown", md)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1 and not md.exists()
    assert (f"no case of {run} (19 cases, first bert-tiny float16 L=16) is in baseline {baseline}: regenerate "
            f"the baseline from a run of this matrix (cudagraph-bench baseline {run} -o {baseline}) "
            "or drop --baseline") in err
    monkeypatch.chdir(tmp_path)  # baselines/nvidia-h200.json picked from the run's GPU
    rc, out, err = run_cli(capsys, "gate", run)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert "is in baseline baselines/nvidia-h200.json (picked from the run's GPU): pass --baseline FILE" in err


def test_run_cases_without_a_baseline_entry_are_named_in_the_summary(tmp_path, capsys, baseline):
    doc = json.loads(baseline.read_text())
    doc["cases"] = [c for c in doc["cases"] if (c["model"], c["dtype"]) != ("gpt2", "bfloat16")]
    write(doc, baseline)
    rc, out, _ = run_cli(capsys, "gate", FIXTURE, "--baseline", baseline)
    assert rc == 0
    assert out.splitlines()[-1].endswith(
        f"no graph median regressed vs {baseline}; 5 cases of this run have no baseline entry, not checked for "
        "regression: gpt2 bfloat16 L=16, gpt2 bfloat16 L=50, gpt2 bfloat16 L=128, ...")
    run = copy.deepcopy(DOC)
    run["benchmarks"] = [b for b in run["benchmarks"] if b["extra_info"]["model"] != "bert-tiny"]
    rc, out, _ = run_cli(capsys, "gate", write(run, tmp_path / "no-bert.json"), "--baseline", baseline)
    assert rc == 0
    assert (f"no graph median regressed vs {baseline} (8 baseline cases not in this run); 5 cases of this run "
            "have no baseline entry") in out.splitlines()[-1]


def test_a_single_gated_case_is_singular(tmp_path, capsys):
    doc = copy.deepcopy(DOC)
    doc["benchmarks"] = [bench(doc, "gpt2", "float32", 16, v) for v in ("eager", "graph")]
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "one.json"))
    assert rc == 0
    assert f"gate PASS: 1 gated case reaches its threshold (lowest {RED[('gpt2', 'float32', 16)]:.1f}%" in out


def test_unchanged_graph_medians_show_plus_zero_not_minus_zero(capsys, baseline):
    # the baseline stores medians rounded to the ns and the gate rounds the run's the same way: exactly 0
    rc, out, _ = run_cli(capsys, "gate", FIXTURE, "--baseline", baseline)
    assert rc == 0
    rows = [line.split() for line in out.splitlines() if len(line.split()) > 3 and line.split()[3] == "graph"]
    assert len(rows) == len(RED) == 38
    assert [r[-2] for r in rows] == ["+0.0"] * 38


def test_a_folder_as_baseline_or_run_names_the_file_to_give(tmp_path, capsys, baseline):
    rc, out, err = run_cli(capsys, "gate", FIXTURE, "--baseline", baseline.parent)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert f"--baseline {baseline.parent} is a folder: give a baseline file such as {baseline}" in err
    rc, out, err = run_cli(capsys, "gate", tmp_path)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert f"{tmp_path} is a folder, not a run JSON: give a run file, e.g. a file written by pytest " \
           "--benchmark-json=FILE" in err
    write(DOC, tmp_path / "out" / "run.json")
    rc, _, err = run_cli(capsys, "gate", tmp_path / "out")
    assert rc == 2 and f"give a run file, e.g. {tmp_path / 'out' / 'run.json'}?" in err


def test_saved_run_id_from_another_storage(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(DOC, tmp_path / "elsewhere" / "Linux-CPython-3.12-64bit" / "0007_abc_20260101_000000.json")
    rc, _, err = run_cli(capsys, "gate", "0007")
    assert rc == 2 and ".benchmarks/ holds no saved runs" in err
    rc, out, _ = run_cli(capsys, "gate", "0007", "--storage", tmp_path / "elsewhere")
    assert rc == 0 and "0007_abc_20260101_000000.json" in out.splitlines()[0]


def test_an_eager_only_cpu_run_says_gating_needs_a_gpu_run(tmp_path, capsys):
    doc = copy.deepcopy(DOC)  # what cudagraph-bench run --device cpu writes: eager only, no cuda fingerprint
    doc["machine_info"]["cuda"] = None
    doc["benchmarks"] = [b for b in doc["benchmarks"] if b["extra_info"]["variant"] == "eager"]
    for b in doc["benchmarks"]:
        b["extra_info"]["device"] = "cpu"
    run = write(doc, tmp_path / "cpu" / "run.json")
    rc, out, err = run_cli(capsys, "gate", run)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert (f"{run} has no graph variant (it is a CPU run, and cudagraph-bench run --device cpu measures eager "
            "only); gating needs a GPU run with eager and graph") in err
    assert "filtering" not in err


def test_no_interval_from_fewer_rounds_than_the_bootstrap_minimum(tmp_path, capsys):
    doc = json.loads(FIXTURE.read_text())
    for bench in doc["benchmarks"]:
        if bench["extra_info"]["variant"] == "graph":
            bench["stats"]["data"] = bench["stats"]["data"][:MIN_BOOTSTRAP_ROUNDS - 1]
    path = tmp_path / "few.json"
    path.write_text(json.dumps(doc))
    rc, out, _ = run_cli(capsys, "gate", path)
    rows = [line.split() for line in out.splitlines() if len(line.split()) > 3 and line.split()[3] == "graph"]
    assert rows and all("[" not in " ".join(r) for r in rows)  # no "[low, high]" interval on any graph row
    # the 24 gated cases (prompt length <= 128) are counted and named in the summary
    assert "24 gated cases without a 95% interval (fewer than 5 rounds of per-round data" in out.splitlines()[-1]


def test_a_run_without_per_round_data_says_so(tmp_path, capsys):
    doc = json.loads(FIXTURE.read_text())
    for bench in doc["benchmarks"]:
        del bench["stats"]["data"]
    path = tmp_path / "nodata.json"
    path.write_text(json.dumps(doc))
    rc, out, _ = run_cli(capsys, "gate", path)
    assert rc == 0 and "24 gated cases without a 95% interval" in out.splitlines()[-1]


ROOT = Path(__file__).resolve().parents[1]


def test_the_committed_run_never_regresses_against_its_own_baseline(capsys, monkeypatch):
    """baselines/nvidia-h200.json was written from forward.json, with medians rounded to the ns: gating that
    run against it with no tolerance at all must pass (the run's medians are compared at the same precision)."""
    monkeypatch.chdir(ROOT)
    rc, out, err = run_cli(capsys, "gate", "baselines/nvidia-h200/forward.json",
                           "--baseline", "baselines/nvidia-h200.json", "--max-regression", "0")
    assert rc == 0, out + err
    assert "REGRESSION" not in out and "no graph median regressed vs baselines/nvidia-h200.json" in out


def test_a_run_gated_against_the_baseline_written_from_it_changes_by_exactly_zero(tmp_path, capsys, baseline):
    from cudagraph_bench.baseline import load_baseline
    from cudagraph_bench.gate import evaluate
    from cudagraph_bench.runfile import load_run

    rc, out, _ = run_cli(capsys, "gate", FIXTURE, "--baseline", baseline, "--max-regression", "0")
    assert rc == 0 and "REGRESSION" not in out
    changes = [r.change_pct for r in evaluate(load_run(str(FIXTURE)), load_baseline(baseline),
                                              max_regression_pct=0.0) if r.variant == "graph"]
    assert len(changes) == len(RED) and set(changes) == {0.0}


def test_a_slowdown_above_the_stored_precision_still_regresses_at_zero_tolerance(tmp_path, capsys, baseline):
    doc = copy.deepcopy(DOC)
    key = ("gpt2", "float32", 50)
    scale(bench(doc, *key, "graph"), 1.0001)  # +0.01%: ~0.2 us, far above the ns the baseline keeps
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "run.json"), "--baseline", baseline,
                         "--max-regression", "0")
    assert rc == 1
    assert out.splitlines()[-1] == f"gate FAIL: {label(key)} graph median +0.0% vs baseline (> 0%)"


@pytest.mark.parametrize("empty", ["", " "])
def test_an_empty_markdown_path_is_a_usage_error(tmp_path, capsys, monkeypatch, empty):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        cli_main(["gate", str(FIXTURE), "--markdown", empty])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and out == "" and len(err.splitlines()) == 1
    assert "argument --markdown: expected a path, got an empty string" in err
    assert list(tmp_path.iterdir()) == []
