"""Whether two run files are one run (no torch): the same bytes, or one pytest session's two files (JSON and autosave):
the same :func:`content_digest`, ``datetime`` within :data:`SAME_SESSION_S`, and agreeing rounds."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from cudagraph_bench.results.record import parse_stamp
from cudagraph_bench.table import plural

if TYPE_CHECKING:
    from cudagraph_bench.results.runfile import Run

#: Most seconds between the ``datetime`` stamps of one session's two files (written one right after the other).
SAME_SESSION_S = 30.0
#: The top-level keys both files of one session hold unchanged (besides the benchmarks and the suite's section).
SESSION_KEYS = ("machine_info", "commit_info", "version")
#: Keys of the ``cudagraph_bench`` section holding a clock reading: the only ones a session's two files differ in.
CLOCK_KEYS = frozenset({"wall_s"})


def _without_rounds(bench) -> object:
    """Without ``stats.data``, which only one of a session's files may hold."""
    if not (isinstance(bench, dict) and isinstance(bench.get("stats"), dict)):
        return bench
    return {**bench, "stats": {k: v for k, v in bench["stats"].items() if k != "data"}}


def content_digest(data: dict) -> str | None:
    """sha256 of the canonical JSON both files of a session hold unchanged; None without benchmarks."""
    benchmarks = data.get("benchmarks") or []
    if not benchmarks:
        return None
    section = data.get("cudagraph_bench")
    if isinstance(section, dict):
        section = {k: v for k, v in section.items() if k not in CLOCK_KEYS}
    shared = {**{key: data.get(key) for key in SESSION_KEYS}, "cudagraph_bench": section,
              "benchmarks": [_without_rounds(b) for b in benchmarks]}
    return hashlib.sha256(json.dumps(shared, sort_keys=True).encode()).hexdigest()


def _same_rounds(a: Run, b: Run) -> bool:
    rounds = [[(x.get("stats") or {}).get("data") if isinstance(x, dict) else None for x in pair]
              for pair in zip(a.benchmarks, b.benchmarks)]
    return not any(one is not None and other is not None and one != other for one, other in rounds)


def same_run_reason(a: Run, b: Run) -> str | None:
    """Why ``a`` and ``b`` are one run, in a few words (``"sha256 <12 hex digits>"``, or the session's files and their
    time apart), or None."""
    if a.sha256 == b.sha256:
        return f"sha256 {a.sha256[:12]}"
    if a.content_digest is None or a.content_digest != b.content_digest:
        return None
    raw_a, raw_b = a.environment.run_datetime, b.environment.run_datetime    # equal: 0 s apart, even unreadable
    when_a, when_b = parse_stamp(raw_a), parse_stamp(raw_b)
    apart = (0.0 if raw_a == raw_b else None if when_a is None or when_b is None else
             abs((when_a - when_b).total_seconds()))
    if apart is None or apart > SAME_SESSION_S or not _same_rounds(a, b):
        return None
    return (f"one session's two files: the same {plural(len(a.benchmarks), 'benchmark')} and statistics, stamped "
            f"{apart:.3f} s apart")


def shared_runs(runs: list[Run], others: list[Run]) -> list[Run]:
    """The runs of ``runs`` that are also one of ``others`` (:func:`same_run_reason`), in their order."""
    return [run for run in runs if any(same_run_reason(run, other) for other in others)]


def repeated_run(runs: list[Run]) -> tuple[Run, Run, str] | None:
    """``(earlier, run, why)`` of the first run repeating an earlier one, or None."""
    return next(((earlier, run, why) for i, run in enumerate(runs) for earlier in runs[:i]
                 if (why := same_run_reason(earlier, run))), None)
