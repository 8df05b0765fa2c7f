"""Launch-overhead report (no torch): the N-sweep table, predicted vs measured saving, and ``docs/launch-overhead.md``
from a run with launch-suite benchmarks. Every number on the page comes from the input files; the prose has none."""

from __future__ import annotations

import itertools
import os
from collections import Counter
from pathlib import Path

from cudagraph_bench import variants
from cudagraph_bench.errors import InputFileError
from cudagraph_bench.fsio import check_output_folder, figure_png, write_files_atomic
from cudagraph_bench.report.launch_data import (REFERENCE_N, LaunchRow, as_run, baked_pointer_outcome,
                                                graphs_cu_rows, launch_rows, parse_sanitizer_log, reference_row,
                                                sanitizer_case, saving_rows)
from cudagraph_bench.report.plots import PLOT_DPI, speedup_figure
from cudagraph_bench.table import Column, listed, render_table

PAGE_NAME = "launch-overhead.md"
PLOT_NAME = "launch_speedup_vs_n.png"
#: Where the command writes the page and its plot without ``-o`` (never the committed ``docs/``).
DEFAULT_OUT_DIR = "out/launch"


LAUNCH_COLUMNS = [
    Column("n_launches", "N", "d"), Column("loop_ms", "loop ms", ".4f"), Column("graph_ms", "graph ms", ".4f"),
    Column("speedup", "speedup ×", ".2f"), Column("us_per_launch_loop", "µs/launch loop", ".3f"),
    Column("us_per_launch_graph", "µs/launch graph", ".3f"),
]
SAVING_COLUMNS = [
    Column("model", "model"), Column("dtype", "dtype"), Column("seq_len", "tokens", "d"),
    Column("n_kernels", "kernels", "d"), Column("eager_ms", "eager ms", ".3f"), Column("graph_ms", "graph ms", ".3f"),
    Column("measured_saving_ms", "measured saving ms", ".3f"),
    Column("predicted_saving_ms", "predicted saving ms", ".3f"),
    Column("measured_over_predicted", "measured / predicted", ".2f"),
]
CLOCK_COLUMNS = [
    Column("n_launches", "N", "d"), Column("variant", "variant"), Column("issue_ms", "host issue ms (no sync)", ".4f"),
    Column("synced_wall_ms", "host wall ms (synced)", ".4f"), Column("event_ms", "CUDA events ms", ".4f"),
]


def launch_table_markdown(rows: list[LaunchRow]) -> str:
    """N, loop ms, graph ms, speedup, µs/launch loop and graph (``-`` where a variant is missing)."""
    return render_table(LAUNCH_COLUMNS, [{c.key: getattr(r, c.key) for c in LAUNCH_COLUMNS} for r in rows],
                        fmt="markdown")


def clocks_table_markdown(rows: list[LaunchRow]) -> str | None:
    """The three clocks per (N, variant); None when no row carries clock fields."""
    items = []
    for r in rows:
        for variant, clocks in ((variants.LAUNCH_REFERENCE, r.loop_clocks), (variants.LAUNCH_GRAPH, r.graph_clocks)):
            if clocks:
                items.append({"n_launches": r.n_launches, "variant": variant, **clocks})
    return render_table(CLOCK_COLUMNS, items, fmt="markdown") if items else None


def saving_table_markdown(rows: list[dict]) -> str:
    """Predicted vs measured (ms), with a ``clock`` column only when the medians are of mixed clocks."""
    mixed = bool(rows) and {r.get("clock") for r in rows} not in ({"cuda-event"}, {"wall"})
    return render_table(SAVING_COLUMNS + ([Column("clock", "clock")] if mixed else []), rows, fmt="markdown")


def render_launch_section(run, *, forward_runs: list | None = None) -> str:
    """The N-sweep and predicted-vs-measured tables (level-2 heading) for a general report (``forward_runs`` default:
    ``run``); one line when the run holds no launch benchmarks or no forward cases with kernel counts."""
    rows = launch_rows(run)
    if not rows:
        return ("## Launch overhead\n\nNo launch-suite benchmarks in this run "
                "(run `pytest perf_tests/test_launch.py --benchmark-only --benchmark-json=RUN.json`).\n")
    return "\n".join(["## Launch overhead: N tiny launches, eager loop vs one graph replay\n",
                      f"Medians ({_clock_caption(rows)}); µs/launch = median / N.\n", launch_table_markdown(rows), "",
                      _saving_section(forward_runs or [run], rows, REFERENCE_N, "###")])


