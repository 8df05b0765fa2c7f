"""Launch-overhead report: N-sweep table, plot, predicted vs measured saving, docs page (CPU only).

Most runs here are small synthetic pytest-benchmark dicts built in the test; expected numbers are
worked out by hand from them. The tests of the data-driven sentences (speedup vs N, sanitizer cases)
also read the committed H200 files under ``results/nvidia-h200/launch`` and check the sentences against
numbers computed from them.
"""

import json
from pathlib import Path

import pytest

from cudagraph_bench import cli
from cudagraph_bench.report import launch_data, plots
from cudagraph_bench.report import launch_page as lr
from cudagraph_bench.errors import InputFileError, UsageError
from cudagraph_bench.fsio import save_figure

pytestmark = pytest.mark.transformers_free


def bench(median_s=0.001, rounds=50, data=None, **info):
    """One pytest-benchmark entry (stats in seconds) with ``extra_info=info``."""
    stats = {"min": median_s, "max": median_s, "mean": median_s, "median": median_s, "stddev": 0.0,
             "rounds": rounds, "iterations": 1}
    if data is not None:
        stats["data"] = data
    name = "test_" + "-".join(f"{v}" for v in info.values() if not isinstance(v, list))
    return {"group": None, "name": name, "fullname": f"perf_tests/x.py::{name}", "stats": stats,
            "extra_info": info}


def launch_bench(n, variant, event_median_ms, **extra):
    return bench(suite="launch", n_launches=n, variant=variant, event_median_ms=event_median_ms, **extra)


def fwd(model, seq_len, variant, event_median_ms, **extra):
    return bench(suite="forward", model=model, dtype="float32", seq_len=seq_len, variant=variant, batch=1,
                 event_median_ms=event_median_ms, **extra)


def make_run(benchmarks):
    return {"machine_info": {"node": "test", "cuda": {"gpu_name": "Test GPU", "torch": "2.11.0+cu130",
                                                       "cuda_runtime": "13.0", "driver": "580.00"}},
            "commit_info": {}, "benchmarks": benchmarks, "datetime": "2026-01-01T00:00:00", "version": "5.3.1"}


CLOCKS_512_LOOP = {"clock_issue_ms": 1.0, "clock_synced_wall_ms": 1.1, "clock_event_ms": 1.05}

LAUNCH = [
    launch_bench(8, "loop", 0.016), launch_bench(8, "graph", 0.016),
    launch_bench(512, "loop", 1.024, **CLOCKS_512_LOOP), launch_bench(512, "graph", 0.256),
    launch_bench(4096, "loop", 8.192), launch_bench(4096, "graph", 1.024),
    launch_bench(64, "loop", 0.128),                                   # graph variant missing
]
FORWARD = [
    fwd("gpt2", 50, "eager", 10.0, n_kernels=400), fwd("gpt2", 50, "graph", 4.0),
    fwd("gpt2", 16, "eager", 8.0), fwd("gpt2", 16, "graph", 3.0),       # no n_kernels: not modelled
    fwd("bert-tiny", 16, "eager", 2.0, n_kernels=100),                  # no graph: not modelled
    fwd("bert-tiny", 128, "eager", 1.0, n_kernels=1000), fwd("bert-tiny", 128, "graph", 0.5),
    fwd("gpt2", 50, "padded", 5.0),
]


def test_launch_rows_values_and_missing_variant():
    rows = launch_data.launch_rows(make_run(LAUNCH + FORWARD))
    assert [r.n_launches for r in rows] == [8, 64, 512, 4096]
    r512 = rows[2]
    assert (r512.loop_ms, r512.graph_ms) == (1.024, 0.256)
    assert r512.speedup == 4.0
    assert r512.us_per_launch_loop == pytest.approx(2.0)
    assert r512.us_per_launch_graph == pytest.approx(0.5)
    assert r512.loop_clocks == {"issue_ms": 1.0, "synced_wall_ms": 1.1, "event_ms": 1.05}
    assert r512.graph_clocks is None
    assert r512.rounds == 50
    r64 = rows[1]
    assert r64.graph_ms is None and r64.speedup is None and r64.us_per_launch_graph is None
    assert not r64.complete


def test_median_falls_back_from_event_median_to_event_list_to_wall_stats():
    b1 = bench(median_s=0.5, suite="launch", n_launches=8, variant="loop", cuda_event_ms=[3.0, 1.0, 2.0, 10.0])
    b2 = bench(median_s=0.004, suite="launch", n_launches=8, variant="graph")
    b3 = bench(median_s=0.5, data=[0.001, 0.003, 0.002], suite="launch", n_launches=16, variant="graph")
    b4 = bench(median_s=0.5, suite="launch", n_launches=16, variant="loop", event_median_ms=7.0,
               cuda_event_ms=[1.0])
    ms = launch_data.measurements(launch_data.as_run(make_run([b1, b2, b3, b4])))
    assert [launch_data.bench_median_ms(m) for m in ms.values()] == [
        (2.5, "cuda-event"), (4.0, "wall"), (pytest.approx(2.0), "wall"), (7.0, "cuda-event")]
    rows = launch_data.launch_rows(make_run([b1, b2]))
    assert rows[0].clock == "cuda-event+wall"


