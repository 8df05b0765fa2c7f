"""The gate on the real H200 run (results/nvidia-h200/forward/forward.json.gz), copied and scaled where a test needs a
failure, and on sets of separate runs made from it with per-run factors the tests choose. Expectations are
derived from the fixture's rounds, from the factors, or from scipy/numpy written out here."""

import copy
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import mannwhitneyu, median_abs_deviation, t

from h200_fixture import (copy_doc, DOC, FIXTURE, bench, checked, committed_doc, committed_run, forward_benches,
                          median_ms,
                          no_default_baseline_fixture, read_json, run_cli, scale, scaled, write, write_runs)

from cudagraph_bench.results import noise
from cudagraph_bench import paths
from cudagraph_bench.cli import main as cli_main
from cudagraph_bench.results.stats import MIN_BOOTSTRAP_ROUNDS

pytestmark = pytest.mark.transformers_free

GPU = DOC["machine_info"]["cuda"]["gpu_slug"]
#: per-run factors of the runs a baseline is built from (median 1.0: the baseline's medians are the fixture's)
FACTORS = (0.97, 0.985, 1.0, 1.015, 1.03)
CHECKED = checked(DOC)


@pytest.fixture(autouse=True)
def no_default_baseline(tmp_path, monkeypatch):
    return no_default_baseline_fixture(tmp_path, monkeypatch)


def reductions(doc):
    """{(model, dtype, seq_len): median reduction in percent} of graph vs eager, from the raw rounds."""
    out = {}
    for b in forward_benches(doc, "graph"):
        i = b["extra_info"]
        e = median_ms(bench(doc, i["model"], i["dtype"], i["seq_len"], "eager"))
        out[(i["model"], i["dtype"], i["seq_len"])] = 100.0 * (e - median_ms(b)) / e
    return out


RED = reductions(DOC)
GATED = {k: v for k, v in RED.items() if k[2] <= 128}


def label(key):
    return f"{key[0]} {key[1]} L={key[2]}"


def expected_spread(key, factors=FACTORS):
    """Between-run spread (percent) of a case's graph median over runs scaled by ``factors``."""
    medians = median_ms(bench(DOC, *key, "graph")) * np.asarray(factors)
    return 100.0 * median_abs_deviation(np.log(medians), scale="normal")


def expected_tolerance(spread, k, n, floor=noise.DEFAULT_FLOOR_PCT, multiplier=None):
    """Tolerance of ``n`` runs against a baseline of ``k``: the multiplier is given, or Student's t
    quantile (one-sided tail 0.001) of the baseline spread's k - 1 degrees of freedom."""
    m = multiplier if multiplier is not None else t.ppf(1 - 0.001, max(k - 1, 1))
    return max(floor, m * spread * np.sqrt(1.0 / k + 1.0 / n))


@pytest.fixture
def checked_run(tmp_path):
    return write(CHECKED, tmp_path / "checked.json")


@pytest.fixture
def baseline(tmp_path, capsys):
    """A baseline built by the CLI from five runs of the fixture scaled by FACTORS."""
    runs = write_runs(tmp_path / "base-runs", FACTORS)
    path = tmp_path / "made" / f"{GPU}.json"
    rc, _, err = run_cli(capsys, "baseline", *runs, "-o", path)
    assert rc == 0, err
    return path


def file_tolerances(path, n_new=1):
    """{case: tolerance} of every case of a baseline file, from its stored spread and run count."""
    doc = json.loads(Path(path).read_text())
    th = doc["thresholds"]
    return {(c["model"], c["dtype"], c["seq_len"]): expected_tolerance(
        c["graph"]["spread_pct"], len(c["graph"]["run_medians_ms"]), n_new, floor=th["regression_floor_pct"],
        multiplier=th["noise_multiplier"]) for c in doc["cases"]}


def graph_rows(out):
    return [line.split() for line in out.splitlines() if len(line.split()) > 3 and line.split()[3] == "graph"]


def test_fixture_has_gated_cases():
    assert GATED, "the fixture must contain forward cases with prompt length <= 128"
    assert all(v >= 30 for v in GATED.values()), "the fixture's gated cases must reach 30%"


def test_gate_passes_on_the_real_run(tmp_path, capsys, checked_run):
    md = tmp_path / "report.md"
    rc, out, err = run_cli(capsys, "gate", checked_run, "--baseline", "none", "--markdown", md)
    assert rc == 0, out + err
    assert "gate PASS" in out and "--baseline none: regression check skipped" in out.splitlines()[-1]
    lowest = min(GATED, key=GATED.get)
    assert f"lowest reduction {GATED[lowest]:.1f}%: {label(lowest)}" in out
    text = md.read_text()
    assert text.startswith("## cudagraph-bench gate: PASS")
    assert "| model | dtype | L | variant |" in text
    shown = [b for b in forward_benches(DOC) if b["extra_info"]["variant"] != "eager"]
    assert sum(line.startswith("| ") for line in text.splitlines()) == 1 + len(shown)


def test_markdown_replaces_a_page_it_wrote_and_never_another_file(tmp_path, capsys, checked_run):
    """--markdown over a file that is no page of this tool (a run): one line, exit 2, the file kept; over its own
    earlier page: replaced."""
    other = write(CHECKED, tmp_path / "other.json")
    before = other.read_bytes()
    rc, out, err = run_cli(capsys, "gate", checked_run, "--baseline", "none", "--markdown", other)
    assert rc == 2 and not out and err.count("\n") == 1 and other.read_bytes() == before
    assert f"--markdown {other} is not a page that cudagraph-bench gate wrote" in err
    assert "remove that file first" in err
    md = tmp_path / "gate.md"
    for verb in ("wrote", "replaced"):
        rc, _, err = run_cli(capsys, "gate", checked_run, "--baseline", "none", "--markdown", md)
        assert rc == 0 and f"{verb} {md}" in err


