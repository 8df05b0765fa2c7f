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
turns the garbage collector off while timing, pilot included; the project's ini ``addopts`` gives it (``-o addopts=``
keeps the collector on).
"""

from __future__ import annotations

import argparse
import os
import shlex

import pytest

def honoured() -> dict:
    """pytest-benchmark flag -> (its ``config.option`` dest, the suite's flag, its value's text -> the suite option's
    value), from :data:`cudagraph_bench.options.PYTEST_BENCHMARK_SPELLING`."""
    from cudagraph_bench.options import PYTEST_BENCHMARK_SPELLING

    return {flag: (flag[2:].replace("-", "_"), suite_flag, parse)
            for suite_flag, (flag, _, parse) in PYTEST_BENCHMARK_SPELLING.items()}


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


def _pytest_benchmark_value(flag: str, text: str):
    """``text`` as pytest-benchmark's own parser of ``flag`` reads it (its type: int, or its seconds' string)."""
    import pytest_benchmark.utils as utils

    return {"--benchmark-min-rounds": utils.parse_rounds, "--benchmark-max-time": utils.parse_seconds}.get(flag, int)(text)


def apply(config) -> None:
    """Set the suite's round options from the pytest-benchmark options given, or to the suite's defaults; refuse
    the options without a counterpart (module docstring).

    Raises:
        pytest.UsageError: a refused option, or a value the suite's parser refuses (one line, naming the option)."""
    from cudagraph_bench.options import MATRIX_OPTIONS, pytest_argument

    given = given_flags(config)
    for flag, why in REFUSED.items():
        if flag in given:
            raise pytest.UsageError(f"{flag} is not read by cudagraph-bench's timing: {why}")
    parsers = {o.flag: o for o in MATRIX_OPTIONS}
    for flag, (dest, suite_flag, parse) in honoured().items():
        option = parsers[suite_flag]
        if flag not in given:
            setattr(config.option, option.dest, option.default)
            # pytest-benchmark records its options in the run JSON ("options": min_rounds, max_time): the suite's
            # value, in its type, rather than pytest-benchmark's own default that nothing used
            text = pytest_argument(suite_flag, str(option.default))[1]
            setattr(config.option, dest, _pytest_benchmark_value(flag, text))
            continue
        try:
            setattr(config.option, option.dest, parse(str(config.getoption(dest))))
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise pytest.UsageError(f"{flag} {config.getoption(dest)}: {exc}") from None
