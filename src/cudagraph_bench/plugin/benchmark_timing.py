"""pytest-benchmark in the suite: its options honoured (min-rounds, max-time and warmup-iterations: the pytest spelling
of the round options) or refused in one line (:data:`REFUSED`: calibration without use under one call per round), and
timing a benchmark through one CallTimer, with the gated variants' device-side figure."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
from typing import Callable

import pytest

from cudagraph_bench.options import MATRIX_OPTIONS, PYTEST_BENCHMARK_SPELLING, pytest_argument

#: pytest-benchmark flag -> what to use instead, for the options a policy of one call per round has no use for.
REFUSED = {
    "--benchmark-min-time": "each round is one call here: set --min-time-ms (ms of measured calls per benchmark)",
    "--benchmark-calibration-precision": "rounds are planned from a pilot of calls here: set --precision-pct",
    "--benchmark-timer": "each call is timed here by a synchronized perf_counter and CUDA events, not a chosen timer",
    "--benchmark-warmup": "every benchmark warms up here: set --benchmark-warmup-iterations and --warmup-ms",
}


def apply_benchmark_options(config) -> None:
    """Set the suite's round options from pytest-benchmark's given (in the arguments, ``PYTEST_ADDOPTS`` or the ini's
    ``addopts``), or to the defaults; pytest.UsageError (one line) for a refused option or a value the suite's parser
    refuses."""
    import pytest_benchmark.utils as utils

    args = [*map(str, config.invocation_params.args), *shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))]
    with contextlib.suppress(ValueError, KeyError):
        args += [str(a) for a in config.getini("addopts")]
    given = {a.split("=", 1)[0] for a in args if a.startswith("--")}
    for flag, why in REFUSED.items():
        if flag in given:
            raise pytest.UsageError(f"{flag} is not read by cudagraph-bench's timing: {why}")
    parsers = {o.flag: o for o in MATRIX_OPTIONS}
    # how pytest-benchmark's parser of each flag reads its text (--benchmark-warmup-iterations: int)
    spelled = {"--benchmark-min-rounds": utils.parse_rounds, "--benchmark-max-time": utils.parse_seconds}
    for suite_flag, (flag, _, parse) in PYTEST_BENCHMARK_SPELLING.items():
        option, dest = parsers[suite_flag], flag[2:].replace("-", "_")    # pytest-benchmark's dest of its flag
        if flag not in given:
            setattr(config.option, option.dest, option.default)
            # the run JSON's "options" then record the suite's value, not pytest-benchmark's unused default
            text = pytest_argument(suite_flag, str(option.default))[1]
            setattr(config.option, dest, spelled.get(flag, int)(text))
            continue
        try:
            setattr(config.option, option.dest, parse(str(config.getoption(dest))))
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise pytest.UsageError(f"{flag} {config.getoption(dest)}: {exc}") from None


def round_policy(option: Callable[[str], object], *, rounds: int | None = None, warmup: int | None = None,
                 max_rounds: int | None = None):
    """The session's RoundPolicy, with ``rounds`` / ``warmup`` / ``max_rounds`` replacing its own where given."""
    from cudagraph_bench.measure.settings import MeasureSettings

    settings = MeasureSettings.from_options(option)
    return settings.round_policy(rounds=rounds or settings.rounds, max_rounds=max_rounds or settings.max_rounds,
                                 warmup_rounds=settings.warmup_rounds if warmup is None else warmup)


def benchmark_call(benchmark, fn: Callable[[], object], *, group: str, extra_info: dict, policy, device: str = "cuda",
                   warm: bool = False, checked_call_ms: float | None = None,
                   device_figure: bool = False) -> list[float]:
    """Time ``fn`` with ``benchmark.pedantic`` through one CallTimer, rounds planned by ``policy``'s pilot, GC off
    around the pilot too with ``--benchmark-disable-gc``; ``device_figure``: also the back-to-back figure.
    ``extra_info`` gets the event times, device figure, timing fields, ``gpu_state`` and, when throttled, ``throttled``
    (with a warning). Returns the measured rounds' CUDA-event ms (``[]`` on a CPU)."""
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
