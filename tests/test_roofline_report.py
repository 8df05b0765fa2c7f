"""The roofline in ``cudagraph-bench report``: the decode roofline table (README block and results.md) of a
committed H200 decode run given the bytes per token that the presets' configs give, the forward busy-time
table of a committed forward run given busy times, their plots, and runs without these fields rendered
as before."""

import json

import pytest

from cudagraph_bench.cli import main as cli_main
from cudagraph_bench.measure.roofline import request_bytes_per_token
from cudagraph_bench.models.presets import load_model
from cudagraph_bench.report import pages, plots
from cudagraph_bench.report import roofline_tables
from cudagraph_bench.results.roofline_arithmetic import choose_peak, table_peak_gbps
from cudagraph_bench.results.runfile import load_run

from h200_fixture import copy_doc, committed_run, read_json

DECODE = committed_run("decode-checked")
FORWARD = committed_run("forward")
README = "# Project\n\n<!-- results:start -->\nold\n<!-- results:end -->\n"
ROOFLINE_FIELDS = ("weight_bytes", "kv_bytes_per_token", "bytes_per_token", "context_tokens")


def with_decode_bytes(doc: dict) -> dict:
    """Copy of a decode run whose benchmarks carry the bytes per token of their case, computed from the
    preset's config (built on the meta device) as the decode benchmark records them."""
    doc = copy_doc(doc)
    models = {}
    for b in doc["benchmarks"]:
        info = b["extra_info"]
        key = (info["model"], info["dtype"])
        if key not in models:
            models[key] = load_model(*key, "meta")
        info.update(request_bytes_per_token(models[key], info["seq_len"], info["new_tokens"]))
    return doc


@pytest.fixture(scope="module")
def decode_doc():
    return with_decode_bytes(read_json(DECODE))


def table_after(text: str, marker: str) -> list[dict]:
    """Rows (header -> cell) of the first markdown table after the line ``marker``."""
    lines = text.splitlines()
    i = lines.index(marker)
    start = next(j for j in range(i, len(lines)) if lines[j].startswith("| "))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, (c.strip() for c in line.strip("|").split("|")))))
    return rows


def expected_decode_cells(doc: dict, peak_gbps: float) -> dict:
    """Per (model, dtype, prompt, new, variant): the achieved GB/s and % of peak cells, from the JSON."""
    out = {}
    for b in doc["benchmarks"]:
        i = b["extra_info"]
        gbps = i["bytes_per_token"] / (i["ms_per_token"] / 1e3) / 1e9
        out[(i["model"], i["dtype"], str(i["seq_len"]), str(i["new_tokens"]), i["variant"])] = {
            "achieved GB/s": f"{gbps:.1f}", "% of peak": f"{100 * gbps / peak_gbps:.1f}",
            "weights MB/token": f"{i['weight_bytes'] / 1e6:.1f}", "ms/token": f"{i['ms_per_token']:.3f}",
            "ms/token at peak": f"{i['bytes_per_token'] / peak_gbps / 1e6:.3f}"}
    return out


def test_results_show_the_decode_roofline_of_the_committed_run(tmp_path, decode_doc):
    run = tmp_path / "decode-roofline.json"
    run.write_text(json.dumps(decode_doc))
    readme = tmp_path / "README.md"
    readme.write_text(README)
    docs = tmp_path / "docs"
    assert cli_main(["report", str(run), "-o", str(docs), "--readme", str(readme)]) == 0
    gpu = decode_doc["machine_info"]["cuda"]["gpu_name"]
    peak = table_peak_gbps(gpu)             # the committed run recorded no NVML peak: the datasheet's
    expected = expected_decode_cells(decode_doc, peak)
    for text, marker in (((docs / "results.md").read_text(), "### Decode roofline"),):
        rows = table_after(text, marker)
        got = {(r["model"], r["dtype"], r["prompt tokens"], r["new tokens"], r["variant"]): r for r in rows}
        assert set(got) == set(expected)
        for key, cells in expected.items():
            assert {k: got[key][k] for k in cells} == cells, key
        assert f"Peak memory bandwidth of {gpu}: {peak:.0f} GB/s from the vendor datasheet table" in text
    assert (docs / pages.DECODE_BANDWIDTH_PNG).read_bytes()[:4] == b"\x89PNG"
    assert f"]({pages.DECODE_BANDWIDTH_PNG})" in (docs / "results.md").read_text()
    assert "(docs/results.md)" in readme.read_text()      # the README's headline links the page with the roofline


