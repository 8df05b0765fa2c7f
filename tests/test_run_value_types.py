"""A run whose ``extra_info`` (or a failed case's entry) holds a value of the wrong type where the report formats or
computes with it is refused by the run's loader, in one line naming the field and the fix (exit 2), before any reader
sees it: ``report`` writes nothing and shows no traceback. The run is a cut of the committed H200 ``make gpu-gate`` run
(one decode request and one forward case), corrupted one field at a time."""

import pytest

from h200_fixture import committed_doc, copy_doc, run_bad_input, run_cli, write

from cudagraph_bench.results.benchmark_values import VALUE_FIELDS

pytestmark = pytest.mark.transformers_free


def _cut() -> dict:
    """The gpu-gate run cut to its first decode request (every decoder) and the first forward case with a kernel
    count (every variant), with one failed forward case recorded."""
    doc = committed_doc("gpu-gate")
    key = ("model", "dtype", "seq_len", "new_tokens")
    decode = next(b["extra_info"] for b in doc["benchmarks"] if b["extra_info"]["suite"] == "decode")
    forward = next(b["extra_info"] for b in doc["benchmarks"] if "n_kernels" in b["extra_info"])
    keep = [b for b in doc["benchmarks"]
            if all(b["extra_info"].get(k) == decode[k] for k in ("suite", *key))
            or all(b["extra_info"].get(k) == forward[k] for k in ("suite", *key[:3]))]
    failed = {k: forward[k] for k in key[:3]} | {"variant": forward["variant"], "status": "failed", "reason": "oom"}
    return {**doc, "benchmarks": keep, "cudagraph_bench": {"failures": [failed]}}


CUT = _cut()

#: field -> the wrong values tried; every field the report formats or computes with is tried.
BAD_VALUES = {
    "n_kernels": ["bogus", -1.5, -1, {"n": 3}, [3], True],
    "weight_bytes": ["1e9", {"bytes": 1}, [1]],
    "kv_bytes_per_token": ["1e9", {"bytes": 1}, [1]],
    "bytes_per_token": ["1e9", {"bytes": 1}, [1]],
    "attn_implementation": [{"name": "sdpa"}, ["sdpa"], 3],
    "gpu_busy_ms": [{"ms": 1.0}, [1.0]],
    "ms_per_token": [{"ms": 1.0}, [1.0]],
    "tokens_per_s": [{"rate": 1.0}, [1.0]],
}
CASES = [(field, value) for field, values in BAD_VALUES.items() for value in values]


def test_every_checked_field_is_tried_and_the_cut_holds_each():
    assert set(BAD_VALUES) == set(VALUE_FIELDS)
    held = {field for b in CUT["benchmarks"] for field in b["extra_info"]}
    assert set(BAD_VALUES) <= held


def test_the_cut_reports(tmp_path, capsys):
    rc, _, err = run_cli(capsys, "report", write(CUT, tmp_path / "run.json"), "-o", tmp_path / "out", "--no-plots")
    assert rc == 0 and (tmp_path / "out" / "results.md").is_file(), err


def _report_refuses(tmp_path, capsys, doc) -> str:
    """The one line ``report`` refuses ``doc`` with; asserts nothing was written."""
    run = write(doc, tmp_path / "run.json")
    err = run_bad_input(capsys, ["report", run, "-o", tmp_path / "out", "--no-plots"])
    assert "Traceback" not in err and not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]
    return err


@pytest.mark.parametrize("field, value", CASES, ids=[f"{f}={v!r}" for f, v in CASES])
def test_report_refuses_a_value_of_the_wrong_type(tmp_path, capsys, field, value):
    doc = copy_doc(CUT)
    i = next(i for i, b in enumerate(doc["benchmarks"]) if field in b["extra_info"])
    doc["benchmarks"][i]["extra_info"][field] = value
    err = _report_refuses(tmp_path, capsys, doc)
    assert f"benchmarks[{i}] has extra_info.{field} = " in err and "rerun the benchmarks to rewrite the file" in err


@pytest.mark.parametrize("field", ["attn_implementation", "ms_per_token"])
def test_report_refuses_a_failed_case_of_the_wrong_type(tmp_path, capsys, field):
    doc = copy_doc(CUT)
    doc["cudagraph_bench"]["failures"][0][field] = {"x": 1}
    err = _report_refuses(tmp_path, capsys, doc)
    assert f"cudagraph_bench.failures[0].{field} = {{'x': 1}}, not " in err