def test_gate_fails_when_a_gated_case_drops_below_30_percent(tmp_path, capsys):
    doc = copy_doc(CHECKED)
    key = max(GATED, key=GATED.get)
    eager, graph = bench(doc, *key, "eager"), bench(doc, *key, "graph")
    scale(graph, 0.8 * median_ms(eager) / median_ms(graph))  # graph median -> 80% of eager: 20% reduction
    md = tmp_path / "report.md"
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "run.json"), "--baseline", "none", "--markdown", md)
    assert rc == 1
    assert f"gate FAIL: {label(key)} reduction 20.0% < 30%" in out
    failing = [line.split()[:4] for line in out.splitlines()[:-1] if "FAIL" in line]
    assert failing == [[key[0], key[1], str(key[2]), "graph"]]
    assert md.read_text().startswith("## cudagraph-bench gate: FAIL")  # report written even on failure


def test_inflating_every_gated_graph_fails_and_names_each_case(tmp_path, capsys):
    doc = copy_doc(CHECKED)
    for key in GATED:
        eager, graph = bench(doc, *key, "eager"), bench(doc, *key, "graph")
        scale(graph, 0.75 * median_ms(eager) / median_ms(graph))
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "run.json"), "--baseline", "none")
    assert rc == 1
    summary = out.splitlines()[-1]
    assert all(f"{label(k)} reduction 25.0% < 30%" in summary for k in GATED)


# --- correctness is part of the verdict -------------------------------------------------------------------

def test_a_failed_correctness_check_fails_the_gate_and_names_the_case(tmp_path, capsys):
    doc = copy_doc(CHECKED)
    key = ("gpt2", "float32", 16)
    bench(doc, *key, "graph")["extra_info"].update(correct=False, max_abs_diff=3.5)
    run = write(doc, tmp_path / "wrong.json")
    rc, out, _ = run_cli(capsys, "gate", run, "--baseline", "none")
    assert rc == 1
    summary = out.splitlines()[-1]
    assert summary.startswith("gate FAIL: ") and label(key) in summary and "3.5" in summary
    assert "WRONG" in next(" ".join(r) for r in graph_rows(out) if r[:3] == [key[0], key[1], str(key[2])])
    # fast enough (its reduction is untouched) and --allow unchecked does not excuse a failed check
    rc, _, _ = run_cli(capsys, "gate", run, "--baseline", "none", "--allow", "unchecked", "--min-reduction", 0)
    assert rc == 1


def test_a_failed_check_of_an_ungated_case_still_fails(tmp_path, capsys):
    long = [k for k in RED if k[2] > 128]
    if not long:
        pytest.skip("fixture has no prompt length > 128")
    doc = copy_doc(CHECKED)
    bench(doc, *long[0], "graph")["extra_info"].update(correct=False, max_abs_diff=0.25)
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "wrong.json"), "--baseline", "none")
    assert rc == 1 and label(long[0]) in out.splitlines()[-1] and "0.25" in out.splitlines()[-1]


def test_a_gated_case_without_a_check_fails_unless_allowed(tmp_path, capsys):
    doc = copy_doc(CHECKED)
    key = min(GATED)
    for field in ("correct", "check", "max_abs_diff"):
        bench(doc, *key, "graph")["extra_info"].pop(field)
    run = write(doc, tmp_path / "unchecked.json")
    rc, out, _ = run_cli(capsys, "gate", run, "--baseline", "none")
    assert rc == 1
    summary = out.splitlines()[-1]
    assert "1 gated case recorded no correctness check" in summary and label(key) in summary
    rc, out, _ = run_cli(capsys, "gate", run, "--baseline", "none", "--allow", "unchecked")
    assert rc == 0 and out.splitlines()[-1].startswith("gate PASS")


def test_an_ungated_case_without_a_check_does_not_fail(tmp_path, capsys):
    long = [k for k in RED if k[2] > 128]
    if not long:
        pytest.skip("fixture has no prompt length > 128")
    doc = copy_doc(CHECKED)
    bench(doc, *long[0], "graph")["extra_info"].pop("correct")
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "run.json"), "--baseline", "none")
    assert rc == 0, out


def test_the_unchecked_fixture_fails_and_passes_with_allow_unchecked(capsys):
    rc, out, _ = run_cli(capsys, "gate", FIXTURE, "--baseline", "none")
    assert rc == 1 and f"{len(GATED)} gated cases recorded no correctness check" in out.splitlines()[-1]
    rc, _, _ = run_cli(capsys, "gate", FIXTURE, "--baseline", "none", "--allow", "unchecked")
    assert rc == 0


# --- thresholds --------------------------------------------------------------------------------------------

def test_threshold_override_and_marginal_label(tmp_path, capsys, checked_run):
    from cudagraph_bench.results import stats
    key = min(GATED, key=GATED.get)
    eager, graph = bench(DOC, *key, "eager"), bench(DOC, *key, "graph")
    lo, hi = stats.reduction_ci(np.asarray(eager["stats"]["data"]) * 1e3, np.asarray(graph["stats"]["data"]) * 1e3)
    threshold = GATED[key] - 1e-6  # just below this case's reduction: passes, interval straddles it
    assert 100 * lo < threshold < 100 * hi
    rc, out, _ = run_cli(capsys, "gate", checked_run, "--baseline", "none", "--min-reduction", threshold)
    assert rc == 0
    marginal = re.search(r"(\d+) marginal \(([^)]*)\)", out.splitlines()[-1])
    assert marginal and label(key) in marginal.group(2).split(", ")
    rc, out, _ = run_cli(capsys, "gate", checked_run, "--baseline", "none", "--min-reduction", GATED[key] + 1e-6)
    assert rc == 1 and label(key) in out.splitlines()[-1]


def test_max_gated_len_extends_the_gate_to_long_prompts(tmp_path, capsys, checked_run):
    long = {k: v for k, v in RED.items() if k[2] > 128}
    if not long:
        pytest.skip("fixture has no prompt length > 128")
    worst = min(long, key=long.get)
    if not long[worst] < min(GATED.values()):
        pytest.skip("no long prompt reduces latency less than every short one")
    threshold = (long[worst] + min(GATED.values())) / 2
    rc, _, _ = run_cli(capsys, "gate", checked_run, "--baseline", "none", "--min-reduction", threshold)
    assert rc == 0  # long prompts are not gated by default
    rc, out, _ = run_cli(capsys, "gate", checked_run, "--baseline", "none", "--min-reduction", threshold,
                         "--max-gated-len", worst[2])
    assert rc == 1 and f"{label(worst)} reduction" in out.splitlines()[-1]


