"""The graph's capture cost in the baseline and the gate (``results/capture_cost.py``): capture time, judged in eager
calls, and the GPU memory a graph left reserved after its release. Every expectation is derived from the committed
H200 runs of the baseline (``results/nvidia-h200/forward-repeats``, two machines), the committed baseline built from
them, and the self-test's unmodified runs on a third machine."""

import json

import numpy as np
import pytest

from cudagraph_bench.results import capture_cost, noise
from cudagraph_bench.results.baseline import baseline_of, build_baseline
from cudagraph_bench.results.gate import evaluate
from cudagraph_bench.results.runfile import load_run
from h200_fixture import copy_doc, H200_RESULTS, bench, read_json, run_bad_input, run_cli, write

pytestmark = pytest.mark.transformers_free

REPEATS = sorted((H200_RESULTS / "forward-repeats").glob("forward-*.json.gz"))
BASELINE = H200_RESULTS.parents[1] / "baselines" / "nvidia-h200.json"
SELFTEST = [H200_RESULTS / "selftest" / f"unmodified-{i}.json.gz" for i in (1, 2)]


@pytest.fixture(autouse=True)
def _no_default_baseline(tmp_path, monkeypatch):
    from h200_fixture import no_default_baseline_fixture

    return no_default_baseline_fixture(tmp_path, monkeypatch)


def label(key):
    return "{} {} L={}".format(*key)


def _base():
    return json.loads(BASELINE.read_text())


def _calmest_case():
    """The baseline case whose capture ratio moved least between the runs (its tolerance is the narrowest)."""
    cases = [c for c in _base()["cases"] if c["capture_cost"] and c["capture_cost"]["capture_ms"]["spread_pct"]]
    c = min(cases, key=lambda c: c["capture_cost"]["capture_ms"]["spread_pct"])
    return (c["model"], c["dtype"], c["seq_len"]), c


def _copies(tmp_path, paths, edit=None):
    """Plain copies of committed runs, each document passed through ``edit`` first."""
    out = []
    for p in paths:
        doc = read_json(p)
        if edit:
            edit(doc)
        out.append(write(doc, tmp_path / p.name.removesuffix(".gz")))
    return out


def test_the_committed_baseline_is_the_baseline_command_over_the_committed_repeats(tmp_path, capsys):
    out = tmp_path / "nvidia-h200.json"
    rc, _, err = run_cli(capsys, "baseline", *REPEATS, "-o", out)
    assert rc == 0, err
    assert json.loads(out.read_text()) == _base()
    doc = _base()
    assert doc["schema_version"] == 4 and doc["thresholds"]["capture_floor_pct"] == capture_cost.CAPTURE_FLOOR_PCT
    for c in doc["cases"]:
        runs = [load_run(str(p)) for p in REPEATS]
        values = [bench(r.data, c["model"], c["dtype"], c["seq_len"], "graph")["extra_info"]["capture_ms"]
                  for r in runs]
        assert c["capture_cost"]["capture_ms"]["run_values_ms"] == pytest.approx(values, abs=1e-6)


def test_memory_left_reads_the_ledger_and_skips_the_first_graph_case():
    run = load_run(str(REPEATS[0]))
    ledger = run.data["cudagraph_bench"]["cases"]
    left = capture_cost.memory_left(run)
    assert ledger[0]["case"] not in left
    assert left == {e["case"]: e["reserved_after_mib"] - e["reserved_before_mib"] for e in ledger[1:]}
    first = _base()["cases"]
    by_id = {capture_cost.ledger_id((c["model"], c["dtype"], c["seq_len"])): c for c in first}
    assert by_id[ledger[0]["case"]]["capture_cost"]["pool_left_mib"] is None


def test_capture_in_eager_calls_moves_less_between_runs_than_capture_time():
    """Why the capture time is judged over the same run's eager median: both are host-side work."""
    runs = [load_run(str(p)) for p in REPEATS]
    raw, ratio = [], []
    for c in _base()["cases"]:
        key = (c["model"], c["dtype"], c["seq_len"])
        g = [bench(r.data, *key, "graph") for r in runs]
        e = [bench(r.data, *key, "eager") for r in runs]
        caps = [b["extra_info"]["capture_ms"] for b in g]
        raw.append(noise.host_spread(caps, [r.environment.host for r in runs]))
        ratio.append(noise.host_spread([x / (b["stats"]["median"] * 1e3) for x, b in zip(caps, e)],
                                       [r.environment.host for r in runs]))
    assert noise.pooled_cross_host_pct(ratio)[0] < noise.pooled_cross_host_pct(raw)[0]
    assert np.median([s.within_pct for s in ratio]) < np.median([s.within_pct for s in raw])


