"""GPU-correct timing of one call: synchronized wall time plus CUDA-event time.

A CUDA call returns when its kernels are queued, not when they finish. Every timed call here ends
with ``torch.cuda.synchronize()``, so host wall time includes the GPU work; CUDA events recorded
around the call on the current stream give the device-side time of the same call. The gap between
the two is host overhead that the GPU does not see (launch, Python, synchronisation).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable


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


def time_call(fn: Callable[[], object], *, rounds: int, warmup: int) -> Timing:
    """Call ``fn`` ``warmup`` times untimed, then ``rounds`` times timed (wall + CUDA events).

    Raises:
        ValueError: ``rounds < 1`` or ``warmup < 0``.
    """
    if rounds < 1 or warmup < 0:
        raise ValueError(f"rounds must be >= 1 and warmup >= 0 (got {rounds}, {warmup})")
    timer = CallTimer(fn, capacity=warmup + rounds)
    wall = []
    for i in range(warmup + rounds):
        t0 = time.perf_counter()
        timer()
        if i >= warmup:
            wall.append((time.perf_counter() - t0) * 1e3)
    return Timing(wall_ms=wall, event_ms=timer.event_ms(last=rounds))
