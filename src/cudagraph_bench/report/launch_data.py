"""The launch page's inputs (no torch): a run's N-sweep rows, the model's reference row, predicted vs measured saving
on forward benchmarks with a kernel count, and what compute-sanitizer and the program saw in the baked-pointer demo of
``perf_tests/cuda/graphs.cu``."""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from cudagraph_bench import variants
from cudagraph_bench.errors import InputFileError, UsageError
from cudagraph_bench.fsio import parse_json, read_input_bytes
from cudagraph_bench.results.launch_model import LoopVsGraph, median_ms, predicted_saving_ms
from cudagraph_bench.results.record import Measurement
from cudagraph_bench.results.runfile import Run, measurements

#: The N whose µs/launch feeds the launch-overhead model (else the largest N measured).
REFERENCE_N = 512
CLOCK_KEYS = ("clock_issue_ms", "clock_synced_wall_ms", "clock_event_ms")

LOOP, GRAPH = variants.LAUNCH_REFERENCE, variants.LAUNCH_GRAPH


def as_run(run) -> Run:
    """``run``, or a run document as an unvalidated ``Run``; InputFileError when neither."""
    if isinstance(run, Run):
        return run
    if not (isinstance(run, dict) and isinstance(run.get("benchmarks"), list)):
        raise InputFileError("not a pytest-benchmark run: expected a dict with a 'benchmarks' list "
                             "(the file written by pytest --benchmark-json)")
    return Run(path=Path("<run>"), data={**run, "benchmarks": [b for b in run["benchmarks"] if isinstance(b, dict)]},
               sha256="")


def bench_median_ms(m: Measurement) -> tuple[float, str]:
    """``(median ms, clock)``: ``event_median_ms``, else the median of ``cuda_event_ms`` (``"cuda-event"``), else the
    wall median (``"wall"``)."""
    value = m.extra_info.get("event_median_ms")
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value), "cuda-event"
    events = m.extra_info.get("cuda_event_ms")
    if isinstance(events, list) and events:
        return median_ms(events), "cuda-event"
    return m.summary.median_ms, "wall"


@dataclass(frozen=True)
class LaunchRow(LoopVsGraph):
    """Loop vs graph for one N: median ms, None when not measured; ``*_clocks``: the three clock medians or None."""

    n_launches: int
    loop_ms: float | None
    graph_ms: float | None
    clock: str = "cuda-event"
    rounds: int | None = None
    loop_clocks: dict | None = None
    graph_clocks: dict | None = None


def _clocks(m: Measurement | None) -> dict | None:
    info = m.extra_info if m is not None else {}
    if not all(isinstance(info.get(k), (int, float)) for k in CLOCK_KEYS):
        return None
    return {k[len("clock_"):]: float(info[k]) for k in CLOCK_KEYS}


def launch_rows(run) -> list[LaunchRow]:
    """One :class:`LaunchRow` per N, sorted. InputFileError when a launch benchmark lacks ``n_launches``/``variant``,
    has an unknown variant, or appears twice for one (N, variant)."""
    found: dict[int, dict[str, Measurement]] = {}
    for m in measurements(as_run(run)).values():
        if m.suite != "launch":
            continue
        n, variant = m.case.n_launches, m.case.variant
        if variant not in variants.LAUNCH_NAMES or n < 1:
            raise InputFileError(f"launch benchmark {m.name!r} has variant {variant!r}, N={n}: expected "
                                 "'loop' or 'graph' and N >= 1")
        found.setdefault(n, {})[variant] = m
    rows = []
    for n, by_variant in sorted(found.items()):
        medians = {v: bench_median_ms(m) for v, m in by_variant.items()}
        rounds = [m.summary.n for m in by_variant.values()]
        rows.append(LaunchRow(n, *(medians[v][0] if v in medians else None for v in (LOOP, GRAPH)),
                              clock="+".join(sorted({kind for _, kind in medians.values()})),
                              rounds=min(rounds) if all(rounds) else None,
                              loop_clocks=_clocks(by_variant.get(LOOP)), graph_clocks=_clocks(by_variant.get(GRAPH))))
    return rows


