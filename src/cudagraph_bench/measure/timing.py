"""GPU-correct timing of one call: synchronized wall time plus CUDA-event time, CUDA synchronised in one place.

A CUDA call returns when its kernels are queued, not when they finish. Every timed call goes through a
:class:`CallTimer`, which records CUDA events around the call on the current stream and then synchronizes: host
wall time includes the GPU work, and the events give the device-side time of the same call. The gap between the
two is host overhead that the GPU does not see (launch, Python, synchronisation). On a CPU the timer only calls.

How many calls a benchmark times is planned from a pilot of its first calls (:class:`RoundPolicy`,
:func:`plan_rounds`): at least ``rounds``, more until the median's 95% interval is expected within
``precision_pct`` (:func:`rounds_for_precision`), with what that target adds capped at ``max_rounds`` and at
``max_time_ms`` of calls; time floors ``min_time_ms`` / ``warmup_ms``.

The device-side figure the gate guards (:func:`back_to_back_ms`) times blocks of :data:`BACK_TO_BACK_CALLS` calls
between two events, as nvbench and triton's ``do_bench`` do: the host's per-call work (Python, the launch, the
synchronize) is hidden behind the GPU's, so what is left is the replay's own time, stable between processes.
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
    """Wraps ``fn`` so that each call is bracketed by CUDA events and ends with a synchronize: the one place the
    timing code synchronizes CUDA. On ``device="cpu"`` it only calls ``fn`` (no events).

    Use it as the target of ``benchmark.pedantic`` (pytest-benchmark times the wrapper with its own clock, wall
    time, synchronized) or of :func:`time_call`; :meth:`event_ms` returns the CUDA-event ms of the calls. Events
    are created up front (``capacity`` pairs) so the timed region only records them.
    """

    def __init__(self, fn: Callable[[], object], capacity: int = 256, *, device: str = "cuda"):
        self._fn = fn
        self.calls = 0
        self._cuda = None
        self._events: list = []
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
        """CUDA-event time (ms) of each call so far, or of the ``last`` calls (the measured rounds); ``[]`` on
        a CPU."""
        pairs = self._events[: self.calls]
        if last is not None:
            pairs = pairs[-last:] if last else []
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


def time_call(fn: Callable[[], object], *, rounds: int, warmup: int, device: str = "cuda") -> Timing:
    """Call ``fn`` ``warmup`` times untimed, then ``rounds`` times timed through a :class:`CallTimer` (wall +
    CUDA events), with the garbage collector off (:func:`gc_disabled`).

    Raises:
        ValueError: ``rounds < 1`` or ``warmup < 0``.
    """
    if rounds < 1 or warmup < 0:
        raise ValueError(f"rounds must be >= 1 and warmup >= 0 (got {rounds}, {warmup})")
    timer = CallTimer(fn, capacity=warmup + rounds, device=device)
    wall = []
    with gc_disabled():
        for i in range(warmup + rounds):
            t0 = time.perf_counter()
            timer()
            if i >= warmup:
                wall.append((time.perf_counter() - t0) * 1e3)
    return Timing(wall_ms=wall, event_ms=timer.event_ms(last=rounds))


#: Calls per block of the device-side figure (:func:`back_to_back_ms`), at most: enough that the host's per-call
#: work hides behind the GPU's for a replay of a few hundred microseconds. A slower call gets fewer, so that a block
#: lasts about :data:`BACK_TO_BACK_BLOCK_MS` (the host's jitter is then a small share of it anyway).
BACK_TO_BACK_CALLS = 20
BACK_TO_BACK_BLOCK_MS = 2.0
#: Blocks of the device-side figure: at least this many, more until :data:`BACK_TO_BACK_BUDGET_MS`, at most
#: :data:`BACK_TO_BACK_MAX_BLOCKS`.
BACK_TO_BACK_MIN_BLOCKS = 10
BACK_TO_BACK_BUDGET_MS = 300.0
BACK_TO_BACK_MAX_BLOCKS = 200


def back_to_back_ms(fn: Callable[[], object], *, calls: int = BACK_TO_BACK_CALLS,
                    min_blocks: int = BACK_TO_BACK_MIN_BLOCKS, budget_ms: float = BACK_TO_BACK_BUDGET_MS,
                    max_blocks: int = BACK_TO_BACK_MAX_BLOCKS) -> list[float]:
    """The device-side time of one call of ``fn`` (ms), once per block of calls issued back to back between two
    CUDA events (one :class:`CallTimer` call per block): CUDA-event ms of the block / its calls. A first call sizes
    the blocks: ``calls`` calls, fewer when they would last beyond :data:`BACK_TO_BACK_BLOCK_MS` (at least one);
    then one warm block, then at least ``min_blocks`` blocks, more while they sum to less than ``budget_ms``, at most
    ``max_blocks``. Garbage collector off. Source of the method: nvbench's batch measurement and
    ``triton.testing.do_bench`` (events around repeated calls, median of the repetitions).

    Returns the per-call ms of each block (``[]`` without CUDA)."""
    import torch

    if not torch.cuda.is_available():
        return []
    one = CallTimer(fn, capacity=1)
    with gc_disabled():
        one()
    first_ms = max(one.event_ms()[0], 1e-3)
    per_block = max(1, min(calls, int(BACK_TO_BACK_BLOCK_MS / first_ms)))

    def block():
        for _ in range(per_block):
            fn()

    timer = CallTimer(block, capacity=min_blocks + 1)
    out: list[float] = []
    with gc_disabled():
        timer()                                        # warm block: clocks, caches
        while len(out) < max_blocks and (len(out) < min_blocks or sum(out) * per_block < budget_ms):
            timer()
            out.append(timer.event_ms(last=1)[0] / per_block)
    return out


#: Calls of the pilot that plans the rounds (:func:`pilot_call_ms`): at most this many, and no more once
#: they took ``PILOT_BUDGET_MS`` (or the warmup time floor, when longer: the pilot is warmup too).
PILOT_CALLS = 20
PILOT_BUDGET_MS = 100.0
#: The fewest timed pilot calls, budget or not: the fewest whose spread :func:`median_ci_pct` can estimate (a
#: pilot of one slow first call would switch the precision target off for that benchmark).
PILOT_MIN_CALLS = 3
#: Rounds planned per round the pilot's spread asks for: a 20-call pilot's MAD misjudges sigma by ~20%, and
#: in simulation (normal data) 1.5x brings the measured interval within 1.25x the target ~9 times in 10.
PLAN_SAFETY = 1.5
#: Normal quantile of a two-sided 95% interval.
Z_95 = 1.959963984540054
#: Asymptotic standard error of the sample median relative to sigma/sqrt(n) for normal data: sqrt(pi/2).
MEDIAN_SE_FACTOR = math.sqrt(math.pi / 2)
#: sigma of normal data per median absolute deviation (MAD): 1 / Phi^-1(3/4).
MAD_TO_SIGMA = 1.482602218505602


def pilot_call_ms(fn: Callable[[], object], sync: Callable[[], None] | None = None, *, calls: int = PILOT_CALLS,
                  budget_ms: float = PILOT_BUDGET_MS, min_calls: int = PILOT_MIN_CALLS,
                  spread_useless_ms: float | None = None, cold_call: bool = True) -> list[float]:
    """Wall ms of the pilot calls of ``fn`` (a :class:`CallTimer`, which synchronizes, or ``fn`` followed by
    ``sync``):
    one cold call untimed (``cold_call=False``: none, for a ``fn`` the caller has just run, e.g. a decode
    request whose tokens were checked), then up to ``calls`` timed calls, stopping early once they took ``budget_ms`` in
    all and there were at least ``min_calls`` of them (``min_calls=1``: a slow call is not repeated), or
    as soon as one timed call took at least ``spread_useless_ms`` (a call that slow gets no rounds for the
    precision target, so its spread need not be known: :meth:`RoundPolicy.plan`). These calls are extra
    warmup, never measured rounds.

    Returns:
        the timed calls' wall ms, in call order (at least one).
    """
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


def estimate_call_ms(fn: Callable[[], object], sync: Callable[[], None] | None = None, *, calls: int = 3,
                     budget_ms: float = 100.0) -> float:
    """The smallest of :func:`pilot_call_ms`'s calls (ms): a rough per-call time (a slow call is not repeated)."""
    return min(pilot_call_ms(fn, sync, calls=calls, budget_ms=budget_ms, min_calls=1))


