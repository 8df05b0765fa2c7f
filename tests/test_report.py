"""``cudagraph-bench report``: tables match the numbers in the JSON, failures and the fastest variant,
decode rows, README markers, merged runs, one-line errors."""

import json
import re
import statistics
from pathlib import Path

import pytest

from cudagraph_bench.report import forward_tables
from cudagraph_bench.report import runs as report_runs
from cudagraph_bench.report import pages as report
from cudagraph_bench.cli import main as cli_main
from cudagraph_bench.errors import InputFileError, UsageError
from cudagraph_bench.results.record import decode_environment, decode_measurement
from cudagraph_bench.results.runfile import load_run

from h200_fixture import FIXTURE, H200_RESULTS, read_json

pytestmark = pytest.mark.transformers_free

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def bench(data_ms, **info):
    """A pytest-benchmark entry with per-round data (seconds) and the given extra_info."""
    data = [x / 1e3 for x in data_ms]
    key = "-".join(str(info.get(k)) for k in ("model", "dtype", "seq_len", "variant", "new_tokens"))
    return {"group": "g", "name": f"t[{key}]", "fullname": f"t.py::t[{key}]", "params": {}, "param": key,
            "extra_info": info, "options": {},
            "stats": {"min": min(data), "max": max(data), "mean": statistics.mean(data),
                      "median": statistics.median(data), "rounds": len(data), "stddev": 0.0, "data": data,
                      "iterations": 1}}


def fwd(model, dtype, seq_len, variant, data_ms, **extra):
    return bench(data_ms, suite="forward", model=model, dtype=dtype, seq_len=seq_len, variant=variant,
                 batch=1, **extra)


def run_doc(benchmarks, failures=(), gpu="Test GPU"):
    return {"machine_info": {"cuda": {"gpu_name": gpu, "gpu_slug": "test-gpu", "torch": "t"}},
            "commit_info": {"id": "abc"}, "benchmarks": list(benchmarks), "datetime": "2026-01-01", "version": "5",
            "cudagraph_bench": {"failures": list(failures)}}