def graphs_cu_rows(data: dict) -> list[LaunchRow]:
    """``graphs.cu``'s N sweep (cudaEvent medians); InputFileError without a ``sweep`` list of the expected rows."""
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
                                  loop_clocks=pick(clocks.get(LOOP)), graph_clocks=pick(clocks.get(GRAPH))))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise InputFileError("graphs.cu JSON sweep rows need n_launches, loop_ms and graph_ms: "
                                 "rerun perf_tests/cuda/graphs.cu") from None
    return sorted(rows, key=lambda r: r.n_launches)


def reference_row(rows: list[LaunchRow], reference_n: int = REFERENCE_N) -> LaunchRow | None:
    """N == ``reference_n`` if measured with both variants, else the largest such N; None when none."""
    complete = [r for r in rows if r.complete]
    largest = max(complete, key=lambda r: r.n_launches, default=None)
    return next((r for r in complete if r.n_launches == reference_n), largest)


def check_reference_n(rows: list[LaunchRow], reference_n: int) -> None:
    """UsageError (listing the usable N) unless ``reference_n`` was measured with both: no silent fallback."""
    usable = [r.n_launches for r in rows if r.complete]
    choices = (f"use one of {', '.join(map(str, usable))}" if usable else
               "no N of this run was measured with both loop and graph, so no N can feed the model")
    row = next((r for r in rows if r.n_launches == reference_n), None)
    if row is None:
        raise UsageError(f"--reference-n {reference_n} was not measured: {choices}")
    if not row.complete:
        only = LOOP if row.loop_ms is not None else GRAPH
        raise UsageError(f"--reference-n {reference_n} was measured with the {only} variant only (the model "
                         f"needs loop and graph): {choices}")


def saving_rows(run, ref: LaunchRow) -> list[dict]:
    """Predicted vs measured eager-minus-graph saving (ms) per forward case with an eager ``n_kernels`` and a graph
    benchmark, sorted. ``clock``: ``"cuda-event"``, ``"wall"``, or ``"eager clock/graph clock"`` when they differ."""
    cases: dict[tuple, dict[str, Measurement]] = {}
    for m in measurements(as_run(run)).values():
        if m.suite == variants.FORWARD and m.case.variant in (variants.FORWARD_REFERENCE, variants.GATED):
            cases.setdefault(m.case.without_variant(), {})[m.case.variant] = m
    out = []
    for key, by_variant in sorted(cases.items()):
        eager, graph = by_variant.get(variants.FORWARD_REFERENCE), by_variant.get(variants.GATED)
        if eager is None or graph is None or not isinstance(n_kernels := eager.extra_info.get("n_kernels"), int):
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


def load_json_object(path: str, what: str) -> dict:
    """The JSON object at ``path`` (``what`` names it); InputFileError when unreadable or no JSON object."""
    fix = f"give the {what} file"
    try:
        data = parse_json(read_input_bytes(path, what, fix), path, what, fix)
    except json.JSONDecodeError as exc:
        raise InputFileError(f"{path} is not valid JSON (line {exc.lineno}): {fix}") from None
    except UnicodeDecodeError:
        raise InputFileError(f"{path} is not UTF-8 JSON: {fix}") from None
    if not isinstance(data, dict):
        raise InputFileError(f"{path} is not a JSON object: give the {what} file")
    return data


def check_forward_runs(runs: list) -> None:
    """InputFileError when a run file is given twice, or two runs hold the same forward case."""
    seen: set[Path] = set()
    for run in runs:
        if Path(run.path).resolve() in seen:
            raise InputFileError(f"{run.path} is given twice (as RUN or --forward): give each forward run once")
        seen.add(Path(run.path).resolve())
    origin: dict[tuple, Path] = {}
    for run in runs:
        for key, m in measurements(run).items():
            if key[0] == "forward" and key in origin:
                raise InputFileError(f"forward case {m.label!r} is in both {origin[key]} and {run.path}: "
                                     "give each forward case once (drop one of the files, or pass runs that "
                                     "measured different cases)")
            origin[key] = run.path


# ------------------------------------------------------------ compute-sanitizer logs of graphs.cu

