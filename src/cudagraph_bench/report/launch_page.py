"""Launch-overhead report (no torch): N-sweep table, speedup-vs-N plot, predicted vs measured saving,
and the docs page ``docs/launch-overhead.md`` generated from a committed run JSON.

Input is a pytest-benchmark run (the dict of ``--benchmark-json``, or a
:class:`~cudagraph_bench.results.runfile.Run`) holding launch-suite benchmarks
(``extra_info.suite == "launch"``, written by ``perf_tests/test_launch.py``) and optionally
forward-suite ones whose eager variant carries ``extra_info["n_kernels"]``. Optionally also the JSON
printed by ``perf_tests/cuda/graphs.cu`` and compute-sanitizer logs of its baked-pointer mode.

Every number on the page comes from these files; the prose around them contains none.

Command line::

    cudagraph-bench launch-report RUN.json [-o docs/] [--forward FORWARD.json ...]
        [--graphs-cu graphs_cu.json] [--sanitizer compute_sanitizer_d4.log ...] [--reference-n 512]
        [--storage .benchmarks]

``-o`` defaults to ``out/launch`` (``scripts/regenerate_docs.sh`` passes ``-o docs``); each forward
case (model, dtype, tokens, variant) must come from one run only.

The general ``cudagraph-bench report`` command can call :func:`render_launch_section` and
:func:`save_speedup_plot`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cudagraph_bench.errors import InputFileError, UsageError
from cudagraph_bench.fsio import check_output_folder, figure_png, save_figure, write_files_atomic
from cudagraph_bench.results.launch_model import predicted_saving_ms
from cudagraph_bench.results.runfile import cuda_versions
from cudagraph_bench.table import Column, render_table

#: Sequence length whose µs/launch feeds the launch-overhead model (else the largest N measured).
REFERENCE_N = 512
PAGE_NAME = "launch-overhead.md"
PLOT_NAME = "launch_speedup_vs_n.png"
#: Where the command writes the page and its plot without ``-o`` (never the committed ``docs/``).
DEFAULT_OUT_DIR = "out/launch"
#: Resolution of the PNG (dots per inch), as :func:`cudagraph_bench.fsio.save_figure` writes it.
PLOT_DPI = 120
CLOCK_KEYS = ("clock_issue_ms", "clock_synced_wall_ms", "clock_event_ms")


# ----------------------------------------------------------------------------------- extraction

def _benchmarks(run) -> list[dict]:
    data = getattr(run, "data", run)
    if not (isinstance(data, dict) and isinstance(data.get("benchmarks"), list)):
        raise InputFileError("not a pytest-benchmark run: expected a dict with a 'benchmarks' list "
                             "(the file written by pytest --benchmark-json)")
    return [b for b in data["benchmarks"] if isinstance(b, dict)]


def _run_data(run) -> dict:
    return getattr(run, "data", run)


def bench_median_ms(bench: dict) -> tuple[float, str]:
    """Median time (ms) of one benchmark and the clock it comes from.

    Prefers device time: ``extra_info["event_median_ms"]``, else the median of
    ``extra_info["cuda_event_ms"]`` (both ``"cuda-event"``); falls back to pytest-benchmark's wall
    ``stats.median`` (seconds, synchronized) as ``"wall"``.
    Raises InputFileError when none of them is present.
    """
    info = bench.get("extra_info") or {}
    value = info.get("event_median_ms")
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value), "cuda-event"
    events = info.get("cuda_event_ms")
    if isinstance(events, list) and events:
        return float(np.median(np.asarray(events, dtype=np.float64))), "cuda-event"
    stats = bench.get("stats") or {}
    if isinstance(stats.get("median"), (int, float)):
        return float(stats["median"]) * 1e3, "wall"
    raise InputFileError(f"benchmark {bench.get('fullname') or bench.get('name')!r} has no median: "
                         "neither extra_info event_median_ms/cuda_event_ms nor stats.median")


@dataclass(frozen=True)
class LaunchRow:
    """Loop vs graph for one N. Times in ms (medians), ``None`` when that variant was not measured.

    ``loop_clocks`` / ``graph_clocks``: ``{"issue_ms", "synced_wall_ms", "event_ms"}`` medians or None.
    """

    n_launches: int
    loop_ms: float | None
    graph_ms: float | None
    clock: str = "cuda-event"
    rounds: int | None = None
    loop_clocks: dict | None = None
    graph_clocks: dict | None = None

    @property
    def complete(self) -> bool:
        return self.loop_ms is not None and self.graph_ms is not None

    @property
    def speedup(self) -> float | None:
        """``loop_ms / graph_ms``, None when a variant is missing or the graph time is not > 0."""
        if not self.complete or not self.graph_ms > 0:
            return None
        return self.loop_ms / self.graph_ms

    @property
    def us_per_launch_loop(self) -> float | None:
        return None if self.loop_ms is None else self.loop_ms * 1000.0 / self.n_launches

    @property
    def us_per_launch_graph(self) -> float | None:
        return None if self.graph_ms is None else self.graph_ms * 1000.0 / self.n_launches

    def as_dict(self) -> dict:
        return {"n_launches": self.n_launches, "loop_ms": self.loop_ms, "graph_ms": self.graph_ms,
                "speedup": self.speedup, "us_per_launch_loop": self.us_per_launch_loop,
                "us_per_launch_graph": self.us_per_launch_graph, "clock": self.clock}


def _clocks(info: dict) -> dict | None:
    if not all(isinstance(info.get(k), (int, float)) for k in CLOCK_KEYS):
        return None
    return {k[len("clock_"):]: float(info[k]) for k in CLOCK_KEYS}


def launch_rows(run) -> list[LaunchRow]:
    """Launch-suite benchmarks of a run as one :class:`LaunchRow` per N, sorted by N (empty list when
    the run has none).

    Raises InputFileError when a launch benchmark lacks ``n_launches``/``variant``, has an unknown
    variant, or appears twice for the same (N, variant).
    """
    found: dict[int, dict[str, dict]] = {}
    for bench in _benchmarks(run):
        info = bench.get("extra_info") or {}
        if info.get("suite") != "launch":
            continue
        name = bench.get("fullname") or bench.get("name")
        try:
            n = int(info["n_launches"])
            variant = str(info["variant"])
        except (KeyError, TypeError, ValueError):
            raise InputFileError(f"launch benchmark {name!r} lacks extra_info n_launches/variant: "
                                 "was it written by perf_tests/test_launch.py?") from None
        if variant not in ("loop", "graph") or n < 1:
            raise InputFileError(f"launch benchmark {name!r} has variant {variant!r}, N={n}: expected "
                                 "'loop' or 'graph' and N >= 1")
        if variant in found.setdefault(n, {}):
            raise InputFileError(f"launch N={n} {variant} appears twice in the run: report one run per file")
        found[n][variant] = bench
    rows = []
    for n in sorted(found):
        variants = found[n]
        medians = {v: bench_median_ms(b) for v, b in variants.items()}
        clocks = {v: _clocks(b.get("extra_info") or {}) for v, b in variants.items()}
        rounds = [int((b.get("stats") or {}).get("rounds", 0)) for b in variants.values()]
        kinds = sorted({kind for _, kind in medians.values()})
        rows.append(LaunchRow(n_launches=n,
                              loop_ms=medians["loop"][0] if "loop" in medians else None,
                              graph_ms=medians["graph"][0] if "graph" in medians else None,
                              clock="+".join(kinds), rounds=min(rounds) if all(rounds) else None,
                              loop_clocks=clocks.get("loop"), graph_clocks=clocks.get("graph")))
    return rows


def graphs_cu_rows(data: dict) -> list[LaunchRow]:
    """The N sweep printed by ``perf_tests/cuda/graphs.cu`` as :class:`LaunchRow` (cudaEvent medians).
    Raises InputFileError when ``data`` has no ``sweep`` list of rows with the expected fields."""
    sweep = data.get("sweep") if isinstance(data, dict) else None
    if not isinstance(sweep, list):
        raise InputFileError("graphs.cu JSON has no 'sweep' list: give the output of a full run "
                             "(./graphs without --baked-pointer-only)")
    def pick(c: dict | None) -> dict | None:
        return {k: float(c[k]) for k in ("issue_ms", "synced_wall_ms", "event_ms")} if c else None

    rows = []
    for item in sweep:
        try:
            clocks = item.get("clocks") or {}
            rows.append(LaunchRow(n_launches=int(item["n_launches"]), loop_ms=float(item["loop_ms"]),
                                  graph_ms=float(item["graph_ms"]), clock="cuda-event",
                                  rounds=int(data.get("repeats", 0)) or None,
                                  loop_clocks=pick(clocks.get("loop")), graph_clocks=pick(clocks.get("graph"))))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise InputFileError("graphs.cu JSON sweep rows need n_launches, loop_ms and graph_ms: "
                                 "rerun perf_tests/cuda/graphs.cu") from None
    return sorted(rows, key=lambda r: r.n_launches)


def reference_row(rows: list[LaunchRow], reference_n: int = REFERENCE_N) -> LaunchRow | None:
    """The row whose µs/launch feeds the model: N == ``reference_n`` if measured with both variants,
    else the largest N with both; None when no N has both."""
    complete = [r for r in rows if r.complete]
    for r in complete:
        if r.n_launches == reference_n:
            return r
    return max(complete, key=lambda r: r.n_launches) if complete else None


def check_reference_n(rows: list[LaunchRow], reference_n: int) -> None:
    """Raise UsageError unless ``reference_n`` launches were measured with both loop and graph
    (an explicit ``--reference-n`` must not silently fall back to another N). The message lists the
    N values that can be used."""
    usable = [r.n_launches for r in rows if r.complete]
    choices = (f"use one of {', '.join(map(str, usable))}" if usable else
               "no N of this run was measured with both loop and graph, so no N can feed the model")
    measured = {r.n_launches: r for r in rows}
    if reference_n not in measured:
        raise UsageError(f"--reference-n {reference_n} was not measured: {choices}")
    row = measured[reference_n]
    if not row.complete:
        only = "loop" if row.loop_ms is not None else "graph"
        raise UsageError(f"--reference-n {reference_n} was measured with the {only} variant only (the model "
                         f"needs loop and graph): {choices}")


def saving_rows(run, ref: LaunchRow) -> list[dict]:
    """Predicted vs measured eager-minus-graph saving per forward case (model, dtype, seq_len).

    Only cases with an eager benchmark carrying ``extra_info["n_kernels"]`` and a graph benchmark are
    listed. ``predicted_saving_ms = n_kernels * (loop - graph µs/launch at ref.n_launches) / 1000``
    (:func:`cudagraph_bench.results.launch_model.predicted_saving_ms`); ``measured_saving_ms`` = eager median - graph
    median in ms, each from :func:`bench_median_ms`: the CUDA-event median (``extra_info["event_median_ms"]``,
    else the median of ``extra_info["cuda_event_ms"]``), and only for a benchmark without either the
    synchronized wall median ``stats.median``; ``clock`` says which (``"cuda-event"``, ``"wall"``, or
    ``"eager clock/graph clock"`` when they differ). Sorted by (model, dtype, seq_len).
    """
    cases: dict[tuple, dict[str, dict]] = {}
    for bench in _benchmarks(run):
        info = bench.get("extra_info") or {}
        if info.get("suite") != "forward" or info.get("variant") not in ("eager", "graph"):
            continue
        try:
            key = (str(info["model"]), str(info["dtype"]), int(info["seq_len"]))
        except (KeyError, TypeError, ValueError):
            continue
        cases.setdefault(key, {})[info["variant"]] = bench
    out = []
    for key in sorted(cases):
        variants = cases[key]
        eager, graph = variants.get("eager"), variants.get("graph")
        n_kernels = (eager or {}).get("extra_info", {}).get("n_kernels")
        if eager is None or graph is None or not isinstance(n_kernels, int):
            continue
        eager_ms, clock_e = bench_median_ms(eager)
        graph_ms, clock_g = bench_median_ms(graph)
        predicted = predicted_saving_ms(n_kernels, ref.us_per_launch_loop, ref.us_per_launch_graph)
        measured = eager_ms - graph_ms
        out.append({"model": key[0], "dtype": key[1], "seq_len": key[2], "n_kernels": n_kernels,
                    "eager_ms": eager_ms, "graph_ms": graph_ms, "measured_saving_ms": measured,
                    "predicted_saving_ms": predicted,
                    "measured_over_predicted": measured / predicted if predicted > 0 else None,
                    "clock": clock_e if clock_e == clock_g else f"{clock_e}/{clock_g}"})
    return out


# ------------------------------------------------------------------------------------- tables

LAUNCH_COLUMNS = [
    Column("n_launches", "N", "d"),
    Column("loop_ms", "loop ms", ".4f"),
    Column("graph_ms", "graph ms", ".4f"),
    Column("speedup", "speedup ×", ".2f"),
    Column("us_per_launch_loop", "µs/launch loop", ".3f"),
    Column("us_per_launch_graph", "µs/launch graph", ".3f"),
]

SAVING_COLUMNS = [
    Column("model", "model"),
    Column("dtype", "dtype"),
    Column("seq_len", "tokens", "d"),
    Column("n_kernels", "kernels", "d"),
    Column("eager_ms", "eager ms", ".3f"),
    Column("graph_ms", "graph ms", ".3f"),
    Column("measured_saving_ms", "measured saving ms", ".3f"),
    Column("predicted_saving_ms", "predicted saving ms", ".3f"),
    Column("measured_over_predicted", "measured / predicted", ".2f"),
]

CLOCK_COLUMNS = [
    Column("n_launches", "N", "d"),
    Column("variant", "variant"),
    Column("issue_ms", "host issue ms (no sync)", ".4f"),
    Column("synced_wall_ms", "host wall ms (synced)", ".4f"),
    Column("event_ms", "CUDA events ms", ".4f"),
]


def launch_table_markdown(rows: list[LaunchRow]) -> str:
    """Markdown N-sweep table: N, loop ms, graph ms, speedup, µs/launch loop, µs/launch graph
    (``-`` where a variant is missing)."""
    return render_table(LAUNCH_COLUMNS, [r.as_dict() for r in rows], fmt="markdown")


def clocks_table_markdown(rows: list[LaunchRow]) -> str | None:
    """Markdown table of the three clocks per (N, variant); None when no row carries clock fields."""
    items = []
    for r in rows:
        for variant, clocks in (("loop", r.loop_clocks), ("graph", r.graph_clocks)):
            if clocks:
                items.append({"n_launches": r.n_launches, "variant": variant, **clocks})
    return render_table(CLOCK_COLUMNS, items, fmt="markdown") if items else None


def saving_table_markdown(rows: list[dict]) -> str:
    """Markdown predicted-vs-measured table of :func:`saving_rows` (times in ms), with a ``clock``
    column only when the rows' medians are not all of one clock (all CUDA events or all wall)."""
    extra = [Column("clock", "clock")] if _mixed_clocks(rows) else []
    return render_table(SAVING_COLUMNS + extra, rows, fmt="markdown")