# --- baseline lookup, independent of the working directory ----------------------------------------------

def test_baseline_from_the_environment_folder_whatever_the_cwd(tmp_path, capsys, baseline, monkeypatch):
    monkeypatch.setenv(paths.BASELINES_ENV, str(baseline.parent))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    tolerances = file_tolerances(baseline)
    assert set(tolerances) == set(RED)
    factor = 1.0 + 2.0 * max(tolerances.values()) / 100.0  # twice the widest case's tolerance
    run = write(scaled(CHECKED, factor, {"graph"}), tmp_path / "slow.json")
    rc, out, err = run_cli(capsys, "gate", run, "--min-reduction", 0)
    assert rc == 1, out + err
    assert f"baseline {baseline} (GPU {GPU}, {len(FACTORS)} runs" in out
    summary = out.splitlines()[-1]
    assert all(f"{label(k)} graph median" in summary for k in RED)
    assert sum("REGRESSION" in " ".join(r) for r in graph_rows(out)) == len(RED)
    # the unscaled run passes against the same baseline, still found from elsewhere
    rc, out, _ = run_cli(capsys, "gate", write(CHECKED, tmp_path / "same.json"))
    assert rc == 0 and f"no graph median regressed beyond its tolerance vs {baseline}" in out


def test_a_baselines_environment_variable_that_names_no_folder_is_a_usage_error(tmp_path, capsys, baseline,
                                                                                 monkeypatch):
    # a typo would otherwise fall back to the checkout's baselines without a word
    missing = tmp_path / "no-such-folder"
    monkeypatch.setenv(paths.BASELINES_ENV, str(missing))
    run = write(CHECKED, tmp_path / "run.json")
    for command in ("gate", "compare"):
        argv = [command, run] if command == "gate" else [command, write({**CHECKED, "datetime": "2030-01-01"},
                                                                       tmp_path / "old.json"), run]
        rc, out, err = run_cli(capsys, *argv)
        assert rc == 2 and out == "" and len(err.splitlines()) == 1
        assert f"${paths.BASELINES_ENV} is {str(missing)!r}, which is not a folder" in err and "unset it" in err
    rc, out, _ = run_cli(capsys, "gate", run, "--baseline", baseline)  # a baseline named explicitly: not looked up
    assert rc == 0, out


def test_baseline_from_the_checkout_baselines_folder(tmp_path, capsys, baseline, monkeypatch):
    checkout = tmp_path / "checkout"
    (checkout / "baselines").mkdir(parents=True)
    (checkout / "baselines" / baseline.name).write_bytes(baseline.read_bytes())
    monkeypatch.delenv(paths.BASELINES_ENV)
    monkeypatch.setattr(paths, "checkout_root", lambda: checkout)
    monkeypatch.chdir(tmp_path / "made")  # a baselines-like folder as cwd must not matter
    factor = 1.0 + 2.0 * max(file_tolerances(baseline).values()) / 100.0
    run = write(scaled(CHECKED, factor, {"graph"}), tmp_path / "slow.json")
    rc, out, _ = run_cli(capsys, "gate", run, "--min-reduction", 0)
    assert rc == 1
    assert f"baseline {checkout / 'baselines' / baseline.name}" in out


def test_a_baseline_in_the_cwd_is_never_picked(tmp_path, capsys, baseline, monkeypatch, no_default_baseline,
                                                checked_run):
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / baseline.name).write_bytes(baseline.read_bytes())
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_cli(capsys, "gate", checked_run)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert f"no baseline for GPU {GPU}: looked in {no_default_baseline / baseline.name}" in err
    assert "--baseline none" in err and "--baseline FILE" in err


def test_no_baseline_anywhere_is_a_usage_error_unless_baseline_none(tmp_path, capsys, monkeypatch, checked_run):
    monkeypatch.delenv(paths.BASELINES_ENV)
    md = tmp_path / "report.md"
    rc, out, err = run_cli(capsys, "gate", checked_run, "--markdown", md)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1 and not md.exists()
    assert f"no baseline for GPU {GPU}: looked in nowhere" in err and "--baseline none" in err
    rc, out, _ = run_cli(capsys, "gate", checked_run, "--baseline", "none")
    assert rc == 0 and out.splitlines()[-1].endswith("--baseline none: regression check skipped")
    assert "no baseline (--baseline none: regression check skipped)" in out.splitlines()[1]


@pytest.mark.parametrize("name", ["decode-checked", "launch"])
def test_a_run_without_forward_benchmarks_and_without_a_gpu_names_what_it_lacks(tmp_path, capsys, name):
    """A run that records no GPU (another tool's pytest-benchmark JSON, here a committed run without its
    machine_info.cuda) and no forward benchmark: the error says what the gate needs, not that no baseline
    exists for GPU "<gpu>"."""
    doc = committed_doc(name)
    assert not any(b["extra_info"].get("suite") == "forward" for b in doc["benchmarks"])
    del doc["machine_info"]["cuda"]
    path = tmp_path / "no-gpu.json"
    path.write_text(json.dumps(doc))
    rc, out, err = run_cli(capsys, "gate", path)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert "has no forward-suite benchmarks" in err and "<gpu>" not in err


def test_a_forward_run_without_a_gpu_asks_for_a_baseline_file(tmp_path, capsys):
    """A forward run that records no GPU cannot pick its GPU's baseline: the one-line error says so and names
    --baseline and --baseline none, not a baseline path with a placeholder GPU."""
    doc = copy_doc(CHECKED)
    del doc["machine_info"]["cuda"]
    rc, out, err = run_cli(capsys, "gate", write(doc, tmp_path / "no-gpu.json"))
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert "records no GPU" in err and "--baseline FILE" in err and "--baseline none" in err and "<gpu>" not in err


# --- several runs ------------------------------------------------------------------------------------------