#: The line compute-sanitizer writes first, before the program runs: a log without it is another file.
SANITIZER_BANNER = "========= COMPUTE-SANITIZER"
_INVALID_RE = re.compile(r"Invalid __global__ (read|write) of size (\d+)")
_SUMMARY_RE = re.compile(r"ERROR SUMMARY:\s*(\d+) error")
_ADDRESS_RE = re.compile(r"Address (0x[0-9a-fA-F]+)\s+(.*)")


def parse_sanitizer_log(text: str) -> dict:
    """Findings of a ``compute-sanitizer --tool memcheck`` log: ``{"invalid_global_writes": int, "invalid_global_reads":
    int, "error_summary": int | None, "first_address": str | None, "first_address_note": str | None}`` (error_summary
    None without an ``ERROR SUMMARY`` line)."""
    invalid = Counter(m.group(1) for m in _INVALID_RE.finditer(text))
    summary = _SUMMARY_RE.search(text)
    addr = _ADDRESS_RE.search(text)
    return {"invalid_global_writes": invalid["write"], "invalid_global_reads": invalid["read"],
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


def sanitizer_case(findings: dict, bp: dict | None) -> tuple[str, str]:
    """``(case, sentence)`` of one sanitizer run (``bp`` None when the program's stdout was not saved): ``case``
    ``"reused"`` (the captured address was reallocated: nothing to flag), ``"not-reused"`` (memcheck should flag the
    write) or ``"unknown"``."""
    # tiny() does d[0] += 1: memcheck stops the kernel at its first invalid access, the read
    writes = findings["invalid_global_writes"] + findings["invalid_global_reads"]
    aliased = bp.get("aliased_index") if isinstance(bp, dict) else None
    if not isinstance(aliased, int):
        return "unknown", ("the program's `aliased_index` is not available (its output was not saved next to "
                           "the log), so whether a new allocation reused the captured address, and so whether "
                           "memcheck should flag the write, is not known")
    if findings["error_summary"] is None and not writes:
        verdict = "memcheck's verdict is missing (no summary in the log)"
    elif aliased >= 0:
        verdict = ("memcheck reported no invalid access, as expected in this case" if writes == 0 else
                   f"yet memcheck reported {writes} invalid global access(es), which this case does not explain: "
                   "read the log")
    else:
        verdict = (f"memcheck flagged it ({writes} invalid global access(es)), as expected" if writes else
                   "but memcheck reported no invalid access, against what this case predicts: read the log")
    if aliased >= 0:
        return "reused", (f"case observed: the captured address was reused by allocation #{aliased} made after "
                          "the free, so the replay wrote live memory: memcheck has nothing to flag, and only the "
                          f"program's own check sees the corruption; {verdict}")
    return "not-reused", ("case observed: no allocation reused the captured address, so "
                          f"the replay wrote freed memory, which memcheck should flag; {verdict}")


def last_json_object(path: Path) -> dict:
    """The last line parsing as a JSON object, else ``{}``."""
    try:
        lines = read_input_bytes(path, "graphs.cu output", "").decode("utf-8", errors="replace").splitlines()
    except InputFileError:
        return {}
    for line in reversed(lines):
        with contextlib.suppress(json.JSONDecodeError):
            if line.startswith("{") and isinstance(data := json.loads(line), dict):
                return data
    return {}


def read_sanitizer_logs(paths) -> tuple[dict[str, str], dict[str, dict]]:
    """``(logs, outcomes)``: file name -> log text, and -> the ``baked_pointer`` object of a same-named ``.json``.
    InputFileError when a log cannot be read or lacks :data:`SANITIZER_BANNER`."""
    fix = "give the stderr of `compute-sanitizer --tool memcheck graphs --baked-pointer-only`"
    logs, outcomes = {}, {}
    for path in map(Path, paths):
        logs[path.name] = read_input_bytes(path, "sanitizer log", fix).decode("utf-8", errors="replace")
        if SANITIZER_BANNER not in logs[path.name]:
            raise InputFileError(f"{path} is not a compute-sanitizer log (no {SANITIZER_BANNER!r} line): {fix}")
        stdout = path.with_suffix(".json")          # the program's stdout saved next to the log
        bp = last_json_object(stdout).get("baked_pointer") if stdout.is_file() else None
        if isinstance(bp, dict):
            outcomes[path.name] = bp
    return logs, outcomes