#: Per clock of a median: its name in the sweep's caption, and its medians described in the saving's caption.
_CLOCK_WORDS = {
    "cuda-event": ("CUDA events on the launching stream",
                   "CUDA-event medians (time between CUDA events recorded on the stream before and after each timed "
                   "call: `extra_info[\"event_median_ms\"]`, else the median of `extra_info[\"cuda_event_ms\"]`)"),
    "wall": ("synchronized host wall time", "synchronized host wall-time medians (pytest-benchmark `stats.median`)"),
}


def _clock_caption(rows: list[LaunchRow]) -> str:
    return ", ".join(_CLOCK_WORDS[c][0] if c in _CLOCK_WORDS else c for c in sorted({r.clock for r in rows}))


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
    if not savings:
        return (f"{h} Launch-overhead model\n\nNot checked here: no forward case of these runs has an eager benchmark "
                "with kernel counts (`extra_info[\"n_kernels\"]`, recorded by `perf_tests/test_kernel_counts.py`) and "
                "a graph benchmark; `cudagraph-bench launch-report LAUNCH.json --forward RUN.json` checks the model "
                "on a run that has them.\n")
    savings.sort(key=lambda r: (r["model"], r["dtype"], r["seq_len"]))
    return (f"{h} Launch-overhead model: predicted vs measured saving\n\n"
            f"predicted saving = kernels of one eager forward × (loop − graph µs/launch at N={ref.n_launches}) "
            f"= kernels × ({ref.us_per_launch_loop:.3f} − {ref.us_per_launch_graph:.3f}) µs; "
            f"{_measured_saving_caption(savings)}.\n\n{saving_table_markdown(savings)}\n")


def _measured_saving_caption(savings: list[dict]) -> str:
    lead = "measured saving = eager median − graph median, "
    event, wall = _CLOCK_WORDS["cuda-event"][1], _CLOCK_WORDS["wall"][1]
    clocks = {r["clock"] for r in savings}
    if clocks == {"cuda-event"}:
        return f"{lead}both {event}, not pytest-benchmark's wall-time `stats.median`"
    if clocks == {"wall"}:
        return f"{lead}both {wall}: these benchmarks have no CUDA-event times"
    both = sum(r["clock"] == "cuda-event" for r in savings)
    return (f"{lead}each of {event} where the benchmark has them, else of {wall}; {both} of {len(savings)} case(s) "
            "use CUDA events for both (the clock column says which)")


def _step_direction(a: LaunchRow, b: LaunchRow) -> int:
    """+1, -1 or 0 as the speedup as printed (``.2f``, so prose never contradicts a table) rises, falls or stays."""
    sa, sb = (float(f"{r.speedup:.2f}") for r in (a, b))
    return (sb > sa) - (sb < sa)


def _x(row: LaunchRow) -> str:
    return f"{row.speedup:.2f}× at N={row.n_launches}"


def _speedup_path(points: list[LaunchRow]) -> str:
    """``"from 2.99× at N=8 it rises to 5.57× at N=64, then falls to ..."`` over ``points`` (>= 2)."""
    verbs = {1: "rises to", -1: "falls to", 0: "stays at"}
    steps = [(_step_direction(a, b), b) for a, b in zip(points, points[1:])]
    parts = []
    for d, segment in itertools.groupby(steps, key=lambda step: step[0]):
        items = [_x(b) for _, b in segment]
        parts.append(f"{verbs[d]} {listed(items)}")
    return f"from {_x(points[0])} it " + ", then ".join(parts)


