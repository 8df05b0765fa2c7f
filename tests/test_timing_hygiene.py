"""Timing hygiene without a GPU: time-based warmup and minimum measured time, the time cap of the
precision target (also re-planned on a committed H200 run), garbage collector off while timing, the --cpus
parser and CPU pinning, and the NVML GPU-state reading (mapped bit masks, None without NVML)."""

import argparse
import gc
import gzip
import json
import math
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from cudagraph_bench import envinfo
from cudagraph_bench.measure import gpustate
from cudagraph_bench.errors import UsageError
from cudagraph_bench.options import (DEFAULT_MAX_ROUNDS, DEFAULT_MAX_TIME_MS, DEFAULT_ROUNDS, MATRIX_OPTIONS, parse_cpus,
                                     parse_ms)
from cudagraph_bench.measure.timing import (MAX_TIMED_ROUNDS, PILOT_CALLS, RoundPolicy, gc_disabled, pilot_call_ms,
                                            median_ci_pct, plan_rounds, rounds_for_precision)

#: The default forward matrix of the H200, measured with rounds planned from a pilot and no time cap.
ONE_PIPELINE_RUN = Path(__file__).parents[1] / "results" / "nvidia-h200" / "forward" / "forward-one-pipeline.json.gz"


# ---------------------------------------------------------------------------- rounds from time floors


def test_plan_rounds_fills_the_time_floors_with_literal_numbers():
    # 0.1 ms graph replay: 200 ms of measurement = 2000 rounds, 100 ms of warmup = 1000 rounds
    assert plan_rounds(0.1, rounds=100, warmup=10, warmup_ms=100, min_time_ms=200) == (2000, 1000)
    # 50 ms call: the round counts already last longer than the floors
    assert plan_rounds(50.0, rounds=100, warmup=10, warmup_ms=100, min_time_ms=200) == (100, 10)
    # floors off
    assert plan_rounds(0.1, rounds=7, warmup=0, warmup_ms=0, min_time_ms=0) == (7, 0)


def test_plan_rounds_caps_what_the_time_floors_add():
    assert plan_rounds(0.0, rounds=100, warmup=10, warmup_ms=100, min_time_ms=200) == (MAX_TIMED_ROUNDS,) * 2
    assert plan_rounds(1e-3, rounds=30_000, warmup=5, warmup_ms=100, min_time_ms=200, max_rounds=1000) == \
        (30_000, 1000)   # never fewer than asked for


def test_the_pilot_calls_cold_once_then_stops_at_its_budget():
    calls = []

    def fn():
        calls.append(1)

    syncs = []
    assert len(pilot_call_ms(fn, lambda: syncs.append(1), calls=3, min_calls=1)) == 3
    assert len(calls) == len(syncs) == 4                         # 1 cold + 3 timed, each synchronized
    calls.clear()
    slow = pilot_call_ms(lambda: (calls.append(1), __import__("time").sleep(0.02)), calls=5, budget_ms=10,
                         min_calls=1)
    assert len(calls) == 2 and len(slow) == 1 and slow[0] >= 15  # a slow call is not repeated


def test_a_slow_first_pilot_call_still_leaves_a_spread_to_plan_from():
    """One slow call (a lazy initialisation) used up the budget alone: the pilot still times PILOT_MIN_CALLS
    calls, so the precision target plans from a spread instead of switching off."""
    import time

    from cudagraph_bench.measure.timing import PILOT_MIN_CALLS, median_ci_pct, pilot_call_ms

    delays = iter([0.0, 0.05] + [0.0] * 50)          # the cold call, one slow timed call, then fast ones
    pilot = pilot_call_ms(lambda: time.sleep(next(delays)), budget_ms=10)
    assert len(pilot) == PILOT_MIN_CALLS and pilot[0] >= 40 and median_ci_pct(pilot) is not None
    fast = pilot_call_ms(lambda: None, calls=2, budget_ms=0)
    assert len(fast) == 2                            # never more than asked for