def _mixed_clocks(rows: list[dict]) -> bool:
    """True when the medians of :func:`saving_rows` are not all of one clock (all CUDA events or all wall)."""
    return bool(rows) and {r.get("clock") for r in rows} not in ({"cuda-event"}, {"wall"})


# --------------------------------------------------------------------------------------- plots

SPEEDUP_XLABEL = "launches per sequence N (log scale)"
SPEEDUP_YLABEL = "speedup: loop time / graph replay time (×)"
US_YLABEL = "overhead per launch (µs, log scale)"


def speedup_figure(series: dict[str, list[LaunchRow]]):
    """Matplotlib figure (no pyplot, Agg): left, speedup vs N; right, µs per launch vs N (loop solid,
    graph dashed). ``series`` maps a label (``"torch"``, ``"CUDA C++"``) to its rows; rows without
    both variants are skipped. Log-scale x (base 2) on both axes. Raises UsageError when no series has
    a complete row."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    plotted = {label: [r for r in rows if r.complete and r.speedup is not None] for label, rows in series.items()}
    plotted = {label: rows for label, rows in plotted.items() if rows}
    if not plotted:
        raise UsageError("nothing to plot: no N measured with both loop and graph variants")
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    ax_s, ax_us = fig.subplots(1, 2)
    for label, rows in plotted.items():
        ns = [r.n_launches for r in rows]
        ax_s.plot(ns, [r.speedup for r in rows], marker="o", label=label)
        line = ax_us.plot(ns, [r.us_per_launch_loop for r in rows], marker="o", label=f"{label} loop")[0]
        ax_us.plot(ns, [r.us_per_launch_graph for r in rows], marker="s", linestyle="--",
                   color=line.get_color(), label=f"{label} graph")
    ax_s.axhline(1.0, color="grey", linewidth=0.8, linestyle=":", label="no gain (1×)")
    all_n = sorted({r.n_launches for rows in plotted.values() for r in rows})
    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    for ax in (ax_s, ax_us):
        ax.set_xscale("log", base=2)
        ax.set_xticks(all_n)
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(SPEEDUP_XLABEL)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    ax_us.set_yscale("log")
    ax_us.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax_us.yaxis.set_major_formatter(plain)
    ax_us.yaxis.set_minor_formatter(NullFormatter())
    ax_s.set_ylabel(SPEEDUP_YLABEL)
    ax_us.set_ylabel(US_YLABEL)
    ax_s.set_title("graph replay speedup vs N")
    ax_us.set_title("launch overhead per kernel")
    return fig


def save_speedup_plot(series: dict[str, list[LaunchRow]] | list[LaunchRow], path: str | os.PathLike) -> Path:
    """Write :func:`speedup_figure` as a PNG at ``path`` (atomically). A plain list of rows is plotted
    as the series ``"torch"``. Returns the path."""
    if isinstance(series, list):
        series = {"torch": series}
    return save_figure(speedup_figure(series), Path(path), dpi=PLOT_DPI)


# ------------------------------------------------------------------------------- sanitizer logs

_INVALID_RE = re.compile(r"Invalid __global__ (read|write) of size (\d+)")
_SUMMARY_RE = re.compile(r"ERROR SUMMARY:\s*(\d+) error")
_ADDRESS_RE = re.compile(r"Address (0x[0-9a-fA-F]+)\s+(.*)")


def parse_sanitizer_log(text: str) -> dict:
    """Findings of a ``compute-sanitizer --tool memcheck`` log.

    Returns ``{"invalid_global_writes": int, "invalid_global_reads": int, "error_summary": int | None,
    "first_address": str | None, "first_address_note": str | None}``: counts of ``Invalid __global__
    write/read`` reports, the number in ``ERROR SUMMARY: N errors`` (None when the log has no summary,
    e.g. the tool did not run), and the first reported address with the rest of its line
    (e.g. ``"is out of bounds"``).
    """
    writes = reads = 0
    for m in _INVALID_RE.finditer(text):
        if m.group(1) == "write":
            writes += 1
        else:
            reads += 1
    summary = _SUMMARY_RE.search(text)
    addr = _ADDRESS_RE.search(text)
    return {"invalid_global_writes": writes, "invalid_global_reads": reads,
            "error_summary": int(summary.group(1)) if summary else None,
            "first_address": addr.group(1) if addr else None,
            "first_address_note": addr.group(2).strip() if addr else None}


def baked_pointer_outcome(bp: dict) -> str:
    """One sentence on what the replay after ``cudaFree`` did, from graphs.cu's ``baked_pointer`` object."""
    launch, sync = bp.get("launch_error"), bp.get("sync_error")
    if launch != "cudaSuccess":
        # graphs.cu synchronizes only after a successful cudaGraphLaunch (sync_error is then cudaSuccess)
        synced = "" if sync == "cudaSuccess" else f" and its synchronize (`cudaStreamSynchronize`) {sync}"
        return (f"the replay's launch (`cudaGraphLaunch`) returned {launch}{synced}, so the graph did not run "
                "as captured")
    if sync != "cudaSuccess":
        return (f"the replay's launch (`cudaGraphLaunch`) returned cudaSuccess and its synchronize "
                f"(`cudaStreamSynchronize`) {sync}: the kernel accessed the freed address, which no allocation "
                "owned any more")
    aliased = bp.get("aliased_index", -1)
    if isinstance(aliased, int) and aliased >= 0:
        return (f"allocation #{aliased} made after the free got the captured address and was silently "
                f"updated to {bp.get('aliased_value')}; d2 = {bp.get('d2_value')}")
    return (f"no new allocation got the captured address; the replay wrote freed memory without a fault; "
            f"d2 = {bp.get('d2_value')}")