def speedup_vs_n_summary(series: dict[str, list[LaunchRow]]) -> str:
    """Sentences on how the printed speedup depends on N: at the ends, whether monotonic, and for every fall how loop
    and graph µs/launch changed. ``series``: label -> rows; ``""`` when no row has a speedup."""
    points = {label: kept for label, rows in series.items() if (kept := [r for r in rows if r.speedup is not None])}
    out = []
    ends = {(rows[0].n_launches, rows[-1].n_launches) for rows in points.values()}
    shared = len(points) > 1 and len(ends) == 1 and all(len(rows) > 1 for rows in points.values())
    if shared:
        (lo, hi), = ends
        out.append(f"On this GPU the speedup at the smallest N measured (N={lo}) was "
                   + " / ".join(f"{rows[0].speedup:.2f}× ({k})" for k, rows in points.items())
                   + f" and at the largest (N={hi}) "
                   + " / ".join(f"{rows[-1].speedup:.2f}×" for rows in points.values()) + ".")
    for i, (label, rows) in enumerate(points.items()):
        lead = "On this GPU the" if i == 0 and not shared else "The"
        if len(rows) == 1:
            out.append(f"{lead} {label} speedup was measured at one N only: {_x(rows[0])}.")
            continue
        steps = [(_step_direction(a, b), a, b) for a, b in zip(rows, rows[1:])]
        shape = "not monotonic in N" if {1, -1} <= {d for d, _, _ in steps} else "monotonic in N"
        span = "" if shared else (f" was {rows[0].speedup:.2f}× at the smallest N measured (N={rows[0].n_launches}) "
                                  f"and {rows[-1].speedup:.2f}× at the largest (N={rows[-1].n_launches}); it")
        out.append(f"{lead} {label} speedup{span} is {shape}: {_speedup_path(rows)}.")
        falls = [(a, b) for d, a, b in steps if d < 0]
        if falls:
            changes = "; ".join(
                f"N={a.n_launches} → {b.n_launches}: loop {a.us_per_launch_loop:.3f} → "
                f"{b.us_per_launch_loop:.3f} µs (×{b.us_per_launch_loop / a.us_per_launch_loop:.3f}), "
                f"graph {a.us_per_launch_graph:.3f} → {b.us_per_launch_graph:.3f} µs "
                f"(×{b.us_per_launch_graph / a.us_per_launch_graph:.3f})" for a, b in falls)
            out.append(f"The {label} speedup falls where loop µs/launch changed by a smaller factor than graph "
                       f"µs/launch: {changes}. In the model loop µs/launch is constant and graph µs/launch only "
                       "falls with N, so the speedup only rises; these steps are where this run departs from it.")
    return " ".join(out)


_PROSE_WHY_N = """\
The eager loop pays the host cost of every launch: Python and the PyTorch dispatcher (torch version) or just the
CUDA runtime (C++ version), then `cudaLaunchKernel`; its time is about N × (host cost per launch). A graph replay is
one `cudaGraphLaunch` whatever N is; what still grows with N is the device executing N kernel nodes back to back,
which for a one-element kernel typically costs less than a host launch. So the replay time is about a constant (the
replay call and the synchronization) plus N × (device cost per node). In this model the speedup, loop time / replay
time, approaches (host cost per launch) / (device cost per node) as N grows, which the µs/launch columns at the
largest N estimate; at small N the replay's constant weighs more against the few kernels it runs, which keeps the
speedup below that limit. The model only approximates a real run: the measured per-launch costs can themselves vary
with N, so a measured speedup need not rise at every step of N, nor be lowest at the smallest N.
"""


_PROSE_CLOCKS = """\
Three clocks time the same sequence (`TinyKernelSequence.clocked`, and the same in `graphs.cu`):

- **host issue time**: `time.perf_counter` (C++: `std::chrono::steady_clock`) from before the first launch to after
  the last, *without* synchronizing: how long the host took to queue the work; the GPU may still be busy when it
  stops.
- **synchronized wall time**: the same clock from the same start, stopped after `stream.synchronize()`: issue time
  plus waiting for the device.
- **CUDA events** recorded on the stream around the launches: device time between the two events.

Guaranteed, and asserted per repeat by the tests: issue time ≤ synchronized wall time (same clock, same start, later
stop), and event time ≤ synchronized wall time up to the event timer's resolution (the start event is queued after
the host clock started; the end event has completed when the synchronize returns). Issue time vs event time has no
fixed order: an eager loop of tiny kernels keeps the GPU waiting for each launch, so both are about the same; a
graph replay is issued in one call while its kernels run afterwards, so its issue time is far below its event time.
A benchmark that reads the host clock without synchronizing measures issue overhead, not latency.
"""


