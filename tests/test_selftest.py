"""The self-test's verdicts (``cudagraph-bench selftest --from DIR``) on runs derived from a committed H200 run:
unmodified reruns with a small spread, planted delays on the gated graphs, a stale input and a wrong decode. The
planted runs change what the pipeline would record (the device-side figure, the recorded check), never the
expectations: those come from the same data."""

import json
import shutil

import numpy as np
import pytest

from h200_fixture import copy_doc, committed_doc, committed_selftest_runs, run_cli, write

pytestmark = pytest.mark.transformers_free

#: Spread of the unmodified runs (fractions of the device-side figure) and the delays planted.
JITTER = (1.0, 1.002, 0.998, 1.001, 0.999)
DELAYS = (3.0, 5.0, 10.0)


def _with_device_figure(doc: dict, factor: float, gated_factor: float = 1.0) -> dict:
    """``doc`` with every graph benchmark's device-side figure set to its wall median x ``factor`` x
    ``gated_factor`` (the committed run predates the figure), the rest as recorded."""
    out = copy_doc(doc)
    for bench in out["benchmarks"]:
        info = bench["extra_info"]
        if info.get("suite") == "forward" and info.get("variant") == "graph":
            info["device_median_ms"] = bench["stats"]["median"] * 1e3 * factor * gated_factor
            if gated_factor != 1.0:
                info.update(planted_fault=f"delay:{100 * (gated_factor - 1):g}",
                            planted_measured_pct=100 * (gated_factor - 1))
    if gated_factor != 1.0:          # the run records its fault as the plugin writes it
        out.setdefault("cudagraph_bench", {})["planted_fault"] = f"delay:{100 * (gated_factor - 1):g}"
    return out


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A self-test folder: 5 unmodified runs, a run per delay, a stale-input, a wrong-decode, a stale-mask and a
    stale-position run, and the committed eager-layer and skip-inductor-graphs runs."""
    base = committed_doc("forward-checked")
    out = tmp_path_factory.mktemp("selftest")
    for i, f in enumerate(JITTER, 1):
        write(_with_device_figure(base, f), out / f"unmodified-{i}.json")
    for pct in DELAYS:
        write(_with_device_figure(base, 1.0, 1 + pct / 100), out / f"delay-{pct:g}.json")
    stale = _with_device_figure(base, 1.0)
    for bench in stale["benchmarks"]:
        if bench["extra_info"].get("variant") == "graph" and bench["extra_info"]["model"] == "gpt2":
            bench["extra_info"].update(correct=False, status="mismatch", planted_fault="stale-input",
                                       reason="outputs differ from eager")
    stale.setdefault("cudagraph_bench", {})["planted_fault"] = "stale-input"
    write(stale, out / "stale-input.json")
    decode = committed_doc("decode-checked")
    for bench in decode["benchmarks"]:
        if bench["extra_info"].get("variant") == "graph":
            bench["extra_info"].update(correct=False, status="mismatch", planted_fault="wrong-decode",
                                       reason="graphed decode tokens differ from the eager static-cache loop's")
    decode.setdefault("cudagraph_bench", {})["planted_fault"] = "wrong-decode"
    write(decode, out / "wrong-decode.json")
    padding = committed_doc("gpu-gate")
    padding["benchmarks"] = [b for b in padding["benchmarks"] if b["extra_info"].get("variant") in ("padded", "bucketed")
                             and b["extra_info"]["model"] == "gpt2"]
    for bench in padding["benchmarks"]:
        bench["extra_info"].update(correct=False, status="mismatch", planted_fault="stale-mask", reason=(
            "outputs differ from eager (max |diff| 2.7e+00) and from float64 more than eager does (call 2 of 3: a "
            "16-token prompt in the 1024-token graph, after 1-token ones)"))
    padding.setdefault("cudagraph_bench", {})["planted_fault"] = "stale-mask"
    write(padding, out / "stale-mask.json")
    position = committed_doc("decode-checked")
    for bench in position["benchmarks"]:
        if bench["extra_info"].get("variant") == "graph":
            bench["extra_info"].update(correct=False, status="mismatch", planted_fault="stale-position",
                                       reason="graphed decode tokens differ from the eager static-cache loop's")
    position.setdefault("cudagraph_bench", {})["planted_fault"] = "stale-position"
    write(position, out / "stale-position.json")
    committed_selftest_runs(out, ("eager-layer", "skip-inductor-graphs"))
    return out


def test_every_fault_fails_the_gate_and_no_unmodified_run_does(folder, capsys, tmp_path):
    page = tmp_path / "gate-selftest.md"
    rc, out, err = run_cli(capsys, "selftest", "--from", folder, "--markdown", page)
    assert rc == 0, out + err
    last = out.splitlines()[-1]
    assert last.startswith("selftest PASS: ") and "0 false alarms" in last
    gated = {(b["extra_info"]["model"], b["extra_info"]["dtype"], b["extra_info"]["seq_len"])
             for b in json.loads((folder / "unmodified-1.json").read_text())["benchmarks"]
             if b["extra_info"]["variant"] == "graph" and b["extra_info"]["seq_len"] <= 128}
    for pct in DELAYS:     # +3% sits at the 3% floor of the tolerance: reported, not required
        assert f"+{pct:g}% detected in " in last
        if pct >= 5:
            assert f"+{pct:g}% detected in {len(gated)}/{len(gated)}" in last
    for fault in ("stale-input", "wrong-decode", "stale-mask", "stale-position"):
        assert f"{fault} fails the gate" in last
    text = page.read_text()
    assert last in text and "unmodified-1.json" in text
    assert "- `stale-mask`: the gate fails: gpt2 " in text and "after 1-token ones" in text
    assert "- `stale-position`: the gate fails: decode gpt2 " in text


def test_a_stale_buffer_run_that_passes_the_gate_fails_the_selftest(folder, capsys, tmp_path):
    """A stale mask or position that the recorded checks miss is a wrong result the gate passes: the self-test
    says so and exits 1."""
    for fault in ("stale-mask", "stale-position"):
        blind = tmp_path / fault
        shutil.copytree(folder, blind)
        doc = json.loads((folder / f"{fault}.json").read_text())
        for bench in doc["benchmarks"]:
            info = bench["extra_info"]
            if info.get("correct") is False:
                info.update(correct=True)
                info.pop("status"), info.pop("reason")
        write(doc, blind / f"{fault}.json")
        rc, out, _ = run_cli(capsys, "selftest", "--from", blind)
        last = out.splitlines()[-1]
        assert rc == 1 and f"{fault} PASSES the gate" in last, last


def test_a_planted_delay_below_the_tolerance_is_reported_missed(folder, capsys, tmp_path):
    """With the unmodified runs spread by +-4%, a +5% delay cannot be told from noise: the self-test says so and
    exits 1 (a gate that flagged it would raise false alarms too)."""
    wide = tmp_path / "wide"
    wide.mkdir()
    base = json.loads((folder / "unmodified-1.json").read_text())
    for i, f in enumerate((1.0, 1.04, 0.96, 1.03, 0.97), 1):
        doc = copy_doc(base)
        for bench in doc["benchmarks"]:
            if "device_median_ms" in bench["extra_info"]:
                bench["extra_info"]["device_median_ms"] *= f
        write(doc, wide / f"unmodified-{i}.json")
    for name in ("delay-5.json", "stale-input.json", "wrong-decode.json", "stale-mask.json", "stale-position.json"):
        (wide / name).write_text((folder / name).read_text())
    rc, out, _ = run_cli(capsys, "selftest", "--from", wide)
    assert rc == 1
    assert "selftest FAIL" in out.splitlines()[-1] and "+5% detected in 0/" in out.splitlines()[-1]


def test_the_noise_table_compares_the_harness_with_the_plain_loop(folder, tmp_path):
    from cudagraph_bench.results.process_spread import MAX_SPAN_PCT, span_pct, spread_rows
    from cudagraph_bench.results.runfile import load_run

    unmodified = [load_run(str(folder / f"unmodified-{i}.json")) for i in range(1, 6)]
    rows = spread_rows(unmodified, unmodified)     # the same runs as their own plain loop: within 1x
    assert rows and all(r["ok"] for r in rows)
    expected = 100 * (max(JITTER) - min(JITTER)) / float(np.median(JITTER))
    assert all(list(r["within"].values()) == [pytest.approx(expected)] for r in rows)
    assert all(r["across"] is None for r in rows)          # one machine: nothing across machines
    assert expected <= MAX_SPAN_PCT and span_pct([1.0]) is None


def test_fewer_than_five_unmodified_runs_is_a_usage_error(folder, capsys, tmp_path):
    few = tmp_path / "few"
    few.mkdir()
    for i in (1, 2):
        (few / f"unmodified-{i}.json").write_text((folder / f"unmodified-{i}.json").read_text())
    rc, out, err = run_cli(capsys, "selftest", "--from", few)
    assert rc == 2 and "at least 5 unmodified runs" in err and len(err.strip().splitlines()) == 1


def test_a_run_with_a_planted_fault_is_never_a_baseline_and_the_gate_names_it(folder, capsys, tmp_path):
    runs = [folder / f"unmodified-{i}.json" for i in range(1, 5)] + [folder / "delay-5.json"]
    rc, out, err = run_cli(capsys, "baseline", *runs, "-o", tmp_path / "b.json")
    assert rc == 2 and "planted the self-test fault delay:5" in err and not (tmp_path / "b.json").exists()
    rc, out, _ = run_cli(capsys, "gate", folder / "delay-5.json", "--baseline", "none")
    assert "self-test run with the planted fault delay:5" in out


def test_from_passes_over_what_a_stopped_run_left(folder, capsys, tmp_path):
    """A self-test stopped by a job's time limit leaves ``NAME.part0.json`` (empty or half-written) beside its
    log: ``--from`` evaluates the finished runs and reads no part file."""
    stopped = tmp_path / "stopped"
    shutil.copytree(folder, stopped)
    (stopped / "unmodified-6.part0.json").write_text("")
    (stopped / "delay-10.part1.json").write_text('{"benchmarks": [')
    rc, out, err = run_cli(capsys, "selftest", "--from", stopped)
    expected = run_cli(capsys, "selftest", "--from", folder)
    assert (rc, out) == expected[:2], err


def test_from_a_file_says_it_is_not_a_folder(capsys, tmp_path):
    page = tmp_path / "page.md"
    page.write_text("x")
    rc, _, err = run_cli(capsys, "selftest", "--from", page)
    assert rc == 2 and "is not a folder" in err and len(err.strip().splitlines()) == 1
    rc, _, err = run_cli(capsys, "selftest", "--from", tmp_path / "none")
    assert rc == 2 and "no such folder" in err


def test_a_given_baseline_judges_two_unmodified_runs_and_the_planted_ones(folder, capsys, tmp_path):
    """``--baseline FILE``: the planted and unmodified runs are gated against a baseline of other runs (as a runner
    that is not among the baseline's machines is), two unmodified runs are enough, and a delay off its target is
    marked on the page, not counted as a miss of the gate."""
    others = [write(_with_device_figure(committed_doc("forward-checked"), f), tmp_path / "others" / f"r{i}.json")
              for i, f in enumerate((1.0, 1.001, 0.999, 1.002, 0.998))]
    baseline = tmp_path / "b.json"
    assert run_cli(capsys, "baseline", *others, "-o", baseline)[0] == 0
    few = tmp_path / "few"
    few.mkdir()
    for name in ("unmodified-1", "unmodified-2", "delay-5", "stale-input", "wrong-decode"):
        shutil.copy(folder / f"{name}.json", few / f"{name}.json")
    delay = json.loads((few / "delay-5.json").read_text())
    off = next(b for b in delay["benchmarks"] if b["extra_info"].get("variant") == "graph")
    off["extra_info"]["planted_on_target"] = False
    (few / "delay-5.json").write_text(json.dumps(delay))
    page = tmp_path / "page.md"
    rc, out, err = run_cli(capsys, "selftest", "--from", few, "--baseline", baseline, "--markdown", page)
    last = out.splitlines()[-1]
    assert "2 unmodified runs" in last and "(1 planted off target)" in last, out + err
    text = page.read_text()
    assert f"- baseline: `{baseline}`" in text and "(off target)" in text
    assert run_cli(capsys, "selftest", "--from", few)[0] == 2          # without it, 2 runs are no baseline


def test_resume_keeps_the_finished_runs_and_runs_the_others(tmp_path, monkeypatch):
    from cudagraph_bench.selftest import planned_runs as runner
    from cudagraph_bench.runner.matrix_processes import Matrix
    from cudagraph_bench.runner.process import PytestRun

    ran = []

    class Outcome:
        def __init__(self, path):
            self.json_path, self.returncode = path, 0

    def fake_run(run: PytestRun):
        ran.append(run.json_path.name)
        run.json_path.write_text("{}")
        return Outcome(run.json_path)

    monkeypatch.setattr(runner, "run_pytest", fake_run)
    matrix = Matrix((("models", ("gpt2",)), ("dtypes", ("float32",)), ("prompt_lengths", (16,))), ())
    plan = runner.plan(matrix, gated_lengths=(16,), runs=2, delays=(5.0,))
    (tmp_path / "unmodified-1.json").write_text("{}")          # finished before the stop
    (tmp_path / "delay-5.json.part1.json").write_text("{}")   # what a stopped run leaves: not a run
    done = runner.run_all(tmp_path, tmp_path, plan, log=lambda s: None, resume=True)
    assert ran == ["delay-5.json", "unmodified-2.json", "stale-input.json", "stale-mask.json", "eager-layer.json",
                   "skip-inductor-graphs.json", "wrong-decode.json", "stale-position.json"]
    assert set(done) == {"unmodified-1", "delay-5", "unmodified-2", "stale-input", "stale-mask", "eager-layer",
                         "skip-inductor-graphs", "wrong-decode", "stale-position"}
    ran.clear()
    runner.run_all(tmp_path, tmp_path, plan, log=lambda s: None, resume=False)
    assert len(ran) == len(plan)                                 # without resume every run runs


@pytest.mark.parametrize("left_out", [
    ("delay-3", "delay-5", "stale-input", "stale-mask", "eager-layer", "skip-inductor-graphs", "wrong-decode",
     "stale-position"),                                                    # nothing planted at all
    ("delay-5",),                                                          # +3% only: the +5% target is not tested
    ("eager-layer",),
])
def test_a_self_test_without_the_runs_its_verdict_needs_fails_and_names_them(tmp_path, capsys, monkeypatch, left_out):
    """The committed self-test passes; the same runs without a +5% delay or an always-planted fault do not, and the
    verdict names what is missing."""
    from h200_fixture import H200_RESULTS

    from cudagraph_bench.selftest.verdicts import ALWAYS_PLANTED

    monkeypatch.chdir(H200_RESULTS.parents[1])
    part = tmp_path / "part"
    part.mkdir()
    for f in (H200_RESULTS / "selftest").iterdir():
        if f.name.removesuffix(".json.gz") not in left_out and not f.name.startswith("ab-"):
            shutil.copy(f, part / f.name)
    rc, out, _ = run_cli(capsys, "selftest", "--from", part, "--baseline", "baselines/nvidia-h200.json")
    last = out.splitlines()[-1]
    assert rc == 1 and last.startswith("selftest FAIL: "), last
    missing = last.split("missing runs: ")[1].split(", ")
    expected = (["a delay of at least 5% (delay-5)"] if "delay-5" in left_out else []) + [
        n for n in ALWAYS_PLANTED if n in left_out]                          # the committed delays: 3% and 5%
    assert missing == expected
