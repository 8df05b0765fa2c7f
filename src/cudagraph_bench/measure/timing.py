"""GPU-correct timing of one call: synchronized wall time plus CUDA-event time.

A CUDA call returns when its kernels are queued, not when they finish. Every timed call here ends
with ``torch.cuda.synchronize()``, so host wall time includes the GPU work; CUDA events recorded
around the call on the current stream give the device-side time of the same call. The gap between
the two is host overhead that the GPU does not see (launch, Python, synchronisation).
"""

from __future__ import annotations

import gc
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

#: Upper bound of the rounds that ``--warmup-ms`` / ``--min-time-ms`` may add (per benchmark, each of
#: warmup and measured): a 1 us call would otherwise ask for 200k rounds.
MAX_TIMED_ROUNDS = 20_000


class CallTimer:
    """Wraps ``fn`` so that each call is bracketed by CUDA events and ends with a synchronize.

    Use it as the target of ``benchmark.pedantic``: pytest-benchmark times the wrapper with its own
    clock (wall time, synchronized), and :meth:`event_ms` returns the CUDA-event ms of the calls.
    Events are created up front (``capacity`` pairs) so the timed region only records them.
    """

    def __init__(self, fn: Callable[[], object], capacity: int = 256):
        import torch

        self._fn = fn
        self._torch = torch
        self._events = [self._pair() for _ in range(capacity)]
        self.calls = 0

    def _pair(self):
        cuda = self._torch.cuda
        return cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)

    def __call__(self):
        if self.calls == len(self._events):
            self._events.append(self._pair())
        start, end = self._events[self.calls]
        start.record()
        out = self._fn()
        end.record()
        self._torch.cuda.synchronize()
        self.calls += 1
        return out

    def event_ms(self, last: int | None = None) -> list[float]:
        """CUDA-event time (ms) of each call so far, or of the ``last`` calls (the measured rounds)."""
        pairs = self._events[: self.calls]
        if last is not None:
            pairs = pairs[-last:]
        return [start.elapsed_time(end) for start, end in pairs]


@dataclass(frozen=True)
class Timing:
    """Per-call times of the measured rounds: ``wall_ms`` (host clock, synchronized) and ``event_ms``."""

    wall_ms: list[float]
    event_ms: list[float]


@contextmanager
def gc_disabled() -> Iterator[None]:
    """Python's garbage collector off for the block (a collection inside a timed call would add ms to
    that round only), restored to its previous state after it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def time_call(fn: Callable[[], object], *, rounds: int, warmup: int) -> Timing:
    """Call ``fn`` ``warmup`` times untimed, then ``rounds`` times timed (wall + CUDA events), with the
    garbage collector off (:func:`gc_disabled`).

    Raises:
        ValueError: ``rounds < 1`` or ``warmup < 0``.
    """
    if rounds < 1 or warmup < 0:
        raise ValueError(f"rounds must be >= 1 and warmup >= 0 (got {rounds}, {warmup})")
    timer = CallTimer(fn, capacity=warmup + rounds)
    wall = []
    with gc_disabled():
        for i in range(warmup + rounds):
            t0 = time.perf_counter()
            timer()
            if i >= warmup:
                wall.append((time.perf_counter() - t0) * 1e3)
    return Timing(wall_ms=wall, event_ms=timer.event_ms(last=rounds))


def estimate_call_ms(fn: Callable[[], object], sync: Callable[[], None] | None = None, *, calls: int = 3,
                     budget_ms: float = 100.0) -> float:
    """Rough wall ms of one call of ``fn`` (each followed by ``sync``, e.g. ``torch.cuda.synchronize``):
    one cold call untimed, then up to ``calls`` timed calls, stopping early once they took ``budget_ms``
    in all (a slow call is not repeated). Returns the smallest timed call (ms); these calls are extra
    warmup, not measured rounds.
    """
    sync = sync or (lambda: None)
    fn()
    sync()
    times: list[float] = []
    spent = 0.0
    for _ in range(max(1, calls)):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
        spent += times[-1]
        if spent >= budget_ms:
            break
    return min(times)


def plan_rounds(per_call_ms: float, *, rounds: int, warmup: int, warmup_ms: float, min_time_ms: float,
                max_rounds: int = MAX_TIMED_ROUNDS) -> tuple[int, int]:
    """Measured and warmup rounds for a call of about ``per_call_ms`` ms: at least ``rounds`` measured
    rounds and enough of them to take ``min_time_ms``; at least ``warmup`` warmup rounds and enough to
    take ``warmup_ms``. What the time floors add stops at ``max_rounds`` each (never below ``rounds`` /
    ``warmup``).

    Returns:
        ``(rounds, warmup)``, e.g. a 0.1 ms call with rounds 100, warmup 10, 100 ms warmup, 200 ms minimum
        -> ``(2000, 1000)``.
    """
    per_call_ms = max(float(per_call_ms), 1e-6)

    def at_least(n: int, ms: float) -> int:
        by_time = math.ceil(ms / per_call_ms) if ms > 0 else 0
        return max(n, min(by_time, max_rounds))

    return at_least(rounds, min_time_ms), at_least(warmup, warmup_ms)
