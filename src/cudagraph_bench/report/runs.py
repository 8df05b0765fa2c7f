"""The runs a results page is made of (no torch): loading, merging or superseding them, unmeasured cases, GPU."""

from __future__ import annotations

from pathlib import Path

from cudagraph_bench.errors import InputFileError
from cudagraph_bench.results.record import FailedCase, decode_failure
from cudagraph_bench.results.runfile import Measurement, Run, load_run, measurements
from cudagraph_bench.variants import FORWARD, display_rank


def load_runs(refs: list[str], storage: str | None = None) -> list[Run]:
    """InputFileError (one line) for a bad file or the same run given twice."""
    from cudagraph_bench.results.identity import repeated_run

    runs = [load_run(ref, storage) for ref in refs]
    repeat = repeated_run(runs)
    if repeat:
        earlier, run, why = repeat
        raise InputFileError(f"{earlier.path} and {run.path} are the same run ({why}): give each run once")
    return runs


def run_time(run: Run):
    """An aware UTC datetime (naive: UTC); InputFileError when missing or not ISO 8601."""
    from datetime import datetime, timezone

    raw = run.environment.run_datetime
    try:
        when = datetime.fromisoformat(str(raw))
    except ValueError:
        raise InputFileError(f"{run.path}: 'datetime' is {raw!r}, not an ISO 8601 time: --allow overlap needs "
                             "the time each run was made") from None
    return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)


def merged(runs: list[Run]) -> dict[tuple, Measurement]:
    """Keyed by ``(suite, *key)``; InputFileError when two runs hold the same case."""
    out: dict[tuple, Measurement] = {}
    origin: dict[tuple, Path] = {}
    for run in runs:
        for key, m in measurements(run).items():
            if key in out:
                raise InputFileError(f"{m.label!r} is in both {origin[key]} and {run.path}: "
                                     "report each case from one run, or pass --allow overlap to keep the newer one")
            out[key], origin[key] = m, run.path
    return out


def _group_of(record: Measurement | FailedCase) -> tuple:
    """A forward prompt length as a whole, else one benchmark by name."""
    suite = record.case.suite
    return ("forward", *record.case.without_variant()) if suite == "forward" else (suite, record.name)


def supersede(runs: list[Run]) -> tuple[list[Run], list[str]]:
    """``--allow overlap``: a forward prompt length or benchmark held by several runs is kept from the newest only (a
    length whole, so each reduction compares one run's variants). Returns ``(runs, one line per replacement)``."""
    times = [run_time(run) for run in runs]
    owner: dict[tuple, int] = {}
    lost: dict[tuple, list[int]] = {}
    variants: dict[tuple, set] = {}  # (run index, group) -> forward variants it holds
    for i in sorted(range(len(runs)), key=lambda i: times[i]):
        run = runs[i]
        for record in [*measurements(run).values(), *run.failures]:
            variants.setdefault((i, _group_of(record)), set()).add(str(record.case.variant))
        for g in {g for (j, g) in variants if j == i}:
            if g in owner:
                if times[owner[g]] == times[i]:
                    raise InputFileError(f"{runs[owner[g]].path} and {run.path} overlap and have the same datetime "
                                         f"{times[i].isoformat()}: cannot tell which is newer; leave one out")
                lost.setdefault(g, []).append(owner[g])
            owner[g] = i
    out = []
    for i, run in enumerate(runs):
        data = {**run.data, "benchmarks": [b for b, m in zip(run.benchmarks, measurements(run).values())
                                           if owner[_group_of(m)] == i]}
        section = dict(data.get("cudagraph_bench") or {})
        if section.get("failures"):
            # an entry that names no case is kept as it is: no page lists it
            section["failures"] = [f for f in section["failures"]
                                   if (failed := decode_failure(f)) is None or owner[_group_of(failed)] == i]
            data["cudagraph_bench"] = section
        out.append(Run(path=run.path, data=data, sha256=run.sha256))
    lines = []
    for g, olds in sorted(lost.items(), key=lambda kv: tuple((0, x, "") if isinstance(x, int) else (1, 0, str(x))
                                                              for x in kv[0])):
        what = f"{g[1]} {g[2]} L={g[3]}" if g[0] == "forward" else f"{g[0]} {g[1]}"
        line = f"{what}: {', '.join(sorted({runs[j].path.name for j in olds}))} -> {runs[owner[g]].path.name}"
        dropped = set().union(*(variants[(j, g)] for j in olds)) - variants[(owner[g], g)]
        if g[0] == "forward" and dropped:
            line += (f" (drops {', '.join(sorted(dropped, key=variant_order))}: the newer run "
                     "does not hold them at this length; leave it out or rerun the length whole)")
        lines.append(line)
    return out, lines


def not_measured(runs: list[Run], suite: str = "forward") -> list[FailedCase]:
    """Cases of ``suite`` that a run could not measure (:attr:`Run.failures <cudagraph_bench.results.runfile.Run>`)."""
    return [f for run in runs for f in run.failures if f.case.suite == suite]


def gpu_name(runs: list[Run]) -> str | None:
    """Joined with "/" when they differ."""
    names = list(dict.fromkeys(r.environment.gpu_name for r in runs))
    return " / ".join(n for n in names if n) or None


def variant_order(variant: str) -> tuple[int, str]:
    """Sort key of forward variants: the registry's display order, unknown ones last by name."""
    return display_rank(FORWARD, variant), variant