def test_launch_rows_reject_bad_and_duplicate_entries():
    assert launch_data.launch_rows(make_run(FORWARD)) == []                     # no launch suite: no rows
    with pytest.raises(InputFileError, match="twice"):
        launch_data.launch_rows(make_run([launch_bench(8, "loop", 1.0), launch_bench(8, "loop", 2.0)]))
    with pytest.raises(InputFileError, match="n_launches"):
        launch_data.launch_rows(make_run([bench(suite="launch", variant="loop")]))
    with pytest.raises(InputFileError, match="variant"):
        launch_data.launch_rows(make_run([launch_bench(8, "eager", 1.0)]))
    with pytest.raises(InputFileError, match="benchmarks"):
        launch_data.launch_rows({"not": "a run"})


def test_launch_table_markdown_literal():
    table = lr.launch_table_markdown(launch_data.launch_rows(make_run(LAUNCH)))
    assert table.splitlines() == [
        "| N | loop ms | graph ms | speedup × | µs/launch loop | µs/launch graph |",
        "|---:|---:|---:|---:|---:|---:|",
        "| 8 | 0.0160 | 0.0160 | 1.00 | 2.000 | 2.000 |",
        "| 64 | 0.1280 | - | - | 2.000 | - |",
        "| 512 | 1.0240 | 0.2560 | 4.00 | 2.000 | 0.500 |",
        "| 4096 | 8.1920 | 1.0240 | 8.00 | 2.000 | 0.250 |",
    ]


def test_clocks_table_only_when_clock_fields_exist():
    rows = launch_data.launch_rows(make_run(LAUNCH))
    table = lr.clocks_table_markdown(rows)
    assert table.splitlines()[2] == "| 512 | loop | 1.0000 | 1.1000 | 1.0500 |"
    assert len(table.splitlines()) == 3
    assert lr.clocks_table_markdown(launch_data.launch_rows(make_run(LAUNCH[:2]))) is None


def test_reference_row_prefers_512_else_largest_complete():
    rows = launch_data.launch_rows(make_run(LAUNCH))
    assert launch_data.reference_row(rows).n_launches == 512
    assert launch_data.reference_row(rows, reference_n=64).n_launches == 4096     # 64 lacks the graph variant
    assert launch_data.reference_row([r for r in rows if r.n_launches != 512]).n_launches == 4096
    assert launch_data.reference_row(launch_data.launch_rows(make_run([launch_bench(8, "loop", 1.0)]))) is None


def test_saving_rows_predicted_vs_measured_literal():
    run = make_run(LAUNCH + FORWARD)
    ref = launch_data.reference_row(launch_data.launch_rows(run))          # N=512: loop 2.0 µs, graph 0.5 µs per launch
    rows = launch_data.saving_rows(run, ref)
    assert [(r["model"], r["seq_len"]) for r in rows] == [("bert-tiny", 128), ("gpt2", 50)]
    bert, gpt2 = rows
    # gpt2 L=50: 400 kernels x 1.5 µs = 0.6 ms predicted; 10.0 - 4.0 = 6.0 ms measured
    assert gpt2["predicted_saving_ms"] == pytest.approx(0.6)
    assert gpt2["measured_saving_ms"] == pytest.approx(6.0)
    assert gpt2["measured_over_predicted"] == pytest.approx(10.0)
    # bert-tiny L=128: 1000 x 1.5 µs = 1.5 ms predicted; 0.5 ms measured
    assert bert["predicted_saving_ms"] == pytest.approx(1.5)
    assert bert["measured_saving_ms"] == pytest.approx(0.5)
    assert bert["clock"] == "cuda-event"
    table = lr.saving_table_markdown(rows).splitlines()
    assert table[0] == ("| model | dtype | tokens | kernels | eager ms | graph ms | measured saving ms | "
                        "predicted saving ms | measured / predicted |")
    assert table[3] == "| gpt2 | float32 | 50 | 400 | 10.000 | 4.000 | 6.000 | 0.600 | 10.00 |"


def test_render_section_handles_missing_suites():
    no_launch = lr.render_launch_section(make_run(FORWARD))
    assert "No launch-suite benchmarks" in no_launch
    no_forward = lr.render_launch_section(make_run(LAUNCH))
    assert "| 512 | 1.0240 | 0.2560 | 4.00 | 2.000 | 0.500 |" in no_forward
    assert "Not checked here: no forward case of these runs has an eager benchmark with kernel counts" in no_forward
    assert "predicted saving =" not in no_forward  # no formula over an empty table
    both = lr.render_launch_section(make_run(LAUNCH + FORWARD))
    assert "| gpt2 | float32 | 50 | 400 |" in both
    assert "(2.000 − 0.500) µs" in both
    only_loop = lr.render_launch_section(make_run([launch_bench(8, "loop", 1.0)]))
    assert "no model" in only_loop


def test_speedup_figure_axes_are_log_x_and_labelled_with_units():
    rows = launch_data.launch_rows(make_run(LAUNCH))
    fig = plots.speedup_figure({"torch": rows})
    ax_s, ax_us = fig.axes
    for ax in (ax_s, ax_us):
        assert ax.get_xscale() == "log"
        assert ax.get_xlabel() == "launches per sequence N (log scale)"
    assert "(×)" in ax_s.get_ylabel() and "µs" in ax_us.get_ylabel()
    speedup_line = ax_s.get_lines()[0]
    assert list(speedup_line.get_xdata()) == [8, 512, 4096]          # N=64 has no graph: not plotted
    assert list(speedup_line.get_ydata()) == [1.0, 4.0, 8.0]
    with pytest.raises(UsageError, match="nothing to plot"):
        plots.speedup_figure({"torch": [r for r in rows if not r.complete]})