def test_each_committed_repeat_against_the_others_fails_no_capture_cost():
    """Calibrate-style: every run of the baseline gated alone against a baseline of the other eight."""
    runs = [load_run(str(p)) for p in REPEATS]
    beyond = 0
    for i, run in enumerate(runs):
        others = runs[:i] + runs[i + 1:]
        base = baseline_of(build_baseline(others, min_runs=len(others), rounded=False), BASELINE)
        results = [r for r in evaluate([run], base) if r.capture is not None]
        assert results and not any(r.capture.regressed for r in results), (run.path, [
            (r.label, r.capture) for r in results if r.capture.regressed])
        assert all(r.capture.memory_change_mib == 0 for r in results if r.capture.memory_change_mib is not None)
        beyond += sum(r.capture.capture_warning for r in results)
    # by the ratio alone one run would have failed: the rank test is what a capture failure needs
    assert beyond > 0


def test_unmodified_runs_of_another_machine_pass_on_capture_cost(capsys):
    rc, out, err = run_cli(capsys, "gate", *SELFTEST, "--baseline", BASELINE)
    assert rc == 0, out + err
    assert "capture_ms" not in out.splitlines()[-1] and "memory left" not in out.splitlines()[-1]


def test_unchanged_runs_pass_and_the_table_shows_capture_and_memory(tmp_path, capsys):
    rc, out, err = run_cli(capsys, "gate", *REPEATS[4:], "--baseline", BASELINE, "--markdown", tmp_path / "g.md")
    assert rc == 0, out + err
    assert "capture ms" in out and "left MiB" in out and "capture/eager vs baseline %" in out
    assert "gated loosely" in (tmp_path / "g.md").read_text()


def test_capture_time_half_as_long_again_fails_with_its_line(tmp_path, capsys):
    key, case = _calmest_case()

    def slower(doc):
        bench(doc, *key, "graph")["extra_info"]["capture_ms"] *= 1.5
    runs = _copies(tmp_path, REPEATS[4:], slower)
    base = baseline_of(_base(), BASELINE)
    check = next(r for r in evaluate([load_run(str(p)) for p in runs], base)
                 if (r.model, r.dtype, r.seq_len, r.variant) == (*key, "graph")).capture.capture
    assert check.change_pct > check.tolerance_pct >= capture_cost.CAPTURE_FLOOR_PCT
    rc, out, _ = run_cli(capsys, "gate", *runs, "--baseline", BASELINE)
    line = out.splitlines()[-1]
    assert rc == 1 and line.startswith("gate FAIL")
    assert (f"{label(key)} graph capture_ms {check.change_pct:+.0f}% vs baseline in eager calls (tolerance "
            f"{check.tolerance_pct:.0f}%, rank p=") in line
    assert "CAPTURE COST" in out


def test_one_run_beyond_the_capture_tolerance_is_a_warning(tmp_path, capsys):
    key, _ = _calmest_case()

    def slower(doc):
        bench(doc, *key, "graph")["extra_info"]["capture_ms"] *= 3.0
    run, = _copies(tmp_path, REPEATS[:1], slower)
    rc, out, _ = run_cli(capsys, "gate", run, "--baseline", BASELINE)
    line = out.splitlines()[-1]
    assert rc == 0 and "warning: capture_ms (in eager calls) beyond its tolerance in one run" in line
    assert label(key) in line


@pytest.mark.parametrize("grow", [4.0, 34.0])
def test_memory_left_reserved_fails_with_its_line(tmp_path, capsys, grow):
    def leak(doc):
        entry = doc["cudagraph_bench"]["cases"][1]
        entry["reserved_after_mib"] += grow
    run, = _copies(tmp_path, REPEATS[:1], leak)
    entry = read_json(REPEATS[0])["cudagraph_bench"]["cases"][1]
    c = next(c for c in _base()["cases"] if capture_cost.ledger_id((c["model"], c["dtype"], c["seq_len"])) ==
             entry["case"])
    mem = c["capture_cost"]["pool_left_mib"]
    tolerance = max(capture_cost.MEMORY_FLOOR_MIB, capture_cost.MEMORY_FLOOR_PCT / 100 * mem["median_mib"],
                    max(mem["run_values_mib"]) - min(mem["run_values_mib"]))
    rc, out, _ = run_cli(capsys, "gate", run, "--baseline", BASELINE)
    assert rc == 1
    change = entry["reserved_after_mib"] + grow - entry["reserved_before_mib"] - mem["median_mib"]
    assert (f"{label((c['model'], c['dtype'], c['seq_len']))} graph memory left reserved {change:+.0f} MiB vs "
            f"baseline (tolerance {tolerance:g} MiB)") in out.splitlines()[-1]


