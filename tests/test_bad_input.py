"""Bad input to the commands that read runs and baselines and write pages: each is one line on stderr that
names the fix, exit code 2, nothing on stdout, and no file or folder made. The inputs are the committed H200
runs and baseline, or what a user could pass by mistake (a device, a JSON nested 200,000 deep, a run larger
than the read cap, another GPU's baseline, an output path under folders that do not exist)."""

import json
import os
from pathlib import Path

import pytest

from h200_fixture import committed_run, read_json, run_bad_input, write

from cudagraph_bench import cli
from cudagraph_bench.fsio import MAX_INPUT_BYTES, MAX_JSON_DEPTH
from cudagraph_bench.options import MAX_CONFIRM
from cudagraph_bench.results.noise import MIN_BASELINE_RUNS

pytestmark = pytest.mark.transformers_free

ROOT = Path(__file__).resolve().parents[1]
RUN = committed_run("forward-checked")
OTHER_RUN = committed_run("forward")       # a separate run of the same matrix on the same GPU
LAUNCH_RUN = committed_run("launch")
BASELINE = ROOT / "baselines" / "nvidia-h200.json"
#: nesting a user reported: deeper than Python's recursion limit
DEEP = 200_000


def deep_run(tmp_path):
    return _text(tmp_path / "deep-run.json", '{"machine_info": {}, "benchmarks": ' + "[" * DEEP + "]" * DEEP + "}")


def deep_baseline(tmp_path):
    return _text(tmp_path / "deep-baseline.json", '{"schema_version": 2, "cases": ' + "[" * DEEP + "]" * DEEP + "}")


def _text(path, text):
    path.write_text(text)
    return path


def huge_run(tmp_path):
    """A sparse file one byte larger than the read cap (no disk space used)."""
    path = tmp_path / "huge.json"
    with open(path, "wb") as fh:
        fh.truncate(MAX_INPUT_BYTES + 1)
    return path


def other_gpu_baseline(tmp_path):
    doc = json.loads(BASELINE.read_text())
    doc["gpu_slug"] = "nvidia-a100-sxm4-80gb"
    return write(doc, tmp_path / "nvidia-a100-sxm4-80gb.json")


def separate_runs(tmp_path, n):
    """``n`` separate runs of the committed checked run (their own datetime, so their own bytes)."""
    doc = read_json(RUN)
    return [write({**doc, "datetime": f"2030-01-{i + 1:02d}T00:00:00"}, tmp_path / "runs" / f"run-{i + 1}.json")
            for i in range(n)]


def failures_run(tmp_path, failures):
    """The committed checked run with ``cudagraph_bench.failures`` replaced by ``failures``."""
    doc = read_json(RUN)
    doc["cudagraph_bench"] = {**(doc.get("cudagraph_bench") or {}), "failures": failures}
    return write(doc, tmp_path / "failures.json")


def missing(tmp_path):
    """An absolute output path two folders below ``tmp_path`` that do not exist."""
    return tmp_path / "missing" / "dir"


def readme(tmp_path):
    return _text(tmp_path / "README.md", "# x\n<!-- results:start -->\n<!-- results:end -->\n")


