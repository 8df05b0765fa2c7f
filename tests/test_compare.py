"""``cudagraph-bench compare OLD NEW`` / ``--old RUN... --new RUN...``: per-benchmark change of the median
of run medians against a tolerance calibrated on between-run noise; exit 1 on a regression, a check that
went from pass to fail, or a gated benchmark lost in NEW. Expectations are computed here from the
fixture's rounds, the factors the tests apply, and scipy."""

import copy
import json
import random
from datetime import datetime, timedelta

import numpy as np
import pytest
from scipy.stats import mannwhitneyu, median_abs_deviation, t

from cudagraph_bench.results import noise
from cudagraph_bench import paths

from h200_fixture import (copy_doc, DOC, FIXTURE, bench, checked, committed_doc, committed_run, forward_benches,
                          median_ms,
                          no_default_baseline_fixture, plain_copy, read_json, run_cli, scale, scaled, write,
                          write_runs)

pytestmark = pytest.mark.transformers_free

GPU = DOC["machine_info"]["cuda"]["gpu_slug"]
CHECKED = checked(DOC)
FLOOR = noise.DEFAULT_FLOOR_PCT


@pytest.fixture(autouse=True)
def no_default_baseline(tmp_path, monkeypatch):
    return no_default_baseline_fixture(tmp_path, monkeypatch)


def forward_label(b):
    i = b["extra_info"]
    return f"{i['model']} {i['dtype']} L={i['seq_len']} {i['variant']}"


def row_of(out, label):
    """The table line of one benchmark (labels like 'gpt2 ...' are substrings of 'distilgpt2 ...')."""
    return next(line for line in out.splitlines() if f" {label} " in line)


def n_benchmarks(doc):
    return len(doc["benchmarks"])


@pytest.fixture
def old(tmp_path):
    return write(CHECKED, tmp_path / "old.json")


def test_identical_measurements_pass(tmp_path, capsys, old):
    md = tmp_path / "cmp.md"
    same = write({**CHECKED, "datetime": "2030-01-01T00:00:00"}, tmp_path / "same-measurements.json")
    rc, out, _ = run_cli(capsys, "compare", old, same, "--markdown", md)
    assert rc == 0
    assert f"compare PASS: {n_benchmarks(DOC)} benchmarks in both, no gated one slower beyond its tolerance" in out
    assert "REGRESSION" not in out
    text = md.read_text()
    assert text.startswith("## cudagraph-bench compare: PASS") and "| suite | benchmark |" in text


def test_regression_beyond_the_floor_fails_and_names_the_benchmark(tmp_path, capsys, old):
    new = copy_doc(CHECKED)
    victim = random.Random(0).choice(forward_benches(new, "graph"))
    scale(victim, 1.15)
    path = write(new, tmp_path / "new.json")
    rc, out, _ = run_cli(capsys, "compare", old, path)
    assert rc == 1
    assert (f"compare FAIL: 1 of {n_benchmarks(DOC)} benchmarks slower beyond their tolerance: "
            f"{forward_label(victim)} (+15.0% > {FLOOR:.1f}%)") in out
    row = row_of(out, forward_label(victim))
    assert "+15.0" in row and row.rstrip().endswith("REGRESSION")
    rc, out, _ = run_cli(capsys, "compare", old, path, "--max-regression", 16)
    assert rc == 0 and "+15.0" in row_of(out, forward_label(victim))


def test_a_change_within_the_floor_passes(tmp_path, capsys, old):
    new = copy_doc(CHECKED)
    victim = bench(new, "gpt2", "float32", 16, "graph")
    scale(victim, 1 + (FLOOR - 1) / 100)
    rc, out, _ = run_cli(capsys, "compare", old, write(new, tmp_path / "new.json"))
    assert rc == 0 and row_of(out, forward_label(victim)).rstrip().endswith("ok")


def test_a_slower_reference_variant_is_reported_not_failed(tmp_path, capsys, old):
    new = copy_doc(CHECKED)
    eager = forward_benches(new, "eager")[0]
    scale(eager, 1.5)
    path = write(new, tmp_path / "new.json")
    rc, out, _ = run_cli(capsys, "compare", old, path)
    assert rc == 0 and row_of(out, forward_label(eager)).rstrip().endswith("slower (reference)")
    rc, out, _ = run_cli(capsys, "compare", old, path, "--gate-references")
    assert rc == 1 and row_of(out, forward_label(eager)).rstrip().endswith("REGRESSION")


