"""A baseline built on several machines (runs told apart by their GPU's UUID): each gated case keeps its spread within
a machine and across machines, and the gate's tolerance for a run of a machine not in the baseline covers the
cross-machine part. Runs are copies of the real H200 fixture scaled per run and per machine; every expectation is
computed here from the fixture's rounds, the factors and scipy."""

import json
import math

import numpy as np
import pytest
from scipy.stats import median_abs_deviation, t

from cudagraph_bench.results import noise
from cudagraph_bench.results.baseline import load_baseline
from h200_fixture import copy_doc, DOC, bench, checked, run_cli, scaled, write

pytestmark = pytest.mark.transformers_free

GPU = DOC["machine_info"]["cuda"]["gpu_slug"]
CHECKED = checked(DOC)
#: Graph factors of the runs of each machine: machine B is 2% slower than A, each with its own run-to-run noise.
HOSTS = {"GPU-aaaa": (1.000, 1.004, 0.997, 1.002, 0.999), "GPU-bbbb": (1.021, 1.018, 1.024, 1.020, 1.017)}
KEY = ("gpt2", "float32", 16)


@pytest.fixture(autouse=True)
def no_default_baseline(tmp_path, monkeypatch):
    from h200_fixture import no_default_baseline_fixture

    return no_default_baseline_fixture(tmp_path, monkeypatch)


def host_run(factor: float, host: str, minute: int) -> dict:
    run = scaled(CHECKED, factor, {"graph"})
    run["machine_info"]["cuda"]["gpu_uuid"] = host
    run["machine_info"]["node"] = "vm"
    run["datetime"] = f"2026-11-29T11:{minute:02d}:00+00:00"
    return run


@pytest.fixture
def runs(tmp_path):
    paths, minute = [], 0
    for host, factors in HOSTS.items():
        for f in factors:
            minute += 1
            paths.append(write(host_run(f, host, minute), tmp_path / "runs" / f"run-{minute}.json"))
    return paths


@pytest.fixture
def baseline_path(tmp_path, capsys, runs):
    path = tmp_path / "b.json"
    rc, _, err = run_cli(capsys, "baseline", *runs, "-o", path)
    assert rc == 0, err
    return path


def graph_median(key, factor):
    return float(np.median(np.asarray(bench(DOC, *key, "graph")["stats"]["data"]) * 1000.0 * factor))


def test_each_case_keeps_its_spread_within_and_across_machines(baseline_path):
    doc = json.loads(baseline_path.read_text())
    assert [h["host"] for h in doc["hosts"]] == list(HOSTS) and [h["runs"] for h in doc["hosts"]] == [5, 5]
    assert [s["host"] for s in doc["sources"]] == [h for h, fs in HOSTS.items() for _ in fs]
    case = next(c for c in doc["cases"] if (c["model"], c["dtype"], c["seq_len"]) == KEY)
    per_host = {h: [graph_median(KEY, f) for f in fs] for h, fs in HOSTS.items()}
    residuals = np.concatenate([np.log(v) - np.median(np.log(v)) for v in per_host.values()])
    within = 100 * median_abs_deviation(residuals, scale="normal") * math.sqrt(10 / 8)
    host_medians = [np.median(v) for v in per_host.values()]
    cross = 100 * np.std(np.log(host_medians), ddof=1)
    g = case["graph"]
    assert g["run_hosts"] == [h for h, fs in HOSTS.items() for _ in fs]
    assert g["within_host_spread_pct"] == pytest.approx(within, abs=1e-3) == g["spread_pct"]
    assert g["cross_host_spread_pct"] == pytest.approx(cross, abs=1e-3)
    assert g["within_host_df"] == 8
    # the centre weighs each machine the same: the geometric mean of the machine medians
    assert g["median_ms"] == pytest.approx(math.exp(np.mean(np.log(host_medians))), rel=1e-6)
    # the pooled cross-machine spread: root mean square over the gated cases, one degree of freedom each
    gated = [c for c in doc["cases"] if c["gated"]]
    pooled = math.sqrt(np.mean([c["graph"]["cross_host_spread_pct"] ** 2 for c in gated]))
    assert doc["thresholds"]["cross_host_spread_pct"] == pytest.approx(pooled, abs=2e-3)
    assert doc["thresholds"]["cross_host_df"] == len(gated)


