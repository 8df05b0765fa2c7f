"""Timing a benchmark through one CallTimer, and the gated variants' device-side figure."""

from __future__ import annotations

from typing import Callable


def round_policy(option: Callable[[str], object], *, rounds: int | None = None, warmup: int | None = None,
                 max_rounds: int | None = None):
    """The session's RoundPolicy, with ``rounds`` / ``warmup`` / ``max_rounds`` replacing its own where given."""
    from cudagraph_bench.measure.settings import MeasureSettings

    settings = MeasureSettings.from_options(option)
    return settings.round_policy(rounds=rounds or settings.rounds, max_rounds=max_rounds or settings.max_rounds,
                                 warmup_rounds=settings.warmup_rounds if warmup is None else warmup)


def benchmark_call(benchmark, fn: Callable[[], object], *, group: str, extra_info: dict, policy, device: str = "cuda",
                   warm: bool = False, checked_call_ms: float | None = None, device_figure: bool = False) -> list[float]:
    """Time ``fn`` with ``benchmark.pedantic`` through one CallTimer, rounds planned by ``policy``'s pilot, GC off
    around the pilot too with ``--benchmark-disable-gc``; ``device_figure``: also the back-to-back figure.
    ``extra_info`` gets the event times, device figure, timing fields, ``gpu_state`` and, when throttled, ``throttled``
    (with a warning). Returns the measured rounds' CUDA-event ms (``[]`` on a CPU)."""
    import contextlib

    import numpy as np
    import torch

    from cudagraph_bench.measure.case import timing_record
    from cudagraph_bench.measure.gpustate import read_gpu_state, warn_if_throttled
    from cudagraph_bench.measure.timing import CallTimer, back_to_back_ms, gc_disabled

    benchmark.group = group
    benchmark.extra_info.update(extra_info)
    on_gpu = device != "cpu"
    before = read_gpu_state() if on_gpu else None
    timer = CallTimer(fn, device=device)
    # a collection in a pilot call would widen the spread that plans the rounds
    gc_off = gc_disabled() if getattr(benchmark, "_disable_gc", False) else contextlib.nullcontext()
    with torch.inference_mode(), gc_off:
        rounds, warmup, pilot = policy.plan(timer, warm=warm, checked_call_ms=checked_call_ms)
        benchmark.pedantic(timer, rounds=rounds, warmup_rounds=warmup, iterations=1)
        device = back_to_back_ms(fn) if device_figure and on_gpu else None
    after = read_gpu_state() if on_gpu else None
    events = timer.event_ms(last=rounds)
    stats = getattr(getattr(benchmark, "stats", None), "stats", None)
    wall_ms = [x * 1e3 for x in stats.data] if stats is not None and getattr(stats, "data", None) else events
    if on_gpu:
        benchmark.extra_info["cuda_event_ms"] = events
        benchmark.extra_info["event_median_ms"] = float(np.median(events)) if events else None
    if device is not None:
        benchmark.extra_info.update(device.record())
    benchmark.extra_info.update(timing_record(rounds, warmup, pilot, wall_ms, policy.precision_pct,
                                              max_time_ms=policy.max_time_ms))
    benchmark.extra_info["gpu_state"] = {"before": before, "after": after}
    throttled = warn_if_throttled(getattr(benchmark, "name", None) or group, before, after) if on_gpu else None
    if throttled:
        benchmark.extra_info["throttled"] = throttled
    return events