def test_faster_and_noise_are_not_failures(tmp_path, capsys, old):
    new = copy_doc(CHECKED)
    faster = forward_benches(new)[0]
    scale(faster, 0.7)
    rng = random.Random(1)
    for b in new["benchmarks"]:
        if b is not faster:
            rng.shuffle(b["stats"]["data"])
    rc, out, _ = run_cli(capsys, "compare", old, write(new, tmp_path / "new.json"))
    assert rc == 0
    row = row_of(out, forward_label(faster))
    assert "-30.0" in row and row.rstrip().endswith("faster")


# --- correctness --------------------------------------------------------------------------------------------

def test_a_check_that_went_from_pass_to_fail_fails_and_is_named(tmp_path, capsys, old):
    new = copy_doc(CHECKED)
    victim = bench(new, "gpt2", "float32", 16, "graph")
    victim["extra_info"].update(correct=False, max_abs_diff=3.5)
    path = write(new, tmp_path / "new.json")
    rc, out, _ = run_cli(capsys, "compare", old, path)
    assert rc == 1
    line = out.splitlines()[-1]
    assert line.startswith("compare FAIL: 1 benchmark failed a correctness check that passed before: "
                           "gpt2 float32 L=16 graph (") and "3.5" in line
    assert "WRONG (check pass -> fail)" in row_of(out, "gpt2 float32 L=16 graph")
    # wrong on both sides: still a wrong result in NEW, which fails the comparison
    again = write({**new, "datetime": "2030-01-01T00:00:00"}, tmp_path / "new-again.json")  # a separate run
    rc, out, _ = run_cli(capsys, "compare", path, again)
    assert rc == 1 and "WRONG (in OLD and NEW)" in row_of(out, "gpt2 float32 L=16 graph")
    assert "1 benchmark failed a correctness check in NEW, as in OLD: gpt2 float32 L=16 graph (" in out.splitlines()[-1]


# --- several runs per side ------------------------------------------------------------------------------

OLD_FACTORS = (0.98, 1.0, 1.02, 0.99, 1.01)


def _pooled_spread(groups):
    residuals = np.concatenate([np.log(g) - np.median(np.log(g)) for g in groups])
    n, k = residuals.size, len(groups)
    return 100 * median_abs_deviation(residuals, scale="normal") * np.sqrt(n / (n - k))


def t_multiplier(df):
    """Student's t quantile (one-sided tail 0.001) the spread is multiplied by, for its degrees of freedom."""
    return t.ppf(1 - 0.001, max(df, 1))


def test_five_against_five_a_clear_shift_regresses_with_the_rank_test(tmp_path, capsys):
    new_factors = (1.01, 0.99, 1.0, 1.02, 0.98)
    key = ("gpt2", "float32", 16)
    m = median_ms(bench(DOC, *key, "graph"))
    a = m * np.asarray(OLD_FACTORS)
    # the pooled spread does not depend on a common shift; its degrees of freedom are (5 - 1) + (5 - 1)
    tol = max(FLOOR, t_multiplier(8) * _pooled_spread([a, m * np.asarray(new_factors)]) * np.sqrt(1 / 5 + 1 / 5))
    shift = 1 + 2 * tol / 100  # twice the tolerance: a clear shift
    olds = write_runs(tmp_path / "old", OLD_FACTORS, prefix="base")
    news = write_runs(tmp_path / "new", [f * shift for f in new_factors], prefix="head", variants={"graph"})
    b = m * shift * np.asarray(new_factors)
    assert _pooled_spread([a, b]) == pytest.approx(_pooled_spread([a, m * np.asarray(new_factors)]), rel=1e-9)
    p = mannwhitneyu(b, a, alternative="greater").pvalue
    change = 100 * (np.median(b) / np.median(a) - 1)
    assert p < noise.DEFAULT_ALPHA and change > tol
    rc, out, _ = run_cli(capsys, "compare", "--old", *olds, "--new", *news)
    assert rc == 1
    row = row_of(out, "gpt2 float32 L=16 graph").split()
    assert row[5:8] == ["5", "->", "5"]
    assert row[-1] == "REGRESSION" and f"{p:.3f}" in row and f"{tol:.1f}" in row and f"{change:+.1f}" in row
    assert f"gpt2 float32 L=16 graph ({change:+.1f}% > {tol:.1f}%)" in out.splitlines()[-1]
    # eager was not shifted: unchanged within noise
    assert row_of(out, "gpt2 float32 L=16 eager").rstrip().endswith("ok")


