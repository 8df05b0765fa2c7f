"""pytest-benchmark's own options beside the suite's round policy: each means what it says, or is refused.

The suite times every benchmark through ``benchmark.pedantic`` with its own round policy
(:class:`~cudagraph_bench.measure.timing.RoundPolicy`), which pytest-benchmark's calibration would not reach.
In a pytest session its flags are the only spelling of the round options they name
(:data:`cudagraph_bench.options.PYTEST_BENCHMARK_SPELLING`; ``cudagraph-bench run`` passes its ``--rounds``,
``--max-time-ms`` and ``--warmup-rounds`` on that way). When given (on the command line, in ``PYTEST_ADDOPTS`` or
in the ini file's ``addopts``):

- ``--benchmark-min-rounds N``: at least N measured rounds (the policy's ``rounds``);
- ``--benchmark-max-time S``: the most time of measured calls the precision target adds, S seconds
  (``max_time_ms``);
- ``--benchmark-warmup-iterations N``: N unmeasured calls before the rounds (``warmup_rounds``);
- ``--benchmark-min-time``, ``--benchmark-calibration-precision``, ``--benchmark-timer`` and ``--benchmark-warmup``,
  which have no counterpart in a policy of one call per round, are refused with one line naming the suite's option.

Not given, each takes the suite's default (:mod:`cudagraph_bench.defaults`), not pytest-benchmark's. Each value goes
through the suite option's own parser (:data:`cudagraph_bench.options.MATRIX_OPTIONS`). ``--benchmark-disable-gc``
is what the suite does by default (``--keep-gc`` turns the collector back on while timing).
"""

from __future__ import annotations

import argparse
import os
import shlex

import pytest

def _seconds_as_ms(text: str) -> float:
    from cudagraph_bench.parsers import parse_timeout_s

    return 1000.0 * parse_timeout_s(text)


def _parser(name: str):
    def parse(text: str):
        from cudagraph_bench import parsers

        return getattr(parsers, name)(text)
    return parse


#: pytest-benchmark flag -> (its ``config.option`` dest, the suite option it sets, its value's text -> the suite
#: option's value, by the suite's parser, in the flag's own unit).
HONOURED = {
    "--benchmark-min-rounds": ("benchmark_min_rounds", "--rounds", _parser("parse_rounds")),
    "--benchmark-max-time": ("benchmark_max_time", "--max-time-ms", _seconds_as_ms),
    "--benchmark-warmup-iterations": ("benchmark_warmup_iterations", "--warmup-rounds", _parser("parse_warmup_rounds")),
}
#: pytest-benchmark flag -> what to use instead, for the options a policy of one call per round has no use for.
REFUSED = {
    "--benchmark-min-time": "each round is one call here: set --min-time-ms (ms of measured calls per benchmark)",
    "--benchmark-calibration-precision": "rounds are planned from a pilot of calls here: set --precision-pct",
    "--benchmark-timer": "each call is timed here by a synchronized perf_counter and CUDA events, not a chosen timer",
    "--benchmark-warmup": "every benchmark warms up here: set --benchmark-warmup-iterations and --warmup-ms",
}


def given_flags(config) -> set[str]:
    """The long flags given to this pytest run: its arguments, ``PYTEST_ADDOPTS`` and the ini file's ``addopts``
    (``--flag`` and ``--flag=value`` alike)."""
    args = [*map(str, config.invocation_params.args), *shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))]
    try:
        args += [str(a) for a in config.getini("addopts")]
    except (ValueError, KeyError):
        pass
    return {a.split("=", 1)[0] for a in args if a.startswith("--")}


def apply(config) -> None:
    """Set the suite's round options from the pytest-benchmark options given, or to the suite's defaults; refuse
    the options without a counterpart (module docstring).

    Raises:
        pytest.UsageError: a refused option, or a value the suite's parser refuses (one line, naming the option)."""
    from cudagraph_bench.options import MATRIX_OPTIONS

    given = given_flags(config)
    for flag, why in REFUSED.items():
        if flag in given:
            raise pytest.UsageError(f"{flag} is not read by cudagraph-bench's timing: {why}")
    parsers = {o.flag: o for o in MATRIX_OPTIONS}
    for flag, (dest, suite_flag, parse) in HONOURED.items():
        option = parsers[suite_flag]
        if flag not in given:
            setattr(config.option, option.dest, option.default)
            continue
        try:
            setattr(config.option, option.dest, parse(str(config.getoption(dest))))
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise pytest.UsageError(f"{flag} {config.getoption(dest)}: {exc}") from None