def test_a_warm_pilot_makes_no_untimed_call_and_plans_the_warmup_from_its_timed_calls():
    """``warm`` (the caller has just run the function, e.g. a checked decode request): every pilot call is
    timed, and the warmup floor counts exactly the pilot's calls (no cold call to add)."""
    from cudagraph_bench.measure.timing import RoundPolicy, pilot_call_ms

    calls = []
    pilot = pilot_call_ms(lambda: calls.append(1), calls=3, budget_ms=1e9, min_calls=3, cold_call=False)
    assert len(calls) == len(pilot) == 3
    calls.clear()
    assert len(pilot_call_ms(lambda: calls.append(1), calls=3, budget_ms=1e9, min_calls=3)) == 3 and len(calls) == 4

    policy = RoundPolicy(rounds=3, warmup=0, warmup_ms=1e6, min_time_ms=0.0, precision_pct=0.0, max_rounds=50,
                         max_time_ms=0.0)
    for warm in (False, True):
        calls.clear()
        _, warmup, timed = policy.plan(lambda: calls.append(1), lambda: None, warm=warm)
        assert len(calls) == len(timed) + (0 if warm else 1), warm
        assert warmup == policy.max_rounds - len(calls), warm      # the 1e6 ms floor asks for max_rounds calls


def test_the_pilot_calls_count_towards_the_warmup_rounds_floor():
    """A slow call (one pilot call above the warmup_ms floor): the pilot's timed calls and its cold call are
    calls before the measured rounds, so the warmup rounds make up only what the ``warmup`` floor still
    lacks; a pilot as long as the floor leaves no warmup round, and the warmup_ms floor still wins when it
    asks for more calls."""
    import time

    from cudagraph_bench.measure.timing import RoundPolicy

    def plan(warmup, warmup_ms, warm):
        calls = []

        def fn():
            calls.append(1)
            time.sleep(0.002)

        policy = RoundPolicy(rounds=3, warmup=warmup, warmup_ms=warmup_ms, min_time_ms=0.0, precision_pct=0.0,
                             max_rounds=10_000, max_time_ms=0.0)
        _, planned, pilot = policy.plan(fn, lambda: None, warm=warm)
        return planned, len(calls), pilot

    for warm in (False, True):
        planned, made, pilot = plan(warmup=60, warmup_ms=0.0, warm=warm)
        assert made == len(pilot) + (0 if warm else 1) and 0 < made < 60, warm
        assert planned + made == 60, warm                  # the floor counts every call before the measured ones
        planned, made, _ = plan(warmup=1, warmup_ms=0.0, warm=warm)
        assert planned == 0, warm                          # the pilot alone reaches a floor below its length
    planned, made, pilot = plan(warmup=1, warmup_ms=200.0, warm=False)
    assert planned + made >= 200.0 / max(pilot)            # the time floor, with the pilot's calls counted in


def test_a_call_too_slow_for_the_precision_target_is_timed_once_in_the_pilot():
    """RoundPolicy.plan: when the time cap leaves the precision target no rounds above the ``rounds`` floor
    (one call >= max_time_ms / rounds), the pilot's spread is of no use and one timed call ends it; with
    room for precision rounds the pilot still times PILOT_MIN_CALLS calls."""
    import time

    from cudagraph_bench.measure.timing import PILOT_BUDGET_MS, PILOT_MIN_CALLS, RoundPolicy

    def policy(max_time_ms, precision_pct=1.0):
        return RoundPolicy(rounds=3, warmup=0, warmup_ms=0.0, min_time_ms=0.0, precision_pct=precision_pct,
                           max_rounds=100, max_time_ms=max_time_ms)

    call_ms = 30.0

    def slow():
        time.sleep(call_ms / 1e3)

    capped = policy(max_time_ms=3 * call_ms / 2)           # a call is 2x what the cap allows per round
    rounds, _, pilot = capped.plan(slow, lambda: None)
    assert len(pilot) == 1 and rounds == capped.rounds
    most = max(PILOT_MIN_CALLS, math.ceil(PILOT_BUDGET_MS / call_ms))     # calls of >= call_ms fill the budget
    _, _, pilot = policy(max_time_ms=100 * call_ms).plan(slow, lambda: None)     # room for precision rounds
    assert PILOT_MIN_CALLS <= len(pilot) <= most
    _, _, pilot = policy(max_time_ms=0.0, precision_pct=0.0).plan(slow, lambda: None)   # no target: the budget
    assert 1 < len(pilot) <= most


