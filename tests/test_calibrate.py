"""``cudagraph-bench calibrate RUN...``: false alarms and detection of planted slow-downs of the regression
rule on repeated runs, made here from the H200 fixture with per-run factors the tests choose."""

import json

import numpy as np
import pytest
from scipy.stats import median_abs_deviation, t

from cudagraph_bench.results import noise

from h200_fixture import (copy_doc, DOC, bench, checked, median_ms, no_default_baseline_fixture, run_cli, write,
                          write_runs)

pytestmark = pytest.mark.transformers_free

KEYS = [("gpt2", "float32", 16), ("gpt2", "float32", 50), ("gpt2", "float32", 512)]
GATED = [k for k in KEYS if k[2] <= 128]
#: ten runs that differ by at most 0.9%: nothing changed, so every regression would be a false alarm
TINY = tuple(1.0 + 0.001 * d for d in (0, 3, -2, 5, -4, 1, 9, -1, 2, -3))


def small_doc():
    doc = checked(DOC)
    doc["benchmarks"] = [bench(doc, *k, v) for k in KEYS for v in ("eager", "graph")]
    return doc


@pytest.fixture(autouse=True)
def no_default_baseline(tmp_path, monkeypatch):
    return no_default_baseline_fixture(tmp_path, monkeypatch)


def gate_alarms_and_smallest(medians, step=0.5):
    """Leave-one-out gate of run medians: (false alarms, smallest planted % every held-out run reports)."""
    n = len(medians)

    def flagged(i, plant):
        others = np.delete(medians, i)
        spread = 100 * median_abs_deviation(np.log(others), scale="normal")
        # the spread of the other n - 1 runs has n - 2 degrees of freedom: Student's t, one-sided tail 0.001
        tol = max(noise.DEFAULT_FLOOR_PCT, t.ppf(1 - 0.001, n - 2) * spread * np.sqrt(1 / (n - 1) + 1))
        return 100 * (medians[i] * (1 + plant / 100) / np.median(others) - 1) > tol

    alarms = sum(flagged(i, 0.0) for i in range(n))
    grid = np.arange(step, 100 + step / 2, step)
    smallest = next(float(p) for p in grid if all(flagged(i, float(p)) for i in range(n)))
    return alarms, smallest


def row_of(out, key):
    return next(line for line in out.splitlines() if line.startswith(f"{key[0]} {key[1]} L={key[2]} "))


def test_tiny_noise_gives_no_false_alarm_and_a_planted_30_percent_is_detected(tmp_path, capsys):
    """Also ``--markdown``: the page has the table, the verdict line and every run (one calibration of ten runs,
    the slowest thing this module computes, serves both)."""
    runs = write_runs(tmp_path / "runs", TINY, doc=small_doc())
    md = tmp_path / "page" / "calibration.md"
    rc, out, err = run_cli(capsys, "calibrate", *runs, "--plant", "10,30", "--markdown", md)
    assert rc == 0, out + err
    text = md.read_text()
    assert text.startswith("# How trustworthy the gate's regression rule is")
    assert "| case |" in text and all(f"| {k[0]} {k[1]} L={k[2]} " in text for k in GATED)
    assert f"**{out.splitlines()[-1]}**" in text
    assert all(f"`{r.name}`" in text for r in runs)
    from cudagraph_bench.results.calibrate import MAX_SPLITS

    # C(10, 5) = 252 ordered base/head splits of ten runs into two groups of five, a fixed-seed sample of them
    n, splits = len(TINY), min(252, MAX_SPLITS)
    line = out.splitlines()[-1]
    assert line.startswith(f"calibrate: {len(GATED)} gated cases, {n} runs: false alarms gate 0/{n * len(GATED)}, "
                           f"pairs 0/{n * (n - 1) * len(GATED)}, A/B 0/{splits * len(GATED)}")
    assert f"+30%: gate detects every held-out run on {len(GATED)}/{len(GATED)} cases, A/B on " \
           f"{len(GATED)}/{len(GATED)}" in line
    for key in GATED:
        row = row_of(out, key).split()
        assert row[5:8] == [f"0/{n}", f"0/{n * (n - 1)}", f"0/{splits}"]
        assert row[8:12] == [f"{n}/{n}", f"{n}/{n}", f"{splits}/{splits}", f"{splits}/{splits}"]
        medians = median_ms(bench(DOC, *key, "graph")) * np.asarray(TINY)
        _, smallest = gate_alarms_and_smallest(medians)
        assert row[12] == f"{smallest:g}%"
        spread = 100 * median_abs_deviation(np.log(medians), scale="normal")
        assert row[3] == f"{spread:.2f}"
    assert not any(line.startswith("gpt2 float32 L=512 ") for line in out.splitlines())  # not gated