def test_five_against_five_within_the_noise_passes(tmp_path, capsys):
    olds = write_runs(tmp_path / "old", OLD_FACTORS, prefix="base")
    news = write_runs(tmp_path / "new", (1.015, 0.985, 1.005, 0.995, 1.025), prefix="head")
    rc, out, _ = run_cli(capsys, "compare", "--old", *olds, "--new", *news)
    assert rc == 0, out
    assert "REGRESSION" not in out and out.splitlines()[-1].startswith("compare PASS")


def test_a_shift_beyond_the_tolerance_that_the_rank_test_rejects_is_marginal(tmp_path, capsys):
    """The median moves beyond the tolerance but the NEW runs interleave with the OLD ones: not significant."""
    old_f, new_f = (1.0, 1.01, 1.02, 1.5, 1.6), (0.9, 0.95, 1.12, 1.13, 1.14)
    key = ("gpt2", "float32", 16)
    m = median_ms(bench(DOC, *key, "graph"))
    a, b = m * np.asarray(old_f), m * np.asarray(new_f)
    p = mannwhitneyu(b, a, alternative="greater").pvalue
    change = 100 * (np.median(b) / np.median(a) - 1)
    tol = max(FLOOR, t_multiplier(8) * _pooled_spread([a, b]) * np.sqrt(2 / 5))  # df (5 - 1) + (5 - 1)
    assert p >= noise.DEFAULT_ALPHA and change > tol
    olds = write_runs(tmp_path / "old", old_f, prefix="base")
    news = write_runs(tmp_path / "new", new_f, prefix="head")
    rc, out, _ = run_cli(capsys, "compare", "--old", *olds, "--new", *news)
    row = row_of(out, "gpt2 float32 L=16 graph")
    assert f"{p:.3f}" in row.split() and f"{tol:.1f}" in row.split() and f"{change:+.1f}" in row.split()
    assert row.rstrip().endswith("marginal") and "REGRESSION" not in row
    assert rc == 0 and out.splitlines()[-1].startswith("compare PASS")


def test_one_run_on_each_side_decides_on_the_ratio_alone(tmp_path, capsys, old):
    new = scaled(CHECKED, 1.0 + (FLOOR + 1) / 100, {"graph"})
    rc, out, _ = run_cli(capsys, "compare", old, write(new, tmp_path / "new.json"))
    assert rc == 1
    row = row_of(out, "gpt2 float32 L=16 graph").split()
    assert row[5:8] == ["1", "->", "1"] and row[-5] == "-"  # no rank p for one run against one


def test_the_gpu_baseline_sets_the_tolerance_when_found(tmp_path, capsys, old, monkeypatch):
    base_factors = (0.96, 0.98, 1.0, 1.02, 1.04)
    runs = write_runs(tmp_path / "base-runs", base_factors)
    folder = tmp_path / "found"
    assert run_cli(capsys, "baseline", *runs, "-o", folder / f"{GPU}.json")[0] == 0
    key = ("gpt2", "float32", 16)
    medians = median_ms(bench(DOC, *key, "graph")) * np.asarray(base_factors)
    spread = 100 * median_abs_deviation(np.log(medians), scale="normal")
    tol = max(FLOOR, t_multiplier(len(base_factors) - 1) * spread * np.sqrt(2))  # the baseline's k - 1 df
    assert tol > FLOOR + 2
    new = copy_doc(CHECKED)
    scale(bench(new, *key, "graph"), 1 + (FLOOR + tol) / 2 / 100)  # beyond the floor, within the baseline's
    path = write(new, tmp_path / "new.json")
    rc, out, _ = run_cli(capsys, "compare", old, path)
    assert rc == 1  # no baseline found: the floor decides
    monkeypatch.setenv(paths.BASELINES_ENV, str(folder))
    rc, out, _ = run_cli(capsys, "compare", old, path)
    assert rc == 0, out
    assert f"noise model: {folder / (GPU + '.json')}" in out.splitlines()[0]
    assert f"{tol:.1f}" in row_of(out, "gpt2 float32 L=16 graph").split()
    rc, out, _ = run_cli(capsys, "compare", old, path, "--baseline", folder / f"{GPU}.json")
    assert rc == 0


