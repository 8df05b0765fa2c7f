"""What a session records besides its benchmarks, for the run JSON's ``cudagraph_bench`` section: the cases it
could not measure and the kernel counts of the eager forwards."""

from __future__ import annotations


class SessionRecords:
    """``failures``: one dict per case that produced no measurement (:meth:`fail`); ``kernel_counts``:
    ``(model, dtype, seq_len) -> {"n_kernels", "gpu_busy_ms"}`` of its eager forward."""

    def __init__(self):
        self.failures: list[dict] = []
        self.kernel_counts: dict[tuple[str, str, int], dict] = {}

    def fail(self, fullname: str, key: dict, reason: str, *, status: str = "failed", **details) -> dict:
        """List a case that produced no measurement under ``["cudagraph_bench"]["failures"]`` with its one-line
        ``reason``, ``status`` (``failed`` or ``skipped``), its ``extra_info`` ``key`` (``suite`` and its fields),
        ``fullname`` (the test's node id) and ``details`` (``compile_ms``, ``phase``); returns the entry."""
        entry = {**key, "status": status, "reason": reason, "fullname": fullname, **details}
        self.failures.append(entry)
        return entry

    def summary(self) -> dict:
        """The fields of the run JSON's ``cudagraph_bench`` section."""
        return {"kernel_counts": [{"model": m, "dtype": d, "seq_len": n, **fields}
                                  for (m, d, n), fields in sorted(self.kernel_counts.items())],
                "failures": list(self.failures)}

    def __bool__(self) -> bool:
        return bool(self.failures or self.kernel_counts)
