"""The decode table with the compile variants and failed cases: rows of a run derived from the committed H200
decode run (its gpt2 benchmarks, plus a ``compile+graph`` benchmark made from its ``graph`` one and a failed
``generate-static-compile`` case), ``--allow overlap`` between a failure and a measurement, and a pytest
session that records a failed decode case through the plugin into its JSON and the report."""

import json
import statistics

import pytest

from cudagraph_bench.cli import main as cli_main
from cudagraph_bench.measure.correctness import DecodeCheck, Fp64Check
from cudagraph_bench.report import decode_tables, forward_tables
from cudagraph_bench.report.runs import supersede
from cudagraph_bench.results.runfile import load_run
from h200_fixture import copy_doc, committed_doc, committed_run



#: Inputs this test chooses for the derived compile+graph benchmark.
SPEEDUP_OVER_GRAPH = 2.0
COMPILE_MS = 48_250.0
PEER_REASON = ("RuntimeError: Error: accessing tensor output of CUDAGraphs that has been overwritten by a "
               "subsequent run.")
NEW_TOKENS = 128


def _committed_gpt2_doc() -> dict:
    doc = committed_doc("decode-checked")
    doc["benchmarks"] = [b for b in doc["benchmarks"]
                         if b["extra_info"]["model"] == "gpt2" and b["extra_info"]["new_tokens"] == NEW_TOKENS]
    return doc


def _fullname(variant: str) -> str:
    return f"perf_tests/test_decode_bench.py::test_decode[gpt2-bfloat16-L50-new{NEW_TOKENS}-{variant}]"


def _tie_summary() -> str:
    """The sentence a compile+graph check against static-eager records for a rounding tie at token 7."""
    return DecodeCheck(False, 7, 8, 3, Fp64Check(rmse=0.01, eager_rmse=0.01, limit=0.03), 13, "static-eager").summary


def _derived_doc() -> dict:
    """The committed gpt2 decode run plus a compile+graph benchmark (the graph benchmark's rounds divided by
    :data:`SPEEDUP_OVER_GRAPH`) and the peer recorded as failed."""
    doc = _committed_gpt2_doc()
    graph = next(b for b in doc["benchmarks"] if b["extra_info"]["variant"] == "graph")
    compiled = copy_doc(graph)
    data = [x / SPEEDUP_OVER_GRAPH for x in graph["stats"]["data"]]
    compiled["stats"].update(data=data, min=min(data), max=max(data), mean=statistics.mean(data),
                             median=statistics.median(data))
    compiled["fullname"] = _fullname("compile+graph")
    median_ms = statistics.median(data) * 1e3
    compiled["extra_info"].update(variant="compile+graph", ms_per_token=median_ms / NEW_TOKENS,
                                  tokens_per_s=NEW_TOKENS / (median_ms / 1e3), compile_ms=COMPILE_MS,
                                  compile_mode="max-autotune-no-cudagraphs", steps_per_graph=8,
                                  matches_static_eager=False, static_eager_check_passed=True,
                                  static_eager_check=_tie_summary(), correct=True,
                                  check="tokens vs static-eager, fp64 rule")
    doc["benchmarks"].append(compiled)
    doc["cudagraph_bench"]["failures"] = [
        {"suite": "decode", "model": "gpt2", "dtype": "bfloat16", "seq_len": 50, "new_tokens": NEW_TOKENS,
         "variant": "generate-static-compile", "batch": 1, "status": "failed", "reason": PEER_REASON,
         "fullname": _fullname("generate-static-compile")}]
    return doc


def _write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return load_run(str(path))


def _table(rows) -> list[dict]:
    lines = decode_tables.render_decode_table(rows).splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(header, (c.strip() for c in line.strip("|").split("|")))) for line in lines[2:]]


