"""The journal a pytest session writes for the launcher (no torch, no pytest): one flushed JSON line per event, so a
process dying mid-test still says where: ``{"start": nodeid, "case": {...}}``, ``{"finish": nodeid}``, and ``{"stop":
nodeid, "reason": text}`` when that test broke the CUDA context (exit :data:`EXIT_CUDA_BROKEN`)."""

from __future__ import annotations

import json

#: Exit code of a session stopped because its CUDA context broke.
EXIT_CUDA_BROKEN = 70
_FATAL_CUDA_MARKERS = ("CUDA error", "device-side assert", "illegal memory access", "cudaError",
                       "CUBLAS_STATUS", "CUDNN_STATUS", "unspecified launch failure", "AcceleratorError")


def is_fatal_cuda_error(reason: str | None) -> bool:
    """A sticky CUDA error (device-side assert, illegal memory access...)."""
    return bool(reason) and any(m.lower() in reason.lower() for m in _FATAL_CUDA_MARKERS)


def read_journal(path) -> tuple[list[str], set[str], dict | None, str | None]:
    """``(started ids in order, finished ids, the crashed test's start event or None, the stop reason or None)``; a line
    cut off by the crash is ignored."""
    started, finished, events, stop = [], set(), {}, None
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return [], set(), None, None
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if "start" in event:
            started.append(event["start"])
            events[event["start"]] = event
        if "finish" in event:
            finished.add(event["finish"])
        if "stop" in event:
            stop = str(event.get("reason"))
    in_flight = next((n for n in reversed(started) if n not in finished), None)
    return started, finished, events.get(in_flight), stop
