"""Reading compute-sanitizer logs of the baked-pointer demo of ``perf_tests/cuda/graphs.cu`` (no torch): what
memcheck found, what the program saw and which case one run hit."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from cudagraph_bench.errors import InputFileError
from cudagraph_bench.fsio import read_input_bytes

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
    summary = findings["error_summary"]
    aliased = bp.get("aliased_index") if isinstance(bp, dict) else None
    if not isinstance(aliased, int):
        return "unknown", ("the program's `aliased_index` is not available (its output was not saved next to "
                           "the log), so whether a new allocation reused the captured address, and so whether "
                           "memcheck should flag the write, is not known")
    if summary is None and not writes:
        verdict = "memcheck's verdict is missing (no summary in the log)"
    elif aliased >= 0:
        verdict = ("memcheck reported no invalid access, as expected in this case"
                   if writes == 0 else
                   f"yet memcheck reported {writes} invalid global access(es), which this case does not "
                   "explain: read the log")
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
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict):
                return data
    return {}


def read_sanitizer_logs(paths) -> tuple[dict[str, str], dict[str, dict]]:
    """``(logs, outcomes)``: file name -> log text, and -> the ``baked_pointer`` object of a same-named ``.json``.
    InputFileError when a log cannot be read or lacks :data:`SANITIZER_BANNER`."""
    logs, outcomes = {}, {}
    for path in map(Path, paths):
        raw = read_input_bytes(path, "sanitizer log", "give the stderr of `compute-sanitizer --tool memcheck graphs "
                               "--baked-pointer-only`")
        logs[path.name] = raw.decode("utf-8", errors="replace")
        if SANITIZER_BANNER not in logs[path.name]:
            raise InputFileError(f"{path} is not a compute-sanitizer log (no {SANITIZER_BANNER!r} line): give the "
                                 "stderr of `compute-sanitizer --tool memcheck graphs --baked-pointer-only`")
        stdout = path.with_suffix(".json")          # the program's stdout saved next to the log
        if stdout.is_file():
            bp = last_json_object(stdout).get("baked_pointer")
            if isinstance(bp, dict):
                outcomes[path.name] = bp
    return logs, outcomes