def test_bandwidths_of_a_case_are_ordered_like_its_times_per_token_and_below_the_peak(decode_doc, tmp_path):
    """Same bytes per token for every variant of a case: the ordering of the bandwidths is that of ms/token."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps(decode_doc))
    rows = roofline_tables.decode_roofline_rows([load_run(str(path))])
    by_case: dict = {}
    for r in rows:
        by_case.setdefault((r["model"], r["dtype"], r["seq_len"], r["new_tokens"]), {})[r["variant"]] = r
    for variants in by_case.values():
        fastest = min(variants.values(), key=lambda r: r["ms_per_token"])
        assert max(variants.values(), key=lambda r: r["achieved_gbps"]) is fastest
        assert all(r["pct_of_peak"] < 100 and r["floor_ms_per_token"] < r["ms_per_token"] for r in variants.values())


def test_a_recorded_nvml_peak_is_the_one_used(tmp_path, decode_doc):
    doc = copy_doc(decode_doc)
    gpu = doc["machine_info"]["cuda"]["gpu_name"]
    recorded = choose_peak("Some Future GPU", 1500, 2048)       # not the table's value: its use shows
    doc["machine_info"]["cuda"]["peak_memory_bandwidth"] = recorded
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    text = roofline_tables.render_decode_roofline([load_run(str(path))])
    assert f"Peak memory bandwidth of {gpu}: {recorded['gbps']:.0f} GB/s from NVML" in text
    rows = roofline_tables.decode_roofline_rows([load_run(str(path))])
    assert {r["peak_gbps"] for r in rows} == {recorded["gbps"]} and {r["peak_source"] for r in rows} == {"nvml"}


def test_a_decode_run_without_bytes_has_no_roofline(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(README)
    docs = tmp_path / "docs"
    assert cli_main(["report", str(DECODE), "-o", str(docs), "--readme", str(readme)]) == 0
    for text in (readme.read_text(), (docs / "results.md").read_text()):
        assert "Decode roofline" not in text and "Peak memory bandwidth" not in text
        assert "Greedy decode at batch 1" in text                  # the decode table itself is there
    assert not (docs / pages.DECODE_BANDWIDTH_PNG).exists()
    assert roofline_tables.render_decode_roofline([load_run(str(DECODE))]) is None


# ---------------------------------------------------------------------------- forward busy time


def with_busy_times(doc: dict) -> dict:
    """Copy of a forward run whose eager benchmarks with kernel counts carry a GPU busy time: the fastest
    round of the case's graph replay (a time the GPU certainly needed no more than)."""
    doc = copy_doc(doc)
    graphs = {(i["model"], i["dtype"], i["seq_len"]): min(b["stats"]["data"]) * 1e3
              for b in doc["benchmarks"] if (i := b["extra_info"])["variant"] == "graph"}
    for b in doc["benchmarks"]:
        i = b["extra_info"]
        if i["variant"] == "eager" and i.get("n_kernels"):
            i["gpu_busy_ms"] = graphs[(i["model"], i["dtype"], i["seq_len"])]
    return doc


def medians_ms(doc: dict) -> dict:
    import statistics

    return {(i["model"], i["dtype"], i["seq_len"], i["variant"]): statistics.median(b["stats"]["data"]) * 1e3
            for b in doc["benchmarks"] if (i := b["extra_info"])}