def test_gc_is_off_while_timing_and_restored_after():
    from cudagraph_bench.measure.timing import time_call

    states = []
    assert gc.isenabled()
    timing = time_call(lambda: states.append(gc.isenabled()), rounds=3, warmup=1, device="cpu")
    assert len(timing.wall_ms) == 3 and states == [False] * 4 and gc.isenabled()
    gc.disable()
    try:
        with gc_disabled():
            pass
        assert not gc.isenabled()                                 # a disabled collector stays disabled
    finally:
        gc.enable()
    with pytest.raises(ValueError):
        time_call(lambda: None, rounds=0, warmup=0)


def test_a_checked_call_too_slow_for_the_precision_target_is_the_pilot():
    """RoundPolicy.plan(warm=True, checked_call_ms=...): a just-checked call at least max_time_ms / rounds
    slow is the pilot (fn is not called, the rounds floor is the plan); a faster one leaves the pilot as it
    was, and without ``warm`` it is ignored."""
    from cudagraph_bench.measure.timing import PILOT_MIN_CALLS, RoundPolicy

    policy = RoundPolicy(rounds=3, warmup=0, warmup_ms=100.0, min_time_ms=0.0, precision_pct=1.0, max_rounds=100,
                         max_time_ms=1000.0)
    slow_ms = policy.max_time_ms / policy.rounds
    calls = []
    rounds, warmup, pilot = policy.plan(lambda: calls.append(1), lambda: None, warm=True, checked_call_ms=slow_ms)
    assert calls == [] and pilot == [slow_ms] and (rounds, warmup) == (policy.rounds, policy.warmup)
    for warm, checked in ((True, slow_ms / 2), (False, slow_ms)):
        calls.clear()
        _, _, pilot = policy.plan(lambda: calls.append(1), lambda: None, warm=warm, checked_call_ms=checked)
        assert len(pilot) >= PILOT_MIN_CALLS and len(calls) == len(pilot) + (0 if warm else 1), (warm, checked)


class _Cycle:
    """An object in a reference cycle: only the cyclic garbage collector frees it."""

    def __init__(self):
        self.me = self


@pytest.fixture
def released_session():
    """The plugin's release (:func:`cudagraph_bench.plugin.memory.release`, what ``cgb.release`` calls) run in
    this process; the test process's collector is unfrozen afterwards."""
    from cudagraph_bench.plugin import memory

    yield types.SimpleNamespace(release=memory.release)
    gc.unfreeze()


def test_release_collects_what_the_last_case_left_and_freezes_what_survives(released_session):
    import weakref

    released_session.release(everything=True)
    garbage = _Cycle()
    garbage_ref = weakref.ref(garbage)
    survivor = _Cycle()
    survivor_ref = weakref.ref(survivor)
    del garbage
    released_session.release()
    assert garbage_ref() is None                       # made since the last release: collected
    assert gc.get_freeze_count() > 0
    del survivor                                       # frozen while alive: a plain release skips it
    released_session.release()
    assert survivor_ref() is not None
    released_session.release(everything=True)          # e.g. a model dropped from the cache
    assert survivor_ref() is None


def test_release_while_an_exception_propagates_freezes_nothing(released_session):
    import weakref

    released_session.release(everything=True)
    frozen = gc.get_freeze_count()
    with pytest.raises(RuntimeError):
        try:
            raise RuntimeError("a failing case")
        finally:
            in_flight = _Cycle()                       # e.g. a tensor the failing frame still holds
            in_flight_ref = weakref.ref(in_flight)
            released_session.release()
            assert gc.get_freeze_count() <= frozen    # none frozen; a frozen object may have died meanwhile
            del in_flight
    released_session.release()
    assert in_flight_ref() is None