def test_compile_rows_and_the_failed_peer_come_from_the_run(tmp_path):
    doc = _derived_doc()
    rows = {r["variant"]: r for r in decode_tables.decode_rows([_write(tmp_path, "derived.json", doc)])}
    assert list(rows) == ["generate", "generate-static-compile", "static-eager", "graph", "compile+graph"]
    infos = {b["extra_info"]["variant"]: b["extra_info"] for b in doc["benchmarks"]}
    generate_ms = infos["generate"]["ms_per_token"]
    compiled = rows["compile+graph"]
    assert compiled["ms_per_token"] == pytest.approx(infos["graph"]["ms_per_token"] / SPEEDUP_OVER_GRAPH, rel=0.02)
    assert compiled["speedup_vs_generate"] == pytest.approx(generate_ms / compiled["ms_per_token"])
    assert compiled["compile_s"] == pytest.approx(COMPILE_MS / 1e3)
    assert compiled["vs_static_eager"] == "tie at token 7"
    assert compiled["vs_generate"] == rows["graph"]["vs_generate"]       # its generate check, copied from graph's
    assert compiled["note"] == "max-autotune-no-cudagraphs; 8 steps per graph"
    assert rows["graph"]["vs_static_eager"] == "identical" and rows["static-eager"]["vs_static_eager"] == "reference"
    peer = rows["generate-static-compile"]
    assert peer["status"] == "failed" and peer["note"] == f"failed: {PEER_REASON}"
    assert peer["ms_per_token"] is None and peer["speedup_vs_generate"] is None and peer["rounds"] is None

    table = {r["variant"]: r for r in _table(list(rows.values()))}
    assert list(next(iter(table.values()))) == [c.title for c in decode_tables.DECODE_COLUMNS_WITH_COMPILE]
    peer_cells = table["generate-static-compile"]
    assert peer_cells["ms/token"] == "-" and peer_cells["note"] == f"failed: {PEER_REASON}"
    assert table["compile+graph"]["compile s"] == f"{COMPILE_MS / 1e3:.1f}"
    assert table["compile+graph"]["speedup vs generate (x)"] == f"{compiled['speedup_vs_generate']:.2f}"
    assert decode_tables.decode_note(list(rows.values())).startswith(decode_tables.DECODE_NOTE + " ")


def test_a_run_without_compile_variants_keeps_its_table():
    """Pages generated from the committed runs stay as they were: the old columns and note."""
    rows = decode_tables.decode_rows([load_run(str(committed_run("decode-checked")))])
    assert not decode_tables.with_compile(rows)
    header = decode_tables.render_decode_table(rows).splitlines()[0]
    assert [c.strip() for c in header.strip("|").split("|")] == [c.title for c in decode_tables.DECODE_COLUMNS]
    assert decode_tables.decode_note(rows) == decode_tables.DECODE_NOTE


def test_report_pages_show_the_failed_row_with_its_reason(tmp_path):
    path = tmp_path / "derived.json"
    path.write_text(json.dumps(_derived_doc()))
    assert cli_main(["report", str(path), "-o", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "results.md").read_text()
    assert "| generate-static-compile |" in text and f"failed: {PEER_REASON}" in text
    assert "tokens vs static-eager" in text and "generate-static-compile" in decode_tables.COMPILE_DECODE_NOTE


def test_decode_failures_stay_out_of_the_forward_table(tmp_path):
    doc = _derived_doc()
    doc["cudagraph_bench"]["failures"].append({"model": "gpt2", "dtype": "bfloat16", "seq_len": 50,
                                               "variant": "compile", "status": "failed", "reason": "forward boom"})
    rows = forward_tables.forward_rows([_write(tmp_path, "both.json", doc)])
    assert [(r["variant"], r["note"]) for r in rows] == [("compile", "forward boom")]


@pytest.mark.parametrize("newer", ["measured", "failed"])
def test_allow_overlap_takes_the_newest_of_a_failed_and_a_measured_peer(tmp_path, newer):
    """``--allow overlap``: a failed decode case and a benchmark of the same test replace each other by date."""
    failed = _derived_doc()
    measured = _committed_gpt2_doc()
    generate = next(b for b in measured["benchmarks"] if b["extra_info"]["variant"] == "generate")
    peer = copy_doc(generate)
    peer["fullname"] = _fullname("generate-static-compile")
    peer["extra_info"].update(variant="generate-static-compile", compile_ms=COMPILE_MS)
    measured["benchmarks"] = [peer]
    old, new = ("2026-01-01T00:00:00", "2026-02-01T00:00:00")
    failed["datetime"], measured["datetime"] = (old, new) if newer == "measured" else (new, old)
    runs, lines = supersede([_write(tmp_path, "failed.json", failed), _write(tmp_path, "measured.json", measured)])
    rows = {r["variant"]: r for r in decode_tables.decode_rows(runs)}
    assert rows["generate-static-compile"]["status"] == ("ok" if newer == "measured" else "failed")
    assert len(lines) == 1 and "generate-static-compile" in lines[0]


PLUGIN_SESSION = '''
import pytest

from cudagraph_bench import variants


def test_decode(benchmark, cgb, decode_case, request):
    info = decode_case.extra_info()
    if variants.variant(variants.DECODE, decode_case.variant).peer:
        cgb.records.fail(request.node.nodeid, info, "RuntimeError: peer failed", compile_ms=12.5)
        pytest.xfail("peer failed")
    benchmark.extra_info.update(info, ms_per_token=1.0)
    benchmark(lambda: None)
'''


def test_plugin_records_a_failed_decode_case_in_the_json_and_the_report_shows_it(pytester, tmp_path):
    from cudagraph_bench.options import DECODE_VARIANTS

    pytester.makepyfile(test_bench=PLUGIN_SESSION)
    out = tmp_path / "run.json"
    result = pytester.runpytest_inprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider", "--models", "gpt2",
                                          "--new-tokens", "8", "--with-compile", "--benchmark-max-time=0.001",
                                          f"--benchmark-json={out}", "-rx")
    result.assert_outcomes(passed=len(DECODE_VARIANTS) - 1, xfailed=1)
    doc = json.loads(out.read_text())
    (failure,) = doc["cudagraph_bench"]["failures"]
    assert failure["variant"] == "generate-static-compile" and failure["reason"] == "RuntimeError: peer failed"
    assert failure["fullname"] == "test_bench.py::test_decode[gpt2-bfloat16-L50-new8-generate-static-compile]"
    assert failure["compile_ms"] == 12.5
    rows = {r["variant"]: r for r in decode_tables.decode_rows([load_run(str(out))])}
    assert set(rows) == set(DECODE_VARIANTS)
    assert rows["generate-static-compile"]["note"] == "failed: RuntimeError: peer failed"
    assert rows["generate-static-compile"]["compile_s"] == pytest.approx(12.5 / 1e3)


