"""The roofline inputs of a case (docs/measurement.md, "Kernel counts and the roofline"): bytes one decoded token reads
at batch 1 (as gpt-fast's ``generate.py`` counts them), the GPU's peak memory bandwidth, and an eager forward's GPU busy
time. Useful bytes only: a static cache's masked slots are not counted."""

from __future__ import annotations

import re
import statistics
from typing import Callable, Iterable

from cudagraph_bench.errors import UsageError
from cudagraph_bench.measure.gpustate import _query
from cudagraph_bench.measure.launch_overhead import _require_cuda, is_kernel_event
from cudagraph_bench.models.hf_internals import attention_windows
from cudagraph_bench.results.roofline_arithmetic import choose_peak

#: Profiled calls whose busy times a kernel count takes the median of.
DEFAULT_BUSY_REPEATS = 5
#: Relative move of a forward's profiled busy time between processes and clock states that busy-time checks allow.
BUSY_TIME_NOISE = 0.05
#: Clock cycles of the marker kernel (``torch.cuda._sleep``, under a microsecond) after each profiled call.
MARKER_CYCLES = 1000
#: The marker kernel's name: ATen's ``spin_kernel`` (``aten/src/ATen/cuda/Sleep.cu``), demangled or mangled.
_MARKER_NAME = re.compile(r"(?:^|::|\d)spin_kernel(?:\(|E|$)")


def _text_config(model_or_config):
    config = getattr(model_or_config, "config", model_or_config)
    return config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config


def expert_fraction(model) -> float | None:
    """``top_k / num_experts`` of a mixture-of-experts config, or None for a dense model."""
    config = _text_config(model)
    experts = next((getattr(config, f) for f in ("num_experts", "num_local_experts", "n_routed_experts")
                    if getattr(config, f, None)), None)
    if not experts:
        return None
    top_k = getattr(config, "num_experts_per_tok", None)
    if not top_k:
        raise UsageError(f"{config.__class__.__name__} has {experts} experts but no num_experts_per_tok: cannot "
                         "tell how many experts a token reads")
    return min(int(top_k), int(experts)) / int(experts)


def weight_bytes(model) -> int:
    """Bytes of weights one decoded token reads: every parameter once (tied once, embeddings whole, buffers not), those
    under an ``experts`` module scaled by :func:`expert_fraction`. UsageError for a mixture-of-experts config whose
    model has no parameter under an ``experts`` module."""
    fraction = expert_fraction(model)
    dense, expert = 0, 0
    for name, p in model.named_parameters():   # yields a shared tensor once
        nbytes = p.numel() * p.element_size()
        if fraction is not None and "experts" in name.split("."):
            expert += nbytes
        else:
            dense += nbytes
    if fraction is not None and expert == 0:
        raise UsageError(f"{type(model).__name__} is a mixture of experts, but none of its parameters is under an "
                         "'experts' module: its routed weights cannot be told apart")
    return int(round(dense + expert * (fraction or 1.0)))