# ---------------------------------------------------------------------------------------- page

def _fmt(value: float, spec: str) -> str:
    return format(value, spec)


def render_launch_section(run, *, reference_n: int = REFERENCE_N, heading_level: int = 2,
                          forward_runs: list | None = None) -> str:
    """Markdown of the torch N-sweep table and the predicted-vs-measured table (no plot, no prose
    beyond captions) for embedding in a general report. ``forward_runs``: the runs whose forward
    cases (eager with ``n_kernels`` + graph) the model is checked on (default: ``run`` itself). Says
    so in one line when the run holds no launch-suite benchmarks or no forward cases with kernel counts."""
    h = "#" * heading_level
    rows = launch_rows(run)
    if not rows:
        return (f"{h} Launch overhead\n\nNo launch-suite benchmarks in this run "
                "(run `pytest perf_tests/test_launch.py --benchmark-only --benchmark-json=RUN.json`).\n")
    parts = [f"{h} Launch overhead: N tiny launches, eager loop vs one graph replay\n",
             f"Medians ({_clock_caption(rows)}); µs/launch = median / N.\n", launch_table_markdown(rows), ""]
    parts.append(_saving_section(forward_runs or [run], rows, reference_n, h + "#"))
    return "\n".join(parts)


def _clock_caption(rows: list[LaunchRow]) -> str:
    clocks = sorted({r.clock for r in rows})
    names = {"cuda-event": "CUDA events on the launching stream", "wall": "synchronized host wall time"}
    return ", ".join(names.get(c, c) for c in clocks)


