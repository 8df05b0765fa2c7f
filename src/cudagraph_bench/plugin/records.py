"""What a session records besides benchmarks: unmeasured cases and the eager forwards' kernel counts."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SessionRecords:
    """``failures``: per unmeasured case; ``kernel_counts``: key -> ``n_kernels``, ``gpu_busy_ms``."""

    failures: list[dict] = field(default_factory=list)
    kernel_counts: dict[tuple[str, str, int], dict] = field(default_factory=dict)

    def fail(self, fullname: str, key: dict, reason: str, *, status: str = "failed", **details) -> None:
        """List an unmeasured case with its one-line ``reason``, ``status`` (``failed``/``skipped``), ``key``,
        ``fullname`` and ``details``."""
        self.failures.append({**key, "status": status, "reason": reason, "fullname": fullname, **details})

    def summary(self) -> dict:
        """The fields of the run JSON's ``cudagraph_bench`` section."""
        return {"kernel_counts": [{"model": m, "dtype": d, "seq_len": n, **fields}
                                  for (m, d, n), fields in sorted(self.kernel_counts.items())],
                "failures": list(self.failures)}

    def __bool__(self) -> bool:
        return bool(self.failures or self.kernel_counts)