def test_results_show_busy_time_and_overhead_per_forward_case(tmp_path):
    doc = with_busy_times(read_json(FORWARD))
    run = tmp_path / "forward-busy.json"
    run.write_text(json.dumps(doc))
    readme = tmp_path / "README.md"
    readme.write_text(README)
    docs = tmp_path / "docs"
    assert cli_main(["report", str(run), "-o", str(docs), "--readme", str(readme)]) == 0
    results = (docs / "results.md").read_text()
    rows = table_after(results, "### GPU busy time and overhead")
    medians = medians_ms(doc)
    eager = {(i["model"], i["dtype"], i["seq_len"]): i for b in doc["benchmarks"]
             if (i := b["extra_info"])["variant"] == "eager" and "gpu_busy_ms" in i}
    assert {(r["model"], r["dtype"], int(r["L (tokens)"])) for r in rows} == set(eager)
    for r in rows:
        key = (r["model"], r["dtype"], int(r["L (tokens)"]))
        busy, n = eager[key]["gpu_busy_ms"], eager[key]["n_kernels"]
        for variant, per in (("eager", "eager overhead µs/kernel"), ("graph", "graph overhead µs/node")):
            over = medians[(*key, variant)] - busy
            assert r[f"{variant} overhead ms"] == f"{over:.3f}"
            assert r[per] == f"{over * 1000 / n:.2f}"
        assert r["GPU busy ms"] == f"{busy:.3f}" and r["kernels"] == str(n)
        assert r["busy % of graph"] == f"{100 * busy / medians[(*key, 'graph')]:.1f}"
    assert (docs / pages.BUSY_PNG).read_bytes()[:4] == b"\x89PNG" and f"]({pages.BUSY_PNG})" in results
    assert "GPU busy" not in readme.read_text()                    # the README keeps its forward summary only


def test_a_forward_run_without_busy_times_renders_as_before(tmp_path):
    docs = tmp_path / "docs"
    assert cli_main(["report", str(FORWARD), "-o", str(docs)]) == 0
    assert "GPU busy" not in (docs / "results.md").read_text()
    assert not (docs / pages.BUSY_PNG).exists()
    assert roofline_tables.forward_busy_rows([load_run(str(FORWARD))]) == []


def test_busy_plot_draws_busy_eager_and_graph_per_length(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(with_busy_times(read_json(FORWARD))))
    rows = roofline_tables.forward_busy_rows([load_run(str(path))])
    fig = plots.busy_vs_length(rows, gpu="GPU")
    panels = sorted({(r["model"], r["dtype"]) for r in rows})
    assert [ax.get_title() for ax in fig.axes] == [f"{m} {d}" for m, d in panels]
    ax, (model, dtype) = fig.axes[0], panels[0]
    panel = sorted((r for r in rows if (r["model"], r["dtype"]) == (model, dtype)), key=lambda r: r["seq_len"])
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["GPU busy (sum of kernel times)"].get_ydata()) == [r["busy_ms"] for r in panel]
    assert list(lines["graph median"].get_xdata()) == [r["seq_len"] for r in panel]
    with pytest.raises(ValueError):
        plots.busy_vs_length([])


def test_bandwidth_plot_has_a_bar_per_benchmark_and_the_peak(tmp_path, decode_doc):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(decode_doc))
    rows = roofline_tables.decode_roofline_rows([load_run(str(path))])
    fig = plots.decode_bandwidth(rows)
    ax = fig.axes[0]
    widths = sorted(p.get_width() for p in ax.patches)
    assert widths == pytest.approx(sorted(r["achieved_gbps"] for r in rows))
    peaks = [line.get_xdata()[0] for line in ax.get_lines()]
    assert peaks == [rows[0]["peak_gbps"]]
    with pytest.raises(ValueError):
        plots.decode_bandwidth([])


def test_a_cpu_decode_run_names_no_gpu_peak(tmp_path, decode_doc):
    """A CPU run (no ``machine_info.cuda``) has no GPU whose peak bandwidth could be unknown: the page says it is
    a CPU run instead of naming "no CUDA GPU"."""
    doc = copy_doc(decode_doc)
    doc["machine_info"]["cuda"] = None
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    lines = roofline_tables.peak_lines([load_run(str(path))])
    assert lines == ["Peak memory bandwidth: none (a CPU run: no GPU peak to hold the bytes per token against)."]