def expected_tolerance(doc, case, n_new=1):
    """The rule written out: prediction interval of a new machine's runs, Welch-Satterthwaite degrees of freedom."""
    g, th = case["graph"], doc["thresholds"]
    cross = max(th["cross_host_spread_pct"], g["cross_host_spread_pct"])
    c_var = cross ** 2 * (1 + 1 / 2)
    w_var = g["within_host_spread_pct"] ** 2 * (1 / 10 + 1 / n_new)
    df = (c_var + w_var) ** 2 / (c_var ** 2 / th["cross_host_df"] + w_var ** 2 / g["within_host_df"])
    return max(th["regression_floor_pct"], t.ppf(1 - noise.DEFAULT_TAIL, df) * math.sqrt(c_var + w_var))


@pytest.mark.parametrize("side", [-1, +1])
def test_a_run_of_another_machine_is_gated_with_the_cross_machine_tolerance(tmp_path, capsys, baseline_path, side):
    doc = json.loads(baseline_path.read_text())
    case = next(c for c in doc["cases"] if (c["model"], c["dtype"], c["seq_len"]) == KEY)
    tol = expected_tolerance(doc, case)
    # a run of a third machine, every graph slower than the centre by the tolerance -/+ 0.3 points
    center = case["graph"]["median_ms"]
    factor = center * (1 + (tol + side * 0.3) / 100) / graph_median(KEY, 1.0)
    new = host_run(factor, "GPU-cccc", 59)
    for b in new["benchmarks"]:          # only the one case changes: the others stay at machine A's speed
        if b["extra_info"].get("suite") == "forward" and (b["extra_info"]["model"], b["extra_info"]["dtype"],
                                                          b["extra_info"]["seq_len"]) != KEY:
            orig = bench(CHECKED, b["extra_info"]["model"], b["extra_info"]["dtype"], b["extra_info"]["seq_len"],
                         b["extra_info"]["variant"])
            b["stats"] = copy_doc(orig["stats"])
    path = write(new, tmp_path / "new.json")
    rc, out, err = run_cli(capsys, "gate", path, "--baseline", baseline_path)
    line = next(x for x in out.splitlines() if x.startswith("gate "))
    label = "{} {} L={}".format(*KEY)
    assert rc == (0 if side < 0 else 1), line
    assert (f"{label} graph median" in line) == (side > 0), line
    row = next(x.split() for x in out.splitlines() if x.split()[:4] == [KEY[0], KEY[1], str(KEY[2]), "graph"])
    assert f"{tol:.1f}" in row, (row, tol)
    assert "2 hosts (CPU Intel(R) Xeon(R) Processor, 16 cores), this run's not among them" in out
    assert "cross-host spread" in out


def test_one_machine_baseline_says_the_cross_machine_part_is_not_measured(tmp_path, capsys, runs):
    path = tmp_path / "one.json"
    rc, _, err = run_cli(capsys, "baseline", *runs[:5], "-o", path)
    assert rc == 0, err
    doc = json.loads(path.read_text())
    assert doc["thresholds"]["cross_host_spread_pct"] is None and len(doc["hosts"]) == 1
    case = load_baseline(path).cases[KEY]
    assert case["graph"]["cross_host_spread_pct"] is None
    # one machine: the spread of every run (within it), as before
    medians = [graph_median(KEY, f) for f in HOSTS["GPU-aaaa"]]
    assert case["graph"]["spread_pct"] == pytest.approx(
        100 * median_abs_deviation(np.log(medians), scale="normal"), abs=1e-3)


def test_a_case_measured_on_one_machine_of_several_still_covers_the_machines_spread(baseline_path, tmp_path):
    from cudagraph_bench.results.baseline import case_tolerance

    doc = json.loads(baseline_path.read_text())
    case = copy_doc(next(c for c in doc["cases"] if (c["model"], c["dtype"], c["seq_len"]) == KEY))
    new = [case["graph"]["median_ms"]]
    both = case_tolerance(case, doc["thresholds"], new, floor_pct=0.5, figure="wall").tolerance_pct
    case["graph"]["host_medians_ms"] = case["graph"]["host_medians_ms"][:1]     # as if one machine measured it
    one = case_tolerance(case, doc["thresholds"], new, floor_pct=0.5, figure="wall")
    assert one.cross_host_pct == doc["thresholds"]["cross_host_spread_pct"] and one.n_hosts == 1
    assert one.tolerance_pct > both          # its centre is one machine's: the cross-machine part counts twice