def test_an_odd_run_is_a_false_alarm_and_exits_1(tmp_path, capsys):
    factors = TINY[:-1] + (1.4,)
    runs = write_runs(tmp_path / "runs", factors, doc=small_doc())
    key = GATED[0]
    medians = median_ms(bench(DOC, *key, "graph")) * np.asarray(factors)
    alarms, _ = gate_alarms_and_smallest(medians)
    assert alarms >= 1
    rc, out, _ = run_cli(capsys, "calibrate", *runs, "--plant", "30")
    assert rc == 1
    assert row_of(out, key).split()[5] == f"{alarms}/{len(factors)}"


@pytest.mark.parametrize("n", [1, 5])
def test_fewer_than_six_runs_are_a_usage_error(tmp_path, capsys, n):
    runs = write_runs(tmp_path / "runs", TINY[:n], doc=small_doc())
    rc, out, err = run_cli(capsys, "calibrate", *runs)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert f"at least {noise.MIN_BASELINE_RUNS + 1} separate runs" in err and f"got {n}" in err


def test_six_runs_calibrate_without_the_ab_mode(tmp_path, capsys):
    runs = write_runs(tmp_path / "runs", TINY[:6], doc=small_doc())
    rc, out, _ = run_cli(capsys, "calibrate", *runs, "--plant", "30", "--markdown", tmp_path / "page.md")
    assert rc == 0
    assert "A/B not run (too few runs)" in out.splitlines()[-1]
    page = (tmp_path / "page.md").read_text()      # the page says so too, and why
    assert "- A/B: not run: 5 base runs against 5 head runs need 10 runs, and 6 were given (--ab-runs 3 fits them)." \
        in page and "every split" not in page
    assert row_of(out, GATED[0]).split()[5:8] == ["0/6", "0/30", "-"]
    rc, out, err = run_cli(capsys, "calibrate", *runs, "--ab-runs", "4")    # asked for, and 2 x 4 > 6 runs
    assert rc == 2 and out == "" and "--ab-runs 4 needs 8 runs" in err and len(err.splitlines()) == 1
    with pytest.raises(SystemExit) as exc:                                  # argparse's own usage error
        run_cli(capsys, "calibrate", *runs, "--plant", "-5")
    assert exc.value.code == 2 and "a planted change is a percent > 0" in capsys.readouterr().err


def test_a_run_with_a_failed_check_is_a_usage_error(tmp_path, capsys):
    runs = write_runs(tmp_path / "runs", TINY, doc=small_doc())
    bad = json.loads(runs[3].read_text())
    bench(bad, *GATED[0], "graph")["extra_info"].update(correct=False, max_abs_diff=3.5)
    write(bad, runs[3])
    md = tmp_path / "page.md"
    rc, out, err = run_cli(capsys, "calibrate", *runs, "--markdown", md)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert "gpt2 float32 L=16 graph" in err and str(runs[3]) in err and not md.exists()


def test_a_run_given_twice_and_runs_of_two_gpus_are_usage_errors(tmp_path, capsys):
    runs = write_runs(tmp_path / "runs", TINY[:6], doc=small_doc())
    rc, _, err = run_cli(capsys, "calibrate", *runs, runs[0])
    assert rc == 2 and "same run" in err
    other = copy_doc(json.loads(runs[-1].read_text()))
    other["machine_info"]["cuda"]["gpu_slug"] = "nvidia-a100-sxm4-80gb"
    write(other, runs[-1])
    rc, _, err = run_cli(capsys, "calibrate", *runs)
    assert rc == 2 and "different GPU" in err