def median_ci_pct(samples_ms) -> float | None:
    """Half-width of the median's 95% interval, in % of the median, from the asymptotic standard error of
    the sample median, ``sqrt(pi/2) * sigma / sqrt(n)``, with sigma estimated robustly as 1.4826 x MAD
    (so that a few slow outliers do not inflate it). Source: the asymptotic variance of the sample median,
    ``1 / (4 n f(m)^2)``, which for normal data is ``(pi/2) sigma^2 / n`` (e.g. Kendall & Stuart,
    *The Advanced Theory of Statistics*, vol. 1, sampling distribution of quantiles).

    Returns None for fewer than 3 samples or a median <= 0; 0.0 when every sample is equal.
    """
    import numpy as np

    x = np.asarray(samples_ms, dtype=np.float64)
    if x.size < 3:
        return None
    median = float(np.median(x))
    if median <= 0:
        return None
    sigma = MAD_TO_SIGMA * float(np.median(np.abs(x - median)))
    return 100.0 * Z_95 * MEDIAN_SE_FACTOR * sigma / math.sqrt(x.size) / median


def rounds_for_precision(pilot_ms, precision_pct: float) -> int:
    """Measured rounds whose median's 95% interval is expected within ``precision_pct`` % of the median
    (:func:`median_ci_pct` solved for n, with the pilot's median and MAD). 0 when ``precision_pct`` is 0
    or the pilot has fewer than 3 calls (no spread can be estimated: the other floors decide).

    The planned rounds are :data:`PLAN_SAFETY` times what the pilot's spread asks for. Example: a pilot
    with median 10 ms and MAD 0.2 ms (sigma ~0.3 ms) at 1% -> about 55 x 1.5 = 82 rounds.
    """
    ci = median_ci_pct(pilot_ms) if precision_pct > 0 else None
    if ci is None:
        return 0
    return math.ceil(PLAN_SAFETY * len(pilot_ms) * (ci / precision_pct) ** 2)