def test_median_interval_matches_the_spread_of_medians_over_repeats():
    """median_ci_pct's half-width against what it estimates: 1.96 x the standard deviation of the median
    over many repeated samples of the same distribution (normal, 10 ms, sigma 0.3 ms)."""
    rng = np.random.default_rng(0)
    n = 200
    samples = rng.normal(10.0, 0.3, size=(2000, n))
    medians = np.median(samples, axis=1)
    expected_pct = 100 * 1.959964 * medians.std() / 10.0
    estimates = [median_ci_pct(row) for row in samples[:50]]
    assert np.median(estimates) == pytest.approx(expected_pct, rel=0.1)
    assert median_ci_pct([1.0, 2.0]) is None and median_ci_pct([5.0] * 7) == 0.0


def test_rounds_planned_from_a_pilot_reach_the_precision_target():
    from cudagraph_bench.measure import timing

    """Rounds planned from a full pilot give a measured median within 1.25x the target (most of the time),
    and a tighter target asks for more rounds: the planner only uses the pilot's own spread."""
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(40):
        pilot = rng.normal(5.0, 0.25, size=timing.PILOT_CALLS)
        n = rounds_for_precision(pilot, 1.0)
        assert n >= 1
        hits += median_ci_pct(rng.normal(5.0, 0.25, size=n)) <= 1.25
    assert hits >= 30
    pilot = rng.normal(5.0, 0.25, size=10)
    assert rounds_for_precision(pilot, 0.5) > rounds_for_precision(pilot, 1.0) > 0
    assert rounds_for_precision(pilot, 0.0) == 0 and rounds_for_precision(pilot[:2], 1.0) == 0
    # plan_rounds: the precision target adds rounds above the floor, up to the cap
    need = rounds_for_precision(pilot, 1.0)
    assert plan_rounds(5.0, rounds=3, warmup=0, warmup_ms=0, min_time_ms=0, pilot_ms=pilot, precision_pct=1.0) == \
        (max(3, need), 0)
    assert plan_rounds(5.0, rounds=3, warmup=0, warmup_ms=0, min_time_ms=0, pilot_ms=pilot, precision_pct=1.0,
                       max_rounds=need - 1) == (max(3, need - 1), 0)


def test_benchmark_call_plans_rounds_and_records_warmup_and_gpu_state(monkeypatch):
    """The pytest path with a fake benchmark fixture and a CPU stand-in for CallTimer."""
    from cudagraph_bench.measure import timing
    from cudagraph_bench.plugin.benchmark_timing import benchmark_call, round_policy

    class FakeTimer:
        def __init__(self, fn, capacity=256, *, device="cuda"):
            self.fn, self.capacity, self.calls = fn, capacity, 0

        def __call__(self):
            self.calls += 1
            return self.fn()

        def event_ms(self, last=None):
            return [0.1] * last

    class FakeBenchmark:
        name = "test_forward[gpt2-float32-L16-graph]"

        def __init__(self):
            self.extra_info = {}

        def pedantic(self, target, rounds, warmup_rounds, iterations):
            self.args = (rounds, warmup_rounds, iterations)
            for _ in range(rounds + warmup_rounds):
                target()

    opts = {**{o.dest: o.default for o in MATRIX_OPTIONS},   # every option a session has
            "rounds": 5, "warmup_rounds": 2, "warmup_ms": 100.0, "min_time_ms": 200.0, "precision_pct": 1.0,
            "max_rounds": 2000, "max_time_ms": 150.0}

    readings = iter([{"clocks_event_reasons": ["gpu_idle"]}, {"clocks_event_reasons": ["sw_thermal"]}])
    monkeypatch.setattr(timing, "CallTimer", FakeTimer)
    pilot = [1.0] * 4          # 1 ms calls, no spread: the time floors decide
    monkeypatch.setattr(timing, "pilot_call_ms", lambda fn, sync, **budget: pilot)
    monkeypatch.setattr(gpustate, "read_gpu_state", lambda: next(readings))
    bench = FakeBenchmark()
    with pytest.warns(gpustate.GpuThrottledWarning, match=r"test_forward\[gpt2-float32-L16-graph\]: .*sw_thermal"):
        events = benchmark_call(bench, lambda: None, group="g", extra_info={"model": "gpt2"},
                                policy=round_policy(opts.__getitem__), device="cuda")
    # 1 ms calls: 200 ms / 100 ms floors (the 200 ms floor wins over the 150 ms cap); the pilot's calls (and its
    # cold call) count towards the warmup floor
    warmup = 100 - len(pilot) - 1
    assert bench.args == (200, warmup, 1) and len(events) == 200
    info = bench.extra_info
    assert info["warmup_rounds"] == warmup and info["pilot_ms"] == pilot and info["model"] == "gpt2"
    assert info["precision_target_pct"] == 1.0 and info["median_ci95_pct"] == 0.0   # equal event times
    assert info["max_time_ms"] == opts["max_time_ms"]
    assert info["gpu_state"]["after"] == {"clocks_event_reasons": ["sw_thermal"]}
    assert info["throttled"] == ["sw_thermal"]