# --- missing and disjoint benchmarks, usage errors ----------------------------------------------------------

def _without(doc, label):
    out = copy_doc(doc)
    out["benchmarks"] = [b for b in out["benchmarks"]
                         if not (b["extra_info"].get("suite") == "forward" and forward_label(b) == label)]
    assert len(out["benchmarks"]) == len(doc["benchmarks"]) - 1
    return out


def test_a_gated_benchmark_missing_in_new_fails_unless_allowed(tmp_path, capsys, old):
    new = _without(CHECKED, "gpt2 float32 L=50 graph")
    extra = copy_doc(bench(new, "gpt2", "float32", 50, "eager"))
    extra["extra_info"]["seq_len"] = 77
    new["benchmarks"].append(extra)
    path = write(new, tmp_path / "new.json")
    md = tmp_path / "cmp.md"
    rc, out, _ = run_cli(capsys, "compare", old, path, "--markdown", md)
    assert rc == 1
    line = out.splitlines()[-1]
    assert line.startswith("compare FAIL: ")
    assert line.endswith("; 1 gated benchmark of OLD missing in NEW (--allow missing to accept): "
                         "gpt2 float32 L=50 graph; 1 only in OLD; 1 only in NEW")
    assert "missing in NEW (--allow missing to accept): gpt2 float32 L=50 graph" in md.read_text()
    rc, out, _ = run_cli(capsys, "compare", old, path, "--allow", "missing")
    assert rc == 0
    assert "1 gated benchmark of OLD missing in NEW, allowed by --allow missing: gpt2 float32 L=50 graph" in out


def test_several_missing_gated_benchmarks_are_each_named_and_a_regression_still_fails(tmp_path, capsys, old):
    new = _without(_without(CHECKED, "gpt2 float32 L=50 graph"), "bert-tiny float32 L=16 graph")
    scale(bench(new, "gpt2", "float32", 16, "graph"), 1.5)
    path = write(new, tmp_path / "new.json")
    rc, out, _ = run_cli(capsys, "compare", old, path)
    assert rc == 1
    line = out.splitlines()[-1]
    assert line.startswith(f"compare FAIL: 1 of {n_benchmarks(DOC) - 2} benchmarks slower beyond their tolerance: "
                           "gpt2 float32 L=16 graph (+50.0%")
    assert ("; 2 gated benchmarks of OLD missing in NEW (--allow missing to accept): bert-tiny float32 L=16 graph, "
            "gpt2 float32 L=50 graph; 2 only in OLD") in line
    rc, _, _ = run_cli(capsys, "compare", old, path, "--allow", "missing")
    assert rc == 1  # the regression still fails


def test_a_missing_graph_benchmark_is_gated_only_where_the_gate_gates_its_case(tmp_path, capsys, old):
    """compare calls a missing benchmark gated by the gate's own rule: a graph benchmark of a case the gate leaves
    ungated (a long prompt) missing in NEW is only counted; one of a case the gate gates fails, named."""
    from cudagraph_bench.results.gate import evaluate
    from cudagraph_bench.results.runfile import load_run

    verdicts = [v for v in evaluate(load_run(str(old))) if v.variant == "graph"]
    gated, free = next(v for v in verdicts if v.gated), next(v for v in verdicts if not v.gated)
    assert free.seq_len > max(v.seq_len for v in verdicts if v.gated)

    def label(v):
        return f"{v.model} {v.dtype} L={v.seq_len} graph"
    rc, out, _ = run_cli(capsys, "compare", old, write(_without(CHECKED, label(free)), tmp_path / "free.json"))
    assert rc == 0 and out.splitlines()[-1].endswith("; 1 only in OLD") and "missing in NEW" not in out
    both = write(_without(_without(CHECKED, label(free)), label(gated)), tmp_path / "both.json")
    rc, out, _ = run_cli(capsys, "compare", old, both)
    assert rc == 1 and out.splitlines()[-1].endswith(
        f"; 1 gated benchmark of OLD missing in NEW (--allow missing to accept): {label(gated)}; 2 only in OLD")