def test_gate_of_several_runs_uses_the_median_of_run_medians(tmp_path, capsys):
    factors = (1.02, 0.99, 1.05)
    runs = write_runs(tmp_path / "runs", factors)
    rc, out, err = run_cli(capsys, "gate", *runs, "--baseline", "none")
    assert rc == 0, out + err
    assert out.splitlines()[0].startswith(f"runs {', '.join(str(r) for r in runs)}")
    key = ("gpt2", "float32", 16)
    row = next(r for r in graph_rows(out) if r[:3] == [key[0], key[1], str(key[2])])
    assert row[4] == "3"
    assert float(row[6]) == pytest.approx(median_ms(bench(DOC, *key, "graph")) * np.median(factors), abs=1e-3)


def test_a_run_given_twice_is_a_usage_error(tmp_path, capsys, checked_run):
    copy_of_it = tmp_path / "copy.json"
    copy_of_it.write_bytes(checked_run.read_bytes())
    rc, out, err = run_cli(capsys, "gate", checked_run, copy_of_it, "--baseline", "none")
    assert rc == 2 and out == "" and "same run" in err and len(err.splitlines()) == 1


def test_runs_of_different_gpus_are_a_usage_error(tmp_path, capsys, checked_run):
    other = copy_doc(CHECKED)
    other["machine_info"]["cuda"]["gpu_slug"] = "nvidia-a100-sxm4-80gb"
    rc, out, err = run_cli(capsys, "gate", checked_run, write(other, tmp_path / "a100.json"), "--baseline", "none")
    assert rc == 2 and out == "" and "different GPUs" in err and "nvidia-a100-sxm4-80gb" in err


# --- the regression rule -----------------------------------------------------------------------------------

@pytest.mark.parametrize("key", [("gpt2", "float32", 16), ("tinyllama-1.1b", "bfloat16", 128)])
def test_one_run_regresses_beyond_the_tolerance_and_passes_within(tmp_path, capsys, baseline, key):
    spread = expected_spread(key)
    tol = expected_tolerance(spread, len(FACTORS), 1)
    assert tol > noise.DEFAULT_FLOOR_PCT  # the factors make the noise term, not the floor, decide
    case = next(c for c in json.loads(baseline.read_text())["cases"] if (c["model"], c["dtype"], c["seq_len"]) == key)
    assert case["graph"]["spread_pct"] == pytest.approx(spread, abs=1e-3)
    margin = 1.0
    doc = copy_doc(CHECKED)
    scale(bench(doc, *key, "graph"), 1 + (tol + margin) / 100)
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "slow.json"), "--baseline", baseline,
                         "--min-reduction", 0)
    assert rc == 1
    assert out.splitlines()[-1] == (f"gate FAIL: {label(key)} graph median {tol + margin:+.1f}% vs baseline "
                                    f"(tolerance {tol:.1f}%)")
    doc = copy_doc(CHECKED)
    scale(bench(doc, *key, "graph"), 1 + (tol - margin) / 100)
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "ok.json"), "--baseline", baseline,
                         "--min-reduction", 0)
    assert rc == 0, out


def test_a_wider_floor_excuses_the_same_slowdown(tmp_path, capsys, baseline):
    key = ("gpt2", "float32", 50)
    tol = expected_tolerance(expected_spread(key), len(FACTORS), 1)
    doc = copy_doc(CHECKED)
    scale(bench(doc, *key, "graph"), 1 + (tol + 2) / 100)
    run = write(doc, tmp_path / "slow.json")
    rc, _, _ = run_cli(capsys, "gate", run, "--baseline", baseline, "--min-reduction", 0)
    assert rc == 1
    rc, _, _ = run_cli(capsys, "gate", run, "--baseline", baseline, "--min-reduction", 0, "--max-regression", tol + 3)
    assert rc == 0


def test_several_runs_shifted_together_regress_with_the_rank_test(tmp_path, capsys, baseline):
    shift = 1.3
    runs = write_runs(tmp_path / "new", [f * shift for f in FACTORS[::-1]], variants={"graph"})
    key = ("gpt2", "float32", 16)
    old = median_ms(bench(DOC, *key, "graph")) * np.asarray(FACTORS)
    new = old * shift
    p = mannwhitneyu(new, old, alternative="greater").pvalue
    assert p < noise.DEFAULT_ALPHA
    rc, out, _ = run_cli(capsys, "gate", *runs, "--baseline", baseline, "--min-reduction", 0)
    assert rc == 1
    assert f"{label(key)} graph median +30.0% vs baseline" in out.splitlines()[-1]
    assert f"rank p={p:.3f} < {noise.DEFAULT_ALPHA:g}" in out.splitlines()[-1]


def test_several_runs_within_the_noise_pass(tmp_path, capsys, baseline):
    runs = write_runs(tmp_path / "new", [0.98, 1.01, 1.0, 0.99, 1.02])
    rc, out, _ = run_cli(capsys, "gate", *runs, "--baseline", baseline)
    assert rc == 0, out
    assert "REGRESSION" not in out


def test_regression_of_an_ungated_long_case_also_fails(tmp_path, capsys, baseline):
    long = [k for k in RED if k[2] > 128]
    if not long:
        pytest.skip("fixture has no prompt length > 128")
    key = long[0]
    tol = file_tolerances(baseline)[key]
    factor = 1 + 2 * tol / 100
    doc = copy_doc(CHECKED)
    scale(bench(doc, *key, "graph"), factor)
    stored = next(c for c in json.loads(baseline.read_text())["cases"]
                  if (c["model"], c["dtype"], c["seq_len"]) == key)["graph"]["median_ms"]
    change = 100 * (median_ms(bench(DOC, *key, "graph")) * factor / stored - 1)
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "run.json"), "--baseline", baseline)
    assert rc == 1 and f"{label(key)} graph median {change:+.1f}% vs baseline" in out