def test_save_speedup_plot_writes_png_atomically(tmp_path):
    figure = plots.speedup_figure({"torch": launch_data.launch_rows(make_run(LAUNCH))})
    path = save_figure(figure, tmp_path / "sub" / "plot.png", dpi=plots.PLOT_DPI)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in path.parent.iterdir()] == ["plot.png"]


GRAPHS_CU = {
    "program": "graphs.cu", "mode": "full", "repeats": 50, "warmup": 1,
    "device": {"name": "Test GPU", "compute_capability": "9.0", "cuda_runtime": 13000, "cuda_driver": 13000},
    "sweep": [
        {"n_launches": 512, "loop_ms": 1.28, "graph_ms": 0.64, "clocks": {
            "loop": {"issue_ms": 1.2, "synced_wall_ms": 1.3, "event_ms": 1.28},
            "graph": {"issue_ms": 0.01, "synced_wall_ms": 0.7, "event_ms": 0.64}}},
        {"n_launches": 8, "loop_ms": 0.02, "graph_ms": 0.02},
    ],
    "baked_pointer_keep_alive": {"old_value": 16, "expected_old_value": 16, "d2_value": 0},
    "baked_pointer": {"chain_ptrs": [1, 2, 3, 4, 5], "aliased_index": 0, "aliased_value": 8, "d2_value": 0,
                      "launch_error": "cudaSuccess", "sync_error": "cudaSuccess"},
}


def test_graphs_cu_rows_and_bad_input():
    rows = launch_data.graphs_cu_rows(GRAPHS_CU)
    assert [r.n_launches for r in rows] == [8, 512]
    assert rows[1].speedup == 2.0 and rows[1].us_per_launch_loop == pytest.approx(2.5)
    assert rows[1].graph_clocks == {"issue_ms": 0.01, "synced_wall_ms": 0.7, "event_ms": 0.64}
    with pytest.raises(InputFileError, match="sweep"):
        launch_data.graphs_cu_rows({"mode": "baked-pointer-only"})
    with pytest.raises(InputFileError, match="n_launches"):
        launch_data.graphs_cu_rows({"sweep": [{"loop_ms": 1.0}]})