def test_a_missing_reference_is_counted_and_gated_only_with_gate_references(tmp_path, capsys, old):
    path = write(_without(CHECKED, "gpt2 float32 L=50 eager"), tmp_path / "new.json")
    rc, out, _ = run_cli(capsys, "compare", old, path)
    assert rc == 0 and out.splitlines()[-1].endswith("; 1 only in OLD") and "missing in NEW" not in out
    rc, out, _ = run_cli(capsys, "compare", old, path, "--gate-references")
    assert rc == 1
    assert out.splitlines()[-1].endswith("; 1 gated benchmark of OLD missing in NEW (--allow missing to accept): "
                                         "gpt2 float32 L=50 eager; 1 only in OLD")


def _suites_doc():
    """A run with decode, launch and plain (non-cudagraph-bench) benchmarks, built from real rounds."""
    doc = copy_doc(DOC)
    src = doc["benchmarks"][:3]
    decode, launch, plain = (copy_doc(b) for b in src)
    decode["extra_info"] = {"suite": "decode", "model": "gpt2", "dtype": "float32", "seq_len": 3,
                            "new_tokens": 7, "variant": "graph", "ms_per_token": 1.0, "tokens_per_s": 1000.0}
    launch["extra_info"] = {"suite": "launch", "n_launches": 7, "variant": "loop", "us_per_launch": 5.0}
    plain["extra_info"] = {}
    plain["fullname"] = "perf_tests/test_misc.py::test_something"
    doc["benchmarks"] = [decode, launch, plain]
    return doc


def test_decode_launch_and_plain_benchmarks_are_keyed(tmp_path, capsys):
    old = _suites_doc()
    new = copy_doc(old)
    scale(new["benchmarks"][0], 1.5)
    rc, out, _ = run_cli(capsys, "compare", write(old, tmp_path / "old.json"), write(new, tmp_path / "new.json"))
    assert rc == 1
    assert "gpt2 float32 L=3 +7 graph (+50.0%" in out
    assert "launch n=7 loop" in out and "perf_tests/test_misc.py::test_something" in out
    assert f"compare FAIL: 1 of {len(new['benchmarks'])} benchmarks slower beyond their tolerance" in out


def test_runs_with_no_benchmark_in_common_are_a_usage_error(tmp_path, capsys, old):
    rc, out, err = run_cli(capsys, "compare", old, write(_suites_doc(), tmp_path / "other.json"))
    assert rc == 2 and out == "" and "share no benchmark" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("form", ["both forms", "old only", "new only", "one positional", "three positionals"])
def test_malformed_argument_forms_are_usage_errors(tmp_path, capsys, old, form):
    other = write(scaled(CHECKED, 1.01), tmp_path / "other.json")
    argv = {"both forms": [old, other, "--old", old, "--new", other],
            "old only": ["--old", old, other],
            "new only": ["--new", old, other],
            "one positional": [old],
            "three positionals": [old, other, old]}[form]
    rc, out, err = run_cli(capsys, "compare", *argv)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert ("OLD NEW" in err) or ("--old" in err)
    if form in ("old only", "new only"):  # the message names the side that is missing
        assert f"{'--new' if form == 'old only' else '--old'} is missing" in err


@pytest.mark.parametrize("other_gpu", ["nvidia-a100-sxm4-80gb", None])
def test_runs_of_different_gpus_are_refused_unless_allowed(tmp_path, capsys, old, other_gpu):
    """A run of another GPU, or one that recorded no GPU, is not compared (the verdict would be the hardware's)
    unless --allow gpu-mismatch; then the table says so."""
    other = copy_doc(CHECKED)
    if other_gpu:
        other["machine_info"]["cuda"]["gpu_slug"] = other_gpu
    else:
        del other["machine_info"]["cuda"]
    new = write(other, tmp_path / "other-gpu.json")
    md = tmp_path / "cmp.md"
    rc, out, err = run_cli(capsys, "compare", old, new, "--markdown", md)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1 and not md.exists()
    assert "different GPUs" in err and (other_gpu or "no GPU") in err and "--allow gpu-mismatch" in err
    rc, out, _ = run_cli(capsys, "compare", old, new, "--allow", "gpu-mismatch")
    assert rc == 0 and "note: the runs are from different GPUs" in out