def _saving_section(forward_runs: list, rows: list[LaunchRow], reference_n: int, h: str) -> str:
    ref = reference_row(rows, reference_n)
    if ref is None:
        return f"{h} Launch-overhead model\n\nNo N was measured with both loop and graph: no model.\n"
    savings, origin = [], {}
    for i, fr in enumerate(forward_runs):
        name = getattr(fr, "path", None) or f"forward run #{i + 1}"
        for r in saving_rows(fr, ref):
            key = (r["model"], r["dtype"], r["seq_len"])
            if key in origin:
                raise InputFileError(f"{key[0]} {key[1]} L={key[2]} is in both {origin[key]} and {name}: "
                                     "give each forward case once")
            origin[key] = name
            savings.append(r)
    savings.sort(key=lambda r: (r["model"], r["dtype"], r["seq_len"]))
    head = (f"{h} Launch-overhead model: predicted vs measured saving\n\n"
            f"predicted saving = kernels of one eager forward × (loop − graph µs/launch at N={ref.n_launches}) "
            f"= kernels × ({_fmt(ref.us_per_launch_loop, '.3f')} − {_fmt(ref.us_per_launch_graph, '.3f')}) µs; "
            f"{_measured_saving_caption(savings)}.\n")
    if not savings:
        return (f"{h} Launch-overhead model\n\nNot checked here: no forward case of these runs has an eager "
                "benchmark with kernel counts (`extra_info[\"n_kernels\"]`, recorded by "
                "`perf_tests/test_kernel_counts.py`) and a graph benchmark; `cudagraph-bench "
                "launch-report LAUNCH.json --forward RUN.json` checks the model on a run that "
                "has them.\n")
    return head + "\n" + saving_table_markdown(savings) + "\n"


def _measured_saving_caption(savings: list[dict]) -> str:
    """How ``measured saving`` of :func:`saving_rows` was computed, naming the clock of its medians."""
    event = ("CUDA-event medians (time between CUDA events recorded on the stream before and after each timed call: "
             "`extra_info[\"event_median_ms\"]`, else the median of `extra_info[\"cuda_event_ms\"]`)")
    wall = "synchronized host wall-time medians (pytest-benchmark `stats.median`)"
    clocks = {r["clock"] for r in savings}
    if clocks == {"cuda-event"}:
        return (f"measured saving = eager median − graph median, both {event}, not pytest-benchmark's "
                "wall-time `stats.median`")
    if clocks == {"wall"}:
        return f"measured saving = eager median − graph median, both {wall}: these benchmarks have no CUDA-event times"
    both = sum(r["clock"] == "cuda-event" for r in savings)
    return (f"measured saving = eager median − graph median, each of {event} where the benchmark has them, else "
            f"of {wall}; {both} of {len(savings)} case(s) use CUDA events for both (the clock column says which)")


def _shown_speedup(row: LaunchRow) -> float:
    """The speedup as the tables print it (``.2f``): comparisons in prose use it, so a sentence
    never calls a step a rise or a fall that the table shows as equal."""
    return float(format(row.speedup, ".2f"))


def _step_direction(a: LaunchRow, b: LaunchRow) -> int:
    """+1 when the printed speedup rises from row ``a`` to row ``b``, -1 when it falls, 0 when equal."""
    sa, sb = _shown_speedup(a), _shown_speedup(b)
    return (sb > sa) - (sb < sa)