def test_identical_rerun_passes_against_its_baseline(tmp_path, capsys, baseline):
    doc = copy_doc(CHECKED)
    rng = random.Random(0)
    for b in doc["benchmarks"]:
        rng.shuffle(b["stats"]["data"])  # same rounds, another order: a rerun with identical timings
    random.Random(1).shuffle(doc["benchmarks"])
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "rerun.json"), "--baseline", baseline)
    assert rc == 0, out
    assert f"no graph median regressed beyond its tolerance vs {baseline}" in out
    assert "REGRESSION" not in out


def test_unchanged_graph_medians_show_plus_zero_not_minus_zero(capsys, baseline, checked_run):
    rc, out, _ = run_cli(capsys, "gate", checked_run, "--baseline", baseline)
    assert rc == 0
    rows = graph_rows(out)
    assert len(rows) == len(RED)
    assert [r[-8] for r in rows] == ["+0.0"] * len(RED)


def test_per_case_thresholds_in_the_baseline(tmp_path, capsys, baseline, checked_run):
    key = min(GATED, key=GATED.get)
    doc = json.loads(baseline.read_text())
    case = next(c for c in doc["cases"] if (c["model"], c["dtype"], c["seq_len"]) == key)
    case["min_reduction_pct"] = GATED[key] + 5.0
    write(doc, baseline)
    rc, out, _ = run_cli(capsys, "gate", checked_run, "--baseline", baseline)
    assert rc == 1 and f"{label(key)} reduction {GATED[key]:.1f}% < {GATED[key] + 5.0:g}%" in out
    case["gated"] = False
    write(doc, baseline)
    rc, out, _ = run_cli(capsys, "gate", checked_run, "--baseline", baseline)
    assert rc == 0, out


def test_other_gpu_baseline_is_refused_unless_allowed(tmp_path, capsys, baseline):
    doc = copy_doc(CHECKED)
    doc["machine_info"]["cuda"]["gpu_slug"] = "nvidia-a100-sxm4-80gb"
    doc["machine_info"]["cuda"]["gpu_name"] = "NVIDIA A100-SXM4-80GB"
    run = write(doc, tmp_path / "a100.json")
    md = tmp_path / "report.md"
    rc, out, err = run_cli(capsys, "gate", run, "--baseline", baseline, "--markdown", md)
    assert rc == 2 and out == ""
    assert "--allow gpu-mismatch" in err and "nvidia-a100-sxm4-80gb" in err and len(err.splitlines()) == 1
    assert not md.exists()
    rc, _, _ = run_cli(capsys, "gate", run, "--baseline", baseline, "--allow", "gpu-mismatch")
    assert rc == 0


def test_a_schema_1_baseline_is_refused_in_one_line(tmp_path, capsys, checked_run):
    old = write({"schema_version": 1, "gpu_slug": GPU, "cases": []}, tmp_path / "old.json")
    rc, out, err = run_cli(capsys, "gate", checked_run, "--baseline", old)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert "schema 1" in err and "RUN1 ... RUN5" in err


def test_other_variants_are_shown_but_not_gated(tmp_path, capsys):
    doc = copy_doc(CHECKED)
    key = next(iter(GATED))
    present = {b["extra_info"]["variant"] for b in forward_benches(doc)
               if (b["extra_info"]["model"], b["extra_info"]["dtype"], b["extra_info"]["seq_len"]) == key}
    variant = next(v for v in ("padded", "bucketed", "compile", "compile+graph") if v not in present)
    extra = copy_doc(bench(doc, *key, "eager"))  # as slow as eager: 0% reduction
    extra["extra_info"].update(variant=variant, correct=True, check="strict")
    extra["fullname"] += "-" + variant
    doc["benchmarks"].append(extra)
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "run.json"), "--baseline", "none")
    assert rc == 0, out
    rows = [line.split() for line in out.splitlines() if line.split()[:3] == [key[0], key[1], str(key[2])]]
    assert rows[0][3] == "graph" and variant in [r[3] for r in rows[1:]]
    row = next(r for r in rows if r[3] == variant)
    assert row[8] == "0.0" and row[-1] == "info"   # reduction % (after the wall and device ms)


def _bad_input(tmp_path, case):
    """(path, expected message) of one bad run file."""
    if case == "missing file":
        return tmp_path / "nope.json", "no such file"
    if case == "empty file":
        (tmp_path / "empty.json").write_text("")
        return tmp_path / "empty.json", "is empty"
    if case == "truncated JSON":
        (tmp_path / "trunc.json").write_text(json.dumps(DOC)[:5000])
        return tmp_path / "trunc.json", "not valid JSON"
    if case == "not pytest-benchmark":
        return write({"results": [1, 2]}, tmp_path / "other.json"), "not pytest-benchmark output"
    doc = copy_doc(CHECKED)
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
    rc, out, err = run_cli(capsys, "gate", path, "--baseline", "none", "--markdown", md)
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
    write(CHECKED, tmp_path / ".benchmarks" / "Linux-CPython-3.12-64bit" / "0001_abc_20260101_000000.json")
    monkeypatch.setenv("CUDAGRAPH_BENCH_STORAGE", str(tmp_path / ".benchmarks"))
    rc, out, _ = run_cli(capsys, "gate", "0001", "--baseline", baseline)
    assert rc == 0, out
    rc, _, err = run_cli(capsys, "gate", "0042", "--baseline", "none", "--markdown", md)
    assert rc == 2 and "unknown saved-run id '0042'" in err and "0001" in err
    assert not md.exists()



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


def test_unwritable_markdown_path_is_a_one_line_error(tmp_path, capsys, checked_run):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc, out, err = run_cli(capsys, "gate", checked_run, "--baseline", "none", "--markdown", blocker / "report.md")
    assert rc == 2 and len(err.splitlines()) == 1
    assert "is a file, not a folder" in err and "Traceback" not in err
    rc, out, err = run_cli(capsys, "gate", checked_run, "--baseline", "none", "--markdown", tmp_path)
    assert rc == 2 and len(err.splitlines()) == 1 and f"is a directory: give a file such as {tmp_path / 'gate.md'}" in err
    assert out == ""                                    # refused before the verdict is printed