def test_one_run_as_both_old_and_new_is_a_usage_error(tmp_path, capsys, old):
    # a compare of a run with itself cannot fail: a typo in a CI script would pass for ever
    copy = tmp_path / "copy.json"
    copy.write_bytes(old.read_bytes())
    for new in (old, copy):
        rc, out, err = run_cli(capsys, "compare", old, new)
        assert rc == 2 and out == "" and len(err.splitlines()) == 1
        assert f"OLD {old} and NEW {new} are the same run" in err and "compare separate runs" in err
    later = write({**CHECKED, "datetime": "2029-01-01T00:00:00"}, tmp_path / "later-copy.json")
    for argv in (["--old", old, "--new", copy], ["--old", old, later, "--new", later, copy]):  # the same runs
        rc, out, err = run_cli(capsys, "compare", *argv)
        assert rc == 2 and out == "" and len(err.splitlines()) == 1 and "cannot fail" in err
    # groups of separate runs that share one are compared, with a note
    later = write({**CHECKED, "datetime": "2030-01-01T00:00:00"}, tmp_path / "later.json")
    write({**CHECKED, "datetime": "2031-01-01T00:00:00"}, tmp_path / "last.json")
    rc, out, _ = run_cli(capsys, "compare", "--old", old, later, "--new", later, tmp_path / "last.json")
    assert rc == 0 and "note: OLD and NEW share 1 of their runs, which cannot change" in out


def test_a_run_given_twice_on_one_side_is_a_usage_error(tmp_path, capsys, old):
    other = write(scaled(CHECKED, 1.01), tmp_path / "other.json")
    rc, out, err = run_cli(capsys, "compare", "--old", old, old, "--new", other)
    assert rc == 2 and out == "" and "same run" in err


def one_sessions_files(doc, folder):
    """The two files pytest-benchmark writes for one session of ``doc``: ``--benchmark-json`` (``doc`` as it is,
    compact) and the autosave under ``folder/.benchmarks`` (another layout, its own ``datetime`` a moment later,
    no rounds without ``--benchmark-save-data``, a hook's clock reading later). Returns ``(json file, storage)``."""
    gap = timedelta(milliseconds=20)
    autosave = copy_doc(doc)
    autosave["datetime"] = (datetime.fromisoformat(doc["datetime"]) + gap).isoformat()
    for b in autosave["benchmarks"]:
        del b["stats"]["data"]
    doc = copy_doc(doc)
    doc.setdefault("cudagraph_bench", {})["wall_s"] = 1.0
    autosave.setdefault("cudagraph_bench", {})["wall_s"] = 1.0 + gap.total_seconds()
    storage = folder / ".benchmarks"
    saved = storage / "Linux-CPython-3.12-64bit" / "0001_aaaa_20261129_111454.json"
    saved.parent.mkdir(parents=True)
    saved.write_text(json.dumps(autosave, indent=4))
    return write(doc, folder / "bench.json"), storage


def test_the_json_file_and_the_autosave_of_one_session_are_the_same_run(tmp_path, capsys, monkeypatch):
    """A session's --benchmark-json file and its autosave differ in a few bytes but are one run: compare refuses
    them (it could not fail), on one side or across; a run of another session still compares."""
    doc = committed_doc("forward")
    bench_json, storage = one_sessions_files(doc, tmp_path)
    monkeypatch.setenv("CUDAGRAPH_BENCH_STORAGE", str(storage))
    n = n_benchmarks(doc)
    for argv in (["0001", bench_json], ["--old", bench_json, "--new", "0001"]):
        rc, out, err = run_cli(capsys, "compare", *argv)
        assert rc == 2 and out == "" and len(err.splitlines()) == 1
        assert f"are the same run (one session's two files: the same {n} benchmarks and statistics" in err
        assert "a comparison of a run with itself cannot fail" in err
    rc, out, err = run_cli(capsys, "compare", "--old", "0001", bench_json, "--new", bench_json)
    assert rc == 2 and out == "" and "are the same run (one session's two files" in err
    assert "give each separate run once" in err
    # another session: other statistics, the same statistics stamped later, or (against the file that holds the
    # rounds) the same statistics of rounds in another order
    reordered = copy_doc(doc)
    reordered["benchmarks"][0]["stats"]["data"].reverse()
    later = {**doc, "datetime": (datetime.fromisoformat(doc["datetime"]) + timedelta(hours=1)).isoformat()}
    for name, old, other in (("slower", "0001", scaled(doc, 1.01)), ("later", "0001", later),
                             ("reordered", bench_json, reordered)):
        new = write(other, tmp_path / f"{name}.json")
        rc, out, err = run_cli(capsys, "compare", old, new)
        assert rc in (0, 1) and "same run" not in err and f"{n} benchmarks in both" in out, name