def plan_rounds(per_call_ms: float, *, rounds: int, warmup: int, warmup_ms: float, min_time_ms: float,
                max_rounds: int = MAX_TIMED_ROUNDS, pilot_ms=(), precision_pct: float = 0.0,
                max_time_ms: float = 0.0) -> tuple[int, int]:
    """Measured and warmup rounds for a call of about ``per_call_ms`` ms: at least ``rounds`` measured
    rounds, enough of them to take ``min_time_ms`` and enough for the median's 95% interval to be within
    ``precision_pct`` % (:func:`rounds_for_precision` on ``pilot_ms``); at least ``warmup`` warmup rounds
    and enough to take ``warmup_ms``. What the time floors and the precision target add stops at
    ``max_rounds`` each (never below ``rounds`` / ``warmup``); what the precision target adds also stops at
    ``ceil(max_time_ms / per_call_ms)`` rounds (``max_time_ms`` 0: no time cap). The ``rounds`` and
    ``min_time_ms`` floors take precedence over the time cap: a ``min_time_ms`` above ``max_time_ms`` still
    gets its rounds.

    The time cap is judged from ``per_call_ms`` (:class:`RoundPolicy` passes the pilot's fastest call), so
    calls slower than that take longer than ``max_time_ms`` in all.

    Returns:
        ``(rounds, warmup)``, e.g. a 0.1 ms call with rounds 100, warmup 10, 100 ms warmup, 200 ms minimum
        -> ``(2000, 1000)``. With a time cap: a 20 ms call whose pilot's spread asks for 1500 rounds, with
        rounds 20, max_time_ms 1000 and no time floors -> 1000 / 20 = 50 measured rounds; the same with a
        100 ms call -> 20 (the ``rounds`` floor is above 1000 / 100 = 10); with min_time_ms 3000 on the
        20 ms call -> 3000 / 20 = 150.
    """
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
    """How many rounds a benchmark gets (:func:`plan_rounds`): ``rounds`` (floor of measured rounds),
    ``warmup`` (floor of the calls before the measured rounds, the pilot's included), the time floors
    ``warmup_ms`` / ``min_time_ms``, the precision target ``precision_pct`` (0: off), ``max_rounds`` (cap of
    what the floors and the target add) and ``max_time_ms`` (cap, in ms of calls, of what the precision
    target adds; 0: none)."""

    rounds: int
    warmup: int
    warmup_ms: float
    min_time_ms: float
    precision_pct: float
    max_rounds: int
    max_time_ms: float

    def plan(self, fn: Callable[[], object], sync: Callable[[], None] | None = None, *, warm: bool = False,
             checked_call_ms: float | None = None) -> tuple[int, int, list[float]]:
        """Run the pilot (:func:`pilot_call_ms`) and plan: ``(rounds, warmup, pilot_ms)``. The pilot's
        calls (and its untimed cold call) are calls before the measured rounds like warmup rounds: they count
        towards both warmup floors, the ``warmup`` rounds and ``warmup_ms``: a call whose pilot made 3 timed
        calls and its cold call gets ``warmup - 4`` warmup rounds, not ``warmup`` more.
        ``warm``: the caller has just run ``fn`` (same inputs), so the pilot makes no untimed cold call.

        The pilot stops after one timed call when that call is so slow that the precision target could add
        no rounds: at least ``max_time_ms / rounds`` ms (the time cap then allows no more than the ``rounds``
        floor); with the target off, the pilot's budget alone ends it. A 2 s decode request with 3 rounds
        and a 1000 ms cap is timed once in the pilot instead of three times.

        ``checked_call_ms`` (with ``warm``): the synchronized wall ms of the call the caller has just made, e.g.
        a decode request whose tokens were checked (the same work plus copies of its logits). When it is
        that slow already, it is the pilot (``pilot_ms == [checked_call_ms]``) and ``fn`` is not called: the
        plan is the ``rounds`` floor either way. Faster, it is ignored and the pilot runs."""
        target = self.precision_pct > 0
        useless = self.max_time_ms / max(1, self.rounds) if target and self.max_time_ms > 0 else None
        if warm and checked_call_ms is not None and useless is not None and checked_call_ms >= useless:
            pilot = [float(checked_call_ms)]
        else:
            pilot = pilot_call_ms(fn, sync, budget_ms=max(PILOT_BUDGET_MS, self.warmup_ms),
                                  min_calls=PILOT_MIN_CALLS if target else 1, spread_useless_ms=useless,
                                  cold_call=not warm)
        rounds, warmup = plan_rounds(float(min(pilot)), rounds=self.rounds, warmup=self.warmup,
                                     warmup_ms=self.warmup_ms, min_time_ms=self.min_time_ms,
                                     max_rounds=self.max_rounds, pilot_ms=pilot, precision_pct=self.precision_pct,
                                     max_time_ms=self.max_time_ms)
        return rounds, max(0, warmup - len(pilot) - (0 if warm else 1)), pilot