@pytest.mark.parametrize("field,value,message", [
    ("run_hosts", ["GPU-aaaa"], "graph.run_hosts must list one host"),
    ("run_hosts", [1] * 10, "graph.run_hosts must list one host"),
    ("cross_host_spread_pct", float("inf"), "graph.cross_host_spread_pct must be a finite percent"),
    ("within_host_spread_pct", -1, "graph.within_host_spread_pct must be a finite percent"),
    ("within_host_df", "8", "graph.within_host_df must be a whole number"),
    ("host_medians_ms", [0.1, -1], "graph.host_medians_ms must be a list of positive ms"),
])
def test_malformed_machine_fields_are_refused_naming_the_field(baseline_path, capsys, tmp_path, field, value, message):
    doc = json.loads(baseline_path.read_text())
    doc["cases"][0]["graph"][field] = value
    bad = write(doc, tmp_path / "bad.json")
    rc, out, err = run_cli(capsys, "gate", write(host_run(1.0, "GPU-cccc", 59), tmp_path / "r.json"), "--baseline", bad)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and message in err, err


def test_a_spread_across_machines_of_a_one_machine_baseline_is_refused(tmp_path, capsys, runs):
    path = tmp_path / "one.json"
    assert run_cli(capsys, "baseline", *runs[:5], "-o", path)[0] == 0
    doc = json.loads(path.read_text())
    doc["thresholds"].update(cross_host_spread_pct=0.5, cross_host_df=3)      # as if measured across machines
    rc, out, err = run_cli(capsys, "gate", write(host_run(1.0, "GPU-cccc", 59), tmp_path / "r.json"),
                           "--baseline", write(doc, tmp_path / "edited.json"))
    assert rc == 2 and out == "" and len(err.splitlines()) == 1, err
    assert "thresholds.cross_host_spread_pct is 0.5, but hosts lists 1 machine and no case was measured on 2" in err
    assert f"regenerate it with cudagraph-bench baseline RUN1 ... RUN5 -o {tmp_path / 'edited.json'}" in err


def test_machines_of_one_run_each_give_a_baseline_without_a_spread_across_them_that_loads(tmp_path, capsys):
    """Five machines, one run each: no spread within a machine, so none across them either (the spread of all runs
    is the noise model); the file is consistent and loads."""
    paths = [write(host_run(f, f"GPU-{i}", i), tmp_path / f"run-{i}.json") for i, f in enumerate(HOSTS["GPU-aaaa"])]
    path = tmp_path / "b.json"
    assert run_cli(capsys, "baseline", *paths, "-o", path)[0] == 0
    doc = json.loads(path.read_text())
    assert len(doc["hosts"]) == 5 and doc["thresholds"]["cross_host_spread_pct"] is None
    assert load_baseline(path).cases[KEY]["graph"]["host_medians_ms"]


def test_the_floor_of_a_baseline_is_taken_before_the_figure_is_looked_up():
    """case_tolerance reads the figure's own floor only when neither the caller nor the baseline gives one."""
    from cudagraph_bench.results.baseline import case_tolerance

    case = {"graph": {"median_ms": 1.0, "run_medians_ms": [1.0, 1.01, 0.99], "spread_pct": 1.0}}
    check = case_tolerance(case, {"regression_floor_pct": 2.5}, [1.0], figure="not one of the figures")
    assert check.floor_pct == 2.5


def test_the_gate_header_names_the_baseline_machines_cpus_and_how_many_runs_are_of_them(tmp_path, capsys, baseline_path):
    """Eager is host-bound: the header names the CPUs of the baseline's machines beside the runner's, and says
    "this run's among them" only when every run's machine is; a run without commit info gates beside one with."""
    cpu = "{brand_raw}, {count} cores".format(**DOC["machine_info"]["cpu"])
    mine, other = host_run(1.0, "GPU-aaaa", 57), host_run(1.0, "GPU-cccc", 58)
    mine["commit_info"] = {"id": "0123456789abcdef", "dirty": False}
    other["commit_info"] = {}                  # no commit recorded: not compared with the other run's
    runs = [write(mine, tmp_path / "a.json"), write(other, tmp_path / "c.json")]
    rc, out, err = run_cli(capsys, "gate", *runs, "--baseline", baseline_path)
    head = out.splitlines()[1]
    assert f"10 runs on 2 hosts (CPU {cpu}), 1 of the 2 runs' machines among them;" in head, head
    runs[1] = write(host_run(1.0, "GPU-bbbb", 59), tmp_path / "bbbb.json")    # the fixture's commit: not read
    rc, out, err = run_cli(capsys, "gate", *runs, "--baseline", baseline_path)
    assert "both runs' machines among them;" in out.splitlines()[1], out
