"""Releasing what a case left on the GPU, and the ledger that checks every graph pool was released."""

from __future__ import annotations

import gc
import sys
from dataclasses import dataclass, field


def release(*, everything: bool = False) -> None:
    """Free what the last case left: gc (pools can sit in cycles), then the allocator's free blocks. Survivors are
    frozen (``gc.freeze``; full collections took ~0.4 s per case) unless an exception propagates; ``everything``
    unfreezes first, after long-lived objects were dropped."""
    import torch

    if everything:
        gc.unfreeze()
    gc.collect()
    if sys.exc_info()[1] is None:
        gc.freeze()
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def reserved_mib() -> float:
    """0 without CUDA started in this process."""
    import torch

    return torch.cuda.memory_reserved() / 2**20 if torch.cuda.is_initialized() else 0.0


@dataclass
class MemoryLedger:
    """Reserved memory at session start, end and around graph cases: an unreleased pool stays."""

    start_mib: float | None = None
    end_mib: float | None = None
    cases: list[tuple[str, float, float]] = field(default_factory=list)   # (case id, before, after release) MiB

    def record(self, case_id: str, before_mib: float, after_mib: float) -> None:
        self.cases.append((case_id, before_mib, after_mib))

    def summary(self) -> dict:
        """The run JSON's ``cudagraph_bench`` fields (MiB)."""
        growth = [after - before for _, before, after in self.cases]
        return {"memory_reserved_start_mib": self.start_mib,
                "memory_reserved_end_mib": self.end_mib if self.end_mib is not None else self.start_mib,
                "graph_cases": len(self.cases),
                "max_case_growth_mib": max(growth, default=0.0),
                # the first graph case creates the reused warmup stream and its cuBLAS workspace
                "max_case_growth_after_first_mib": max(growth[1:], default=0.0),
                "cases": [{"case": c, "reserved_before_mib": b, "reserved_after_mib": a} for c, b, a in self.cases]}

    def line(self) -> str:
        """One line of the terminal summary."""
        s = self.summary()
        return (f"reserved at start {s['memory_reserved_start_mib']:.0f} MiB, at end "
                f"{s['memory_reserved_end_mib']:.0f} MiB; {s['graph_cases']} graph cases, largest growth left "
                f"behind by one case {s['max_case_growth_mib']:.0f} MiB, after the first "
                f"{s['max_case_growth_after_first_mib']:.0f} MiB (0 = every graph pool was released; the first case "
                f"also keeps the warmup side stream's cuBLAS workspace; the padded and bucketed graphs the session "
                f"holds for a model's next prompt length are not counted)")
