"""docs/architectures.md from zoo runs (no torch): a GPU run's cells win over a CPU run's, a test that killed its
process is a failed cell, every status cell is one of the four statuses (or awaits a GPU run, and the page says
so), the counts add up to the types; cudagraph-bench zoo --from writes it and refuses a run without zoo entries."""

import gzip
import json

import pytest

from cudagraph_bench import cli
from cudagraph_bench.report.architectures import AWAITS_CELL, render_markdown, run_entries
from cudagraph_bench.results.runfile import load_run


def _bench(model_type, part, **figures):
    return {"name": f"test_zoo_{part}[{model_type}]", "fullname": f"perf_tests/test_zoo.py::test_zoo_{part}[{model_type}]",
            "params": {"zoo_type": model_type}, "group": f"zoo-{model_type}",
            "stats": {"min": 0.001, "max": 0.002, "mean": 0.0015, "median": 0.0015, "rounds": 3},
            "extra_info": {"suite": "zoo", "model_type": model_type, "part": part, "status": "measured",
                           "reason": None, "transformers": "5.24.0", "torch": "2.13.0", **figures}}


def _entry(model_type, part, status, reason, version="5.24.0"):
    return {"suite": "zoo", "model_type": model_type, "part": part, "status": status, "reason": reason,
            "transformers": version, "fullname": f"perf_tests/test_zoo.py::test_zoo_{part}[{model_type}]"}


def _run(path, benchmarks=(), failures=(), gpu=None, when="2026-01-02T00:00:00"):
    cuda = {"gpu_name": gpu, "gpu_slug": "some-gpu", "torch": "2.13.0", "transformers": "5.17.0"} if gpu else None
    doc = {"machine_info": {"gpu": gpu, "cuda": cuda}, "commit_info": {"id": "0123456789abcdef"},
           "datetime": when, "version": "5.1.0", "benchmarks": list(benchmarks),
           "cudagraph_bench": {"failures": list(failures)}}
    path.write_bytes(gzip.compress(json.dumps(doc).encode()) if path.suffix == ".gz" else json.dumps(doc).encode())
    return path


FORWARD_FIGURES = {"eager_ms": 4.0, "graph_ms": 0.5, "reduction_pct": 87.5}
DECODE_FIGURES = {"generate_ms_per_token": 20.0, "graph_ms_per_token": 2.5, "speedup": 8.0}


@pytest.fixture
def runs(tmp_path):
    cpu = _run(tmp_path / "cpu-5.24.0.json.gz", failures=[
        _entry("llama", "forward", "awaits GPU", None), _entry("llama", "decode", "awaits GPU", None),
        _entry("mamba", "forward", "refused", "MambaConfig has no attention heads"),
        _entry("mamba", "decode", "refused", "MambaConfig has no attention heads"),
        _entry("gpt_neo", "forward", "awaits GPU", None),
        _entry("gpt_neo", "decode", "not graphable", "GPTNeoConfig.window_size=16: a local attention window"),
        _entry("qwen3", "forward", "awaits GPU", None), _entry("qwen3", "decode", "awaits GPU", None),
        _entry("llama", "forward", "awaits GPU", None, version="5.17.0"),
        _entry("llama", "decode", "awaits GPU", None, version="5.17.0")])
    gpu = _run(tmp_path / "zoo.json", gpu="Some GPU",
               benchmarks=[_bench("llama", "forward", **FORWARD_FIGURES), _bench("llama", "decode", **DECODE_FIGURES),
                           _bench("qwen3", "forward", **FORWARD_FIGURES)],
               failures=[{"status": "failed", "phase": "process", "reason": "the pytest process died in this test "
                          "(killed by SIGSEGV)", "fullname": "perf_tests/test_zoo.py::test_zoo_decode[qwen3]"}])
    return cpu, gpu


def _rows(page: str) -> dict[str, list[list[str]]]:
    table = page[page.index("| model type |"):].split("\n\n")[0].splitlines()[2:]
    out: dict[str, list[list[str]]] = {}
    for line in table:
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        out.setdefault(cells[0].strip("`"), []).append(cells)
    return out


def test_the_gpu_runs_cells_win_and_a_crashed_test_is_a_failed_cell(runs):
    page = render_markdown([load_run(str(p), records_only=True) for p in runs])
    rows = _rows(page)
    llama_524 = next(r for r in rows["llama"] if r[-1] == "5.24.0")
    assert llama_524[1:3] == ["measured", "measured"]
    assert "(-88%)" in llama_524[4] and "(8.0x)" in llama_524[5]
    assert next(r for r in rows["llama"] if r[-1] == "5.17.0")[1:3] == [AWAITS_CELL, AWAITS_CELL]
    assert rows["qwen3"][0][1:4] == ["measured", "failed", "decode: the pytest process died in this test (killed by "
                                                           "SIGSEGV)"]
    assert rows["mamba"][0][1:4] == ["refused", "refused", "MambaConfig has no attention heads"]
    assert rows["gpt_neo"][0][2] == "not graphable" and "window_size=16" in rows["gpt_neo"][0][3]
    cells = {c for rs in rows.values() for r in rs for c in r[1:3]}
    assert cells <= {"measured", "not graphable", "refused", "failed", AWAITS_CELL}
    assert "Awaiting a GPU run" in page