def _x(row: LaunchRow) -> str:
    return f"{_fmt(row.speedup, '.2f')}× at N={row.n_launches}"


def _speedup_path(points: list[LaunchRow]) -> str:
    """``"from 2.99× at N=8 it rises to 5.57× at N=64, then falls to ..."`` over ``points`` (>= 2)."""
    verbs = {1: "rises to", -1: "falls to", 0: "stays at"}
    segments: list[tuple[int, list[LaunchRow]]] = []
    for a, b in zip(points, points[1:]):
        d = _step_direction(a, b)
        if segments and segments[-1][0] == d:
            segments[-1][1].append(b)
        else:
            segments.append((d, [b]))
    parts = []
    for d, rows in segments:
        items = [_x(r) for r in rows]
        listed = items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
        parts.append(f"{verbs[d]} {listed}")
    return f"from {_x(points[0])} it " + ", then ".join(parts)


def speedup_vs_n_summary(series: dict[str, list[LaunchRow]]) -> str:
    """Sentences on how the measured speedup depends on N, written from the rows themselves (so the
    page never states a trend that its tables contradict). ``series`` maps a label (``"torch"``,
    ``"CUDA C++"``) to its rows; only rows with a speedup count. Empty string when no series has one.

    Says the speedup at the smallest and the largest N measured (one sentence for all series when
    they share both N), then per series whether it is monotonic in N with the path of its values,
    and for every step where the speedup falls (the model of the prose predicts a rise) by what
    factor loop and graph µs/launch changed there. Values are compared as printed (``.2f``).
    """
    points = {label: [r for r in rows if r.speedup is not None] for label, rows in series.items()}
    points = {label: rows for label, rows in points.items() if rows}
    if not points:
        return ""
    out = []
    labels = list(points)
    ends = {(rows[0].n_launches, rows[-1].n_launches) for rows in points.values()}
    if len(labels) > 1 and len(ends) == 1 and all(len(rows) > 1 for rows in points.values()):
        (lo, hi), = ends
        out.append(f"On this GPU the speedup at the smallest N measured (N={lo}) was "
                   + " / ".join(f"{_fmt(points[k][0].speedup, '.2f')}× ({k})" for k in labels)
                   + f" and at the largest (N={hi}) "
                   + " / ".join(f"{_fmt(points[k][-1].speedup, '.2f')}×" for k in labels) + ".")
        shared = True
    else:
        shared = False
    for i, (label, rows) in enumerate(points.items()):
        lead = "On this GPU the" if i == 0 and not shared else "The"
        if len(rows) == 1:
            out.append(f"{lead} {label} speedup was measured at one N only: {_x(rows[0])}.")
            continue
        kinds = {_step_direction(a, b) for a, b in zip(rows, rows[1:])}
        shape = "not monotonic in N" if (1 in kinds and -1 in kinds) else "monotonic in N"
        if shared:
            out.append(f"{lead} {label} speedup is {shape}: {_speedup_path(rows)}.")
        else:
            out.append(f"{lead} {label} speedup was {_fmt(rows[0].speedup, '.2f')}× at the smallest N measured "
                       f"(N={rows[0].n_launches}) and {_fmt(rows[-1].speedup, '.2f')}× at the largest "
                       f"(N={rows[-1].n_launches}); it is {shape}: {_speedup_path(rows)}.")
        falls = [(a, b) for a, b in zip(rows, rows[1:]) if _step_direction(a, b) < 0]
        if falls:
            steps = "; ".join(
                f"N={a.n_launches} → {b.n_launches}: loop {_fmt(a.us_per_launch_loop, '.3f')} → "
                f"{_fmt(b.us_per_launch_loop, '.3f')} µs (×{_fmt(b.us_per_launch_loop / a.us_per_launch_loop, '.3f')}), "
                f"graph {_fmt(a.us_per_launch_graph, '.3f')} → {_fmt(b.us_per_launch_graph, '.3f')} µs "
                f"(×{_fmt(b.us_per_launch_graph / a.us_per_launch_graph, '.3f')})" for a, b in falls)
            out.append(f"The {label} speedup falls where loop µs/launch changed by a smaller factor than graph "
                       f"µs/launch: {steps}. In the model loop µs/launch is constant and graph µs/launch only "
                       "falls with N, so the speedup only rises; these steps are where this run departs from it.")
    return " ".join(out)


_PROSE_WHY_N = """\
The eager loop pays the host cost of every launch: Python and the PyTorch dispatcher (torch version)
or just the CUDA runtime (C++ version), then `cudaLaunchKernel`; its time is about N × (host cost per
launch). A graph replay is one `cudaGraphLaunch` whatever N is; what still grows with N is the device
executing N kernel nodes back to back, which for a one-element kernel typically costs less than a
host launch. So the replay time is about a constant (the replay call and the synchronization) plus
N × (device cost per node). In this model the speedup, loop time / replay time, approaches
(host cost per launch) / (device cost per node) as N grows, which the µs/launch columns at the
largest N estimate; at small N the replay's constant weighs more against the few kernels it runs,
which keeps the speedup below that limit. The model only approximates a real run: the measured
per-launch costs can themselves vary with N, so a measured speedup need not rise at every step of N,
nor be lowest at the smallest N.
"""

_PROSE_CLOCKS = """\
Three clocks time the same sequence (`TinyKernelSequence.clocked`, and the same in `graphs.cu`):

- **host issue time**: `time.perf_counter` (C++: `std::chrono::steady_clock`) from before the first
  launch to after the last, *without* synchronizing. It measures only how long the host took to queue
  the work; the GPU may still be busy when it stops.
- **synchronized wall time**: the same clock from the same start, stopped after
  `stream.synchronize()`: issue time plus waiting for the device.
- **CUDA events** recorded on the stream around the launches: device time between the two events.

Guaranteed, and asserted per repeat by the tests: issue time ≤ synchronized wall time (same clock,
same start, later stop), and event time ≤ synchronized wall time up to the event timer's resolution
(the start event is queued after the host clock started; the end event has completed when the
synchronize returns). Issue time vs event time has no fixed order: an eager loop of tiny kernels
keeps the GPU waiting for each launch, so both are about the same; a graph replay is issued in one
call while its kernels run afterwards, so its issue time is far below its event time. A benchmark
that reads the host clock without synchronizing measures issue overhead, not latency.
"""