def test_saved_run_ids_from_storage(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    slower = scaled(CHECKED, 1.2)
    machine = tmp_path / ".benchmarks" / "Linux-CPython-3.12-64bit"
    write(CHECKED, machine / "0001_aaaa_20260101_000000.json")
    write(slower, machine / "0002_bbbb_20260102_000000.json")
    monkeypatch.setenv("CUDAGRAPH_BENCH_STORAGE", str(tmp_path / ".benchmarks"))
    rc, out, _ = run_cli(capsys, "compare", "0001", "0002_bbbb_20260102_000000")
    n_graph = len(forward_benches(DOC, "graph"))
    assert rc == 1 and f"{n_graph} of {n_benchmarks(DOC)} benchmarks slower beyond their tolerance" in out
    rc, _, _ = run_cli(capsys, "compare", "0002", "0001")
    assert rc == 0
    md = tmp_path / "cmp.md"
    rc, out, err = run_cli(capsys, "compare", "0001", "0003", "--markdown", md)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert "unknown saved-run id '0003'" in err and "0001, 0002" in err
    assert not md.exists()
    monkeypatch.setenv("CUDAGRAPH_BENCH_STORAGE", str(tmp_path / "elsewhere"))
    rc, _, _ = run_cli(capsys, "compare", "0001", "0002")
    assert rc == 2


def test_an_empty_storage_variable_means_what_an_unset_one_means(tmp_path, capsys, monkeypatch):
    """$CUDAGRAPH_BENCH_STORAGE set to an empty or blank value looks saved-run ids up where an unset one does (as
    blank $CUDAGRAPH_BENCH_BASELINES does), and --help says so."""
    from cudagraph_bench.cli import SAVED_RUNS

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CUDAGRAPH_BENCH_STORAGE", raising=False)
    unset = run_cli(capsys, "compare", "0001", "0002")
    assert unset[0] == 2 and "saved-run id '0001'" in unset[2]
    for value in ("", "  "):
        monkeypatch.setenv("CUDAGRAPH_BENCH_STORAGE", value)
        assert run_cli(capsys, "compare", "0001", "0002") == unset
    assert "$CUDAGRAPH_BENCH_STORAGE, else (unset, or set to an empty value) the checkout's .benchmarks/" in SAVED_RUNS


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("", "is empty"),
    ('{"machine_info": {"cpu": {}}, "benchmarks": [', "not valid JSON"),
    ('{"version": "5.3.1"}', "not pytest-benchmark output"),
    ('{"machine_info": {}, "benchmarks": [], "version": "5.3.1"}', "holds no benchmarks"),
])
def test_bad_inputs_exit_2_and_write_nothing(tmp_path, capsys, old, content, message):
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    md = tmp_path / "cmp.md"
    for argv in ((old, bad), (bad, old)):
        rc, out, err = run_cli(capsys, "compare", *argv, "--markdown", md)
        assert rc == 2 and out == ""
        assert message in err and len(err.splitlines()) == 1
        assert not md.exists()


def _raw_changes(old_path, new_path):
    """{label: (change %, variant)} of the benchmarks in both runs, from the raw rounds."""
    def medians(path):
        return {forward_label(b): (median_ms(b), b["extra_info"]["variant"])
                for b in forward_benches(read_json(path))}
    a, b = medians(old_path), medians(new_path)
    return {k: (100 * (b[k][0] / a[k][0] - 1), a[k][1]) for k in set(a) & set(b)}