#: case -> (argv from tmp_path, what the one line says, paths under tmp_path that must not exist afterwards)
CASES = {
    "gate, empty run name": (lambda t: ["gate", "", "--baseline", "none"], "expected a run, got an empty string", []),
    "compare, empty run name": (lambda t: ["compare", RUN, " "], "expected a run, got an empty string", []),
    "gate, deep run": (lambda t: ["gate", deep_run(t), "--baseline", "none"], f"nests JSON deeper than {MAX_JSON_DEPTH}", []),
    "compare, deep run": (lambda t: ["compare", RUN, deep_run(t)], "deep-run.json nests JSON deeper", []),
    "baseline, deep run": (lambda t: ["baseline", deep_run(t), "-o", t / "b.json"], "nests JSON deeper", ["b.json"]),
    "merge, deep run": (lambda t: ["merge", "-o", t / "m.json", deep_run(t)], "nests JSON deeper", ["m.json"]),
    "report, deep run": (lambda t: ["report", deep_run(t), "-o", t / "rep"], "nests JSON deeper", ["rep"]),
    "gate, deep baseline": (lambda t: ["gate", RUN, "--baseline", deep_baseline(t)],
                            "deep-baseline.json nests JSON deeper", []),
    "compare, deep baseline": (lambda t: ["compare", OTHER_RUN, RUN, "--baseline", deep_baseline(t)],
                               "deep-baseline.json nests JSON deeper", []),
    "gate /dev/zero": (lambda t: ["gate", "/dev/zero", "--baseline", "none"],
                       "run /dev/zero is not a regular file (a character device", []),
    "gate --baseline /dev/zero": (lambda t: ["gate", RUN, "--baseline", "/dev/zero"],
                                  "baseline /dev/zero is not a regular file (a character device", []),
    "report --readme /dev/full": (lambda t: ["report", RUN, "-o", t / "rep", "--readme", "/dev/full"],
                                  "--readme /dev/full is not a regular file", ["rep"]),
    "report --readme missing": (lambda t: ["report", RUN, "-o", t / "rep", "--readme", t / "nope.md"],
                                "no such --readme file", ["rep"]),
    "gate, run above the read cap": (lambda t: ["gate", huge_run(t), "--baseline", "none"],
                                     f"is {MAX_INPUT_BYTES + 1:,} bytes, larger than the {MAX_INPUT_BYTES:,} bytes", []),
    "compare --baseline of another GPU": (lambda t: ["compare", OTHER_RUN, RUN, "--baseline", other_gpu_baseline(t)],
                                          "is for GPU nvidia-a100-sxm4-80gb but the run is from nvidia-h200: compare "
                                          "against a baseline of nvidia-h200, or pass --allow gpu-mismatch", []),
    "gate --markdown in missing folders": (lambda t: ["gate", RUN, "--baseline", "none", "--markdown",
                                                      missing(t) / "gate.md"], "missing does not exist", ["missing"]),
    "compare --markdown in missing folders": (lambda t: ["compare", OTHER_RUN, RUN, "--markdown",
                                                         missing(t) / "c.md"], "missing does not exist", ["missing"]),
    "calibrate --markdown in missing folders": (
        lambda t: ["calibrate", *separate_runs(t, MIN_BASELINE_RUNS + 1), "--markdown", missing(t) / "cal.md"],
        "missing does not exist", ["missing"]),
    "baseline -o in missing folders": (lambda t: ["baseline", *separate_runs(t, MIN_BASELINE_RUNS), "-o",
                                                  missing(t) / "b.json"], "missing does not exist", ["missing"]),
    "merge -o in missing folders": (lambda t: ["merge", "-o", missing(t) / "m.json", RUN],
                                    "missing does not exist", ["missing"]),
    "report -o in missing folders": (lambda t: ["report", RUN, "-o", missing(t)], "missing does not exist", ["missing"]),
    "report --readme and -o in missing folders": (lambda t: ["report", RUN, "--readme", readme(t), "-o", missing(t)],
                                                  "missing does not exist", ["missing"]),
    "launch-report -o in missing folders": (lambda t: ["launch-report", LAUNCH_RUN, "-o", missing(t)],
                                            "missing does not exist", ["missing"]),
    "ab -o in missing folders": (lambda t: ["ab", "--base", "HEAD", "--head", "HEAD", "--repo", ROOT, "-o",
                                            missing(t)], "missing does not exist", ["missing"]),
    "gate, failures a string": (lambda t: ["gate", failures_run(t, "oops"), "--baseline", "none"],
                                "cudagraph_bench.failures must be a list of objects", []),
    "compare, failures not objects": (lambda t: ["compare", RUN, failures_run(t, [5])],
                                      "cudagraph_bench.failures must be a list of objects", []),
    "gate --confirm beyond its maximum": (lambda t: ["gate", RUN, "--baseline", "none", "--confirm", "9" * 20],
                                          f"expected at most {MAX_CONFIRM} reruns", []),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_exit_2_and_makes_nothing(tmp_path, capsys, case):
    build, message, absent = CASES[case]
    argv = [str(a) for a in build(tmp_path)]
    before = set(os.listdir(tmp_path))
    err = run_bad_input(capsys, argv)
    assert message in err, err
    assert not [name for name in absent if (tmp_path / name).exists()]
    assert set(os.listdir(tmp_path)) <= before | {"deep-run.json", "deep-baseline.json"}


def test_an_output_folder_one_level_under_an_existing_one_is_made_and_named(tmp_path, capsys, monkeypatch):
    md = tmp_path / "new" / "gate.md"
    rc = cli.main(["gate", str(RUN), "--baseline", "none", "--markdown", str(md)])
    _, err = capsys.readouterr()
    assert rc == 0 and md.is_file() and f"created folder {md.parent}" in err.splitlines()
    monkeypatch.chdir(tmp_path)                         # relative: any depth under the working directory
    rc = cli.main(["gate", str(RUN), "--baseline", "none", "--markdown", "a/b/gate.md"])
    _, err = capsys.readouterr()
    assert rc == 0 and (tmp_path / "a" / "b" / "gate.md").is_file()
    assert [line for line in err.splitlines() if line.startswith("created folder")] == [
        "created folder a", f"created folder {Path('a') / 'b'}"]

