"""pytest-benchmark's own options beside the suite's round policy: each means what it says, or is refused.

The suite times every benchmark through ``benchmark.pedantic`` with its own round policy
(:class:`~cudagraph_bench.measure.timing.RoundPolicy`), which pytest-benchmark's calibration options would not reach.
So, when given (on the command line, in ``PYTEST_ADDOPTS`` or in the ini file's ``addopts``):

- ``--benchmark-min-rounds N`` sets ``--rounds N`` (at least N measured rounds);
- ``--benchmark-max-time S`` sets ``--max-time-ms 1000*S`` (the most time of measured calls a benchmark adds);
- ``--benchmark-warmup-iterations N`` sets ``--warmup-rounds N``;
- ``--benchmark-min-time``, ``--benchmark-calibration-precision``, ``--benchmark-timer`` and ``--benchmark-warmup``,
  which have no counterpart in a policy of one call per round, are refused with one line naming the suite's option.

Each converted value goes through the suite option's own parser (:data:`cudagraph_bench.options.MATRIX_OPTIONS`); a
pytest-benchmark option given with its suite counterpart is refused (one of the two). ``--benchmark-disable-gc``
is what the suite does by default (``--keep-gc`` turns the collector back on while timing).
"""

from __future__ import annotations

import argparse
import os
import shlex

import pytest

#: pytest-benchmark flag -> (its ``config.option`` dest, the suite's flag it sets, value -> the suite flag's text).
HONOURED = {
    "--benchmark-min-rounds": ("benchmark_min_rounds", "--rounds", lambda v: str(v)),
    "--benchmark-max-time": ("benchmark_max_time", "--max-time-ms", lambda v: repr(1000.0 * float(v))),
    "--benchmark-warmup-iterations": ("benchmark_warmup_iterations", "--warmup-rounds", lambda v: str(v)),
}
#: pytest-benchmark flag -> what to use instead, for the options a policy of one call per round has no use for.
REFUSED = {
    "--benchmark-min-time": "each round is one call here: set --min-time-ms (ms of measured calls per benchmark)",
    "--benchmark-calibration-precision": "rounds are planned from a pilot of calls here: set --precision-pct",
    "--benchmark-timer": "each call is timed here by a synchronized perf_counter and CUDA events, not a chosen timer",
    "--benchmark-warmup": "every benchmark warms up here: set --warmup-rounds and --warmup-ms",
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
    """Set the suite's options from the honoured pytest-benchmark options given, refuse the others
    (module docstring).

    Raises:
        pytest.UsageError: a refused option, an honoured one given with its suite counterpart, or a value the suite's
            parser refuses (one line, naming the option)."""
    from cudagraph_bench.options import MATRIX_OPTIONS

    given = given_flags(config)
    for flag, why in REFUSED.items():
        if flag in given:
            raise pytest.UsageError(f"{flag} is not read by cudagraph-bench's timing: {why}")
    parsers = {o.flag: o for o in MATRIX_OPTIONS}
    for flag, (dest, suite_flag, convert) in HONOURED.items():
        if flag not in given:
            continue
        if suite_flag in given:
            raise pytest.UsageError(f"{flag} and {suite_flag} set the same thing: give one of them")
        text = convert(config.getoption(dest))
        option = parsers[suite_flag]
        try:
            setattr(config.option, option.dest, option.type(text))
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise pytest.UsageError(f"{flag} {config.getoption(dest)}: as {suite_flag} {text}: {exc}") from None
