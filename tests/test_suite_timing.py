"""The suite's time per part (:mod:`cudagraph_bench.report.suite_timing`, ``report --suite-timing``) on the
committed whole-suite H200 run: every module's seconds and test count as recorded, the totals, and a second
(sharded) run's column and wall-time ratio, made from it; a run without a time per part is refused before
anything is written."""

import json
import subprocess
import sys
from collections import Counter

import pytest

from cudagraph_bench.errors import InputFileError
from cudagraph_bench.report.suite_timing import render_suite_timing, run_label, suite_timing_rows
from cudagraph_bench.results.runfile import load_run

from h200_fixture import copy_doc, committed_run, read_json

pytestmark = pytest.mark.transformers_free

SUITE_RUN = committed_run("suite-one-gpu")
FORWARD_RUN = committed_run("forward-checked")


@pytest.fixture(scope="module")
def recorded():
    return read_json(SUITE_RUN)["cudagraph_bench"]


def test_rows_are_the_recorded_seconds_and_test_counts_per_module(recorded):
    rows = suite_timing_rows([load_run(str(SUITE_RUN))])
    per_module = {r["part"]: r for r in rows[:-2]}
    assert list(per_module) == list(recorded["time_per_part_s"])
    tests = Counter(node.split("::", 1)[0] for node in recorded["test_durations_s"])
    for part, seconds in recorded["time_per_part_s"].items():
        assert per_module[part]["s0"] == seconds and per_module[part]["tests"] == tests[part]
    in_tests, wall = rows[-2:]
    assert in_tests["s0"] == pytest.approx(sum(recorded["time_per_part_s"].values()))
    assert in_tests["tests"] == len(recorded["test_durations_s"])
    assert wall["s0"] == recorded["wall_s"]


def test_a_sharded_run_gets_its_own_column_and_its_wall_time_against_the_first(tmp_path, recorded):
    doc = read_json(SUITE_RUN)
    sharded = copy_doc(doc)
    sharded["machine_info"]["workers"] = [{"worker": "gw0", "gpu": "0"}, {"worker": "gw1", "gpu": "1"}]
    sharded["cudagraph_bench"]["wall_s"] = recorded["wall_s"] / 2
    path = tmp_path / "sharded.json"
    path.write_text(json.dumps(sharded))
    one, two = load_run(str(SUITE_RUN)), load_run(str(path))
    gpu, started = one.environment.gpu_name, doc["datetime"][:16].replace("T", " ")
    assert run_label(one) == f"{gpu}, 1 process, {started} (s)"
    assert run_label(two) == f"2 x {gpu}, 2 GPU workers, {started}, wall time of the slowest worker (s)"
    rows = suite_timing_rows([one, two])
    assert rows[-1]["part"] == "wall time vs the first run"
    assert rows[-1]["s0"] == 1.0 and rows[-1]["s1"] == pytest.approx(0.5)
    sharded["cudagraph_bench"]["slowest_worker_wall_s"] = recorded["wall_s"] / 3   # a merge with the controller's
    path.write_text(json.dumps(sharded))
    two = load_run(str(path))
    assert run_label(two) == f"2 x {gpu}, 2 GPU workers, {started} (s)"
    table = render_suite_timing([one, two])
    assert f"| 2 x {gpu}, 2 GPU workers, {started} (s) |" in table.splitlines()[0] and "| 0.50x |" in table


def test_a_run_without_a_time_per_part_is_refused():
    with pytest.raises(InputFileError, match="has no time per part"):
        suite_timing_rows([load_run(str(FORWARD_RUN))])


def test_report_refuses_it_before_writing_anything(tmp_path):
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "cudagraph_bench", "report", str(FORWARD_RUN), "--suite-timing",
                           str(committed_run("forward")), "-o", str(out)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "has no time per part" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_report_shows_the_table_in_results_md(tmp_path):
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "cudagraph_bench", "report", str(FORWARD_RUN), "--suite-timing",
                           str(SUITE_RUN), "-o", str(out)], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = (out / "results.md").read_text()
    assert "## Suite time per part" in page and f"`{SUITE_RUN.name}`" in page
    assert render_suite_timing([load_run(str(SUITE_RUN))]) in page


@pytest.mark.parametrize("field, value, message", [
    ("wall_s", 0, "cudagraph_bench.wall_s = 0 is not seconds > 0"),
    ("wall_s", "12.5", "cudagraph_bench.wall_s = '12.5' is not seconds > 0"),
    ("time_per_part_s", {"perf_tests/test_launch.py": "9.1"}, "time_per_part_s is not {test module: seconds >= 0}"),
    ("time_per_part_s", [1.0, 2.0], "time_per_part_s is not {test module: seconds >= 0}"),
])
def test_a_malformed_time_per_part_is_one_line_exit_2_before_anything_is_written(tmp_path, field, value, message):
    """A wall time of 0 would divide the other runs' (a ZeroDivisionError), a string or list would fail
    deep in the table's sums: each is the file's error, named, before any page is written."""
    doc = read_json(SUITE_RUN)
    doc["cudagraph_bench"][field] = value
    doc["datetime"] = "2000-01-01T00:00:00+00:00"      # a run of its own, not a copy of SUITE_RUN's session
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "cudagraph_bench", "report", str(FORWARD_RUN), "--suite-timing",
                           str(bad), "--suite-timing", str(SUITE_RUN), "-o", str(out)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()