_PROSE_BAKED = """\
Capture records each kernel with its arguments, and a kernel's arguments are raw device addresses.
Replaying the graph launches the same kernels with the same addresses: it does not know that a
Python name, or a C pointer variable, now refers to another buffer.

- **Re-pointing the name** (`d = torch.zeros(...)`, `d = d2`) while the old buffer lives: the replay
  keeps updating the old buffer and never the new one (asserted by `test_baked_pointer_hazard` and
  the keep-alive case of `graphs.cu`).
- **Freeing the captured buffer**: the replay writes the freed address. If a later allocation got
  that address, the graph silently corrupts a buffer it never saw, and no tool can tell that write
  from a legitimate one: compute-sanitizer's memcheck sees a write into live memory and reports
  nothing. If none did, the replay writes freed memory: that is the case memcheck is expected to
  report as an invalid global write (without the sanitizer the write may fault with an
  illegal-address error, or go unnoticed). Which case occurs is up to the allocator: the CUDA
  allocator may give the freed address to the next allocation, even a smaller one, and PyTorch's
  caching allocator keeps freed blocks and may hand the same block to the next tensor of that size,
  so the silent case is easy to hit. The programs record which case occurred instead of assuming
  one.

**The right fix** when a buffer must change is to give the graph the new address, not to hope:
recapture the graph with the new buffer, or capture a new graph and apply it to the instantiated one
with `cudaGraphExecUpdate` (it succeeds when only node parameters such as kernel arguments changed
and the topology is the same, and is much cheaper than a fresh `cudaGraphInstantiate`; a single
kernel node can also be patched with `cudaGraphExecKernelNodeSetParams`). `torch.cuda.CUDAGraph` has
no method for either (it only hands out the raw handles, e.g. `raw_cuda_graph_exec()`), so in plain
PyTorch the fix is recapture.

**How this suite avoids it**: `cudagraph_bench.runner.GraphedForward` owns its static input and
output buffers, allocated before capture and never replaced. Callers pass any tensor; it is
`copy_`'d into the static buffer before each replay, so a new tensor (a new address) per call is
fine (`test_graphed_forward_copies_fresh_inputs`). The static buffers are read-only properties
(assigning raises `AttributeError`), and with `check_data_ptrs=True` a static buffer re-pointed by
`.set_()` or `.resize_()` makes the next call raise `StaticBufferError` instead of replaying
(`test_graphed_forward_refuses_repointed_buffer_*`).
"""


def _run_header(run, source: str) -> str:
    data = _run_data(run)
    cuda = (data.get("machine_info") or {}).get("cuda") or {}
    bits = [f"source run `{source}`"]
    if cuda.get("gpu_name"):
        bits.append(f"GPU {cuda['gpu_name']}")
    bits += cuda_versions(cuda, ("torch", "cuda_runtime", "driver"), {"cuda_runtime": "CUDA"})
    if data.get("datetime"):
        bits.append(f"run at {data['datetime']}")
    return "; ".join(bits)


def render_launch_page(run, *, source: str, plot_name: str = PLOT_NAME, reference_n: int = REFERENCE_N,
                       graphs_cu: dict | None = None, sanitizer: dict[str, str] | None = None,
                       sanitizer_outcomes: dict[str, dict] | None = None, forward_runs: list | None = None) -> str:
    """The whole ``docs/launch-overhead.md`` as a string.

    Args:
        run: pytest-benchmark run (dict or :class:`~cudagraph_bench.results.runfile.Run`) with launch-suite
            benchmarks (and optionally forward ones with ``n_kernels``).
        source: how the page names the run file (a repository path).
        plot_name: file name of the PNG next to the page.
        graphs_cu: parsed JSON of a full ``graphs.cu`` run, or None.
        sanitizer: ``{log name: log text}`` of compute-sanitizer runs of the baked-pointer mode.
        sanitizer_outcomes: ``{log name: graphs.cu "baked_pointer" object}`` of the same runs.
        forward_runs: the runs whose forward cases (eager with ``n_kernels`` + graph, both from one
            run) the model is checked on (default: ``run`` itself).

    Raises InputFileError when the run has no launch-suite benchmarks, or when two forward runs
    both give a checked case (model, dtype, tokens).
    """
    rows = launch_rows(run)
    if not rows:
        raise InputFileError(f"{source} has no launch-suite benchmarks (extra_info suite 'launch'): run "
                             "pytest perf_tests/test_launch.py --benchmark-only --benchmark-json=RUN.json")
    rounds = [r.rounds for r in rows if r.rounds]
    out = [
        "# Launch overhead: tiny-kernel loop vs CUDA graph replay",
        "",
        f"<!-- generated by `cudagraph-bench launch-report` from {source}; do not edit by hand -->",
        "",
        f"Generated from the committed raw run: {_run_header(run, source)}.",
        "",
        "## N sweep",
        "",
        "Each row: N launches of a one-element kernel (`counter.add_(1.0)` on a `[1]` float32 tensor) on a "
        "non-default stream, as an eager loop and as one replay of a CUDA graph that captured the same N "
        f"launches (`perf_tests/test_launch.py`). Medians of {min(rounds) if rounds else 'the'} rounds after "
        f"warmup, timed by {_clock_caption(rows)}; every round ends with a stream synchronize. "
        "µs/launch = median / N. The counter is checked to equal the exact number of launches.",
        "",
        launch_table_markdown(rows),
        "",
        f"![graph replay speedup and µs per launch vs N]({plot_name})",
        "",
    ]
    ref = reference_row(rows, reference_n)
    if ref is not None:
        out += [f"At N={ref.n_launches} the eager loop costs {_fmt(ref.us_per_launch_loop, '.3f')} µs per "
                f"launch and the graph replay {_fmt(ref.us_per_launch_graph, '.3f')} µs per kernel "
                f"(speedup {_fmt(ref.speedup, '.2f')}×).", ""]
    if graphs_cu is not None:
        out += _graphs_cu_section(graphs_cu)
    series = {"torch": rows}
    if graphs_cu is not None:
        series["CUDA C++"] = graphs_cu_rows(graphs_cu)
    out += ["## How the speedup depends on N", "", _PROSE_WHY_N]
    summary = speedup_vs_n_summary(series)
    out += [summary or "No N was measured with both loop and graph variants.", ""]
    out += ["## Host issue time vs device time", "", _PROSE_CLOCKS]
    clocks = clocks_table_markdown(rows)
    if clocks:
        out += ["Medians per (N, variant) of the torch run:", "", clocks, ""]
    out += [_saving_section(forward_runs or [run], rows, reference_n, "##").rstrip("\n"), "",
            "The model treats every kernel of an eager forward as one tiny-kernel launch. A real forward "
            "also runs Python module code and ops that launch no kernel, and some kernels take longer on "
            "the device than the host needs to issue the next one, so measured and predicted savings "
            "differ; the ratio column shows by how much.", ""]
    out += ["## Baked pointers", "", _PROSE_BAKED]
    if sanitizer:
        out += _sanitizer_section(sanitizer, sanitizer_outcomes)
    return "\n".join(out).rstrip() + "\n"