def test_a_baseline_without_capture_cost_does_not_fail_it(tmp_path, capsys):
    doc = _base()
    doc["schema_version"] = 3
    for c in doc["cases"]:
        del c["capture_cost"]
    for k in capture_cost.THRESHOLDS:
        del doc["thresholds"][k]
    old = write(doc, tmp_path / "old.json")
    key, _ = _calmest_case()

    def slower(doc):
        bench(doc, *key, "graph")["extra_info"]["capture_ms"] *= 3.0
    runs = _copies(tmp_path, REPEATS[4:], slower)
    rc, out, _ = run_cli(capsys, "gate", *runs, "--baseline", old)
    assert rc == 0 and "capture cost not in the baseline" in out.splitlines()[-1]


def test_a_run_without_capture_time_is_not_checked_on_it(tmp_path, capsys):
    def drop(doc):
        for b in doc["benchmarks"]:
            b["extra_info"].pop("capture_ms", None)
    run, = _copies(tmp_path, REPEATS[:1], drop)
    rc, out, err = run_cli(capsys, "gate", run, "--baseline", BASELINE)
    assert rc == 0, out + err


def _case0(doc):
    return doc["cases"][0]["capture_cost"]


@pytest.mark.parametrize("mutate, where", [
    (lambda d: _case0(d)["capture_ms"]["run_values_ms"].__setitem__(0, -1.0), "capture_ms.run_values_ms"),
    (lambda d: _case0(d)["capture_ms"]["run_values_ms"].__setitem__(0, "12"), "capture_ms.run_values_ms"),
    (lambda d: _case0(d)["capture_ms"].__setitem__("median_ms", 0), "capture_ms.median_ms"),
    (lambda d: _case0(d)["capture_ms"].__setitem__("spread_pct", 1e6), "capture_ms.spread_pct"),
    (lambda d: _case0(d)["capture_ms"].__setitem__("spread_pct", -1), "capture_ms.spread_pct"),
    (lambda d: d["cases"][1]["capture_cost"].__setitem__("pool_left_mib", {"median_mib": "0"}), "pool_left_mib"),
    (lambda d: d["cases"][0].__setitem__("capture_cost", [1]), "capture_cost is [1]"),
    (lambda d: d["cases"][0].pop("capture_cost"), "capture_cost is missing"),
    (lambda d: d["thresholds"].__setitem__("capture_floor_pct", -5), "capture_floor_pct"),
])
def test_a_baseline_with_a_bad_capture_cost_is_refused(tmp_path, capsys, mutate, where):
    doc = _base()
    mutate(doc)
    bad = write(doc, tmp_path / "bad.json")
    err = run_bad_input(capsys, ["gate", REPEATS[0], "--baseline", bad])
    assert where in err and str(bad) in err


@pytest.mark.parametrize("value, what", [(-3.0, "not a finite time >= 0"), ("12", "of type string"),
                                         (float("inf"), "capture_ms")])
def test_a_run_with_a_bad_capture_time_is_refused(tmp_path, capsys, value, what):
    doc = read_json(REPEATS[0])
    graph = bench(doc, "gpt2", "float32", 50, "graph")
    graph["extra_info"]["capture_ms"] = value
    bad = write(doc, tmp_path / "bad.json")
    err = run_bad_input(capsys, ["gate", bad, "--baseline", BASELINE])
    assert str(bad) in err and (what in err or "Infinity" in err)


def test_the_report_shows_capture_time_and_memory_left(tmp_path):
    from cudagraph_bench.report.forward_tables import forward_rows

    run = load_run(str(REPEATS[0]))
    left = capture_cost.memory_left(run)
    rows = [r for r in forward_rows([run]) if r["variant"] == "graph"]
    for r in rows:
        key = (r["model"], r["dtype"], r["seq_len"])
        assert r["capture_ms"] == bench(run.data, *key, "graph")["extra_info"]["capture_ms"]
        assert r["pool_left_mib"] == left.get(capture_cost.ledger_id(key))


def test_capture_check_uses_the_noise_rule():
    key, case = _calmest_case()
    cap = case["capture_cost"]["capture_ms"]
    calls = [x * 1.5 for x in cap["run_eager_calls"][:3]]
    check = capture_cost.check_case(copy_doc(case), {}, calls, []).capture
    expected = noise.check_regression(cap["run_eager_calls"], calls, spread=cap["spread_pct"],
                                      floor_pct=capture_cost.CAPTURE_FLOOR_PCT)
    assert check.tolerance_pct == expected.tolerance_pct and check.change_pct == expected.change_pct
