"""pytest-benchmark's own calibration options mean what they say in the suite, or are refused with one line naming
the suite's option (:mod:`cudagraph_bench.plugin.benchmark_options`): checked through a real pytest session that
records the round policy its benchmark ran under."""

import json

import pytest

pytest_plugins = ["pytester"]

TEST = """
def test_policy(request, benchmark):
    from cudagraph_bench.plugin.benchmark_timing import round_policy
    p = round_policy(request.config.getoption)
    benchmark.extra_info.update(rounds=p.rounds, max_time_ms=p.max_time_ms, warmup_rounds=p.warmup)
    benchmark.pedantic(lambda: None, rounds=1)
"""


def policy(pytester, *args):
    pytester.makepyfile(test_policy=TEST)
    out = pytester.path / "run.json"
    result = pytester.runpytest_inprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider",
                                          f"--benchmark-json={out}", *args)
    # pytest-benchmark before 5.3 opens --benchmark-json as it parses it (argparse.FileType): a session refused
    # before any test leaves that file empty, as it leaves none from 5.3 on
    written = out.exists() and out.stat().st_size > 0
    return result, (json.loads(out.read_text())["benchmarks"][0]["extra_info"] if written else None)


def test_the_honoured_options_set_the_round_policy(pytester):
    _, default = policy(pytester)
    result, info = policy(pytester, "--benchmark-min-rounds=7", "--benchmark-max-time", "0.25",
                          "--benchmark-warmup-iterations=3")
    assert result.ret == 0
    assert (info["rounds"], info["max_time_ms"], info["warmup_rounds"]) == (7, 250.0, 3)
    assert (default["rounds"], default["max_time_ms"], default["warmup_rounds"]) != (7, 250.0, 3)


def test_the_honoured_options_come_from_pytest_addopts_too(pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_ADDOPTS", "--benchmark-min-rounds=9")
    result, info = policy(pytester)
    assert result.ret == 0 and info["rounds"] == 9


@pytest.mark.parametrize("args, phrase", [
    (["--benchmark-min-time=0.1"], "--benchmark-min-time is not read by cudagraph-bench's timing: each round is one "
                                   "call here: set --min-time-ms"),
    (["--benchmark-timer=time.process_time"], "--benchmark-timer is not read by cudagraph-bench's timing"),
    (["--benchmark-calibration-precision=20"], "set --precision-pct"),
    (["--benchmark-warmup=on"], "set --benchmark-warmup-iterations and --warmup-ms"),
    (["--benchmark-min-rounds=100000000"], "--benchmark-min-rounds 100000000: expected at most 100000 rounds"),
    (["--benchmark-max-time=-2"], "--benchmark-max-time -2: expected seconds >= 0"),
])
def test_the_others_are_refused_with_one_line_naming_the_suite_option(pytester, args, phrase):
    result, info = policy(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and info is None
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1 and phrase in errors[0], result.errlines


@pytest.mark.parametrize("flag, spelled", [("--rounds", "--benchmark-min-rounds 5"),
                                           ("--max-time-ms", "--benchmark-max-time 0.005"),
                                           ("--warmup-rounds", "--benchmark-warmup-iterations 5")])
def test_pytest_has_one_switch_per_round_option(pytester, flag, spelled):
    """run's names of the round options pytest-benchmark spells set nothing in pytest: one line names its flag,
    and --help lists only that one."""
    result, info = policy(pytester, flag, "5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and info is None
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1 and errors[0].endswith(f"in pytest it is pytest-benchmark's {spelled.split()[0]} "
                                                   f"(e.g. {spelled})"), result.errlines
    shown = pytester.runpytest_inprocess("-p", "cudagraph_bench.plugin", "--help").stdout.str()
    assert f"{flag} " not in shown and f"{flag}=" not in shown and spelled.split()[0] in shown