def _relabel(doc, keep, dtype):
    """Copy of ``doc`` with the forward benchmarks of dtype ``keep`` only, relabelled as ``dtype``."""
    doc = copy_doc(doc)
    doc["benchmarks"] = [b for b in doc["benchmarks"] if b["extra_info"].get("dtype") == keep]
    for b in doc["benchmarks"]:
        b["extra_info"]["dtype"] = dtype
        b["fullname"] = b["fullname"].replace(keep, dtype)
    return doc


def test_a_baseline_holding_no_case_of_the_run_is_a_usage_error(tmp_path, capsys, baseline, monkeypatch):
    relabelled = _relabel(CHECKED, "bfloat16", "float16")  # the baseline holds float32 and bfloat16 only
    run = write(relabelled, tmp_path / "fp16.json")
    n_cases = len(forward_benches(relabelled, "graph"))
    first = min(tuple(b["extra_info"][f] for f in ("model", "dtype", "seq_len"))
                for b in forward_benches(relabelled, "graph"))
    md = tmp_path / "report.md"
    rc, out, err = run_cli(capsys, "gate", run, "--baseline", baseline, "--markdown", md)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1 and not md.exists()
    assert (f"no case of {run} ({n_cases} cases, first {label(first)}) is in baseline {baseline}: regenerate "
            f"the baseline from runs of this matrix (cudagraph-bench baseline RUN... -o {baseline}) "
            "or drop --baseline") in err
    monkeypatch.setenv(paths.BASELINES_ENV, str(baseline.parent))  # picked from the run's GPU
    rc, out, err = run_cli(capsys, "gate", run)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert f"is in baseline {baseline} (picked from the run's GPU): pass --baseline FILE" in err


def test_run_cases_without_a_baseline_entry_are_named_in_the_summary(tmp_path, capsys, baseline, checked_run):
    doc = json.loads(baseline.read_text())
    doc["cases"] = [c for c in doc["cases"] if (c["model"], c["dtype"]) != ("gpt2", "bfloat16")]
    write(doc, baseline)
    dropped = sorted(k for k in RED if k[:2] == ("gpt2", "bfloat16"))
    rc, out, _ = run_cli(capsys, "gate", checked_run, "--baseline", baseline)
    assert rc == 0
    names = ", ".join(label(k) for k in dropped[:3]) + (", ..." if len(dropped) > 3 else "")
    assert out.splitlines()[-1].endswith(
        f"no graph median regressed beyond its tolerance vs {baseline}; {len(dropped)} cases of this run have no "
        f"baseline entry, not checked for regression: {names}")
    run = copy_doc(CHECKED)
    run["benchmarks"] = [b for b in run["benchmarks"] if b["extra_info"]["model"] != "bert-tiny"]
    n_bert = len({k for k in RED if k[0] == "bert-tiny"} - set(dropped))
    # gated cases missing on both sides (renamed cases would look so): a failure naming both, unless allowed
    rc, out, _ = run_cli(capsys, "gate", write(run, tmp_path / "no-bert.json"), "--baseline", baseline)
    assert rc == 1 and out.splitlines()[-1].startswith("gate FAIL: ") and "renamed cases escape" in out
    rc, out, _ = run_cli(capsys, "gate", tmp_path / "no-bert.json", "--baseline", baseline, "--allow", "missing")
    assert rc == 0
    assert (f"no graph median regressed beyond its tolerance vs {baseline} ({n_bert} baseline cases not in this "
            f"run); {len(dropped)} cases of this run have no baseline entry") in out.splitlines()[-1]


def test_a_single_gated_case_is_singular(tmp_path, capsys):
    doc = copy_doc(CHECKED)
    doc["benchmarks"] = [bench(doc, "gpt2", "float32", 16, v) for v in ("eager", "graph")]
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "one.json"), "--baseline", "none")
    assert rc == 0
    line = out.splitlines()[-1]
    assert line.startswith("gate PASS: 1 gated case reaches its threshold")
    assert f"(lowest reduction {RED[('gpt2', 'float32', 16)]:.1f}%: gpt2 float32 L=16)" in line


def test_a_folder_as_baseline_or_run_names_the_file_to_give(tmp_path, capsys, baseline, checked_run):
    rc, out, err = run_cli(capsys, "gate", checked_run, "--baseline", baseline.parent)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert f"--baseline {baseline.parent} is a folder: give a baseline file such as {baseline}" in err
    rc, out, err = run_cli(capsys, "gate", tmp_path, "--baseline", "none")
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert f"{tmp_path} is a folder, not a run JSON: give a run file, e.g. a file written by pytest " \
           "--benchmark-json=FILE" in err
    write(CHECKED, tmp_path / "out" / "run.json")
    rc, _, err = run_cli(capsys, "gate", tmp_path / "out", "--baseline", "none")
    assert rc == 2 and f"give a run file, e.g. {tmp_path / 'out' / 'run.json'}?" in err


def test_saved_run_id_from_another_storage(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(CHECKED, tmp_path / "elsewhere" / "Linux-CPython-3.12-64bit" / "0007_abc_20260101_000000.json")
    monkeypatch.setenv("CUDAGRAPH_BENCH_STORAGE", str(tmp_path / "empty-storage"))
    rc, _, err = run_cli(capsys, "gate", "0007", "--baseline", "none")
    assert rc == 2 and "holds no saved runs" in err
    monkeypatch.setenv("CUDAGRAPH_BENCH_STORAGE", str(tmp_path / "elsewhere"))
    rc, out, _ = run_cli(capsys, "gate", "0007", "--baseline", "none")
    assert rc == 0 and "0007_abc_20260101_000000.json" in out.splitlines()[0]


def test_an_eager_only_cpu_run_says_gating_needs_a_gpu_run(tmp_path, capsys):
    """Whatever made the CPU run (``run --device cpu`` or ``make bench``), the line names the CUDA GPU it lacks."""
    doc = copy_doc(DOC)  # what a --device cpu session writes: eager only, no cuda fingerprint
    doc["machine_info"]["cuda"] = None
    doc["benchmarks"] = [b for b in doc["benchmarks"] if b["extra_info"]["variant"] == "eager"]
    for b in doc["benchmarks"]:
        b["extra_info"]["device"] = "cpu"
    run = write(doc, tmp_path / "cpu" / "run.json")
    rc, out, err = run_cli(capsys, "gate", run)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert (f"{run} has no graph variant (it is a CPU run, which measures eager only: graph replay needs a CUDA "
            "GPU); gating needs a GPU run with eager and graph") in err
    assert "filtering" not in err and "cudagraph-bench run --device cpu" not in err


def test_no_interval_from_fewer_rounds_than_the_bootstrap_minimum(tmp_path, capsys):
    doc = copy_doc(CHECKED)
    for b in forward_benches(doc, "graph"):
        b["stats"]["data"] = b["stats"]["data"][:MIN_BOOTSTRAP_ROUNDS - 1]
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "few.json"), "--baseline", "none")
    rows = graph_rows(out)
    assert rows and all("[" not in " ".join(r) for r in rows)  # no "[low, high]" interval on any graph row
    assert (f"{len(GATED)} gated cases without a 95% interval (fewer than {MIN_BOOTSTRAP_ROUNDS} rounds of "
            "per-round data") in out.splitlines()[-1]


