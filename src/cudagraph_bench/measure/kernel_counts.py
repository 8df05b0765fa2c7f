"""Kernel launches and GPU busy time of one eager forward per case (``torch.profiler``), for the launch-overhead model
and the roofline; profiled after every timed test (CUPTI left attached slows launches, pytorch#144455)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from cudagraph_bench.measure import roofline
from cudagraph_bench.measure.case import describe_exception
from cudagraph_bench.models.presets import model_forward, random_input_ids

Key = tuple[str, str, int]   # (model, dtype, seq_len in tokens)


@dataclass
class KernelCount:
    """JSON-serialisable. ``status`` ``ok`` (``n_kernels`` > 0; ``gpu_busy_ms`` > 0, median summed kernel ms) or
    ``failed`` (``reason``; ``phase`` ``load`` or ``count``)."""

    model: str
    dtype: str
    seq_len: int
    status: str
    n_kernels: int | None = None
    reason: str | None = None
    phase: str | None = None
    gpu_busy_ms: float | None = None

    @property
    def key(self) -> Key:
        return (self.model, self.dtype, self.seq_len)

    def eager_fields(self) -> dict:
        """``n_kernels`` and, when timed, ``gpu_busy_ms``."""
        return {"n_kernels": self.n_kernels, **({} if self.gpu_busy_ms is None else {"gpu_busy_ms": self.gpu_busy_ms})}


def device_problem(device: str) -> str | None:
    """The profiler counts CUDA kernels only; None when it can."""
    if str(device).startswith("cuda"):
        return None
    return f"kernel counts need a CUDA device (the case runs on {device}): count on a CUDA GPU"


def count_case(model_name: str, dtype: str, seq_len: int, get_model, *, seed: int = 0,
               repeats: int | None = None) -> KernelCount:
    """Kernels of one eager forward on random ``input_ids [1, seq_len]`` and its busy time, from ``repeats`` profiled
    forwards that must agree on the count. Never raises: every failure is a ``failed`` KernelCount."""
    def failed(reason: str, phase: str) -> KernelCount:
        return KernelCount(model_name, dtype, seq_len, "failed", reason=reason, phase=phase)

    try:
        model = get_model(model_name, dtype)
    except Exception as exc:
        return failed(describe_exception(exc), "load")
    device = next(model.parameters()).device
    if (problem := device_problem(str(device))) is not None:
        return failed(problem, "count")
    try:
        import torch

        generator = torch.Generator(device=device).manual_seed(seed)
        ids = random_input_ids(model, seq_len, device=device, generator=generator)
        profiled = roofline.profile_forward(lambda: model_forward(model, ids),
                                            repeats=repeats or roofline.DEFAULT_BUSY_REPEATS)
    except Exception as exc:  # includes CUDA errors
        return failed(describe_exception(exc), "count")
    counts = [n for n, _ in profiled]
    if not counts or counts[0] <= 0:
        return failed("the profiler saw no kernels (CUPTI unavailable, or GPU profiling restricted to admin "
                      "users: allow it with the NVreg_RestrictProfilingToAdminUsers=0 driver option)", "count")
    if len(set(counts)) > 1:
        return failed(f"the same eager forward launched {', then '.join(map(str, counts))} kernels: the count is "
                      "not stable", "count")
    busy = statistics.median(ms for _, ms in profiled)
    if not busy > 0:
        return failed(f"the profiler recorded {counts[0]} kernels but no device time for them (busy {busy!r} ms)",
                      "count")
    return KernelCount(model_name, dtype, seq_len, "ok", n_kernels=counts[0], gpu_busy_ms=busy)