def _graphs_cu_section(data: dict) -> list[str]:
    rows = graphs_cu_rows(data)
    device = data.get("device") or {}
    out = ["## CUDA C++ version (`perf_tests/cuda/graphs.cu`)", "",
           f"Raw `tiny<<<1,1,0,stream>>>` launches vs one `cudaGraphLaunch`, cudaEvent medians of "
           f"{data.get('repeats')} repeats after one warmup on {device.get('name', 'the GPU')} "
           f"(runtime {device.get('cuda_runtime')}, driver {device.get('cuda_driver')}).", "",
           launch_table_markdown(rows), ""]
    keep = data.get("baked_pointer_keep_alive")
    if isinstance(keep, dict):
        out += [f"Baked pointer, d2 allocated while d lives: after the second replay d = {keep.get('old_value')} "
                f"(expected {keep.get('expected_old_value')}), d2 = {keep.get('d2_value')}.", ""]
    bp = data.get("baked_pointer")
    if isinstance(bp, dict):
        out += [f"Baked pointer, `cudaFree(d)` then {len(bp.get('chain_ptrs') or [])} allocations (the last is d2), "
                f"then a replay: {baked_pointer_outcome(bp)}.", ""]
    return out


def sanitizer_case(findings: dict, bp: dict | None) -> tuple[str, str]:
    """Which baked-pointer case one compute-sanitizer run hit, and whether memcheck agreed.

    ``findings``: :func:`parse_sanitizer_log` of the log; ``bp``: the program's ``baked_pointer``
    object of the same run (None when its stdout was not saved). Returns ``(case, sentence)`` with
    ``case`` one of ``"reused"`` (a new allocation got the captured address: the write lands in
    live memory, memcheck has nothing to flag), ``"not-reused"`` (the write lands in freed memory:
    memcheck should flag it) or ``"unknown"`` (no program output or no ``aliased_index``).
    """
    # tiny() does d[0] += 1: memcheck stops the kernel at its first invalid access, the read
    writes = findings["invalid_global_writes"] + findings["invalid_global_reads"]
    summary = findings["error_summary"]
    aliased = bp.get("aliased_index") if isinstance(bp, dict) else None
    if not isinstance(aliased, int):
        return "unknown", ("the program's `aliased_index` is not available (its output was not saved next to "
                           "the log), so whether a new allocation reused the captured address, and so whether "
                           "memcheck should flag the write, is not known")
    if summary is None and not writes:
        verdict = "memcheck's verdict is missing (no summary in the log)"
    elif aliased >= 0:
        verdict = ("memcheck reported no invalid access, as expected in this case"
                   if writes == 0 else
                   f"yet memcheck reported {writes} invalid global access(es), which this case does not "
                   "explain: read the log")
    else:
        verdict = (f"memcheck flagged it ({writes} invalid global access(es)), as expected" if writes else
                   "but memcheck reported no invalid access, against what this case predicts: read the log")
    if aliased >= 0:
        return "reused", (f"case observed: the captured address was reused by allocation #{aliased} made after "
                          "the free, so the replay wrote live memory: memcheck has nothing to flag, and only the "
                          f"program's own check sees the corruption; {verdict}")
    return "not-reused", ("case observed: no allocation reused the captured address, so "
                          f"the replay wrote freed memory, which memcheck should flag; {verdict}")


def _sanitizer_section(logs: dict[str, str], outcomes: dict[str, dict] | None = None) -> list[str]:
    out = ["### compute-sanitizer on the baked-pointer mode", "",
           "`compute-sanitizer --tool memcheck graphs --baked-pointer-only --d-bytes B [--alloc-before-free]`: "
           "memcheck can only flag the replay's access when no live allocation holds the captured address "
           "(`--alloc-before-free` makes every allocation while d lives, so none can). The kernel does "
           "`d[0] += 1`, so memcheck, which stops the kernel at its first invalid access, may report the read "
           "rather than the write. Each run below says, from the program's own output (`aliased_index`), which "
           "case it hit.", ""]
    outcomes = outcomes or {}
    cases = []
    for name, text in sorted(logs.items()):
        f = parse_sanitizer_log(text)
        invalid = f["invalid_global_writes"] + f["invalid_global_reads"]
        if f["error_summary"] is None and not invalid:
            line = f"- `{name}`: no memcheck summary in the log (the tool did not finish)"
        else:
            line = (f"- `{name}`: {f['invalid_global_reads']} invalid global read(s) and "
                    f"{f['invalid_global_writes']} invalid global write(s) reported, "
                    f"ERROR SUMMARY {f['error_summary']} error(s)")
            if f["first_address"]:
                line += f"; first address {f['first_address']} {f['first_address_note']}"
        bp = outcomes.get(name)
        if isinstance(bp, dict):
            line += f". Program: captured buffer of {bp.get('d_bytes')} bytes; {baked_pointer_outcome(bp)}"
        case, sentence = sanitizer_case(f, bp)
        cases.append((case, invalid))
        out.append(f"{line}. {sentence[0].upper()}{sentence[1:]}.")
    n = len(cases)
    reused, free, unknown = (sum(c == k for c, _ in cases) for k in ("reused", "not-reused", "unknown"))
    flagged = sum(c == "not-reused" and w > 0 for c, w in cases)
    summary = (f"Address reused by a new allocation (memcheck cannot flag the access): {reused} of {n} run(s); "
               f"no reuse (memcheck should flag the access): {free} of {n}")
    summary += f"; not known (program output missing): {unknown} of {n}." if unknown else "."
    if free == 0:
        summary += " The case where memcheck flags the access was not observed in these runs."
    else:
        summary += f" memcheck flagged the access in {flagged} of the {free} run(s) without reuse."
    return out + ["", summary, ""]