def test_the_counts_add_up_to_the_types(runs):
    page = render_markdown([load_run(str(p), records_only=True) for p in runs])
    counts = page[page.index("| transformers | part |"):].split("\n\n")[0].splitlines()[2:]
    parsed = {tuple(c.strip() for c in line.strip("|").split("|")[:2]): [int(c) for c in line.strip("|").split("|")[2:]]
              for line in counts}
    assert parsed[("5.24.0", "forward")] == [2, 0, 1, 0, 1, 4]    # measured, not graphable, refused, failed, awaits
    assert parsed[("5.24.0", "decode")] == [1, 1, 1, 1, 0, 4]
    assert parsed[("5.17.0", "decode")] == [0, 0, 0, 0, 1, 1]


def test_zoo_from_writes_the_page_and_exits_1_on_a_failed_part(runs, tmp_path, capsys):
    page = tmp_path / "architectures.md"
    assert cli.main(["zoo", "--from", *map(str, runs), "--markdown", str(page)]) == 1
    assert page.read_text().startswith("# Architectures")
    assert "transformers 5.24.0 decode: 1 measured, 1 not graphable, 1 refused, 1 failed" in capsys.readouterr().out
    assert cli.main(["zoo", "--from", str(runs[0]), "--markdown", str(page)]) == 0


def test_zoo_from_takes_the_later_gpu_runs_cell_whatever_the_order_of_the_files(runs, tmp_path, capsys):
    """A type run again (a later run) replaces the earlier GPU run's cells, in whichever order the files are given."""
    later = _run(tmp_path / "later.json", gpu="Some GPU", when="2026-01-03T00:00:00",
                 failures=[_entry("qwen3", "decode", "not graphable", "a static cache does not reproduce its state")])
    page = tmp_path / "architectures.md"
    for order in ((later, *runs), (*runs, later)):
        assert cli.main(["zoo", "--from", *map(str, order), "--markdown", str(page)]) == 0
        qwen3 = _rows(page.read_text())["qwen3"][0]
        assert qwen3[1:4] == ["measured", "not graphable", "decode: a static cache does not reproduce its state"]
    capsys.readouterr()


def test_zoo_from_orders_runs_by_time_across_time_zones_and_refuses_a_run_given_twice(runs, tmp_path, capsys):
    """12:30+02:00 is 10:30 UTC: earlier than 11:00 UTC, whatever the text says."""
    early = _run(tmp_path / "early.json", gpu="Some GPU", when="2026-01-03T12:30:00+02:00",
                 failures=[_entry("qwen3", "decode", "not graphable", "early")])
    late = _run(tmp_path / "late.json", gpu="Some GPU", when="2026-01-03T11:00:00+00:00",
                failures=[_entry("qwen3", "decode", "not graphable", "late")])
    page = tmp_path / "architectures.md"
    assert cli.main(["zoo", "--from", *map(str, runs), str(late), str(early), "--markdown", str(page)]) == 0
    assert _rows(page.read_text())["qwen3"][0][3] == "decode: late"
    before = page.read_bytes()
    assert cli.main(["zoo", "--from", str(late), str(tmp_path / "." / "late.json"), "--markdown", str(page)]) == 2
    assert "given more than once" in capsys.readouterr().err and page.read_bytes() == before


def test_zoo_from_into_a_closed_stdout_leaves_the_page_as_it_was(runs, tmp_path, capsys, monkeypatch):
    import sys

    page = tmp_path / "architectures.md"
    page.write_text("Generated by `cudagraph-bench zoo --from` from the runs below\n")    # an earlier page
    monkeypatch.setattr(sys, "stdout", None)               # what Python gives a process started with >&-
    assert cli.main(["zoo", "--from", *map(str, runs), "--markdown", str(page)]) == 2
    assert page.read_text().startswith("Generated by") and "standard output" in capsys.readouterr().err


def test_zoo_from_refuses_a_run_without_zoo_entries_and_needs_markdown(tmp_path, capsys):
    plain = _run(tmp_path / "plain.json", failures=[{"suite": "decode", "status": "failed", "reason": "x"}])
    assert cli.main(["zoo", "--from", str(plain), "--markdown", str(tmp_path / "a.md")]) == 2
    assert "no zoo entries" in capsys.readouterr().err
    assert cli.main(["zoo", "--from", str(plain)]) == 2
    assert "--markdown" in capsys.readouterr().err
    assert cli.main(["zoo", "--from", str(plain), "--markdown", str(tmp_path / "a.md"), "--types", "llama",
                     "--device", "cpu", "-o", str(tmp_path / "o")]) == 2
    assert "runs nothing: drop --types, --device, -o" in capsys.readouterr().err


def test_run_entries_read_a_benchmark_and_a_failure(runs):
    entries = run_entries(load_run(str(runs[1]), records_only=True))
    assert {(e.model_type, e.part, e.status) for e in entries} == {
        ("llama", "forward", "measured"), ("llama", "decode", "measured"), ("qwen3", "forward", "measured"),
        ("qwen3", "decode", "failed")}
    assert all(e.gpu == "Some GPU" for e in entries)


def test_every_committed_zoo_run_reads_one_entry_per_type_and_part():
    """The committed zoo runs (GPU and CPU): each entry a status of the page, each type and part once per run."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "results"
    paths = sorted(root.glob("*/zoo/*.json.gz"))
    assert any(p.parts[-3] == "cpu" for p in paths) and any(p.parts[-3] != "cpu" for p in paths)
    for path in paths:
        entries = run_entries(load_run(str(path), records_only=True))
        keys = [(e.transformers, e.model_type, e.part) for e in entries]
        assert entries and len(keys) == len(set(keys)), path
        assert {e.status for e in entries} <= {"measured", "not graphable", "refused", "failed", "awaits GPU"}, path
        assert all(e.reason for e in entries if e.status in ("not graphable", "refused", "failed")), path