def test_a_run_without_per_round_data_says_so(tmp_path, capsys):
    doc = copy_doc(CHECKED)
    for b in doc["benchmarks"]:
        del b["stats"]["data"]
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "nodata.json"), "--baseline", "none")
    assert rc == 0 and f"{len(GATED)} gated cases without a 95% interval" in out.splitlines()[-1]


def test_the_committed_repeated_runs_gate_with_allow_unchecked(capsys):
    """Real repeated H200 runs of the same code: the older ones recorded no check. The verdict follows the
    reduction of the medians of run medians, computed here from the raw rounds."""
    runs = [committed_run(n) for n in ("forward", "forward-2", "forward-3")]
    docs = [read_json(r) for r in runs]
    medians = {}
    for doc in docs:
        for b in forward_benches(doc):
            i = b["extra_info"]
            medians.setdefault((i["model"], i["dtype"], i["seq_len"], i["variant"]), []).append(median_ms(b))
    red = {k[:3]: 100 * (1 - np.median(medians[(*k[:3], "graph")]) / np.median(v))
           for k, v in medians.items() if k[3] == "eager"}
    below = sorted(k for k, v in red.items() if k[2] <= 128 and v < 30)
    rc, out, _ = run_cli(capsys, "gate", *runs, "--baseline", "none")
    assert rc == 1 and "recorded no correctness check" in out.splitlines()[-1]
    rc, out, _ = run_cli(capsys, "gate", *runs, "--baseline", "none", "--allow", "unchecked")
    assert rc == (1 if below else 0)
    assert "correctness check" not in out.splitlines()[-1]
    lowest = min((k for k in red if k[2] <= 128), key=red.get)
    if not below:
        assert f"lowest reduction {red[lowest]:.1f}%: {label(lowest)}" in out.splitlines()[-1]


@pytest.mark.parametrize("empty", ["", " "])
def test_an_empty_markdown_path_is_a_usage_error(tmp_path, capsys, monkeypatch, empty):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        cli_main(["gate", str(FIXTURE), "--markdown", empty])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and out == "" and len(err.splitlines()) == 1
    assert "argument --markdown: expected a path, got an empty string" in err
    assert list(p.name for p in tmp_path.iterdir()) == ["no-baselines"]


def fake_confirm_runs(monkeypatch, factor):
    """Replace the pytest process of :func:`cudagraph_bench.runner.process.run_pytest` with a writer of the
    fixture's selected benchmarks, graph scaled by ``factor``; returns the list of (selected node ids, cwd) of
    each call."""
    from cudagraph_bench.runner import process

    calls = []

    def run_process(cmd, cwd, env, log):
        json_path = Path(next(a.split("=", 1)[1] for a in cmd if a.startswith("--benchmark-json=")))
        selected = [a for a in cmd if "::" in a]
        calls.append((selected, Path(cwd), list(cmd)))
        doc = scaled(CHECKED, factor, {"graph"})
        doc["benchmarks"] = [b for b in doc["benchmarks"] if b["fullname"] in selected]
        write(doc, json_path)
        log.write("fake run\n")
        return 0

    monkeypatch.setattr(process, "run_process", run_process)
    return calls


@pytest.mark.parametrize("rerun_factor, expect_rc", [(1.0, 0), (None, 1)])
def test_confirm_reruns_only_the_regressed_cases_and_judges_all_runs(tmp_path, capsys, baseline, monkeypatch,
                                                                     rerun_factor, expect_rc):
    key = max(GATED, key=lambda k: GATED[k])  # any gated case; the one with the most room above 30%
    tol = file_tolerances(baseline)[key]
    slow = 1.0 + 2.0 * tol / 100.0  # twice the tolerance: one run regresses on the ratio alone
    doc = copy_doc(CHECKED)
    scale(bench(doc, *key, "graph"), slow)
    run = write(doc, tmp_path / "ci" / "run.json")
    calls = fake_confirm_runs(monkeypatch, rerun_factor or slow)
    rc, out, err = run_cli(capsys, "gate", run, "--baseline", baseline, "--confirm", 4)
    assert rc == expect_rc, out + err
    names = {bench(doc, *key, v)["fullname"] for v in ("eager", "graph")}
    assert len(calls) == 4 and all(set(sel) == names for sel, _, _ in calls)  # eager and graph of that case only
    model, dtype, length = key      # the rerun's matrix: that case's model, dtype and length, the gated pair
    matrix = ["--variants", "eager,graph", "--models", model, "--prompt-lengths", str(length), "--dtypes", dtype]
    assert all(cmd[cmd.index("--variants"):][:len(matrix)] == matrix for _, _, cmd in calls), " ".join(calls[0][2])
    assert all((tmp_path / "ci" / f"run.confirm-{i}.json").is_file() for i in range(1, 5))
    verdict = "regression confirmed" if expect_rc else "not confirmed"
    assert f"after 4 of 4 confirmation reruns of the regressed cases: {verdict}" in out
    if expect_rc:  # five slow runs against five baseline runs: the rank test took part and agrees
        p = mannwhitneyu([median_ms(bench(doc, *key, "graph"))] * 5,
                         median_ms(bench(DOC, *key, "graph")) * np.asarray(FACTORS), alternative="greater").pvalue
        assert p < 0.05 and f"{label(key)} graph median" in out


