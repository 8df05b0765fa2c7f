"""The architecture zoo's vocabulary (no torch). A run records one entry per type and part (a benchmark when measured,
else a failures entry) with ``suite``, ``model_type``, ``part``, ``status``, ``reason`` and figures."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: ``extra_info["suite"]`` of every zoo entry.
SUITE = "zoo"
#: The two parts of a type: one forward pass replayed from a graph, and greedy decode with graphed steps.
FORWARD = "forward"
DECODE = "decode"
PARTS = (FORWARD, DECODE)

#: Checked against its reference and timed.
MEASURED = "measured"
#: The suite refuses to capture it, up front, with the layer, op or config field that prevents it.
NOT_GRAPHABLE = "not graphable"
#: The suite does not measure the type at all (its checkpoint is refused, or it cannot be built or run).
REFUSED = "refused"
#: A check ran and failed (a replay or a decode that differs from its reference), or the pipeline raised.
FAILED = "failed"
#: A CPU run found no reason to refuse or fail it; whether its graph matches eager is for a GPU run to say.
AWAITS_GPU = "awaits GPU"
#: Every status, in the order a page counts them.
STATUSES = (MEASURED, NOT_GRAPHABLE, REFUSED, FAILED, AWAITS_GPU)

#: Tokens of the forward prompt and of the decode prompt (an odd length: no kernel tuned for a round one).
PROMPT_TOKENS = 37
#: New tokens of a decode request.
NEW_TOKENS = 32
#: Static KV cache of the decoders (tokens): prompt plus new tokens fit.
CACHE_TOKENS = 128
#: Buckets of the bucketed (right-padded) prefill: the prompt is padded to 64.
PREFILL_BUCKETS = (16, 64)
#: dtype every type is checked and timed in on a GPU (the CPU classification too: the same rules).
DTYPE = "bfloat16"

#: The test id of a zoo test: ``perf_tests/test_zoo.py::test_zoo_decode[qwen3_next]``.
ZOO_TEST_ID = re.compile(r"test_zoo\.py::test_zoo_(forward|decode)\[([^\]]+)\]")
#: ``extra_info`` keys of a measured part's figures (all of them numbers).
FIGURE_SUFFIXES = ("_ms", "_ms_per_token", "_pct", "speedup")


@dataclass(frozen=True)
class ZooEntry:
    """``status``, ``reason`` (None when measured), releases and figures of one part."""

    model_type: str
    part: str
    status: str
    reason: str | None
    transformers: str | None = None
    torch: str | None = None
    figures: dict = field(default_factory=dict)


def read_entry(entry, *, measured: bool) -> ZooEntry | None:
    """The entry of a benchmark's ``extra_info`` or a failures entry, or None for no zoo part; a launcher's entry for a
    killed test is that part, failed."""
    if not isinstance(entry, dict):
        return None
    if not (entry.get("suite") == SUITE and isinstance(entry.get("model_type"), str) and entry.get("part") in PARTS):
        found = None if measured else ZOO_TEST_ID.search(str(entry.get("fullname") or ""))
        if found is None:
            return None
        return ZooEntry(found.group(2), found.group(1), FAILED, str(entry.get("reason") or "the process died"))
    figures = {k: float(v) for k, v in entry.items() if k.endswith(FIGURE_SUFFIXES)
               and isinstance(v, (int, float)) and not isinstance(v, bool)} if measured else {}
    status = str(entry.get("status") or (MEASURED if measured else FAILED))
    return ZooEntry(entry["model_type"], entry["part"], status, entry.get("reason") or None,
                    entry.get("transformers"), entry.get("torch"), figures)