def kv_bytes_per_context_token(model) -> list[tuple[int, int | None]]:
    """Per KV-cache layer ``(bytes of K and V of one cached token, window in tokens or None)``; empty for a model of
    state layers only (its state is read like a weight)."""
    config = _text_config(model)
    windows = attention_windows(config)
    if not windows:
        return []
    heads = int(config.num_attention_heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
    element_size = next((p.element_size() for p in model.parameters() if p.is_floating_point()), None)  # KV's too
    if element_size is None:
        raise UsageError(f"{type(model).__name__} has no floating-point parameters: give a causal LM")
    per_token = 2 * kv_heads * head_dim * element_size
    return [(per_token, window) for window in windows]


def request_bytes_per_token(model, prompt_tokens: int, new_tokens: int) -> dict:
    """``{"weight_bytes", "kv_bytes_per_token", "bytes_per_token", "context_tokens"}`` one decoded token of a greedy
    request reads on average: step ``k`` attends to ``prompt_tokens + k`` cached tokens (itself included);
    ``context_tokens`` is the mean context. ``model``: a causal LM on any device, ``meta`` too. UsageError for
    ``prompt_tokens < 1`` or ``new_tokens < 1``, or a model whose weights or layers cannot be counted."""
    if prompt_tokens < 1 or new_tokens < 1:
        raise UsageError(f"need a prompt of >= 1 token and >= 1 new token (got {prompt_tokens}, {new_tokens})")
    layers = kv_bytes_per_context_token(model)
    weights = weight_bytes(model)
    kv = statistics.fmean(sum(nbytes * (ctx if window is None else min(ctx, window)) for nbytes, window in layers)
                          for ctx in range(prompt_tokens, prompt_tokens + new_tokens))
    return {"weight_bytes": weights, "kv_bytes_per_token": kv, "bytes_per_token": weights + kv,
            "context_tokens": prompt_tokens + (new_tokens - 1) / 2}


def nvml_memory_readings(nvml, handle) -> dict:
    """NVML's ``max_mem_clock_mhz``, ``bus_width_bits``, ``mem_clock_mhz`` (None if unsupported or missing)."""
    def query(fn_name, *args):      # a function this pynvml lacks fails (calling None) like an unsupported one
        return _query(getattr(nvml, fn_name, None), handle, *args)

    return {"max_mem_clock_mhz": query("nvmlDeviceGetMaxClockInfo", nvml.NVML_CLOCK_MEM),
            "bus_width_bits": query("nvmlDeviceGetMemoryBusWidth"),
            "mem_clock_mhz": query("nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_MEM)}


def peak_memory_bandwidth_gbps(device=None) -> dict | None:
    """Peak memory bandwidth (GB/s) of ``device`` (None: current): NVML's max memory clock MHz x bus width bits x 2 / 8,
    or the datasheet's value when NVML gives none or differs by more than 10%. None without a CUDA GPU or a value. Never
    raises."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        from cudagraph_bench.measure.gpustate import nvml_handle

        name = torch.cuda.get_device_name(device)
        found = nvml_handle(device)
        raw = nvml_memory_readings(*found) if found is not None else {}
        peak = choose_peak(name, raw.get("max_mem_clock_mhz"), raw.get("bus_width_bits"))
        return peak and {**peak, "nvml_mem_clock_mhz": raw.get("mem_clock_mhz")}
    except Exception:   # a reading must never fail a benchmark session
        return None


def kernel_busy_ms(events: Iterable) -> float:
    """Sum of the device durations (ms) of kernel events among ``FunctionEvent``-like objects."""
    return sum(e.time_range.elapsed_us() for e in events if is_kernel_event(e)) / 1e3


def is_marker_kernel(name: str) -> bool:
    """Whether a kernel name is the marker (ATen's ``spin_kernel``) :func:`profile_forward` launches between calls."""
    return _MARKER_NAME.search(name) is not None


def split_at_markers(events: Iterable, *, repeats: int) -> list[tuple[int, float]]:
    """``[(n_kernels, busy_ms)] * repeats`` in call order of a window that ran ``call, marker`` ``1 + repeats`` times
    (``events`` in any order, µs): kernels cut at each marker, the first (warm-up) group dropped; ``(0, 0.0)`` each
    without any kernel (no CUPTI). RuntimeError: kernels but not ``repeats + 1`` markers, or kernels after the last
    marker; ValueError: ``repeats < 1``."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    kernels = sorted((e for e in events if is_kernel_event(e)), key=lambda e: e.time_range.start)
    if not kernels:      # CUPTI unavailable
        return [(0, 0.0)] * repeats
    groups: list[list] = [[]]
    for e in kernels:
        if is_marker_kernel(e.name):
            groups.append([])
        else:
            groups[-1].append(e)
    markers = len(groups) - 1
    if markers != repeats + 1:
        raise RuntimeError(f"the profiler recorded {markers} of the {repeats + 1} marker kernels (spin_kernel) "
                           f"that separate the profiled calls: it dropped device records; profile again")
    if groups[-1]:
        raise RuntimeError(f"the profiler recorded {len(groups[-1])} kernels after the last marker kernel: "
                           "another thread or stream launched kernels while the forward was profiled")
    return [(len(g), kernel_busy_ms(g)) for g in groups[1:-1]]


def profile_forward(fn: Callable[[], object], *, repeats: int = DEFAULT_BUSY_REPEATS,
                    warmup: int = 1) -> list[tuple[int, float]]:
    """``(kernels, busy ms)`` of each of ``repeats`` profiled calls of ``fn``, after ``warmup`` calls, in one CUDA-only
    profiler window (cheaper than a schedule per call). Call it after timing (CUPTI stays attached, pytorch#144455).
    Raises CudaUnavailableError without a GPU; ValueError for ``repeats < 1`` or ``warmup < 0``; RuntimeError when the
    profiler dropped a marker kernel."""
    torch = _require_cuda()
    from torch.profiler import ProfilerActivity, profile

    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0, got {repeats}, {warmup}")
    for _ in range(warmup):
        fn()
    torch.cuda._sleep(MARKER_CYCLES)       # loads the marker's module (lazy loading) before the window
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(1 + repeats):
            fn()
            torch.cuda.synchronize()
            torch.cuda._sleep(MARKER_CYCLES)
            torch.cuda.synchronize()
    return split_at_markers(window_records(prof), repeats=repeats)


def window_records(prof) -> list:
    """A finished window's records read straight from kineto (else ``prof.events()``), about 4x faster, with the
    ``FunctionEvent`` attributes :func:`split_at_markers` reads."""
    from types import SimpleNamespace

    from torch.autograd.profiler_util import Interval

    result = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    if result is None or not hasattr(result, "events"):
        return list(prof.events())
    return [SimpleNamespace(name=e.name(), device_type=e.device_type(),       # activity_type: not in torch 2.11
                            activity_type=e.activity_type() if callable(getattr(e, "activity_type", None)) else None,
                            is_user_annotation=bool(e.is_user_annotation()),
                            time_range=Interval(e.start_ns() / 1e3, e.end_ns() / 1e3)) for e in result.events()]