def write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def parse_markdown_table(text, first_header):
    """Rows (dicts header -> cell) of the markdown table whose first header cell is ``first_header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, (c.strip() for c in line.strip("|").split("|")))))
    return rows


def fixture_medians():
    doc = read_json(FIXTURE)
    return {(b["extra_info"]["model"], b["extra_info"]["dtype"], b["extra_info"]["seq_len"], b["extra_info"]["variant"]):
            statistics.median(b["stats"]["data"]) * 1e3 for b in doc["benchmarks"]}


# ---------------------------------------------------------------------------- tables match the JSON


def test_forward_rows_carry_the_medians_and_reductions_of_the_json():
    medians = fixture_medians()
    rows = forward_tables.forward_rows([load_run(str(FIXTURE))])
    assert len(rows) == len(medians)
    for r in rows:
        key = (r["model"], r["dtype"], r["seq_len"], r["variant"])
        assert r["median_ms"] == pytest.approx(medians[key])
        eager = medians[key[:3] + ("eager",)]
        assert r["reduction_pct"] == pytest.approx(100 * (eager - medians[key]) / eager)
        # the H200 forward run of the first session recorded no check per benchmark: graph is
        # "unchecked", never silently "ok"; eager is the reference
        assert r["status"] == ("ok" if r["variant"] == "eager" else "unchecked")


def test_summary_markdown_matches_the_json_numbers():
    medians = fixture_medians()
    text = forward_tables.render_summary_table(forward_tables.forward_rows([load_run(str(FIXTURE))]), "markdown")
    rows = parse_markdown_table(text, "model")
    assert len(rows) == len({k[:3] for k in medians})
    for row in rows:
        key = (row["model"], row["dtype"], int(row["L (tokens)"]))
        eager, graph = medians[key + ("eager",)], medians[key + ("graph",)]
        assert row["eager median ms"] == f"{eager:.3f}"
        assert row["graph median ms"] == f"{graph:.3f}"
        assert row["graph reduction %"] == f"{100 * (eager - graph) / eager:+.1f}"
        assert row["fastest"] == ("graph (unchecked)" if graph < eager else "eager")


def test_other_variants_failures_and_fastest(tmp_path):
    doc = run_doc([
        fwd("gpt2", "float32", 50, "eager", [10, 11, 12]),
        fwd("gpt2", "float32", 50, "graph", [2, 2, 2]),
        fwd("gpt2", "float32", 50, "compile", [1.5, 1.6, 1.4], compile_ms=12000.0, correct=True,
            check="fp64-rmse", fp64_rmse_ratio=1.234),
        fwd("gpt2", "float32", 50, "compile+graph", [1.0, 1.1, 0.9], correct=False, status="mismatch",
            reason="outputs differ from eager: AssertionError: Tensor-likes are not close!"),
    ], failures=[{"model": "gpt2", "dtype": "float32", "seq_len": 1024, "variant": "compile", "status": "failed",
                  "reason": "worker killed by SIGABRT; stderr: device-side assert"}])
    runs = [load_run(str(write(tmp_path, "run.json", doc)))]
    rows = forward_tables.forward_rows(runs)
    by = {(r["seq_len"], r["variant"]): r for r in rows}
    assert by[(50, "compile")]["compile_s"] == pytest.approx(12.0)
    assert by[(50, "compile")]["reduction_pct"] == pytest.approx(100 * (11 - 1.5) / 11)
    assert by[(50, "compile+graph")]["status"] == "mismatch"
    assert by[(1024, "compile")]["status"] == "failed" and by[(1024, "compile")]["median_ms"] is None
    wide = {r["seq_len"]: r for r in forward_tables.summary_rows(rows)[0]}
    assert wide[50]["fastest"] == "compile"  # compile+graph is faster but does not match eager
    assert wide[1024]["fastest"] is None
    md = forward_tables.render_summary_table(rows, "markdown")
    header = md.splitlines()[0]
    assert "compile median ms" in header and "compile+graph reduction %" in header
    problems = forward_tables.problem_lines(rows)
    assert any("L=1024 compile: failed: worker killed by SIGABRT" in p for p in problems)
    assert any("compile+graph: mismatch" in p for p in problems)
    text = forward_tables.render_long_table(rows, "text")
    assert "NO" in text and "12.0" in text
    long_rows = {r["variant"]: r for r in parse_markdown_table(forward_tables.render_long_table(rows, "markdown"), "model")
                 if r["L (tokens)"] == "50"}
    assert long_rows["compile"]["check"] == "fp64-rmse" and long_rows["compile"]["RMSE vs fp64 / eager's"] == "1.23"
    assert long_rows["graph"]["check"] == "-"      # a run without the field: shown as missing, not invented


def test_decode_rows_compute_speedup_vs_generate(tmp_path):
    common = dict(suite="decode", model="gpt2", dtype="bfloat16", seq_len=50, new_tokens=64)
    doc = run_doc([bench([380.0], variant="generate", ms_per_token=6.0, tokens_per_s=166.7, **common),
                   bench([60.0], variant="graph", ms_per_token=1.5, tokens_per_s=666.7, **common),
                   bench([128.0], variant="static-eager", **common)])
    rows = report.decode_rows([load_run(str(write(tmp_path, "d.json", doc)))])
    assert [r["variant"] for r in rows] == ["generate", "static-eager", "graph"]
    assert rows[2]["speedup_vs_generate"] == pytest.approx(4.0)
    assert rows[1]["ms_per_token"] == pytest.approx(2.0)  # from the median when extra_info has none
    assert rows[1]["tokens_per_s"] == pytest.approx(500.0)
    assert rows[1]["speedup_vs_generate"] == pytest.approx(3.0)
    assert [r["rounds"] for r in rows] == [1, 1, 1]  # one measured request each in this run


def test_merging_runs_and_refusing_duplicates(tmp_path):
    a = write(tmp_path, "a.json", run_doc([fwd("gpt2", "float32", 16, "eager", [5.0]),
                                          fwd("gpt2", "float32", 16, "graph", [1.0])]))
    b = write(tmp_path, "b.json", run_doc([fwd("tinyllama-1.1b", "float32", 16, "eager", [9.0]),
                                          fwd("tinyllama-1.1b", "float32", 16, "graph", [3.0])]))
    rows = forward_tables.forward_rows([load_run(str(a)), load_run(str(b))])
    assert {r["model"] for r in rows} == {"gpt2", "tinyllama-1.1b"}
    with pytest.raises(InputFileError, match="is in both"):
        forward_tables.forward_rows([load_run(str(a)), load_run(str(a))])


def test_a_variant_without_a_recorded_check_is_unchecked_not_correct(tmp_path):
    doc = run_doc([fwd("tinyllama-1.1b", "float32", 16, "eager", [20.0]),
                   fwd("tinyllama-1.1b", "float32", 16, "graph", [7.0], correct=True),
                   fwd("tinyllama-1.1b", "float32", 16, "bucketed", [6.9]),           # no check recorded
                   fwd("tinyllama-1.1b", "float32", 50, "eager", [20.0]),
                   fwd("tinyllama-1.1b", "float32", 50, "graph", [7.0]),              # no check recorded
                   fwd("tinyllama-1.1b", "float32", 50, "padded", [6.0], correct=False, status="mismatch")])
    rows = forward_tables.forward_rows([load_run(str(write(tmp_path, "run.json", doc)))])
    by = {(r["seq_len"], r["variant"]): r["status"] for r in rows}
    assert by == {(16, "eager"): "ok", (16, "graph"): "ok", (16, "bucketed"): "unchecked",
                  (50, "eager"): "ok", (50, "graph"): "unchecked", (50, "padded"): "mismatch"}
    wide = {r["seq_len"]: r["fastest"] for r in forward_tables.summary_rows(rows)[0]}
    assert wide == {16: "bucketed (unchecked)", 50: "graph (unchecked)"}   # the mismatched padded never wins
    long_rows = parse_markdown_table(forward_tables.render_long_table(rows, "markdown"), "model")
    assert [r["correct"] for r in long_rows if r["variant"] == "bucketed"] == ["not recorded"]
    assert {r["check"] for r in long_rows if r["variant"] == "eager"} == {"reference"}
    problems = forward_tables.problem_lines(rows)
    assert problems[0].startswith("tinyllama-1.1b float32 L=50 padded: mismatch")
    assert problems[-1].startswith("2 measured case(s) of bucketed, graph carry no correctness check")


def test_allow_overlap_replaces_whole_prompt_lengths_by_the_newest_run(tmp_path, capsys):
    old = run_doc([fwd("gpt2", "float32", 16, "eager", [5.0]), fwd("gpt2", "float32", 16, "graph", [1.0]),
                   fwd("gpt2", "float32", 50, "eager", [6.0]), fwd("gpt2", "float32", 50, "graph", [2.0]),
                   fwd("gpt2", "float32", 50, "padded", [9.0])],
                  failures=[{"model": "gpt2", "dtype": "float32", "seq_len": 50, "variant": "compile",
                             "status": "skipped", "reason": "time budget exhausted"}])
    old["datetime"] = "2026-11-29T11:00:00+00:00"
    new = run_doc([fwd("gpt2", "float32", 50, "eager", [4.0]), fwd("gpt2", "float32", 50, "graph", [1.5]),
                   fwd("gpt2", "float32", 50, "compile", [1.0])])
    new["datetime"] = "2026-11-29T13:00:00+00:00"
    # the newer file first on the command line: order of arguments does not matter, datetime does
    runs = [load_run(str(write(tmp_path, "new.json", new))), load_run(str(write(tmp_path, "old.json", old)))]
    kept, lines = report_runs.supersede(runs)
    # old L=50 held padded (and a skipped compile); the newer L=50 has compile but no padded
    assert lines == ["gpt2 float32 L=50: old.json -> new.json (drops padded: the newer run does not hold them at "
                     "this length; leave it out or rerun the length whole)"]
    rows = {(r["seq_len"], r["variant"]): r for r in forward_tables.forward_rows(kept)}
    assert set(rows) == {(16, "eager"), (16, "graph"), (50, "eager"), (50, "graph"), (50, "compile")}
    assert rows[(50, "eager")]["median_ms"] == pytest.approx(4.0)      # eager of the newer run ...
    assert rows[(50, "graph")]["reduction_pct"] == pytest.approx(100 * (4.0 - 1.5) / 4.0)   # ... in every reduction
    assert rows[(16, "graph")]["reduction_pct"] == pytest.approx(80.0)
    docs = tmp_path / "docs"
    assert cli_main(["report", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "-o", str(docs)]) == 2
    assert "--allow overlap" in capsys.readouterr().err
    assert cli_main(["report", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "-o", str(docs),
                     "--allow", "overlap"]) == 0
    assert "- gpt2 float32 L=50: old.json -> new.json (drops padded" in (docs / "results.md").read_text()
    assert "warning: gpt2 float32 L=50: old.json -> new.json (drops padded" in capsys.readouterr().err


def test_allow_overlap_compares_times_in_utc_and_refuses_what_it_cannot_order(tmp_path, capsys):
    def doc(when, ms):
        d = run_doc([fwd("gpt2", "float32", n, v, [ms]) for n in (16, 128) for v in ("eager", "graph")])
        d["datetime"] = when
        return d

    # 13:00 at +02:00 is 11:00 UTC: older than 12:23 UTC
    a = load_run(str(write(tmp_path, "a.json", doc("2026-11-29T13:00:00+02:00", 5.0))))
    b = load_run(str(write(tmp_path, "b.json", doc("2026-11-29T12:23:00+00:00", 4.0))))
    kept, lines = report_runs.supersede([a, b])
    assert lines == ["gpt2 float32 L=16: a.json -> b.json", "gpt2 float32 L=128: a.json -> b.json"]  # 16 before 128
    assert [len(r.benchmarks) for r in kept] == [0, 4]
    bad = write(tmp_path, "bad.json", doc("garbage", 3.0))
    same_time = write(tmp_path, "same.json", doc("2026-11-29T12:23:00Z", 3.0))
    for other, message in ((bad, "not an ISO 8601 time"), (same_time, "cannot tell which is newer"),
                           (tmp_path / "b.json", "are the same run")):
        assert cli_main(["report", str(tmp_path / "b.json"), str(other), "-o", str(tmp_path / "d"),
                         "--allow", "overlap"]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "d").exists()


# ---------------------------------------------------------------------------- documents


README = """# Project