@pytest.mark.parametrize("tuning", ["coordinate-descent", "none"])
def test_the_note_names_the_decode_tuning_and_the_prefill_graph(tuning):
    """A fused row's note names its inductor tuning (not when it is ``none``) and its prefill graph's bucket,
    the bucket the benchmark derives from the prompt length and ``--buckets``."""
    from cudagraph_bench.options import DEFAULT_BUCKETS
    from cudagraph_bench.measure.decode_case import decode_prefill_bucket

    bucket = decode_prefill_bucket(50, DEFAULT_BUCKETS, 256)
    details = {"compile_mode": "default", "compile_tuning": tuning, "prefill_bucket": bucket, "steps_per_graph": 8}
    note = decode_tables.decode_note_cell("ok", None, details)
    mode = "default, coordinate-descent tuning" if tuning != "none" else "default"
    assert note == f"{mode}; prefill graph of {bucket} tokens; 8 steps per graph"
    assert decode_tables.decode_note_cell("ok", None, {"steps_per_graph": 8}) == "8 steps per graph"


@pytest.mark.parametrize("name", ["decode-fused-tuned-tinyllama", "decode-fused-tuned-llama"])
def test_the_committed_tuned_runs_are_of_the_fused_variant_as_the_suite_builds_it(name):
    """The README's 1B decode rows come from runs of today's ``compile+graph``: compiled under the default
    ``--decode-compile-tuning`` (its inductor fields recorded), prefilled by the graph of the bucket the suite
    derives from the prompt, checked against generate and static-eager; ``graph`` prefilled eagerly."""
    from cudagraph_bench.options import DECODE_COMPILE_TUNINGS, DEFAULT_BUCKETS, DEFAULT_DECODE_COMPILE_TUNING
    from cudagraph_bench.measure.decode_case import decode_prefill_bucket

    doc = committed_doc(name)
    infos = {b["extra_info"]["variant"]: b["extra_info"] for b in doc["benchmarks"]}
    fused = infos["compile+graph"]
    assert fused["compile_tuning"] == DEFAULT_DECODE_COMPILE_TUNING
    assert fused["inductor_options"] == DECODE_COMPILE_TUNINGS[DEFAULT_DECODE_COMPILE_TUNING]
    assert fused["prefill_bucket"] == decode_prefill_bucket(fused["seq_len"], DEFAULT_BUCKETS, fused["max_cache_len"])
    assert fused["generate_check_passed"] and fused["static_eager_check_passed"] and fused["correct"]
    assert infos["graph"]["prefill_bucket"] is None
    rows = {r["variant"]: r for r in decode_tables.decode_rows([load_run(str(committed_run(name)))])}
    assert rows["compile+graph"]["speedup_vs_generate"] == pytest.approx(
        infos["generate"]["ms_per_token"] / fused["ms_per_token"])
