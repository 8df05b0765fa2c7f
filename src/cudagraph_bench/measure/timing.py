"""GPU-correct timing of one call (docs/measurement.md, "Timing"): every timed call goes through a :class:`CallTimer`
(CUDA events, then a synchronize); rounds are planned from a pilot (:class:`RoundPolicy`); the gated device-side figure
is :func:`back_to_back_ms`, with no host time in it."""

from __future__ import annotations

import gc
import math
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

#: Most rounds ``--warmup-ms`` / ``--min-time-ms`` may add (each of warmup and measured): a 1 us call would ask 200k.
MAX_TIMED_ROUNDS = 20_000


class CallTimer:
    """Each call of ``fn`` between CUDA events, then a synchronize: the one place timing code synchronizes (on
    ``device="cpu"`` it only calls ``fn``). ``capacity`` event pairs are created up front."""

    def __init__(self, fn: Callable[[], object], capacity: int = 256, *, device: str = "cuda"):
        self._fn, self.calls, self._cuda, self._events = fn, 0, None, []
        if device != "cpu":
            import torch

            self._cuda = torch.cuda
            self._events = [self._pair() for _ in range(capacity)]

    def _pair(self):
        return self._cuda.Event(enable_timing=True), self._cuda.Event(enable_timing=True)

    def __call__(self):
        if self._cuda is None:
            self.calls += 1
            return self._fn()
        if self.calls == len(self._events):
            self._events.append(self._pair())
        start, end = self._events[self.calls]
        start.record()
        out = self._fn()
        end.record()
        self._cuda.synchronize()
        self.calls += 1
        return out

    def event_ms(self, last: int | None = None) -> list[float]:
        """CUDA-event ms of each call so far, or of the ``last`` calls; ``[]`` on a CPU."""
        pairs = self._events[: self.calls]
        if last is not None:
            pairs = pairs[-last:] if last else []
        return [start.elapsed_time(end) for start, end in pairs]


@dataclass(frozen=True)
class Timing:
    """Per-call ms of the measured rounds: ``wall_ms`` (host clock, synchronized) and ``event_ms``."""

    wall_ms: list[float]
    event_ms: list[float]


@contextmanager
def gc_disabled() -> Iterator[None]:
    """Garbage collector off for the block (a collection would add ms to one round), then restored."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def time_call(fn: Callable[[], object], *, rounds: int, warmup: int, device: str = "cuda") -> Timing:
    """``warmup`` untimed calls, then ``rounds`` timed, GC off; ValueError: ``rounds < 1`` or ``warmup < 0``."""
    if rounds < 1 or warmup < 0:
        raise ValueError(f"rounds must be >= 1 and warmup >= 0 (got {rounds}, {warmup})")
    timer, wall = CallTimer(fn, capacity=warmup + rounds, device=device), []
    with gc_disabled():
        for i in range(warmup + rounds):
            t0 = time.perf_counter()
            timer()
            if i >= warmup:
                wall.append((time.perf_counter() - t0) * 1e3)
    return Timing(wall_ms=wall, event_ms=timer.event_ms(last=rounds))


#: Calls per block of :func:`back_to_back_ms`, at most; fewer so that a block lasts about ``BACK_TO_BACK_BLOCK_MS``.
BACK_TO_BACK_CALLS = 20
BACK_TO_BACK_BLOCK_MS = 2.0
#: Blocks of the device-side figure: at least this many, more until the budget (ms of calls), at most the max.
BACK_TO_BACK_MIN_BLOCKS = 10
BACK_TO_BACK_BUDGET_MS = 200.0
BACK_TO_BACK_MAX_BLOCKS = 100
#: The hold before each block: this many times the host's time to queue it, at least :data:`HOLD_MIN_MS`.
HOLD_FACTOR = 3.0
HOLD_MIN_MS = 0.1


@dataclass(frozen=True)
class DeviceFigure:
    """Device-side time of one call: ``block_ms``, per-call ms of each kept block; ``hold_ms``, the last hold (GPU ms);
    ``enqueue_ms``, host ms to queue one call (median); ``uncovered_blocks``, blocks queued for longer than the hold."""

    block_ms: list[float]
    calls_per_block: int
    hold_ms: float
    enqueue_ms: float
    uncovered_blocks: int = 0

    @property
    def median_ms(self) -> float:
        """Median of :attr:`block_ms` (ms), the figure the gate guards."""
        return float(statistics.median(self.block_ms))

    def record(self) -> dict:
        """The case's ``extra_info`` fields."""
        return {"device_ms": list(self.block_ms), "device_median_ms": self.median_ms,
                "device_calls_per_block": self.calls_per_block, "device_hold_ms": self.hold_ms,
                "host_enqueue_ms": self.enqueue_ms, "device_uncovered_blocks": self.uncovered_blocks}


