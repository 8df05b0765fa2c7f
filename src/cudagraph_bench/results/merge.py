"""One pytest-benchmark document from runs of one suite split over processes (CI shards or ``run --gpus``; no torch):
benchmarks concatenated (a ``fullname`` twice is an error), parts listed under ``machine_info[entries_key]``,
``cudagraph_bench`` sections merged. Runs of different GPU models are refused."""

from __future__ import annotations

import copy
from collections.abc import Mapping

from cudagraph_bench.errors import UsageError
from cudagraph_bench.results.benchmark_values import is_number, is_whole
from cudagraph_bench.results.record import attach_kernel_counts
from cudagraph_bench.results.shards import DURATIONS_KEY, time_per_part

#: ``cudagraph_bench`` keys whose lists are concatenated.
LIST_KEYS = ("cases", "kernel_counts", "failures")
#: Keys added up.
SUM_KEYS = ("graph_cases",)
#: Per-process figures (MiB; ``wall_s`` in seconds) kept as their largest value.
MAX_KEYS = ("wall_s", "memory_reserved_start_mib", "memory_reserved_end_mib", "max_case_growth_mib",
            "max_case_growth_after_first_mib")
#: What describes one part only (the shard it ran): kept under ``parts`` alone.
PART_KEYS = ("shard",)


def machine_gpu(machine_info: Mapping | None) -> str | None:
    """A run's GPU (``"gpu"``, else ``["cuda"]["gpu_name"]``; None for a CPU run), read without torch."""
    info = machine_info or {}
    cuda = info.get("cuda")
    name = info.get("gpu") or (cuda.get("gpu_name") if isinstance(cuda, Mapping) else None)
    return str(name) if name else None


def check_one_gpu(parts: list[tuple[str, Mapping]], envelope: Mapping | None = None) -> str | None:
    """The GPU model of every part (None for CPU runs); UsageError naming two parts of different models."""
    seen: dict[str | None, str] = {}
    named = ([("this session", envelope)] if envelope is not None else []) + list(parts)
    for source, doc in named:
        seen.setdefault(machine_gpu(doc.get("machine_info")), source)
    if len(seen) > 1:
        (gpu_a, a), (gpu_b, b) = list(seen.items())[:2]
        raise UsageError(f"{a} ran on {gpu_a or 'no GPU'} and {b} on {gpu_b or 'no GPU'}: merge the shards of "
                         "one GPU model only (run each GPU model's shards into its own merged file)")
    return next(iter(seen), None)


def part_entry(source: str, doc: Mapping) -> dict:
    """``source``, ``node``, ``gpu``, ``cpu_affinity``, ``commit``, ``datetime``, ``benchmarks``, ``tests`` and the
    ``shard`` when the part ran one."""
    info = doc.get("machine_info") or {}
    section = doc.get("cudagraph_bench") or {}
    shard = section.get("shard") or {}
    entry = {"source": source, "node": info.get("node"), "gpu": machine_gpu(info),
             "cpu_affinity": info.get("cpu_affinity"), "commit": (doc.get("commit_info") or {}).get("id"),
             "datetime": doc.get("datetime"), "benchmarks": len(doc.get("benchmarks") or []),
             "tests": len(section.get(DURATIONS_KEY) or {})}
    if shard.get("index") is not None:
        entry["shard"] = f"{shard['index']}/{shard['count']}"
    return entry


def _check_profiled_once(kernel_counts: list, source: str, profiled: dict) -> None:
    """Record ``source``'s profiled cases in ``profiled``; UsageError naming a case another part profiled too."""
    for entry in kernel_counts:
        if not isinstance(entry, Mapping):
            continue
        case = (entry.get("model"), entry.get("dtype"), entry.get("seq_len"))
        if case in profiled:
            raise UsageError(f"the kernel count of {case[0]} {case[1]} L{case[2]} is in {profiled[case]} and in "
                             f"{source}: merge runs of disjoint shards (each case profiled once)")
        profiled[case] = source