@pytest.mark.parametrize("disable_gc", [True, False])
def test_the_pilot_runs_with_the_garbage_collector_as_the_measured_rounds_do(monkeypatch, disable_gc):
    """pytest-benchmark turns the collector off around the measured rounds (``--benchmark-disable-gc``,
    which this project's ini ``addopts`` sets): the pilot that plans them runs the same way, and the
    collector is back on afterwards."""
    from cudagraph_bench.measure import timing
    from cudagraph_bench.plugin.benchmark_timing import benchmark_call, round_policy

    seen = []

    def pilot(fn, sync, **budget):
        seen.append(gc.isenabled())
        return [1.0] * 4

    class Bench:
        extra_info, _disable_gc, name = {}, disable_gc, "test_forward[gpt2-float32-L16-eager]"

        def pedantic(self, target, rounds, warmup_rounds, iterations):
            seen.append(("pedantic", rounds))

    defaults = {o.dest: o.default for o in MATRIX_OPTIONS}
    monkeypatch.setattr(timing, "pilot_call_ms", pilot)
    monkeypatch.setattr(timing, "CallTimer",
                        lambda fn, capacity=256, *, device: types.SimpleNamespace(event_ms=lambda last: [1.0] * last))
    monkeypatch.setattr(gpustate, "read_gpu_state", lambda: None)
    assert gc.isenabled()
    benchmark_call(Bench(), lambda: None, group="g", extra_info={}, policy=round_policy(defaults.__getitem__),
                   device="cuda")
    assert seen[0] is (not disable_gc) and seen[1][0] == "pedantic"
    assert gc.isenabled()


# ---------------------------------------------------------------------------- time cap of the precision target


def spread_pilot():
    """A full pilot of ~20 ms calls whose spread asks for a few hundred rounds at 1%."""
    return np.random.default_rng(2).normal(20.0, 1.0, size=PILOT_CALLS)


