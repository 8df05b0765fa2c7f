"""The suite's time per part (no torch): seconds per test module, tests, seconds in tests and session wall time, one
column per whole-suite run."""

from __future__ import annotations

from collections import Counter

from cudagraph_bench.errors import InputFileError
from cudagraph_bench.results.runfile import Run
from cudagraph_bench.results.shards import DURATIONS_KEY, base_nodeid, is_seconds
from cudagraph_bench.table import Column, render_table

#: The run JSON section the plugin writes its own records into.
SECTION = "cudagraph_bench"


def _section(run: Run) -> dict:
    """InputFileError unless ``time_per_part_s`` is a non-empty ``{module: s >= 0}`` and ``wall_s`` > 0."""
    section = run.data.get(SECTION) or {}
    if not isinstance(section, dict) or not section.get("time_per_part_s") or section.get("wall_s") is None:
        raise InputFileError(f"{run.path} has no time per part (cudagraph_bench.time_per_part_s and wall_s): give a "
                             "whole-suite run written by this plugin's pytest session (--benchmark-json)")
    parts, wall_s = section["time_per_part_s"], section["wall_s"]
    if not isinstance(parts, dict) or not all(is_seconds(s) for s in parts.values()):
        raise InputFileError(f"{run.path}: cudagraph_bench.time_per_part_s is not {{test module: seconds >= 0}}: "
                             "rerun the suite to rewrite the file")
    if not is_seconds(wall_s, positive=True):
        raise InputFileError(f"{run.path}: cudagraph_bench.wall_s = {wall_s!r} is not seconds > 0: rerun the suite "
                             "to rewrite the file")
    return section


def run_label(run: Run) -> str:
    """E.g. ``"NVIDIA H200, 1 process, 2026-11-30 16:23 (s)"`` (UTC)."""
    env = run.environment
    workers, gpu = env.gpu_workers, env.gpu_name or "CPU"
    when = f", {env.run_datetime[:16].replace('T', ' ')}" if env.run_datetime else ""
    if workers:
        # an older merge (no slowest_worker_wall_s) holds the slowest worker's session as wall_s
        section = run.data.get(SECTION) or {}
        which = "" if "slowest_worker_wall_s" in section else ", wall time of the slowest worker"
        return f"{workers} x {gpu}, {workers} GPU workers{when}{which} (s)"
    return f"{gpu}, 1 process{when} (s)"


def suite_timing_rows(runs: list[Run]) -> list[dict]:
    """One row per module (first run's order), then ``in tests``, ``session wall time`` and (several runs) the ratio to
    the first run: ``part``, ``tests``, ``s0``, ``s1``, ... InputFileError for a run without a time per part."""
    sections = [_section(run) for run in runs]
    tests = Counter(base_nodeid(n).split("::", 1)[0] for n in sections[0].get(DURATIONS_KEY) or {})
    parts = list(dict.fromkeys(p for s in sections for p in s["time_per_part_s"]))
    rows = [*({"part": p, "tests": tests.get(p)} for p in parts),
            {"part": "in tests", "tests": sum(tests.values()) or None}, {"part": "session wall time", "tests": None}]
    if len(sections) > 1:
        rows.append({"part": "wall time vs the first run", "tests": None})
    first = float(sections[0]["wall_s"])
    for i, s in enumerate(sections):
        times, wall = s["time_per_part_s"], float(s["wall_s"])
        for row, value in zip(rows, [*map(times.get, parts), sum(times.values()), wall, wall / first]):
            row[f"s{i}"] = value
    return rows


def render_suite_timing(runs: list[Run], fmt: str = "markdown") -> str:
    """Seconds with 1 decimal, ratios with 2."""
    keys = [f"s{i}" for i in range(len(runs))]
    columns = [Column("part", "part"), Column("tests", "tests", align="right"),
               *(Column(k, run_label(run), align="right") for k, run in zip(keys, runs))]
    rows = suite_timing_rows(runs)
    for row in rows:
        spec = "{:.2f}x" if row["part"].startswith("wall time vs") else "{:.1f}"
        row.update({k: spec.format(row[k]) for k in keys if row[k] is not None})
    return render_table(columns, rows, fmt)
