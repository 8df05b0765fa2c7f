"""torch.compile helpers shared by the compiled forward variants (:mod:`cudagraph_bench.measure.variants`)
and the compiled decode step (:mod:`cudagraph_bench.capture.decode`): warming a compiled function until
its timing is stable (what the warm-up cost beyond steady state was: the compile time), dynamo's
counters, and a context in which a recompile raises (for the calls made while a CUDA graph captures).
"""

from __future__ import annotations

import time
from typing import Callable

#: A timing is "stable" when two consecutive warm-up calls differ by less than this factor.
STABLE_FACTOR = 1.5


def warm_until_stable(call: Callable[[], object], sync: Callable[[], None], *, min_calls: int = 2,
                      max_calls: int = 10, factor: float = STABLE_FACTOR) -> tuple[float, list[float]]:
    """Call ``call()`` (each call synchronized) until two consecutive calls take times within
    ``factor`` of each other, at least ``min_calls`` and at most ``max_calls`` times.

    Returns ``(excess_ms, times_ms)``: ``times_ms`` the wall ms of every call, ``excess_ms`` what the
    calls took beyond steady state: ``sum(times_ms) - len(times_ms) * min(last two times)`` (the
    compilation / recording cost of a torch.compile'd function).
    """
    times: list[float] = []
    for _ in range(max_calls):
        t0 = time.perf_counter()
        call()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
        if len(times) >= max(min_calls, 2):
            a, b = times[-2], times[-1]
            if max(a, b) <= factor * min(a, b):
                break
    steady = min(times[-2:])
    return sum(times) - steady * len(times), times


def compile_counters() -> dict:
    """dynamo's ``unique_graphs`` (graphs compiled so far, graph breaks and recompiles included) and
    inductor's ``cudagraph_skips``, read now (compare two readings to count what a compile added)."""
    from torch._dynamo.utils import counters

    return {"unique_graphs": int(counters["stats"]["unique_graphs"]),
            "cudagraph_skips": int(counters["inductor"]["cudagraph_skips"])}


def no_recompile(torch):
    """Context in which a dynamo recompile raises instead of compiling (``set_stance`` on torch >= 2.6)."""
    set_stance = getattr(torch.compiler, "set_stance", None)
    if set_stance is not None:
        return set_stance("fail_on_recompile")
    return torch._dynamo.config.patch(error_on_recompile=True)