def test_time_cap_stops_what_the_precision_target_adds_never_below_the_rounds_floor():
    pilot, rounds, cap_ms = spread_pilot(), 20, 1000.0
    need = rounds_for_precision(pilot, 1.0)
    assert need > 4 * rounds                                      # room between the floor and the target
    planned = []
    # per-call times at which the cap lies above what the target asks, between floor and target, below the floor
    for call_ms in (cap_ms / (need + 10), cap_ms / ((rounds + need) // 2), cap_ms / (rounds // 2)):
        n, warmup = plan_rounds(call_ms, rounds=rounds, warmup=0, warmup_ms=0, min_time_ms=0, pilot_ms=pilot,
                                precision_pct=1.0, max_time_ms=cap_ms)
        assert n == max(rounds, min(need, math.ceil(cap_ms / call_ms))) and warmup == 0
        planned.append(n)
    assert planned[0] == need and rounds < planned[1] < need and planned[2] == rounds
    # the cap never cuts the rounds asked for
    assert plan_rounds(cap_ms / rounds, rounds=5 * need, warmup=0, warmup_ms=0, min_time_ms=0, pilot_ms=pilot,
                       precision_pct=1.0, max_time_ms=cap_ms) == (5 * need, 0)


def test_time_cap_zero_is_off_and_max_rounds_still_caps():
    pilot, rounds, call_ms = spread_pilot(), 20, 50.0
    need = rounds_for_precision(pilot, 1.0)
    plan = dict(rounds=rounds, warmup=0, warmup_ms=0, min_time_ms=0, pilot_ms=pilot, precision_pct=1.0)
    assert math.ceil(DEFAULT_MAX_TIME_MS / call_ms) < need         # the default cap would cut this one
    assert plan_rounds(call_ms, **plan, max_time_ms=0.0) == (need, 0) == plan_rounds(call_ms, **plan)
    assert plan_rounds(call_ms, **plan, max_time_ms=DEFAULT_MAX_TIME_MS) == \
        (max(rounds, math.ceil(DEFAULT_MAX_TIME_MS / call_ms)), 0)
    # a cap far above the target: max_rounds decides
    assert plan_rounds(1e-3, **plan, max_rounds=need - 1, max_time_ms=DEFAULT_MAX_TIME_MS) == (need - 1, 0)


def test_min_time_floor_wins_over_the_time_cap():
    pilot, rounds, cap_ms = spread_pilot(), 20, 1000.0
    need = rounds_for_precision(pilot, 1.0)
    call_ms = cap_ms / ((rounds + need) // 2)                     # the cap alone: between floor and target
    min_time_ms = 3 * cap_ms
    n, _ = plan_rounds(call_ms, rounds=rounds, warmup=0, warmup_ms=0, min_time_ms=min_time_ms, pilot_ms=pilot,
                       precision_pct=1.0, max_time_ms=cap_ms)
    assert n == math.ceil(min_time_ms / call_ms) > math.ceil(cap_ms / call_ms)
    # the time floor is still bounded by max_rounds (and never below rounds)
    assert plan_rounds(call_ms, rounds=rounds, warmup=0, warmup_ms=0, min_time_ms=min_time_ms, pilot_ms=pilot,
                       precision_pct=1.0, max_time_ms=cap_ms, max_rounds=rounds + 1) == (rounds + 1, 0)


def test_round_policy_caps_by_the_pilots_fastest_call(monkeypatch):
    from cudagraph_bench.measure import timing

    pilot = list(spread_pilot())
    monkeypatch.setattr(timing, "pilot_call_ms", lambda fn, sync, **budget: pilot)
    need = rounds_for_precision(pilot, 1.0)
    policy = dict(rounds=DEFAULT_ROUNDS, warmup=0, warmup_ms=0.0, min_time_ms=0.0, precision_pct=1.0,
                  max_rounds=DEFAULT_MAX_ROUNDS)
    rounds, _, seen = RoundPolicy(**policy, max_time_ms=DEFAULT_MAX_TIME_MS).plan(lambda: None, lambda: None)
    capped = math.ceil(DEFAULT_MAX_TIME_MS / min(pilot))
    assert DEFAULT_ROUNDS < capped < need                         # the cap binds for this pilot
    assert rounds == capped and seen == pilot
    assert RoundPolicy(**policy, max_time_ms=0.0).plan(lambda: None, lambda: None)[0] == min(need, DEFAULT_MAX_ROUNDS)


def test_default_time_cap_shortens_the_timed_calls_of_the_committed_forward_run():
    """Each benchmark of the committed H200 forward run (no time cap) re-planned from its own record: its
    pilot (``pilot_ms``) for the precision target, its recorded mean for the per-call time. Without a cap the
    plan gives the rounds the run measured; with the default cap no benchmark's timed calls (rounds x mean)
    exceed both its rounds floor and the cap plus one call, and together they take less than the run's."""
    run = json.loads(gzip.decompress(ONE_PIPELINE_RUN.read_bytes()))
    recorded_ms = planned_ms = 0.0
    capped = 0
    for bench in run["benchmarks"]:
        stats, info = bench["stats"], bench["extra_info"]
        mean_ms = stats["mean"] * 1e3
        plan = dict(rounds=DEFAULT_ROUNDS, warmup=0, warmup_ms=0, min_time_ms=0, max_rounds=DEFAULT_MAX_ROUNDS,
                    pilot_ms=info["pilot_ms"], precision_pct=info["precision_target_pct"])
        assert plan_rounds(mean_ms, **plan, max_time_ms=0.0)[0] == stats["rounds"], bench["name"]
        rounds, _ = plan_rounds(mean_ms, **plan, max_time_ms=DEFAULT_MAX_TIME_MS)
        assert DEFAULT_ROUNDS <= rounds <= stats["rounds"]
        assert rounds * mean_ms <= max(DEFAULT_ROUNDS * mean_ms, DEFAULT_MAX_TIME_MS + mean_ms)
        capped += rounds < stats["rounds"]
        recorded_ms += stats["rounds"] * mean_ms
        planned_ms += rounds * mean_ms
    assert capped > 0 and planned_ms < recorded_ms


# ---------------------------------------------------------------------------- --cpus


def test_parse_cpus():
    assert parse_cpus("0-3") == (0, 1, 2, 3)
    assert parse_cpus("0,2,4-6") == (0, 2, 4, 5, 6)
    assert parse_cpus(" 5 , 1 ") == (1, 5)
    for bad, message in (("3-1", "bad CPU range '3-1'"), ("a", "bad CPU list item 'a'"), ("", "empty item"),
                         ("-1", "bad CPU list item '-1'"), ("1,", "empty item")):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            parse_cpus(bad)


def test_parse_ms():
    assert parse_ms("0") == 0.0 and parse_ms("12.5") == 12.5
    for bad in ("-1", "inf", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_ms(bad)


def test_format_cpus():
    assert envinfo.format_cpus({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert envinfo.format_cpus([3]) == "3" and envinfo.format_cpus([]) == ""


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="needs os.sched_getaffinity")
def test_cpus_to_pin_a_process_to_are_checked_against_this_processs_cpus(monkeypatch):
    from cudagraph_bench.runner.process import PytestRun, check_cpus, command

    allowed = os.sched_getaffinity(0)
    check_cpus(None)
    check_cpus((min(allowed),))
    with pytest.raises(UsageError, match=rf"--cpus: CPU\(s\) 99999 not available to this process: choose among "
                                         rf"{envinfo.format_cpus(allowed)}$"):
        check_cpus((min(allowed), 99999))
    pinned = command(PytestRun(Path("."), Path("x.json"), cpus=(0, 1, 2, 5)), Path("x.json"), [])
    assert pinned[:4] == ["taskset", "-c", "0-2,5", sys.executable]
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(UsageError, match="--cpus pins with taskset"):
        check_cpus((min(allowed),))


# ---------------------------------------------------------------------------- NVML GPU state


def test_reason_names_map_nvml_bits():
    assert gpustate.reason_names(0) == ["none"]
    assert gpustate.reason_names(0x1) == ["gpu_idle"]
    assert gpustate.reason_names(0x4 | 0x20) == ["sw_power_cap", "sw_thermal"]
    assert gpustate.reason_names(0x2 | 0x8 | 0x10 | 0x40 | 0x80) == [
        "applications_clocks", "hw_slowdown", "sync_boost", "hw_thermal", "hw_power_brake"]
    assert gpustate.reason_names(0x1 | 0x10000) == ["gpu_idle", "unknown_0x10000"]


def test_reason_bits_match_pynvml_constants():
    pynvml = pytest.importorskip("pynvml")
    names = {"gpu_idle": "GpuIdle", "applications_clocks": "ApplicationsClocksSetting", "sw_power_cap": "SwPowerCap",
             "hw_slowdown": "HwSlowdown", "sync_boost": "SyncBoost", "sw_thermal": "SwThermalSlowdown",
             "hw_thermal": "HwThermalSlowdown", "hw_power_brake": "HwPowerBrakeSlowdown"}
    for bit, name in gpustate.REASON_BITS:
        if name in names:
            assert getattr(pynvml, "nvmlClocksThrottleReason" + names[name]) == bit


def test_throttle_reasons_ignore_benign_reasons_and_missing_readings():
    idle = {"clocks_event_reasons": ["gpu_idle", "applications_clocks"]}
    hot = {"clocks_event_reasons": ["sw_thermal", "sync_boost"]}
    capped = {"clocks_event_reasons": ["sw_power_cap", "sw_thermal"]}
    assert gpustate.throttle_reasons(idle, None, {"clocks_event_reasons": None}) == []
    assert gpustate.throttle_reasons(idle, hot, capped) == ["sw_power_cap", "sw_thermal"]
    assert gpustate.warn_if_throttled("case", idle, None) == []
    with pytest.warns(gpustate.GpuThrottledWarning, match="case: GPU clocks were limited while timing"):
        assert gpustate.warn_if_throttled("case", idle, hot) == ["sw_thermal"]


@pytest.fixture
def fresh_nvml(monkeypatch):
    monkeypatch.setattr(gpustate, "_nvml", None)
    monkeypatch.setattr(gpustate, "_handles", {})


def test_gpu_state_is_none_without_a_gpu(monkeypatch, fresh_nvml):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpustate.read_gpu_state() is None


def test_gpu_state_is_none_without_nvml(monkeypatch, fresh_nvml):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setitem(sys.modules, "pynvml", None)             # import pynvml raises ImportError
    assert gpustate.read_gpu_state(0) is None


def test_gpu_state_is_none_when_nvml_init_fails(monkeypatch, fresh_nvml):
    def fail():
        raise RuntimeError("NVML Shared Library Not Found")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setitem(sys.modules, "pynvml", types.SimpleNamespace(nvmlInit=fail))
    assert gpustate.read_gpu_state(0) is None


def fake_nvml(uuid_ok=True):
    def by_uuid(uuid):
        if not uuid_ok:
            raise RuntimeError("not found")
        assert uuid == "GPU-12345678-1234-5678-1234-567812345678"
        return "h-uuid"

    def power(handle):
        raise RuntimeError("Not Supported")

    return types.SimpleNamespace(
        nvmlInit=lambda: None, NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, NVML_TEMPERATURE_GPU=0,
        nvmlDeviceGetHandleByUUID=by_uuid,
        nvmlDeviceGetHandleByPciBusId=lambda bus: ("h-pci", bus),
        nvmlDeviceGetHandleByIndex=lambda i: "h-index",
        nvmlDeviceGetClockInfo=lambda h, clock: {1: 1980, 2: 3201}[clock],
        nvmlDeviceGetTemperature=lambda h, sensor: 41,
        nvmlDeviceGetPowerUsage=power,
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0x4 | 0x1)


def test_gpu_state_reads_the_torch_device_by_uuid_then_pci_bus_id(monkeypatch, fresh_nvml):
    import uuid

    props = types.SimpleNamespace(uuid=uuid.UUID("12345678-1234-5678-1234-567812345678"), pci_domain_id=0,
                                  pci_bus_id=0x1b, pci_device_id=0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml())
    state = gpustate.read_gpu_state()
    assert state == {"sm_clock_mhz": 1980, "mem_clock_mhz": 3201, "temperature_c": 41, "power_w": None,
                     "clocks_event_reasons": ["gpu_idle", "sw_power_cap"], "nvml_match": "uuid"}
    monkeypatch.setattr(gpustate, "_nvml", None)
    monkeypatch.setattr(gpustate, "_handles", {})
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(uuid_ok=False))
    assert gpustate.read_gpu_state("cuda:0")["nvml_match"] == "pci"