SANITIZER_LOG = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at tiny(float *)+0x70 in graphs.cu:55
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f3a00000000 is out of bounds
=========     and is 8,388,609 bytes after the nearest allocation at 0x7f39ff800000 of size 4 bytes
=========
========= Invalid __global__ write of size 4 bytes
=========     at tiny(float *)+0x70 in graphs.cu:55
=========     Address 0x7f3a00000000 is out of bounds
========= ERROR SUMMARY: 2 errors
"""


def test_parse_sanitizer_log():
    assert launch_data.parse_sanitizer_log(SANITIZER_LOG) == {
        "invalid_global_writes": 2, "invalid_global_reads": 0, "error_summary": 2,
        "first_address": "0x7f3a00000000", "first_address_note": "is out of bounds"}
    clean = launch_data.parse_sanitizer_log("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n")
    assert clean["invalid_global_writes"] == 0 and clean["error_summary"] == 0
    assert launch_data.parse_sanitizer_log("")["error_summary"] is None


def test_baked_pointer_outcome_branches():
    assert "allocation #0" in launch_data.baked_pointer_outcome(GRAPHS_CU["baked_pointer"])
    fault = {"launch_error": "cudaSuccess", "sync_error": "cudaErrorIllegalAddress", "aliased_index": -1}
    assert "cudaErrorIllegalAddress" in launch_data.baked_pointer_outcome(fault)
    silent = {"launch_error": "cudaSuccess", "sync_error": "cudaSuccess", "aliased_index": -1, "d2_value": 0}
    assert "without a fault" in launch_data.baked_pointer_outcome(silent)


def test_write_launch_page_from_json_only(tmp_path):
    run = make_run(LAUNCH + FORWARD)
    page, plot = lr.write_launch_page(run, tmp_path / "docs", source="baselines/test/run.json",
                                      graphs_cu=GRAPHS_CU, sanitizer={"d4.log": SANITIZER_LOG})
    assert page.name == "launch-overhead.md" and plot.name == "launch_speedup_vs_n.png"
    assert plot.read_bytes()[:4] == b"\x89PNG"
    text = page.read_text()
    assert "baselines/test/run.json" in text and "GPU Test GPU" in text
    assert "| 4096 | 8.1920 | 1.0240 | 8.00 | 2.000 | 0.250 |" in text
    assert "![graph replay speedup and µs per launch vs N](launch_speedup_vs_n.png)" in text
    assert "At N=512 the eager loop costs 2.000 µs per launch and the graph replay 0.500 µs" in text
    assert "| gpt2 | float32 | 50 | 400 | 10.000 | 4.000 | 6.000 | 0.600 | 10.00 |" in text
    assert "| 512 | 1.2800 | 0.6400 | 2.00 | 2.500 | 1.250 |" in text          # graphs.cu table
    assert "| 512 | graph | 0.0100 | 0.7000 | 0.6400 |" not in text            # clocks table is the torch run's
    assert "| 512 | loop | 1.0000 | 1.1000 | 1.0500 |" in text
    assert "2 invalid global write(s)" in text
    for topic in ("## How the speedup depends on N", "## Host issue time vs device time", "## Baked pointers",
                  "cudaGraphExecUpdate", "recapture"):
        assert topic in text
    assert "Medians of 50 rounds" in text


def test_write_launch_page_without_launch_suite_raises_and_writes_nothing(tmp_path):
    with pytest.raises(InputFileError, match="no launch-suite"):
        lr.write_launch_page(make_run(FORWARD), tmp_path, source="x.json")
    assert list(tmp_path.iterdir()) == []


def test_a_cpu_run_without_launch_benchmarks_says_they_need_a_cuda_gpu(tmp_path):
    """The launch tests skip on the CPU: a CPU run's hint names the GPU they need, a GPU run's only the command."""
    cpu = make_run(FORWARD)
    cpu["machine_info"]["cuda"] = None
    with pytest.raises(InputFileError, match="it is a CPU run, and the launch benchmarks need a CUDA GPU: on a GPU "
                                             "machine, run pytest perf_tests/test_launch.py"):
        lr.write_launch_page(cpu, tmp_path, source="x.json")
    gpu = make_run(FORWARD)
    gpu["machine_info"]["cuda"]["gpu_slug"] = "test-gpu"
    with pytest.raises(InputFileError, match=r"\(extra_info suite 'launch'\): run pytest perf_tests/test_launch.py"):
        lr.write_launch_page(gpu, tmp_path, source="x.json")


def test_main_writes_page_and_maps_bad_input_to_exit_2(tmp_path, capsys):
    run_path = tmp_path / "run.json"
    run_path.write_text(json.dumps(make_run(LAUNCH)))
    gcu = tmp_path / "graphs_cu.json"
    gcu.write_text(json.dumps(GRAPHS_CU))
    log = tmp_path / "compute_sanitizer_d4.log"
    log.write_text(SANITIZER_LOG)
    # the program's stdout saved next to the log: diagnostics, then the JSON object line
    bp = dict(GRAPHS_CU["baked_pointer"], d_bytes=4)
    (tmp_path / "compute_sanitizer_d4.json").write_text("noise\n" + json.dumps({"baked_pointer": bp}) + "\n")
    out = tmp_path / "docs"
    assert cli.main(["launch-report", str(run_path), "-o", str(out), "--graphs-cu", str(gcu), "--sanitizer", str(log)]) == 0
    assert (out / "launch_speedup_vs_n.png").is_file()
    text = (out / "launch-overhead.md").read_text()
    assert "`compute_sanitizer_d4.log`: 0 invalid global read(s) and 2 invalid global write(s)" in text
    assert "Program: captured buffer of 4 bytes; allocation #0 made after the free" in text

    fwd_only = tmp_path / "fwd.json"
    fwd_only.write_text(json.dumps(make_run(FORWARD)))
    assert cli.main(["launch-report", str(fwd_only), "-o", str(tmp_path / "d2")]) == 2
    assert "no launch-suite benchmarks" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert cli.main(["launch-report", str(run_path), "-o", str(out), "--graphs-cu", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    packed = tmp_path / "graphs_cu.json.gz"        # a compressed copy of the real output: not UTF-8 text
    packed.write_bytes(__import__("gzip").compress(gcu.read_bytes()))
    assert cli.main(["launch-report", str(run_path), "-o", str(out), "--graphs-cu", str(packed)]) == 2
    err = capsys.readouterr().err
    assert "is not UTF-8 JSON" in err and "Traceback" not in err and err.count("\n") == 1
    assert cli.main(["launch-report", str(tmp_path / "missing.json"), "-o", str(out)]) == 2
    capsys.readouterr()
    for not_a_log in (bad, gcu):  # files that are not compute-sanitizer output
        assert cli.main(["launch-report", str(run_path), "-o", str(out), "--sanitizer", str(not_a_log)]) == 2
        err = capsys.readouterr().err
        assert f"{not_a_log} is not a compute-sanitizer log" in err and err.count("\n") == 1


# ------------------------------------------------------------- data-driven sentences (committed H200 JSON)

H200 = Path(__file__).resolve().parents[1] / "results" / "nvidia-h200" / "launch"
LAUNCH_RUN = H200 / "launch.json.gz"


def h200_series():
    from h200_fixture import read_json

    run = read_json(LAUNCH_RUN)
    graphs_cu = json.loads((H200 / "graphs_cu.json").read_text())
    return {"torch": launch_data.launch_rows(run), "CUDA C++": launch_data.graphs_cu_rows(graphs_cu)}, run, graphs_cu


def test_speedup_summary_matches_committed_h200_tables():
    series, _, _ = h200_series()
    text = lr.speedup_vs_n_summary(series)
    shown = {label: [(r.n_launches, format(r.speedup, ".2f")) for r in rows if r.speedup is not None]
             for label, rows in series.items()}
    torch, cpp = shown["torch"], shown["CUDA C++"]
    assert torch[0][0] == cpp[0][0] and torch[-1][0] == cpp[-1][0]      # same smallest / largest N
    assert (f"at the smallest N measured (N={torch[0][0]}) was {torch[0][1]}× (torch) / {cpp[0][1]}× (CUDA C++) "
            f"and at the largest (N={torch[-1][0]}) {torch[-1][1]}× / {cpp[-1][1]}×.") in text
    # every speedup the table prints is named in the path, with its N
    for label, points in shown.items():
        for n, x in points:
            assert f"{x}× at N={n}" in text, (label, n, x)
    # monotonic / not monotonic as the printed values say
    for label, points in shown.items():
        values = [float(x) for _, x in points]
        steps = [b - a for a, b in zip(values, values[1:])]
        monotonic = all(d >= 0 for d in steps) or all(d <= 0 for d in steps)
        assert f"The {label} speedup is {'monotonic' if monotonic else 'not monotonic'} in N:" in text
    # the sentence names each N's printed speedup in order, rising or falling as the values do
    for label, points in shown.items():
        values = [float(x) for _, x in points]
        if values == sorted(values):
            assert (f"The {label} speedup is monotonic in N: from {points[0][1]}× at N={points[0][0]} it rises to "
                    + ", ".join(f"{x}× at N={n}" for n, x in points[1:-1])
                    + f" and {points[-1][1]}× at N={points[-1][0]}.") in text


def test_speedup_summary_explains_each_fall_from_the_per_launch_columns():
    series, _, _ = h200_series()
    text = lr.speedup_vs_n_summary(series)
    cpp = [r for r in series["CUDA C++"] if r.speedup is not None]
    falls = [(a, b) for a, b in zip(cpp, cpp[1:]) if float(format(b.speedup, ".2f")) < float(format(a.speedup, ".2f"))]
    assert falls, "the committed CUDA C++ series falls somewhere (its sentence says 'not monotonic')"
    for a, b in falls:
        loop_f = b.us_per_launch_loop / a.us_per_launch_loop
        graph_f = b.us_per_launch_graph / a.us_per_launch_graph
        assert loop_f < graph_f                       # why the speedup falls, by construction
        assert (f"N={a.n_launches} → {b.n_launches}: loop {a.us_per_launch_loop:.3f} → {b.us_per_launch_loop:.3f} µs "
                f"(×{loop_f:.3f}), graph {a.us_per_launch_graph:.3f} → {b.us_per_launch_graph:.3f} µs "
                f"(×{graph_f:.3f})") in text
    assert "The torch speedup falls" not in text      # torch never falls: no such sentence


def test_speedup_summary_synthetic_cases():
    rows = launch_data.launch_rows(make_run(LAUNCH))            # 1.00, 4.00, 8.00 (N=64 has no graph: skipped)
    one = lr.speedup_vs_n_summary({"torch": rows})
    assert one.startswith("On this GPU the torch speedup was 1.00× at the smallest N measured (N=8) and 8.00× "
                          "at the largest (N=4096); it is monotonic in N: from 1.00× at N=8 it rises to 4.00× "
                          "at N=512 and 8.00× at N=4096.")
    assert "falls" not in one
    # series with different N ranges get one sentence each; a flat step "stays"
    flat = launch_data.launch_rows(make_run([launch_bench(8, "loop", 0.02), launch_bench(8, "graph", 0.01),
                                    launch_bench(16, "loop", 0.04), launch_bench(16, "graph", 0.02)]))
    both = lr.speedup_vs_n_summary({"torch": rows, "CUDA C++": flat})
    assert "The CUDA C++ speedup was 2.00× at the smallest N measured (N=8) and 2.00× at the largest (N=16); " \
           "it is monotonic in N: from 2.00× at N=8 it stays at 2.00× at N=16." in both
    single = lr.speedup_vs_n_summary({"torch": [r for r in rows if r.n_launches == 512]})
    assert single == "On this GPU the torch speedup was measured at one N only: 4.00× at N=512."
    assert lr.speedup_vs_n_summary({"torch": [r for r in rows if not r.complete]}) == ""


def test_why_n_prose_claims_nothing_the_tables_can_contradict():
    prose = lr._PROSE_WHY_N
    assert "gains little or nothing" not in prose
    assert "rises with N towards" not in prose
    assert "need not rise at every step of N" in prose
    assert not any(ch.isdigit() for ch in prose)       # numbers come from the data only


def committed_sanitizer_inputs():
    logs, outcomes = {}, {}
    for log in sorted(H200.glob("compute_sanitizer_d*.log")):
        logs[log.name] = log.read_text()
        outcomes[log.name] = launch_data.last_json_object(log.with_suffix(".json"))["baked_pointer"]
    return logs, outcomes


def test_sanitizer_section_states_which_case_each_committed_log_hit():
    logs, outcomes = committed_sanitizer_inputs()
    assert logs, f"no compute_sanitizer_d*.log under {H200}"
    text = "\n".join(lr._sanitizer_section(logs, outcomes))
    reused, free, flagged, quiet = [], [], [], []
    for name, log in logs.items():
        findings = launch_data.parse_sanitizer_log(log)
        invalid = findings["invalid_global_reads"] + findings["invalid_global_writes"]
        bp = outcomes[name]
        if bp.get("alloc_before_free"):   # every allocation made while d lived: none can reuse its address
            assert bp["aliased_index"] == -1, (name, bp)
        line = next(l for l in text.splitlines() if l.startswith(f"- `{name}`"))
        assert (f"{findings['invalid_global_reads']} invalid global read(s) and "
                f"{findings['invalid_global_writes']} invalid global write(s) reported, "
                f"ERROR SUMMARY {findings['error_summary']} error(s)") in line
        if bp["aliased_index"] >= 0:
            reused.append(name)
            assert (f"Case observed: the captured address was reused by allocation #{bp['aliased_index']} made "
                    "after the free, so the replay wrote live memory: memcheck has nothing to flag") in line
            if invalid == 0:
                quiet.append(name)
                assert "memcheck reported no invalid access, as expected in this case" in line
        else:
            free.append(name)
            assert "no allocation reused the captured address" in line
            if invalid:
                flagged.append(name)
                assert f"memcheck flagged it ({invalid} invalid global access(es)), as expected" in line
    # the committed runs cover both cases: a reused address (memcheck blind) and a freed one (memcheck sees it)
    assert reused and free, (reused, free)
    n = len(logs)
    assert text.count("memcheck reported no invalid access, as expected in this case") == len(quiet)
    assert (f"Address reused by a new allocation (memcheck cannot flag the access): {len(reused)} of {n} run(s); "
            f"no reuse (memcheck should flag the access): {len(free)} of {n}. memcheck flagged the access in "
            f"{len(flagged)} of the {len(free)} run(s) without reuse.") in text


def test_sanitizer_case_branches():
    clean = launch_data.parse_sanitizer_log("========= ERROR SUMMARY: 0 errors\n")
    flagged = launch_data.parse_sanitizer_log(SANITIZER_LOG)
    ok = {"launch_error": "cudaSuccess", "sync_error": "cudaSuccess"}
    assert launch_data.sanitizer_case(clean, dict(ok, aliased_index=2))[0] == "reused"
    assert "allocation #2" in launch_data.sanitizer_case(clean, dict(ok, aliased_index=2))[1]
    case, sentence = launch_data.sanitizer_case(flagged, dict(ok, aliased_index=-1))
    assert case == "not-reused" and "memcheck flagged it (2 invalid global access(es)), as expected" in sentence
    case, sentence = launch_data.sanitizer_case(clean, dict(ok, aliased_index=-1))
    assert case == "not-reused" and "against what this case predicts" in sentence
    assert "does not explain" in launch_data.sanitizer_case(flagged, dict(ok, aliased_index=0))[1]
    assert launch_data.sanitizer_case(clean, None)[0] == "unknown"
    # a run without reuse where memcheck flagged the write: the summary says the case was observed
    text = "\n".join(lr._sanitizer_section({"a.log": SANITIZER_LOG}, {"a.log": dict(ok, aliased_index=-1)}))
    assert "no reuse (memcheck should flag the access): 1 of 1. memcheck flagged the access in 1 of the 1" in text
    assert "was not observed" not in text
    missing = "\n".join(lr._sanitizer_section({"b.log": SANITIZER_LOG}))
    assert "not known (program output missing): 1 of 1" in missing


def test_baked_prose_states_the_memcheck_case_as_expected_not_as_fact():
    prose = " ".join(lr._PROSE_BAKED.split())
    assert "which compute-sanitizer's memcheck reports as an invalid global write" not in prose
    assert "that is the case memcheck is expected to report as an invalid global write" in prose
    assert "memcheck sees a write into live memory and reports nothing" in prose


# --------------------------------------------------------------- command line: inputs, -o, --reference-n

def write_run(path, benchmarks, when="2026-01-01T00:00:00"):
    doc = make_run(benchmarks)
    doc["datetime"] = when
    path.write_text(json.dumps(doc))
    return path


def test_forward_case_in_two_runs_is_an_error_in_either_order(tmp_path, capsys):
    launch = write_run(tmp_path / "launch.json", LAUNCH)
    counted = write_run(tmp_path / "counted.json", FORWARD)                  # eager with n_kernels
    uncounted = [dict(b, extra_info={k: v for k, v in b["extra_info"].items() if k != "n_kernels"})
                 for b in FORWARD]
    checked = write_run(tmp_path / "checked.json", uncounted, when="2026-01-02T00:00:00")
    for first, second in ((counted, checked), (checked, counted)):
        out = tmp_path / f"out-{first.stem}"
        assert cli.main(["launch-report", str(launch), "--forward", str(first), "--forward", str(second), "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert f"is in both {first} and {second}: give each forward case once" in err
        assert not out.exists()                                              # nothing written
    # the main run counts as a forward run too
    both = write_run(tmp_path / "both.json", LAUNCH + FORWARD)
    assert cli.main(["launch-report", str(both), "--forward", str(counted), "-o", str(tmp_path / "o2")]) == 2
    assert f"is in both {both} and {counted}" in capsys.readouterr().err
    assert cli.main(["launch-report", str(launch), "--forward", str(counted), "--forward", str(counted), "-o", str(tmp_path / "o3")]) == 2
    assert "given twice" in capsys.readouterr().err
    # disjoint forward runs: the model table holds the cases of both, each once
    gpt2 = write_run(tmp_path / "gpt2.json", [b for b in FORWARD if b["extra_info"]["model"] == "gpt2"])
    bert = write_run(tmp_path / "bert.json", [b for b in FORWARD if b["extra_info"]["model"] == "bert-tiny"])
    out = tmp_path / "ok"
    assert cli.main(["launch-report", str(launch), "--forward", str(gpt2), "--forward", str(bert), "-o", str(out)]) == 0
    text = (out / "launch-overhead.md").read_text()
    assert text.count("| gpt2 | float32 | 50 | 400 |") == 1 and text.count("| bert-tiny | float32 | 128 | 1000 |") == 1
    assert f"source run `{launch} + {gpt2} + {bert}`" in text


def test_committed_forward_runs_overlap_is_refused(tmp_path, capsys):
    """The user-test finding: forward.json (kernel counts) then forward-checked.json (none) gave 0 model rows."""
    forward, checked = (H200.parent / "forward" / f"{n}.json.gz" for n in ("forward", "forward-checked"))
    argv = [str(LAUNCH_RUN), "--forward", str(forward), "--forward", str(checked), "-o", str(tmp_path / "out")]
    assert cli.main(["launch-report", *argv]) == 2
    err = capsys.readouterr().err
    assert f"is in both {forward} and {checked}" in err
    assert not (tmp_path / "out").exists()


def test_library_refuses_a_modelled_case_from_two_forward_runs():
    with pytest.raises(InputFileError, match="bert-tiny float32 L=128 is in both forward run #1 and forward run #2"):
        lr.render_launch_page(make_run(LAUNCH), source="x", forward_runs=[make_run(FORWARD), make_run(FORWARD)])


def test_out_dir_default_empty_file_and_unwritable(tmp_path, monkeypatch, capsys):
    run = write_run(tmp_path / "run.json", LAUNCH)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    assert cli.main(["launch-report", str(run)]) == 0                                       # default: out/launch, not docs/
    assert (tmp_path / "out" / "launch" / "launch-overhead.md").is_file()
    assert (tmp_path / "out" / "launch" / "launch_speedup_vs_n.png").is_file()
    assert list((tmp_path / "docs").iterdir()) == []
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:                                # -o "" would write into ./
        cli.main(["launch-report", str(run), "-o", ""])
    assert exc.value.code == 2 and "expected a path" in capsys.readouterr().err
    afile = tmp_path / "afile"
    afile.write_text("keep")
    for bad in (afile, afile / "sub"):
        assert cli.main(["launch-report", str(run), "-o", str(bad)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{afile} is a file, not a folder" in err
    assert afile.read_text() == "keep"
    if Path("/proc/self").is_dir():
        assert cli.main(["launch-report", str(run), "-o", "/proc/x"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "-o /proc/x cannot be written" in err    # refused before any work
        assert "give a writable -o folder" in err


def test_failed_write_leaves_nothing_half_written(tmp_path, monkeypatch, capsys):
    run = write_run(tmp_path / "run.json", LAUNCH)
    out = tmp_path / "out"
    out.mkdir()
    (out / "launch-overhead.md").write_text("old page")                     # the user's: never replaced
    assert cli.main(["launch-report", str(run), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"-o {out} holds launch-overhead.md, which cudagraph-bench launch-report did not write" in err
    assert (out / "launch-overhead.md").read_text() == "old page" and len(list(out.iterdir())) == 1
    old = "<!-- generated by `cudagraph-bench launch-report` from run.json; do not edit by hand -->\nold page"
    (out / "launch-overhead.md").write_text(old)                            # an earlier launch-report's page
    real_chmod, calls = lr.os.chmod, []

    def full_disk(path, mode):                                          # the second file fails to write
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device", str(path))
        return real_chmod(path, mode)

    monkeypatch.setattr(lr.os, "chmod", full_disk)
    assert cli.main(["launch-report", str(run), "-o", str(out)]) == 2
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err and "no file was written" in err
    assert sorted(p.name for p in out.iterdir()) == ["launch-overhead.md"]   # no PNG, no temporary files
    assert (out / "launch-overhead.md").read_text() == old
    (out / "launch_speedup_vs_n.png").mkdir()                               # a target that is a folder
    assert cli.main(["launch-report", str(run), "-o", str(out)]) == 2
    assert "launch_speedup_vs_n.png is a folder" in capsys.readouterr().err
    assert (out / "launch-overhead.md").read_text() == old


def test_reference_n_must_be_a_measured_n(tmp_path, capsys):
    run = write_run(tmp_path / "run.json", LAUNCH + FORWARD)               # N 8, 512, 4096 complete; 64 loop only
    out = tmp_path / "out"
    for bad in ("0", "-1", "x", "7.5"):
        with pytest.raises(SystemExit) as exc:
            cli.main(["launch-report", str(run), "-o", str(out), "--reference-n", bad])
        assert exc.value.code == 2 and "--reference-n" in capsys.readouterr().err
    assert cli.main(["launch-report", str(run), "-o", str(out), "--reference-n", "7"]) == 2
    assert "--reference-n 7 was not measured: use one of 8, 512, 4096\n" in capsys.readouterr().err
    assert cli.main(["launch-report", str(run), "-o", str(out), "--reference-n", "64"]) == 2
    assert ("--reference-n 64 was measured with the loop variant only (the model needs loop and graph): "
            "use one of 8, 512, 4096") in capsys.readouterr().err
    assert not out.exists()
    assert cli.main(["launch-report", str(run), "-o", str(out), "--reference-n", "4096"]) == 0
    assert "loop − graph µs/launch at N=4096" in (out / "launch-overhead.md").read_text()
    no512 = write_run(tmp_path / "no512.json", [b for b in LAUNCH if b["extra_info"]["n_launches"] != 512])
    assert cli.main(["launch-report", str(no512), "-o", str(tmp_path / "o2")]) == 0           # the default still falls back
    assert "at N=4096" in (tmp_path / "o2" / "launch-overhead.md").read_text()


def test_model_caption_names_the_clock_of_its_medians():
    event = lr.render_launch_section(make_run(LAUNCH + FORWARD))
    assert ("measured saving = eager median − graph median, both CUDA-event medians (time between CUDA events "
            "recorded on the stream before and after each timed call") in event
    assert "not pytest-benchmark's wall-time `stats.median`" in event
    assert "| clock |" not in event
    wall_fwd = [dict(b, extra_info={k: v for k, v in b["extra_info"].items() if k != "event_median_ms"})
                for b in FORWARD]
    wall = lr.render_launch_section(make_run(LAUNCH + wall_fwd))
    assert "both synchronized host wall-time medians (pytest-benchmark `stats.median`)" in wall
    assert "| gpt2 | float32 | 50 | 400 | 1.000 | 1.000 | 0.000 |" in wall     # bench() stats.median is 1 ms
    mixed = lr.render_launch_section(make_run(LAUNCH + wall_fwd[:2] + FORWARD[2:]))
    assert "1 of 2 case(s) use CUDA events for both" in mixed
    assert "| measured / predicted | clock |" in mixed and "| 10.00 | wall |" not in mixed
    assert "| cuda-event |" in mixed and "| wall |" in mixed


def test_baked_pointer_outcome_names_the_call_that_failed():
    sync_fail = {"launch_error": "cudaSuccess", "sync_error": "cudaErrorLaunchFailure", "aliased_index": -1}
    text = launch_data.baked_pointer_outcome(sync_fail)
    assert text.startswith("the replay's launch (`cudaGraphLaunch`) returned cudaSuccess and its synchronize "
                           "(`cudaStreamSynchronize`) cudaErrorLaunchFailure: ")
    assert "cudaSuccess/" not in text and "failed with" not in text
    launch_fail = launch_data.baked_pointer_outcome({"launch_error": "cudaErrorInvalidValue", "sync_error": "cudaSuccess"})
    assert launch_fail.startswith("the replay's launch (`cudaGraphLaunch`) returned cudaErrorInvalidValue,")
    assert "synchronize" not in launch_fail


def test_storage_resolves_saved_run_ids(tmp_path, capsys, monkeypatch):
    storage = tmp_path / "bench-store"
    (storage / "Linux-CPython-3.12-64bit").mkdir(parents=True)
    saved = write_run(storage / "Linux-CPython-3.12-64bit" / "0001_abc_20260101_000000.json", LAUNCH)
    fwd_saved = write_run(storage / "Linux-CPython-3.12-64bit" / "0002_def_20260102_000000.json", FORWARD)
    out = tmp_path / "out"
    monkeypatch.setenv("CUDAGRAPH_BENCH_STORAGE", str(storage))
    assert cli.main(["launch-report", "0001", "--forward", "0002", "-o", str(out)]) == 0
    text = (out / "launch-overhead.md").read_text()
    assert f"source run `{saved} + {fwd_saved}`" in text and "| gpt2 | float32 | 50 | 400 |" in text
    assert cli.main(["launch-report", "0003", "-o", str(out)]) == 2
    assert "0003" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:   # the option is gone: the one line names the variable
        cli.main(["launch-report", "0001", "--storage", str(storage), "-o", str(out)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "$CUDAGRAPH_BENCH_STORAGE" in err


@pytest.mark.parametrize("flag", ["-o", "--output-dir"])
def test_every_spelling_of_the_output_folder_writes_there(tmp_path, capsys, flag):
    run = write_run(tmp_path / "run.json", LAUNCH)
    out = tmp_path / "pages"
    assert cli.main(["launch-report", str(run), flag, str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted([lr.PAGE_NAME, lr.PLOT_NAME])


def _help(capsys, command):
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize("command", ["run", "report", "launch-report", "ab"])
def test_output_folders_are_dash_o_output_dir_everywhere(capsys, command):
    text = _help(capsys, command)
    assert "-o DIR, --output-dir DIR" in text
    assert "--out-dir" not in text and "--out " not in text and "--out," not in text


def test_launch_report_positional_is_shown_as_RUN_like_the_others(capsys):
    usage = " ".join(_help(capsys, "launch-report").split("\n\n")[0].split())
    assert usage.endswith(" RUN") and " run" not in usage.replace("launch-report", "")


def test_forward_runs_of_another_gpu_are_refused_unless_allowed(tmp_path, capsys):
    # the predicted saving applies the launch run's cost per launch to the forward runs' medians
    launch = write_run(tmp_path / "launch.json", LAUNCH)
    other = make_run(FORWARD)
    other["machine_info"]["cuda"].update(gpu_name="Other GPU", gpu_slug="other-gpu")
    other_path = tmp_path / "other.json"
    other_path.write_text(json.dumps(other))
    out = tmp_path / "docs"
    assert cli.main(["launch-report", str(launch), "--forward", str(other_path), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the runs are from different GPUs" in err and "--allow gpu-mismatch" in err
    assert not out.exists()
    assert cli.main(["launch-report", str(launch), "--forward", str(other_path), "--allow", "gpu-mismatch",
                     "-o", str(out)]) == 0
    assert f"wrote {out / 'launch-overhead.md'}" in capsys.readouterr().err
    assert cli.main(["launch-report", str(launch), "-o", str(out)]) == 0
    assert f"replaced {out / 'launch-overhead.md'}" in capsys.readouterr().err