def merge_sections(parts: list[tuple[str, Mapping]]) -> dict:
    """The sections as one: lists concatenated, durations united, counts summed, per-process figures at their largest,
    other keys from the first part, each part's own under ``parts``. UsageError when a test's duration or a case's
    kernel count is recorded by two parts."""
    merged: dict = {}
    owner: dict[str, str] = {}
    profiled: dict[tuple, str] = {}
    per_part = []
    for source, doc in parts:
        section = doc.get("cudagraph_bench")
        if not isinstance(section, Mapping):
            continue
        own = {"source": source}
        for key, value in section.items():
            if key in LIST_KEYS and isinstance(value, list):
                if key == "kernel_counts":
                    _check_profiled_once(value, source, profiled)
                merged.setdefault(key, []).extend(copy.deepcopy(value))
            elif key == DURATIONS_KEY and isinstance(value, Mapping):
                for nodeid, seconds in value.items():
                    if nodeid in owner:
                        raise UsageError(f"{nodeid} ran in {owner[nodeid]} and in {source}: merge runs of "
                                         "disjoint shards (each test in one of them)")
                    owner[nodeid] = source
                    merged.setdefault(DURATIONS_KEY, {})[nodeid] = seconds
            elif key in SUM_KEYS or key in MAX_KEYS:
                own[key] = value
                if is_number(value):
                    known = merged.get(key)
                    merged[key] = value if known is None else (known + value if key in SUM_KEYS else max(known, value))
            elif key in PART_KEYS:
                own[key] = copy.deepcopy(value)
            elif key != "parts":
                merged.setdefault(key, copy.deepcopy(value))   # e.g. run settings: the first part's
                own[key] = copy.deepcopy(value)
        per_part.append(own)
    if DURATIONS_KEY in merged:   # recomputed from the united durations
        merged["time_per_part_s"] = {part: round(t["s"], 3) for part, t in time_per_part(merged[DURATIONS_KEY]).items()}
    if "kernel_counts" in merged:
        merged["kernel_counts"].sort(key=lambda k: (str(k.get("model")), str(k.get("dtype")), k.get("seq_len") or 0))
    if per_part:
        merged["parts"] = per_part
    return merged


def merge_runs(parts: list[tuple[str, Mapping]], *, envelope: Mapping | None = None,
               entries_key: str = "shards", entries: list[dict] | None = None) -> dict:
    """One document of ``parts`` (``(source, document)``), benchmarks in input order. ``envelope``: the document whose
    environment the result takes (None: the first part's, newest datetime); ``entries_key``: ``"shards"`` or
    ``"workers"``. UsageError: no parts, different GPU models, or a ``fullname`` in two parts."""
    if not parts:
        raise UsageError("nothing to merge: give the runs of every shard")
    check_one_gpu(parts, envelope)
    base = envelope if envelope is not None else parts[0][1]
    out = {key: copy.deepcopy(value) for key, value in base.items() if key not in ("benchmarks", "cudagraph_bench")}
    out.setdefault("machine_info", {})
    if envelope is None:
        stamps = [str(doc["datetime"]) for _, doc in parts if doc.get("datetime")]
        if stamps:
            out["datetime"] = max(stamps)
    benchmarks, where = [], {}
    for source, doc in parts:
        for bench in doc.get("benchmarks") or []:
            name = bench.get("fullname") or bench.get("name")
            if name in where:
                raise UsageError(f"benchmark {name} is in {where[name]} and in {source}: merge runs of disjoint "
                                 "shards (each benchmark measured once)")
            where[name] = source
            benchmarks.append(copy.deepcopy(bench))
    out["benchmarks"] = benchmarks
    section = merge_sections(parts)
    if section:
        out["cudagraph_bench"] = section
        attach_kernel_counts(benchmarks, section.get("kernel_counts") or [])   # profiled in another part
    out["machine_info"][entries_key] = entries if entries is not None else [part_entry(s, d) for s, d in parts]
    return out


def recorded_shard(doc: Mapping) -> tuple[int, int] | None:
    """``(K, N)`` of the run's ``--shard``, or the one shard all its parts ran; None when unsharded."""
    section = doc.get("cudagraph_bench")
    section = section if isinstance(section, Mapping) else {}
    found = [section.get("shard")] if section.get("shard") else \
        [p.get("shard") for p in section.get("parts") or [] if isinstance(p, Mapping) and p.get("shard")]
    pairs = {(s.get("index"), s.get("count")) for s in found if isinstance(s, Mapping)}
    if len(pairs) != 1:
        return None
    index, count = pairs.pop()
    return (index, count) if is_whole(index) and is_whole(count) else None


def check_shards(parts: list[tuple[str, Mapping]]) -> list[str]:
    """The shards ``"K/N"`` missing from ``parts``; UsageError when two parts ran different N or the same K."""
    seen: dict[tuple[int, int], str] = {}
    for source, doc in parts:
        shard = recorded_shard(doc)
        if shard is None:
            continue
        for (k, n), where in seen.items():
            if n != shard[1]:
                raise UsageError(f"{where} is shard {k}/{n} and {source} is shard {shard[0]}/{shard[1]}: merge the "
                                 "shards of one --shard K/N split (the same N)")
            if k == shard[0]:
                raise UsageError(f"{where} and {source} both ran shard {k}/{n}: give each shard's run once")
        seen[shard] = source
    if not seen:
        return []
    count = next(iter(seen))[1]
    return [f"{k}/{count}" for k in range(1, count + 1) if (k, count) not in seen]


def commits_of(parts: list[tuple[str, Mapping]]) -> list[str]:
    """The distinct commit ids of ``parts`` (``commit_info.id``), in order."""
    return list(dict.fromkeys(str((doc.get("commit_info") or {}).get("id")) for _, doc in parts
                              if (doc.get("commit_info") or {}).get("id")))