_PROSE_BAKED = """\
Capture records each kernel with its arguments, and a kernel's arguments are raw device addresses. A replay launches
the same kernels with the same addresses: it does not know that a Python name, or a C pointer variable, now refers
to another buffer.

- **Re-pointing the name** (`d = torch.zeros(...)`, `d = d2`) while the old buffer lives: the replay keeps updating
  the old buffer and never the new one (asserted by `test_baked_pointer_hazard` and the keep-alive case of
  `graphs.cu`).
- **Freeing the captured buffer**: the replay writes the freed address. If a later allocation got that address, the
  graph silently corrupts a buffer it never saw, and no tool can tell that write from a legitimate one:
  compute-sanitizer's memcheck sees a write into live memory and reports nothing. If none did, the replay writes
  freed memory: that is the case memcheck is expected to report as an invalid global write (without the sanitizer
  the write may fault with an illegal-address error, or go unnoticed). Which case occurs is up to the allocator: the
  CUDA allocator may give the freed address to the next allocation, even a smaller one, and PyTorch's caching
  allocator may hand a freed block to the next tensor of that size, so the silent case is easy to hit. The programs
  record which case occurred instead of assuming one.

**The right fix** when a buffer must change is to give the graph the new address: recapture the graph with the new
buffer, or capture a new graph and apply it to the instantiated one with `cudaGraphExecUpdate` (it succeeds when
only node parameters such as kernel arguments changed and the topology is the same, and is much cheaper than a fresh
`cudaGraphInstantiate`; a single kernel node can also be patched with `cudaGraphExecKernelNodeSetParams`).
`torch.cuda.CUDAGraph` has no method for either (it only hands out the raw handles, e.g. `raw_cuda_graph_exec()`),
so in plain PyTorch the fix is recapture.

**How this suite avoids it**: `cudagraph_bench.capture.graphed.GraphedForward` owns its static input and output
buffers, allocated before capture and never replaced. Callers pass any tensor; it is `copy_`'d into the static
buffer before each replay, so a new tensor (a new address) per call is fine
(`test_graphed_forward_copies_fresh_inputs`). The static buffers are read-only properties (assigning raises
`AttributeError`), and with `check_data_ptrs=True` a static buffer re-pointed by `.set_()` or `.resize_()` makes the
next call raise `StaticBufferError` instead of replaying (`test_graphed_forward_refuses_repointed_buffer_*`).
"""


def _series(rows: list[LaunchRow], graphs_cu: dict | None) -> dict[str, list[LaunchRow]]:
    return {"torch": rows, **({"CUDA C++": graphs_cu_rows(graphs_cu)} if graphs_cu is not None else {})}