Intro text.

<!-- results:start -->
old numbers
<!-- results:end -->

Footer text.
"""


def test_report_cli_writes_results_pngs_and_readme_block(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(README)
    docs = tmp_path / "docs"
    assert cli_main(["report", str(FIXTURE), "-o", str(docs), "--readme", str(readme)]) == 0
    for name in ("latency_comparison.png", "speedup_vs_length.png"):
        assert (docs / name).read_bytes()[:8] == PNG_MAGIC
    results = (docs / "results.md").read_text()
    assert "synthetic" not in results.lower()          # the fixture is the real H200 run
    assert "NVIDIA H200" in results                      # provenance names the GPU of the run
    assert "](latency_comparison.png)" in results
    text = readme.read_text()
    assert text.startswith("# Project\n\nIntro text.\n\n<!-- results:start -->\n")
    assert text.endswith("<!-- results:end -->\n\nFooter text.\n")
    assert "old numbers" not in text
    assert "NVIDIA H200" in text
    assert "(docs/results.md)" in text
    medians = fixture_medians()
    rows = parse_markdown_table(text, "model")
    row = next(r for r in rows if (r["model"], r["dtype"]) == ("gpt2", "float32"))
    eager, graph = medians[("gpt2", "float32", 50, "eager")], medians[("gpt2", "float32", 50, "graph")]
    assert row["L=50"] == f"{eager:.3g} -> {graph:.3g} ms ({-100 * (eager - graph) / eager:+.0f}%)"
    # regenerating gives the same README
    assert cli_main(["report", str(FIXTURE), "-o", str(docs), "--readme", str(readme)]) == 0
    assert readme.read_text() == text
    # --no-plots writes the same pages, linking the plots a full report draws, and draws none
    png = (docs / "latency_comparison.png").read_bytes()
    fresh = tmp_path / "fresh"
    assert cli_main(["report", str(FIXTURE), "-o", str(fresh), "--no-plots"]) == 0
    assert sorted(p.name for p in fresh.iterdir()) == ["results.md"]
    assert (fresh / "results.md").read_text() == results
    assert cli_main(["report", str(FIXTURE), "-o", str(docs), "--readme", str(readme), "--no-plots"]) == 0
    assert readme.read_text() == text and (docs / "results.md").read_text() == results
    assert (docs / "latency_comparison.png").read_bytes() == png      # left as it was


def test_the_readme_block_of_a_cpu_run_says_its_figures_come_from_a_cpu_run(tmp_path):
    """A run made with --device cpu (eager only, no CUDA fingerprint) is named as such above its figures; a GPU
    run's block has no such line."""
    doc = read_json(FIXTURE)
    doc["machine_info"]["cuda"] = None
    doc["benchmarks"] = [b for b in doc["benchmarks"] if b["extra_info"].get("variant") == "eager"]
    for b in doc["benchmarks"]:
        b["extra_info"]["device"] = "cpu"
    run = tmp_path / "cpu.json"
    run.write_text(json.dumps(doc))
    line = "These figures come from a CPU run, which measures eager only: graph replay needs a CUDA GPU."
    for source, said in ((run, True), (FIXTURE, False)):
        readme = tmp_path / "README.md"
        readme.write_text(README)
        assert cli_main(["report", str(source), "-o", str(tmp_path / "docs"), "--readme", str(readme),
                         "--no-plots"]) == 0
        assert (line in readme.read_text().splitlines()) == said and ("CPU run" in readme.read_text()) == said


