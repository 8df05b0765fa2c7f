"""pytest-benchmark's own calibration options mean what they say in the suite, or are refused with one line naming
the suite's option (:mod:`cudagraph_bench.plugin.benchmark_timing`): checked through a real pytest session that
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
    """The TOML names of the round options pytest-benchmark spells set nothing in pytest: one line names its flag,
    and --help lists only that one."""
    result, info = policy(pytester, flag, "5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and info is None
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1 and errors[0].endswith(f"on pytest's command line it is pytest-benchmark's {spelled.split()[0]} "
                                                   f"(e.g. {spelled})"), result.errlines
    shown = pytester.runpytest_inprocess("-p", "cudagraph_bench.plugin", "--help").stdout.str()
    assert f"{flag} " not in shown and f"{flag}=" not in shown and spelled.split()[0] in shown


def test_the_run_json_records_the_round_options_the_suite_used(pytester):
    """Not given, pytest-benchmark's own record of its options (the JSON's ``options``) holds the suite's values,
    not pytest-benchmark's unused defaults; given, what was given."""
    from cudagraph_bench.options import DEFAULT_MAX_TIME_MS, DEFAULT_ROUNDS

    for args, (rounds, max_time_s) in (((), (DEFAULT_ROUNDS, DEFAULT_MAX_TIME_MS / 1000)),
                                       (("--benchmark-min-rounds=7", "--benchmark-max-time=0.25"), (7, 0.25))):
        result, _ = policy(pytester, *args)
        assert result.ret == 0
        recorded = json.loads((pytester.path / "run.json").read_text())["benchmarks"][0]["options"]
        assert (recorded["min_rounds"], float(recorded["max_time"])) == (rounds, max_time_s)


def test_the_time_cap_converts_between_ms_and_seconds_exactly_and_a_vanishing_one_is_refused():
    import argparse

    from cudagraph_bench.options import pytest_argument
    from cudagraph_bench.parsers import ms_as_seconds_text, parse_ms, parse_seconds_as_ms

    for ms in ("500.1", "63.7", "127.4", "1000", "0", "0.001"):
        assert parse_seconds_as_ms(ms_as_seconds_text(ms)) == float(ms)
    assert pytest_argument("--max-time-ms", "500.1") == ("--benchmark-max-time", "0.5001")
    for parse in (parse_ms, parse_seconds_as_ms):
        with pytest.raises(argparse.ArgumentTypeError, match="too small to tell from 0"):
            parse("1e-400")
        assert parse("0") == 0.0


def test_a_refused_run_name_gives_an_example_only_with_a_value_that_parses(pytester):
    result, _ = policy(pytester, "--rounds=abc")
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1 and errors[0].endswith("(e.g. --benchmark-min-rounds N)"), result.errlines
