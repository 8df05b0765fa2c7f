"""Splitting a suite into CI shards by recorded durations (no torch, no pytest): whole groups (one model and dtype) by
greedy longest-processing-time (Graham 1969; pytest-split's ``least_duration``), the same split in every job."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping

from cudagraph_bench.errors import InputFileError
from cudagraph_bench.results.benchmark_values import is_finite, is_positive, json_type

#: Key of the recorded durations in a run's ``cudagraph_bench`` section: ``{node id: seconds}``.
DURATIONS_KEY = "test_durations_s"
#: Parameters that name a test's model (the forward/decode cases, and the decode tests' ``causal_model``).
MODEL_PARAMS = ("model", "causal_model")


def base_nodeid(nodeid: str) -> str:
    """``"t.py::f[a]@gpt2-float32"`` -> ``"t.py::f[a]"``."""
    at = nodeid.rfind("@")
    return nodeid[:at] if at > nodeid.rfind("]") and at > nodeid.rfind("::") else nodeid


def group_of(params: Mapping, nodeid: str) -> str:
    """``"<model>-<dtype>"`` from its parameters, e.g. ``"gpt2-float32"``; else its module path."""
    model = next((params[p] for p in MODEL_PARAMS if params.get(p) is not None), None)
    if model is not None and params.get("dtype") is not None:
        return f"{model}-{params['dtype']}"
    return base_nodeid(nodeid).split("::", 1)[0]


def typical_seconds(durations: Mapping[str, float] | None) -> float:
    """The median recorded test (s), or 1 without any."""
    values = [float(v) for v in (durations or {}).values()]
    return statistics.median(values) if values else 1.0


def group_seconds(nodeids: Iterable[str], durations: Mapping[str, float] | None, default_s: float) -> float:
    """``default_s`` for each test without a record."""
    durations = durations or {}
    return sum(float(durations.get(base_nodeid(n), default_s)) for n in nodeids)


def assign_shards(groups: Mapping[str, list[str]], n_shards: int,
                  durations: Mapping[str, float] | None = None) -> list[list[str]]:
    """Split ``groups`` into ``n_shards`` lists: heaviest first (ties by name), each to the lightest shard (ties: the
    lowest). Shard ``i`` is CI shard ``i + 1`` and may be empty. ValueError when ``n_shards`` < 1."""
    if n_shards < 1:
        raise ValueError(f"need at least one shard, got {n_shards}")
    default_s = typical_seconds(durations)
    weights = {g: group_seconds(ids, durations, default_s) for g, ids in groups.items()}
    loads = [0.0] * n_shards
    shards: list[list[str]] = [[] for _ in range(n_shards)]
    for group in sorted(weights, key=lambda g: (-weights[g], g)):
        lightest = min(range(n_shards), key=lambda i: (loads[i], i))
        shards[lightest].append(group)
        loads[lightest] += weights[group]
    return shards


def is_seconds(value, *, positive: bool = False) -> bool:
    """A finite number of seconds, >= 0 (> 0 with ``positive``)."""
    return is_positive(value) if positive else is_finite(value) and value >= 0


def durations_of(data: Mapping, source: str, *, required: bool = True) -> dict[str, float]:
    """``{node id: seconds}`` of a run; InputFileError naming ``source`` when the record is no object of seconds >= 0,
    or (``required``: sharding by them) it records none."""
    section = data.get("cudagraph_bench") if isinstance(data, Mapping) else None
    found = section.get(DURATIONS_KEY, {}) if isinstance(section, Mapping) else {}
    if not isinstance(found, Mapping):
        raise InputFileError(f"{source}: cudagraph_bench.{DURATIONS_KEY} is of type {json_type(found)}, not an "
                             "object of seconds per test: rerun the suite to rewrite the file")
    if required and not found:
        raise InputFileError(f"{source} records no test durations (cudagraph_bench.{DURATIONS_KEY}): give the "
                             "--benchmark-json of a run made with this plugin, or leave --shard-durations out "
                             "to split by test count")
    out = {}
    for nodeid, seconds in found.items():
        if not is_seconds(seconds):
            raise InputFileError(f"{source}: cudagraph_bench.{DURATIONS_KEY}[{nodeid!r}] = {seconds!r} is not "
                                 "seconds >= 0: rerun the suite to rewrite the file")
        out[base_nodeid(str(nodeid))] = float(seconds)
    return out


def load_durations(path: str) -> dict[str, float]:
    """:func:`durations_of` the run at ``path``; raises InputFileError."""
    from cudagraph_bench.results.runfile import load_run

    run = load_run(path, interrupted_fix="give --shard-durations the run of a session that ran to its end")
    return durations_of(run.data, str(run.path))


def time_per_part(durations_s: dict[str, float]) -> dict[str, dict]:
    """``{module path: {"s": seconds, "tests": count}}`` from ``{node id: s}``, longest first."""
    parts: dict[str, dict] = {}
    for nodeid, seconds in durations_s.items():
        part = parts.setdefault(nodeid.split("::", 1)[0], {"s": 0.0, "tests": 0})
        part["s"] += float(seconds)
        part["tests"] += 1
    return dict(sorted(parts.items(), key=lambda kv: -kv[1]["s"]))