def test_readme_without_markers_is_a_usage_error_and_nothing_is_written(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    docs = tmp_path / "docs"
    assert cli_main(["report", str(FIXTURE), "-o", str(docs), "--readme", str(readme)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "<!-- results:start -->" in err
    assert readme.read_text() == "# no markers\n"
    assert not docs.exists()


@pytest.mark.parametrize("what", ["missing", "folder"])
def test_a_readme_that_cannot_be_read_is_one_line_naming_the_fix(tmp_path, capsys, what):
    readme = tmp_path / "README.md"
    if what == "folder":
        readme.mkdir()
    docs = tmp_path / "docs"
    assert cli_main(["report", str(FIXTURE), "-o", str(docs), "--readme", str(readme)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(readme) in err
    assert f"{report.MARKER_START}" in err and f"{report.MARKER_END}" in err
    assert not docs.exists()


def test_replace_between_markers_rejects_two_blocks():
    block = f"{report.MARKER_START}\nold\n{report.MARKER_END}\n"
    with pytest.raises(UsageError, match="more than one"):
        report.replace_between_markers(block + block, "new")


def test_replace_between_markers_rejects_reversed_markers():
    with pytest.raises(UsageError):
        report.replace_between_markers("<!-- results:end -->\n<!-- results:start -->\n", "x")
    assert report.replace_between_markers("a\n<!-- results:start -->\nb\n<!-- results:end -->\nc", "NEW") == \
        "a\n<!-- results:start -->\nNEW\n<!-- results:end -->\nc"


def test_missing_or_broken_run_file_is_one_line_exit_2(tmp_path, capsys):
    assert cli_main(["report", str(tmp_path / "nope.json"), "-o", str(tmp_path)]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"benchmarks": [')
    assert cli_main(["report", str(bad), "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not valid JSON" in err


def test_report_of_a_run_with_failures_lists_them(tmp_path):
    doc = run_doc([fwd("gpt2", "float32", 16, "eager", [5.0, 6.0]), fwd("gpt2", "float32", 16, "graph", [1.0, 1.2])],
                  failures=[{"model": "gpt2", "dtype": "float32", "seq_len": 16, "variant": "compile+graph",
                             "status": "failed", "reason": "timed out after 300 s (per-case limit); worker killed"}])
    path = write(tmp_path, "run.json", doc)
    assert cli_main(["report", str(path), "-o", str(tmp_path / "docs")]) == 0
    results = (tmp_path / "docs" / "results.md").read_text()
    assert "### Not measured or not matching eager" in results
    assert re.search(r"gpt2 float32 L=16 compile\+graph: failed: timed out after 300 s", results)


def test_launch_suite_is_rendered_by_launch_report(tmp_path):
    def launch(n, variant, ms):
        return bench([ms, ms], suite="launch", n_launches=n, variant=variant, event_median_ms=ms,
                     us_per_launch=ms * 1e3 / n)

    doc = run_doc([fwd("gpt2", "float32", 16, "eager", [5.0]), fwd("gpt2", "float32", 16, "graph", [1.0]),
                   launch(64, "loop", 0.448), launch(64, "graph", 0.064),
                   launch(512, "loop", 3.584), launch(512, "graph", 0.512)])
    path = write(tmp_path, "run.json", doc)
    docs = tmp_path / "docs"
    assert cli_main(["report", str(path), "-o", str(docs)]) == 0
    results = (docs / "results.md").read_text()
    assert "Launch overhead" in results
    assert "](launch_speedup_vs_n.png)" in results
    assert (docs / "launch_speedup_vs_n.png").read_bytes()[:8] == PNG_MAGIC
    # the launch plot is not listed among the forward plots
    forward_part = results.split("### All measurements")[0]
    assert "launch_speedup_vs_n" not in forward_part


def test_source_runs_name_the_host_because_eager_is_host_bound(tmp_path):
    def host(machine_info):
        return report._host(decode_environment({"machine_info": machine_info}))

    assert host({"cpu": {"brand_raw": "Intel(R) Xeon(R) Processor", "count": 32}}) == \
        ", host Intel(R) Xeon(R) Processor (32 cores)"
    assert host({"cpu": {"count": 16}}) == ", host (16 cores)"
    assert host({"cpu": "garbage"}) == ""
    assert host({}) == ""
    run = load_run(FIXTURE)  # the real H200 run: pytest-benchmark's cpuinfo is in its machine_info
    line = report._provenance([run])[0]
    cpu = read_json(FIXTURE)["machine_info"]["cpu"]
    assert f"host {cpu['brand_raw']} ({cpu['count']} cores)" in line


def test_summary_carries_eager_spread_per_case():
    rows = [{"model": "m", "dtype": "float32", "seq_len": 16, "variant": "eager", "status": "ok", "median_ms": 4.0,
             "p95_ms": 6.0, "reduction_pct": 0.0, "spread_pct": 80.0},
            {"model": "m", "dtype": "float32", "seq_len": 16, "variant": "graph", "status": "ok", "median_ms": 1.0,
             "p95_ms": 1.1, "reduction_pct": 75.0, "spread_pct": 3.0}]
    wide, variants = forward_tables.summary_rows(rows)
    assert wide[0]["eager_spread_pct"] == 80.0 and wide[0]["fastest"] == "graph"
    table = forward_tables.render_summary_table(rows, "markdown").splitlines()
    header = [c.strip() for c in table[0].strip("|").split("|")]
    cells = [c.strip() for c in table[2].strip("|").split("|")]
    assert cells[header.index("eager spread %")] == "80"


def test_spread_of_each_row_is_recomputed_from_the_rounds_of_the_json():
    raw = read_json(FIXTURE)
    rows = {(r["model"], r["dtype"], r["seq_len"], r["variant"]): r for r in forward_tables.forward_rows([load_run(FIXTURE)])}
    for bench in raw["benchmarks"]:
        e = bench["extra_info"]
        data = sorted(bench["stats"]["data"])
        n = len(data)

        def pct(q):  # numpy's default linear interpolation, written out
            pos = q * (n - 1)
            lo = int(pos)
            return data[lo] + (pos - lo) * (data[min(lo + 1, n - 1)] - data[lo])

        median = statistics.median(data)
        row = rows[(e["model"], e["dtype"], e["seq_len"], e["variant"])]
        assert row["spread_pct"] == pytest.approx(100 * (pct(0.95) - pct(0.05)) / median)


def test_report_without_o_writes_out_report_not_the_committed_docs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli_main(["report", str(FIXTURE)]) == 0
    assert (tmp_path / "out" / "report" / "results.md").is_file() and not (tmp_path / "docs").exists()


PRESET_DECODE_RUNS = sorted((H200_RESULTS / "presets").glob("decode-bfloat16-*.json.gz"))


@pytest.mark.parametrize("path", PRESET_DECODE_RUNS, ids=lambda p: p.stem)
def test_decode_table_shows_each_committed_check_against_generate(path):
    """The committed preset decode runs: every decoder row's "tokens vs generate" cell says what its
    recorded check says, with generate's distinct-token count, and generate is the reference."""
    doc = read_json(path)
    infos = {b["extra_info"]["variant"]: b["extra_info"] for b in doc["benchmarks"]}
    assert set(infos) == {"generate", "static-eager", "graph"}
    rows = {r["variant"]: r for r in report.decode_rows([load_run(str(path))])}
    assert rows["generate"]["vs_generate"] == "reference"
    for variant in ("static-eager", "graph"):
        info, cell = infos[variant], rows[variant]["vs_generate"]
        assert cell.endswith(f"({info['distinct_reference_tokens']} distinct)")
        assert (cell != "FAILS") == info["generate_check_passed"]
        assert cell.startswith("identical") == (info["matches_generate"] and info["generate_check_passed"])


def test_decode_cell_names_the_token_of_a_rounding_tie():
    summary = ("token 9 differs from generate's, a rounding tie: logits of the 10 steps up to it as close to "
               "float64 as generate's")
    info = dict(suite="decode", model="gpt2", dtype="bfloat16", seq_len=50, new_tokens=64, variant="graph",
                matches_generate=False, generate_check_passed=True, generate_check=summary, distinct_reference_tokens=48)

    def cell(extra_info):
        bench = {"name": "test_decode", "stats": {"min": 1e-3, "max": 1e-3, "mean": 1e-3, "median": 1e-3, "rounds": 1},
                 "extra_info": extra_info}
        return report.vs_generate(decode_measurement(Path("run.json"), 0, bench, decode_environment({})))

    assert cell(info) == "tie at token 9 (48 distinct)"
    assert cell({**info, "generate_check_passed": False}) == "FAILS"
    assert cell({k: v for k, v in info.items() if "generate" not in k}) == "-"
    assert cell({**info, "variant": "generate"}) == "reference"


def plain_pytest_benchmark_doc():
    """What pytest-benchmark writes for tests that are not this suite's: no cudagraph-bench extra_info."""
    entry = bench([1.0, 1.1, 0.9], )
    entry.update(name="test_x", fullname="t.py::test_x", params=None, group=None, extra_info={})
    return {"machine_info": {"node": "host"}, "commit_info": {}, "benchmarks": [entry],
            "datetime": "2026-01-01T00:00:00", "version": "5.2.3"}


def test_plain_pytest_benchmark_output_is_refused_and_nothing_is_written(tmp_path, capsys):
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(plain_pytest_benchmark_doc()))
    out = tmp_path / "docs"
    rc = cli_main(["report", str(plain), "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"no cudagraph-bench benchmark in {plain}" in err
    assert "pytest perf_tests --benchmark-only --benchmark-json=FILE" in err and "cudagraph-bench run" in err
    assert not out.exists()
    # one run of this suite among the files (of one GPU) is enough: its benchmarks are reported
    plain.write_text(json.dumps({**plain_pytest_benchmark_doc(), "machine_info": run_doc([])["machine_info"]}))
    ours = tmp_path / "ours.json"
    ours.write_text(json.dumps(run_doc([fwd("gpt2", "float32", 16, "eager", [2.0, 2.1]),
                                        fwd("gpt2", "float32", 16, "graph", [1.0, 1.1], correct=True)])))
    assert cli_main(["report", str(plain), str(ours), "-o", str(out)]) == 0
    assert "gpt2" in (out / "results.md").read_text()


def forward_pair_doc(gpu_slug, datetime="2026-01-01"):
    doc = run_doc([fwd("gpt2", "float32", 16, "eager", [2.0, 2.1]),
                   fwd("gpt2", "float32", 16, "graph", [1.0, 1.1], correct=True)])
    if gpu_slug is None:
        doc["machine_info"] = {"node": "cpu-host"}
    else:
        doc["machine_info"]["cuda"].update(gpu_slug=gpu_slug, gpu_name=gpu_slug.upper())
    return {**doc, "datetime": datetime}


@pytest.mark.parametrize("other", ["other-gpu", None])
def test_runs_of_two_gpus_on_one_page_are_refused_unless_allowed(tmp_path, capsys, other):
    # the latency tables have no GPU column: another GPU's (or a CPU run's) rows would read as this GPU's
    a = write(tmp_path, "a.json", forward_pair_doc("test-gpu"))
    b = write(tmp_path, "b.json", forward_pair_doc(other, datetime="2026-01-02"))
    out = tmp_path / "docs"
    assert cli_main(["report", str(a), str(b), "--allow", "overlap", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the runs are from different GPUs" in err and "--allow gpu-mismatch" in err
    assert not out.exists()
    assert cli_main(["report", str(a), str(b), "--allow", "overlap", "--allow", "gpu-mismatch", "-o", str(out)]) == 0
    assert (out / "results.md").is_file()


def test_a_report_into_an_earlier_reports_folder_says_what_it_replaced_and_removes_stale_plots(tmp_path, capsys):
    from cudagraph_bench.report.pages import BUSY_PNG, LATENCY_PNG

    out = tmp_path / "docs"
    first = write(tmp_path, "first.json", forward_pair_doc("test-gpu"))
    assert cli_main(["report", str(first), "-o", str(out)]) == 0
    assert "wrote " in capsys.readouterr().err
    stale = out / BUSY_PNG                      # a plot the first report's runs would have had data for
    stale.write_bytes((out / LATENCY_PNG).read_bytes())
    assert cli_main(["report", str(first), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"replaced {out / LATENCY_PNG}" in err and f"replaced {out / 'results.md'}" in err
    assert f"removed {stale}" in err and not stale.exists()
    assert BUSY_PNG not in (out / "results.md").read_text()


def test_a_report_never_replaces_or_removes_a_page_or_plot_it_did_not_write(tmp_path, capsys):
    """A results.md or a PNG named like a plot in -o that no report wrote (a matplotlib PNG without the report's mark,
    too): refused before any write, every file kept, even a PNG the new report would only remove as stale."""
    from matplotlib.figure import Figure
    from cudagraph_bench.report.pages import BUSY_PNG

    out = tmp_path / "docs"
    out.mkdir()
    run = write(tmp_path, "run.json", forward_pair_doc("test-gpu"))
    (out / "results.md").write_text("# my notes\n")
    Figure(figsize=(1, 1)).savefig(out / BUSY_PNG, dpi=10)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert cli_main(["report", str(run), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"-o {out} holds results.md, {BUSY_PNG}, which cudagraph-bench report did not write" in err
    assert err.endswith(": give another -o folder, or remove those files first\n")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    (out / "results.md").unlink()
    assert cli_main(["report", str(run), "-o", str(out)]) == 2
    assert f"holds {BUSY_PNG}, which" in capsys.readouterr().err and (out / BUSY_PNG).read_bytes() == before[BUSY_PNG]


def test_the_attention_each_model_ran_is_noted_only_where_it_differs(tmp_path):
    """A run whose models ran different attention (gpt-oss its eager, gpt2 SDPA) notes which ran which above the
    tables, and a failure listed as skipped (not graphable) keeps its reason; a run of one attention shows no note,
    so that pages of older runs stay as they were."""
    mixed = run_doc([fwd("gpt2", "bfloat16", 16, "eager", [5.0, 6.0], attn_implementation="sdpa"),
                     fwd("gpt-oss-20b", "bfloat16", 16, "eager", [9.0, 9.5], attn_implementation="eager")],
                    failures=[{"model": "gpt-oss-20b", "dtype": "bfloat16", "seq_len": 16, "variant": "graph",
                               "status": "skipped", "attn_implementation": "eager",
                               "reason": "NotGraphableError: GptOssForCausalLM does host work"}])
    rows = forward_tables.forward_rows([load_run(str(write(tmp_path, "mixed.json", mixed)))])
    assert {(r["model"], r["variant"]): r["attn_implementation"] for r in rows} == {
        ("gpt2", "eager"): "sdpa", ("gpt-oss-20b", "eager"): "eager", ("gpt-oss-20b", "graph"): "eager"}
    note = forward_tables.attention_note(rows)
    assert note.endswith("eager: gpt-oss-20b; sdpa: gpt2.")
    assert cli_main(["report", str(tmp_path / "mixed.json"), "-o", str(tmp_path / "docs")]) == 0
    results = (tmp_path / "docs" / "results.md").read_text()
    assert note in results and "gpt-oss-20b bfloat16 L=16 graph: skipped: NotGraphableError" in results
    same = run_doc([fwd("gpt2", "bfloat16", 16, "eager", [5.0, 6.0], attn_implementation="sdpa")])
    assert forward_tables.attention_note(forward_tables.forward_rows(
        [load_run(str(write(tmp_path, "same.json", same)))])) is None