def write_launch_page(run, out_dir: str | os.PathLike, *, source: str, reference_n: int = REFERENCE_N,
                      graphs_cu: dict | None = None, sanitizer: dict[str, str] | None = None,
                      sanitizer_outcomes: dict[str, dict] | None = None,
                      forward_runs: list | None = None) -> tuple[Path, Path]:
    """Write ``out_dir/launch-overhead.md`` and ``out_dir/launch_speedup_vs_n.png``, all or nothing:
    both are rendered and written to temporary files in ``out_dir`` first, then moved into place.
    Returns ``(page_path, plot_path)``. ``forward_runs``: see :func:`render_launch_page`.

    Raises InputFileError when the run has no launch benchmarks (nothing is written), UsageError when
    ``out_dir`` (or a parent) is a file or the page/plot path is a folder, OSError when the folder
    cannot be written (no file is left half-written and no existing page is replaced).
    """
    out_dir = Path(out_dir)
    page = render_launch_page(run, source=source, reference_n=reference_n, graphs_cu=graphs_cu,
                              sanitizer=sanitizer, sanitizer_outcomes=sanitizer_outcomes,
                              forward_runs=forward_runs)
    series = {"torch": launch_rows(run)}
    if graphs_cu is not None:
        series["CUDA C++"] = graphs_cu_rows(graphs_cu)
    png = figure_png(speedup_figure(series), PLOT_DPI)
    page_path, plot_path = out_dir / PAGE_NAME, out_dir / PLOT_NAME
    check_output_folder(out_dir, [PAGE_NAME, PLOT_NAME])
    write_files_atomic({plot_path: png, page_path: page})
    return page_path, plot_path


# ----------------------------------------------------------------------------------------- CLI

def _load_json(path: str, what: str) -> dict:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputFileError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputFileError(f"{path} is not valid JSON (line {exc.lineno}): give the {what} file") from None
    if not isinstance(data, dict):
        raise InputFileError(f"{path} is not a JSON object: give the {what} file")
    return data


def _last_json_object(path: Path) -> dict:
    """The last line of ``path`` that parses as a JSON object (graphs.cu prints one), else ``{}``."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return {}
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict):
                return data
    return {}


def configure_parser(parser: argparse.ArgumentParser) -> None:
    from cudagraph_bench.options import parse_count, parse_path
    from cudagraph_bench.options import add_storage_option

    parser.add_argument("run", help="pytest-benchmark JSON with launch-suite benchmarks (a path, or a saved-run "
                        "id such as 0001 under --storage)")
    parser.add_argument("-o", "--out-dir", type=parse_path, default=DEFAULT_OUT_DIR,
                        help=f"folder for {PAGE_NAME} and {PLOT_NAME}, created when missing; both are written "
                        "or neither (default: %(default)s; the committed page is regenerated with -o docs)")
    parser.add_argument("--graphs-cu", metavar="JSON", help="stdout of a full perf_tests/cuda/graphs.cu run")
    parser.add_argument("--sanitizer", metavar="LOG", action="append", default=[],
                        help="compute-sanitizer log of graphs --baked-pointer-only (repeatable); the program's "
                        "stdout, if saved next to it as the same name with .json, adds the outcome")
    parser.add_argument("--forward", metavar="RUN", action="append", default=[],
                        help="another run whose forward benchmarks (eager with n_kernels, graph) feed the "
                        "predicted-vs-measured table (repeatable; RUN's own forward benchmarks count too). "
                        "Each forward case (model, dtype, tokens, variant) must be in one run only")
    parser.add_argument("--reference-n", type=parse_count, default=None, metavar="N",
                        help=f"N (launches, a whole number >= 1) whose µs/launch feeds the model; it must be "
                        f"measured with loop and graph (default: {REFERENCE_N}, else the largest such N)")
    add_storage_option(parser)


def check_forward_runs(runs: list) -> None:
    """Raise InputFileError when the same run file is given twice, or when two runs hold the same
    forward case (model, dtype, tokens, variant): the model table must not silently keep one of them.
    ``runs``: :class:`~cudagraph_bench.results.runfile.Run` objects, in the order given (RUN, then --forward)."""
    from cudagraph_bench.results.runfile import measurements

    seen: dict[Path, Path] = {}
    for run in runs:
        real = Path(run.path).resolve()
        if real in seen:
            raise InputFileError(f"{run.path} is given twice (as RUN or --forward): give each forward run once")
        seen[real] = run.path
    origin: dict[tuple, Path] = {}
    for run in runs:
        for key, m in measurements(run).items():
            if key[0] != "forward":
                continue
            if key in origin:
                raise InputFileError(f"forward case {m.label!r} is in both {origin[key]} and {run.path}: "
                                     "give each forward case once (drop one of the files, or pass runs that "
                                     "measured different cases)")
            origin[key] = run.path


def main(args: argparse.Namespace) -> int:
    """Load the inputs named by ``args``, check them, and write the page and plot into ``args.out_dir``.
    Returns 0; raises UsageError (exit 2) on bad input or an output folder that cannot be written."""
    from cudagraph_bench.results.runfile import load_run

    run = load_run(args.run, args.storage)
    forward_runs = [run, *(load_run(ref, args.storage) for ref in args.forward)]
    check_forward_runs(forward_runs)
    source = " + ".join(str(r.path) for r in forward_runs)
    reference_n = REFERENCE_N
    if args.reference_n is not None:
        rows = launch_rows(run)
        if rows:                                   # without any, the page reports the missing launch suite
            check_reference_n(rows, args.reference_n)
        reference_n = args.reference_n
    graphs_cu = _load_json(args.graphs_cu, "graphs.cu output") if args.graphs_cu else None
    logs, outcomes = {}, {}
    for path in map(Path, args.sanitizer):
        try:
            logs[path.name] = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise InputFileError(f"cannot read sanitizer log {path}: {exc.strerror or exc}") from None
        stdout = path.with_suffix(".json")          # the program's stdout saved next to the log
        if stdout.is_file():
            bp = _last_json_object(stdout).get("baked_pointer")
            if isinstance(bp, dict):
                outcomes[path.name] = bp
    try:
        page, plot = write_launch_page(run, args.out_dir, source=source, reference_n=reference_n,
                                       graphs_cu=graphs_cu, sanitizer=logs, sanitizer_outcomes=outcomes,
                                       forward_runs=forward_runs)
    except OSError as exc:
        where = exc.filename or args.out_dir
        raise UsageError(f"cannot write {PAGE_NAME} and {PLOT_NAME} into {args.out_dir} ({where}: "
                         f"{exc.strerror or exc}); no file was written: choose a writable folder with -o") from None
    print(f"wrote {page} and {plot}")
    return 0
