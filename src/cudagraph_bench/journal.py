"""The journal a pytest session writes for the launcher (no torch, no pytest): one JSON line per event, flushed at
once, so a process that dies mid-test still says where. Events: ``{"start": nodeid, "case": {extra_info key}}``
(``case`` only for a benchmark case), ``{"finish": nodeid}``, ``{"stop": nodeid, "reason": text}`` when that test
broke the CUDA context (exit code :data:`EXIT_CUDA_BROKEN`)."""

from __future__ import annotations

import json

#: Exit code of a session stopped because its CUDA context broke.
EXIT_CUDA_BROKEN = 70
_FATAL_CUDA_MARKERS = ("CUDA error", "device-side assert", "illegal memory access", "cudaError",
                       "CUBLAS_STATUS", "CUDNN_STATUS", "unspecified launch failure", "AcceleratorError")


def is_fatal_cuda_error(reason: str | None) -> bool:
    """Whether a failure reason looks like a sticky CUDA error (device-side assert, illegal memory access...)."""
    return bool(reason) and any(m.lower() in reason.lower() for m in _FATAL_CUDA_MARKERS)


def read_journal(path) -> tuple[list[str], set[str], dict | None, str | None]:
    """``(started node ids in order, finished node ids, the start event of the test a crash was in or None, the
    stop reason or None)`` of a journal; a line cut off by the crash is ignored."""
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