@pytest.mark.parametrize("pair", [("forward-2", "forward-3"), ("forward", "forward-checked")])
def test_two_real_h200_runs_fail_only_on_gated_changes_beyond_the_floor(capsys, pair):
    """Two committed single H200 runs of the same code: one run per side and no baseline, so the ratio
    decides against the floor; eager changes are references and never fail."""
    old_path, new_path = (committed_run(n) for n in pair)
    changes = _raw_changes(old_path, new_path)
    regressed = {k for k, (c, v) in changes.items() if c > FLOOR and v != "eager"}
    slower_refs = {k for k, (c, v) in changes.items() if c > FLOOR and v == "eager"}
    rc, out, _ = run_cli(capsys, "compare", old_path, new_path)
    assert rc == (1 if regressed else 0)
    rows = [line for line in out.splitlines() if line.startswith("forward ")]
    assert len(rows) == len(changes)
    assert {k for k in changes if row_of(out, k).rstrip().endswith("REGRESSION")} == regressed
    assert {k for k in changes if row_of(out, k).rstrip().endswith("slower (reference)")} == slower_refs
    line = out.splitlines()[-1]
    if not regressed:
        gated = {k: c for k, (c, v) in changes.items() if v != "eager"}
        closest = max(gated, key=gated.get)
        assert line.startswith(f"compare PASS: {len(changes)} benchmarks in both, no gated one slower beyond its "
                               f"tolerance (closest: {closest} {gated[closest]:+.1f}% of {FLOOR:.1f}%)")
        if slower_refs:
            assert f"{len(slower_refs)} reference variant{'' if len(slower_refs) == 1 else 's'} slower" in line
    else:
        assert all(k in line for k in regressed)


def test_an_output_never_replaces_an_input(tmp_path, capsys):
    import shutil

    run = tmp_path / "run.json"
    shutil.copy(plain_copy(FIXTURE, tmp_path), run)
    before = run.read_bytes()
    others = write_runs(tmp_path / "others", (1.01, 1.02, 1.03, 1.04))
    for argv in (["compare", others[0], run, "--markdown", run], ["baseline", run, *others, "-o", run,
                                                                 "--allow", "unchecked"],
                 ["gate", run, "--baseline", run, "--markdown", run]):
        rc, _, err = run_cli(capsys, *argv)
        assert rc == 2 and len(err.strip().splitlines()) == 1, err
        assert "write the output somewhere else" in err or "--baseline" in err
    assert run.read_bytes() == before


def test_one_benchmark_is_singular_and_a_reference_only_pass_says_so(tmp_path, capsys):
    doc = copy_doc(DOC)
    doc["benchmarks"] = [forward_benches(doc, "eager")[0]]
    old = write(doc, tmp_path / "old.json")
    rc, out, _ = run_cli(capsys, "compare", old, write({**doc, "datetime": "2030-01-01T00:00:00"}, tmp_path / "b.json"))
    assert rc == 0
    assert (f"compare PASS: 1 benchmark in both, all reference variants, none gated (largest change +0.0%: "
            f"{forward_label(doc['benchmarks'][0])}, a reference; --gate-references gates them)") in out
    scale(doc["benchmarks"][0], 1.5)
    rc, out, _ = run_cli(capsys, "compare", old, write(doc, tmp_path / "new.json"), "--gate-references")
    assert rc == 1 and "compare FAIL: 1 of 1 benchmark slower beyond their tolerance" in out


def test_a_tiny_speed_up_reads_plus_zero_not_minus_zero(tmp_path, capsys, old):
    new = copy_doc(CHECKED)
    victim = forward_benches(new, "graph")[0]
    scale(victim, 0.9999)  # -0.01%
    rc, out, _ = run_cli(capsys, "compare", old, write(new, tmp_path / "new.json"))
    assert rc == 0
    row = row_of(out, forward_label(victim)).split()
    assert row[-1] == "ok" and row[-7] == "+0.0" and " -0.0 " not in out


@pytest.mark.parametrize("empty", ["", " "])
def test_an_empty_markdown_path_is_a_usage_error(tmp_path, capsys, monkeypatch, empty):
    from cudagraph_bench.cli import main as cli_main

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    with pytest.raises(SystemExit) as exc:
        cli_main(["compare", str(FIXTURE), str(FIXTURE), "--markdown", empty])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and out == "" and len(err.splitlines()) == 1
    assert "argument --markdown: expected a path, got an empty string" in err
    assert list(work.iterdir()) == []