_CYCLES_PER_MS: dict = {}


def sleep_cycles_per_ms() -> float:
    """GPU cycles of ``torch.cuda._sleep`` per ms on the current device (median of 5 timed sleeps; once per device)."""
    import torch

    key = torch.cuda.current_device()
    if key not in _CYCLES_PER_MS:
        cycles = 20_000_000
        torch.cuda._sleep(cycles)          # warm: clocks up, kernel loaded
        timer = CallTimer(lambda: torch.cuda._sleep(cycles), capacity=5)
        for _ in range(5):
            timer()
        _CYCLES_PER_MS[key] = cycles / statistics.median(timer.event_ms())
    return _CYCLES_PER_MS[key]


def hold_stream(ms: float) -> None:
    """Queue a GPU spin of about ``ms`` ms on the current stream, so the work queued after it runs back to back."""
    import torch

    torch.cuda._sleep(max(1, int(ms * sleep_cycles_per_ms())))


def back_to_back_ms(fn: Callable[[], object], *, calls: int = BACK_TO_BACK_CALLS,
                    min_blocks: int = BACK_TO_BACK_MIN_BLOCKS, budget_ms: float = BACK_TO_BACK_BUDGET_MS,
                    max_blocks: int = BACK_TO_BACK_MAX_BLOCKS) -> DeviceFigure | None:
    """Device-side ms of one call of ``fn``: blocks of up to ``calls`` calls queued behind :func:`hold_stream`, timed by
    CUDA events recorded after the hold (nvbench's blocking kernel), since host latency to a block's first launch moved
    a 1-3 ms call by 2-5% between processes. A block queued for longer than the hold is dropped and the hold doubled.
    Returns a :class:`DeviceFigure`, or None without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return None
    one = CallTimer(fn, capacity=1)
    with gc_disabled():
        one()
    first_ms = max(one.event_ms()[0], 1e-3)
    per_block = max(1, min(calls, int(BACK_TO_BACK_BLOCK_MS / first_ms)))
    sleep_cycles_per_ms()                              # calibrated before any block
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(max_blocks + 1)]
    out: list[float] = []
    enqueue: list[float] = []
    uncovered = 0
    with gc_disabled():
        t0 = time.perf_counter()                       # unheld: the host's time to queue a block
        for _ in range(per_block):
            fn()
        hold_ms = max(HOLD_MIN_MS, HOLD_FACTOR * (time.perf_counter() - t0) * 1e3)
        torch.cuda.synchronize()
        for _ in range(2 * max_blocks):
            if len(out) >= max_blocks or (len(out) >= min_blocks and sum(out) * per_block >= budget_ms):
                break
            start, end = pairs[len(out)]
            held = time.perf_counter()
            hold_stream(hold_ms)
            start.record()
            t0 = time.perf_counter()
            for _ in range(per_block):
                fn()
            t1 = time.perf_counter()
            end.record()
            queued_ms = (time.perf_counter() - held) * 1e3
            torch.cuda.synchronize()
            if queued_ms >= hold_ms:                   # the GPU may have waited for the host: not device time
                uncovered += 1
                hold_ms *= 2
                continue
            out.append(start.elapsed_time(end) / per_block)
            enqueue.append((t1 - t0) * 1e3 / per_block)
    if not out:
        return None
    return DeviceFigure(block_ms=out, calls_per_block=per_block, hold_ms=hold_ms,
                        enqueue_ms=float(statistics.median_high(enqueue)), uncovered_blocks=uncovered)


#: Calls of the pilot (:func:`pilot_call_ms`): at most this many, no more once they took the budget (or warmup_ms).
PILOT_CALLS = 20
PILOT_BUDGET_MS = 100.0
#: The fewest timed pilot calls, budget or not: the fewest whose spread :func:`median_ci_pct` can estimate.
PILOT_MIN_CALLS = 3
#: Rounds planned per round the pilot's spread asks for: a 20-call pilot's MAD misjudges sigma by ~20%.
PLAN_SAFETY = 1.5
#: Asymptotic standard error of the sample median relative to sigma/sqrt(n) for normal data: sqrt(pi/2).
MEDIAN_SE_FACTOR = math.sqrt(math.pi / 2)


def pilot_call_ms(fn: Callable[[], object], sync: Callable[[], None] | None = None, *, calls: int = PILOT_CALLS,
                  budget_ms: float = PILOT_BUDGET_MS, min_calls: int = PILOT_MIN_CALLS,
                  spread_useless_ms: float | None = None, cold_call: bool = True) -> list[float]:
    """Wall ms of the pilot calls (at least one, in order; warmup, never measured): an untimed cold call (unless
    ``cold_call=False``), then up to ``calls``, stopping once they took ``budget_ms`` and were at least ``min_calls``,
    or once one took ``spread_useless_ms``."""
    sync = sync or (lambda: None)
    if cold_call:
        fn()
        sync()
    times: list[float] = []
    for _ in range(max(1, calls)):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
        if spread_useless_ms is not None and times[-1] >= spread_useless_ms:
            break
        if sum(times) >= budget_ms and len(times) >= min_calls:
            break
    return times


def median_ci_pct(samples_ms) -> float | None:
    """Half-width of the median's 95% interval in % of the median: ``norm.ppf(0.975) * sqrt(pi/2) * sigma / sqrt(n)``,
    sigma the normal-scaled MAD (Kendall & Stuart, vol. 1: the sample median's asymptotic variance). None for fewer than
    3 samples or a median <= 0; 0.0 when every sample is equal."""
    import numpy as np
    from scipy import stats

    x = np.asarray(samples_ms, dtype=np.float64)
    if x.size < 3:
        return None
    median = float(np.median(x))
    if median <= 0:
        return None
    sigma = float(stats.median_abs_deviation(x, scale="normal"))
    return 100.0 * float(stats.norm.ppf(0.975)) * MEDIAN_SE_FACTOR * sigma / math.sqrt(x.size) / median


def rounds_for_precision(pilot_ms, precision_pct: float) -> int:
    """Rounds whose median's 95% interval is expected within ``precision_pct`` % (times :data:`PLAN_SAFETY`); 0 when
    ``precision_pct`` is 0 or the pilot has fewer than 3 calls."""
    ci = median_ci_pct(pilot_ms) if precision_pct > 0 else None
    return 0 if ci is None else math.ceil(PLAN_SAFETY * len(pilot_ms) * (ci / precision_pct) ** 2)


def plan_rounds(per_call_ms: float, *, rounds: int, warmup: int, warmup_ms: float, min_time_ms: float,
                max_rounds: int = MAX_TIMED_ROUNDS, pilot_ms=(), precision_pct: float = 0.0,
                max_time_ms: float = 0.0) -> tuple[int, int]:
    """``(rounds, warmup)`` for a call of about ``per_call_ms`` ms: at least ``rounds``, enough to take ``min_time_ms``
    and to meet ``precision_pct``; at least ``warmup``, enough to take ``warmup_ms``. What the floors and the target add
    stops at ``max_rounds``; what the target adds also at ``ceil(max_time_ms / per_call_ms)`` (0: no cap), which the
    ``rounds`` and ``min_time_ms`` floors win over."""
    per_call_ms = max(float(per_call_ms), 1e-6)

    def by_time(ms: float) -> int:
        return math.ceil(ms / per_call_ms) if ms > 0 else 0

    precision = rounds_for_precision(list(pilot_ms), precision_pct)
    if max_time_ms > 0:
        precision = min(precision, by_time(max_time_ms))
    measured = max(rounds, min(max(by_time(min_time_ms), precision), max_rounds))
    return measured, max(warmup, min(by_time(warmup_ms), max_rounds))


@dataclass(frozen=True)
class RoundPolicy:
    """:func:`plan_rounds`'s arguments (``precision_pct`` 0: off; ``max_time_ms`` 0: no cap)."""

    rounds: int
    warmup: int
    warmup_ms: float
    min_time_ms: float
    precision_pct: float
    max_rounds: int
    max_time_ms: float

    def plan(self, fn: Callable[[], object], sync: Callable[[], None] | None = None, *, warm: bool = False,
             checked_call_ms: float | None = None) -> tuple[int, int, list[float]]:
        """Run the pilot and plan: ``(rounds, warmup, pilot_ms)``, the pilot's calls counted as warmup. ``warm``: the
        caller just ran ``fn`` (no cold call); ``checked_call_ms``: that call's wall ms, the pilot when slow enough."""
        target = self.precision_pct > 0
        useless = self.max_time_ms / max(1, self.rounds) if target and self.max_time_ms > 0 else None
        if warm and checked_call_ms is not None and useless is not None and checked_call_ms >= useless:
            pilot = [float(checked_call_ms)]
        else:
            pilot = pilot_call_ms(fn, sync, budget_ms=max(PILOT_BUDGET_MS, self.warmup_ms),
                                  min_calls=PILOT_MIN_CALLS if target else 1, spread_useless_ms=useless,
                                  cold_call=not warm)
        rounds, warmup = plan_rounds(float(min(pilot)), pilot_ms=pilot, **vars(self))
        return rounds, max(0, warmup - len(pilot) - (0 if warm else 1)), pilot
