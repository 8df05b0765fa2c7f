"""Proof of replay (no torch): did the timed call of a graph variant replay its graph or run eagerly (vLLM#36165,
pytorch#124506)? The plugin records one profiled call's host launches in ``extra_info["replay"]``; kernels inside a
replayed graph make no launch call and are not counted."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Iterable

#: Host API calls that launch a whole CUDA graph (runtime and driver API).
GRAPH_LAUNCH_APIS = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})
#: Host API calls that launch one kernel outside any graph (runtime and driver API; Triton uses the driver's).
KERNEL_LAUNCH_APIS = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
                                "cudaLaunchCooperativeKernelMultiDevice", "cuLaunchKernel", "cuLaunchKernelEx",
                                "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernelMultiDevice"})
#: Name prefixes of host API calls that copy or set memory (the static input copy): not kernels.
COPY_API_PREFIXES = ("cudaMemcpy", "cudaMemset", "cuMemcpy", "cuMemset")
#: Event kinds that are device activity (the kernels and copies themselves), never a host API call.
DEVICE_KINDS = frozenset({"kernel", "concurrent_kernel", "gpu_memcpy", "gpu_memset", "cuda", "memcpy", "memset"})
_SUFFIX = re.compile(r"(_v\d+)?(_ptsz|_ptds)?$")


@dataclass(frozen=True)
class ReplayCount:
    """Host launches during the profiled calls, summed."""

    graph_launches: int
    kernels_outside_graph: int
    copies_outside_graph: int


def api_name(name: str) -> str:
    """Without CUPTI's suffixes (``"cudaLaunchKernel_v7000"`` -> ``"cudaLaunchKernel"``)."""
    return _SUFFIX.sub("", str(name).strip())


def count_replay(events: Iterable[tuple[str, str]]) -> ReplayCount:
    """Count graph launches, kernel launches and copies among ``(name, kind)`` records by host-call name; device kinds
    never count, unknown names are ignored."""
    apis = [api_name(name) for name, kind in events if str(kind).strip().lower() not in DEVICE_KINDS]
    return ReplayCount(sum(a in GRAPH_LAUNCH_APIS for a in apis), sum(a in KERNEL_LAUNCH_APIS for a in apis),
                       sum(a.startswith(COPY_API_PREFIXES) for a in apis))   # the three sets share no name


def replay_field(count: ReplayCount, *, calls: int, expected_graph_launches: int,
                 kernels_outside_allowed: int | None) -> dict:
    """``{"calls", "graph_launches", "kernels_outside_graph", "copies_outside_graph", "expected_graph_launches",
    "kernels_outside_allowed"}``: counts summed over calls, expected/allowed per call (allowed None: unbounded)."""
    return {"calls": calls, **asdict(count), "expected_graph_launches": expected_graph_launches,
            "kernels_outside_allowed": kernels_outside_allowed}


#: Fields of ``extra_info["replay"]`` that must be whole numbers >= 0 (calls: >= 1), and whether each is required.
_FIELDS = {"graph_launches": True, "kernels_outside_graph": True, "calls": False, "copies_outside_graph": False,
           "expected_graph_launches": False, "kernels_outside_allowed": False}


def replay_format_problem(value) -> str | None:
    """One phrase naming the malformed field, or None."""
    if not isinstance(value, dict):
        kind = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(value), "null")
        return f"extra_info.replay of type {kind}, not an object of launch counts"
    for key, required in _FIELDS.items():
        if key not in value:
            if required:
                return f"extra_info.replay without {key}"
            continue
        x = value[key]
        if x is None and key == "kernels_outside_allowed":
            continue
        if not isinstance(x, int) or isinstance(x, bool) or x < (1 if key == "calls" else 0):
            return f"extra_info.replay.{key} = {x!r}, not a whole number >= {1 if key == 'calls' else 0}"
    return None


def replay_problem(value) -> str | None:
    """None when per call graph launches equal ``expected_graph_launches`` (default 1) and kernels outside are at most
    ``kernels_outside_allowed`` (default 0; null: unbounded), else the one-line reason."""
    calls = value.get("calls") or 1
    launches, kernels = value["graph_launches"], value["kernels_outside_graph"]
    expected = value.get("expected_graph_launches", 1)
    allowed = value.get("kernels_outside_allowed", 0)
    if launches == expected * calls and (allowed is None or kernels <= allowed * calls):
        return None
    per = "per call" if calls == 1 else f"in {calls} calls"
    why = ("the timed call ran eagerly" if launches == 0 else
           f"not the {expected} graph launch(es) per call the variant replays" if launches != expected * calls else
           "part of the call ran outside its graph")
    bound = "any" if allowed is None else str(allowed)
    return (f"replay: {launches} graph launches and {kernels} kernels outside a graph {per} "
            f"(expected {expected} and at most {bound} per call): {why}")