def render_launch_page(run, *, source: str, reference_n: int = REFERENCE_N,
                       graphs_cu: dict | None = None, sanitizer: dict[str, str] | None = None,
                       sanitizer_outcomes: dict[str, dict] | None = None, forward_runs: list | None = None) -> str:
    """The whole ``docs/launch-overhead.md`` from ``run`` (dict or Run); ``graphs_cu``: parsed ``graphs.cu`` JSON;
    ``sanitizer`` / ``sanitizer_outcomes``: log name -> text / ``baked_pointer`` object; ``forward_runs``: runs whose
    forward cases check the model (default ``run``). InputFileError without launch benchmarks, or when two forward
    runs give one checked case."""
    rows = launch_rows(run)
    if not rows:
        where = ("it is a CPU run, and the launch benchmarks need a CUDA GPU: on a GPU machine, run "
                 if as_run(run).on_cpu else "run ")
        raise InputFileError(f"{source} has no launch-suite benchmarks (extra_info suite 'launch'): {where}"
                             "pytest perf_tests/test_launch.py --benchmark-only --benchmark-json=RUN.json")
    env = as_run(run).environment
    header = [f"source run `{source}`", env.gpu_name and f"GPU {env.gpu_name}",
              *env.versions(("torch", "cuda_runtime", "driver"), {"cuda_runtime": "CUDA"}),
              env.run_datetime and f"run at {env.run_datetime}"]
    out = [
        "# Launch overhead: tiny-kernel loop vs CUDA graph replay", "",
        f"<!-- generated by `cudagraph-bench launch-report` from {source}; do not edit by hand -->", "",
        f"Generated from the committed raw run: {'; '.join(filter(None, header))}.", "",
        "## N sweep", "",
        "Each row: N launches of a one-element kernel (`counter.add_(1.0)` on a `[1]` float32 tensor) on a "
        "non-default stream, as an eager loop and as one replay of a CUDA graph that captured the same N launches "
        f"(`perf_tests/test_launch.py`). Medians of {min((r.rounds for r in rows if r.rounds), default='the')} rounds "
        f"after warmup, timed by {_clock_caption(rows)}; every round ends with a stream synchronize. "
        "µs/launch = median / N. The counter is checked to equal the exact number of launches.", "",
        launch_table_markdown(rows), "",
        f"![graph replay speedup and µs per launch vs N]({PLOT_NAME})", "",
    ]
    ref = reference_row(rows, reference_n)
    if ref is not None:
        out += [f"At N={ref.n_launches} the eager loop costs {ref.us_per_launch_loop:.3f} µs per "
                f"launch and the graph replay {ref.us_per_launch_graph:.3f} µs per kernel "
                f"(speedup {ref.speedup:.2f}×).", ""]
    if graphs_cu is not None:
        out += _graphs_cu_section(graphs_cu)
    summary = speedup_vs_n_summary(_series(rows, graphs_cu))
    out += ["## How the speedup depends on N", "", _PROSE_WHY_N,
            summary or "No N was measured with both loop and graph variants.", ""]
    out += ["## Host issue time vs device time", "", _PROSE_CLOCKS]
    if clocks := clocks_table_markdown(rows):
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


def _sanitizer_section(logs: dict[str, str], outcomes: dict[str, dict] | None = None) -> list[str]:
    out = ["### compute-sanitizer on the baked-pointer mode", "",
           "`compute-sanitizer --tool memcheck graphs --baked-pointer-only --d-bytes B [--alloc-before-free]`: "
           "memcheck can only flag the replay's access when no live allocation holds the captured address "
           "(`--alloc-before-free` makes every allocation while d lives, so none can). The kernel does "
           "`d[0] += 1`, so memcheck, which stops the kernel at its first invalid access, may report the read "
           "rather than the write. Each run below says, from the program's own output (`aliased_index`), which "
           "case it hit.", ""]
    cases: Counter = Counter()
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
        bp = (outcomes or {}).get(name)
        if isinstance(bp, dict):
            line += f". Program: captured buffer of {bp.get('d_bytes')} bytes; {baked_pointer_outcome(bp)}"
        case, sentence = sanitizer_case(f, bp)
        cases.update([case] + (["flagged"] if case == "not-reused" and invalid else []))
        out.append(f"{line}. {sentence[0].upper()}{sentence[1:]}.")
    n, free = len(logs), cases["not-reused"]
    summary = (f"Address reused by a new allocation (memcheck cannot flag the access): {cases['reused']} of {n} "
               f"run(s); no reuse (memcheck should flag the access): {free} of {n}")
    summary += f"; not known (program output missing): {cases['unknown']} of {n}." if cases["unknown"] else "."
    summary += (f" memcheck flagged the access in {cases['flagged']} of the {free} run(s) without reuse." if free
                else " The case where memcheck flags the access was not observed in these runs.")
    return out + ["", summary, ""]


def write_launch_page(run, out_dir: str | os.PathLike, **page_options) -> tuple[Path, Path]:
    """Write the page of :func:`render_launch_page` (``page_options``) and its plot into ``out_dir``, all or nothing;
    returns both paths. InputFileError without launch benchmarks; UsageError when ``out_dir`` or a parent is a file or
    a target a folder; OSError when the folder cannot be written (nothing half-written)."""
    out_dir = Path(out_dir)
    page = render_launch_page(run, **page_options)
    png = figure_png(speedup_figure(_series(launch_rows(run), page_options.get("graphs_cu"))), PLOT_DPI)
    page_path, plot_path = out_dir / PAGE_NAME, out_dir / PLOT_NAME
    check_output_folder(out_dir, [PAGE_NAME, PLOT_NAME], command="launch-report")
    write_files_atomic({plot_path: png, page_path: page})
    return page_path, plot_path