@pytest.mark.parametrize("earlier", ["file", "dangling link"])
def test_confirm_never_overwrites_earlier_confirmation_runs(tmp_path, capsys, baseline, monkeypatch, earlier):
    key = next(iter(GATED))
    doc = copy_doc(CHECKED)
    scale(bench(doc, *key, "graph"), 1.0 + 2.0 * file_tolerances(baseline)[key] / 100.0)
    run = write(doc, tmp_path / "run.json")
    if earlier == "file":
        (tmp_path / "run.confirm-2.json").write_text("{}")
    else:                                   # a rerun would write through it, to wherever it points
        (tmp_path / "run.confirm-2.json").symlink_to(tmp_path / "elsewhere.json")
    calls = fake_confirm_runs(monkeypatch, 1.0)
    rc, _, err = run_cli(capsys, "gate", run, "--baseline", baseline, "--confirm", 3)
    assert rc == 2 and "run.confirm-2.json exists" in err and not calls
    assert not (tmp_path / "elsewhere.json").exists()


@pytest.mark.parametrize("whose", ["user", "tool"])
def test_confirm_replaces_only_the_logs_of_its_own_reruns(tmp_path, capsys, baseline, monkeypatch, whose):
    """A rerun's log, journal and attempts are replaced or removed by the rerun: the user's file of that name is
    refused untouched, while the log of an earlier failed rerun (no JSON) is simply replaced."""
    from cudagraph_bench.fsio import LOG_HEADER

    key = next(iter(GATED))
    doc = copy_doc(CHECKED)
    scale(bench(doc, *key, "graph"), 1.0 + 2.0 * file_tolerances(baseline)[key] / 100.0)
    run = write(doc, tmp_path / "run.json")
    text = "my notes on the last gate\n" if whose == "user" else f"{LOG_HEADER} run.confirm-1.json\n2 skipped\n"
    (tmp_path / "run.confirm-1.log").write_text(text)
    calls = fake_confirm_runs(monkeypatch, 1.0)
    rc, _, err = run_cli(capsys, "gate", run, "--baseline", baseline, "--confirm", 2)
    if whose == "user":
        assert rc == 2 and not calls and "run.confirm-1.log is no file of a cudagraph-bench rerun" in err
        assert (tmp_path / "run.confirm-1.log").read_text() == text
    else:
        assert rc in (0, 1) and calls and "Traceback" not in err


def test_confirm_does_not_rerun_when_a_check_failed(tmp_path, capsys, baseline, monkeypatch):
    key = next(iter(GATED))
    doc = copy_doc(CHECKED)
    b = bench(doc, *key, "graph")
    scale(b, 1.0 + 2.0 * file_tolerances(baseline)[key] / 100.0)
    b["extra_info"].update(correct=False, max_abs_diff=3.5)
    calls = fake_confirm_runs(monkeypatch, 1.0)
    rc, out, _ = run_cli(capsys, "gate", write(doc, tmp_path / "run.json"), "--baseline", baseline, "--confirm", 3)
    assert rc == 1 and not calls and "failed its correctness check" in out


def test_confirm_with_no_successful_rerun_keeps_the_regression_and_says_so(tmp_path, capsys, baseline, monkeypatch):
    from cudagraph_bench.runner import process

    key = next(iter(GATED))
    doc = copy_doc(CHECKED)
    scale(bench(doc, *key, "graph"), 1.0 + 2.0 * file_tolerances(baseline)[key] / 100.0)
    run = write(doc, tmp_path / "run.json")

    def run_process(cmd, cwd, env, log):  # pytest on a machine without a GPU: every benchmark skipped, no JSON
        log.write("2 skipped\n")
        return 0

    monkeypatch.setattr(process, "run_process", run_process)
    rc, out, err = run_cli(capsys, "gate", run, "--baseline", baseline, "--confirm", 2)
    assert rc == 1 and "none of the 2 confirmation reruns produced a run" in out and "unconfirmed" in out
    assert "regression confirmed" not in out
    assert all(f"confirmation run run.confirm-{i}.json FAILED" in err for i in (1, 2)) and "no JSON written" in err
    assert "2 skipped" in (tmp_path / "run.confirm-1.log").read_text()


def test_renamed_gated_cases_fail_the_gate_unless_allowed(tmp_path, capsys):
    """Gated cases of the baseline missing from the run while gated cases of the run have no baseline entry (a
    model renamed): the regression check would see neither, so the gate fails naming both, unless --allow missing.
    A run of a part of the baseline's matrix (nothing new) passes as before."""
    doc = committed_doc("forward-repeat")
    part = [b for b in doc["benchmarks"] if b["extra_info"]["model"] == "bert-tiny" and b["extra_info"]["seq_len"] < 128]
    subset = write({**doc, "benchmarks": part}, tmp_path / "subset.json")
    renamed = copy_doc(part)
    for b in renamed:
        if b["extra_info"]["seq_len"] == 50:
            b["extra_info"]["model"] = "bert-tiny-v2"
    moved = write({**doc, "benchmarks": renamed}, tmp_path / "renamed.json")
    baseline = str(Path(__file__).resolve().parents[1] / "baselines" / "nvidia-h200.json")
    assert cli_main(["gate", str(subset), "--baseline", baseline]) == 0
    assert "renamed cases" not in capsys.readouterr().out.splitlines()[-1]
    assert cli_main(["gate", str(moved), "--baseline", baseline]) == 1
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith("gate FAIL: ") and "gated baseline cases not in this run (bert-tiny bfloat16 L=50" in line
    assert "2 gated cases of this run have no baseline entry (bert-tiny-v2 bfloat16 L=50" in line
    assert "or pass --allow missing" in line
    assert cli_main(["gate", str(moved), "--baseline", baseline, "--allow", "missing"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("renamed cases escape the regression check; rebuild "
                                                             "the baseline for the new names (--allow missing: not "
                                                             "failed)")
