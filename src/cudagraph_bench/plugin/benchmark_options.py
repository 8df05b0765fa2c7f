"""pytest-benchmark's own options beside the suite's round policy: each means what it says, or is refused. Its
min-rounds, max-time and warmup-iterations flags are the only pytest spelling of the round options they name; its
calibration options without use under one call per round (:data:`REFUSED`) are refused in one line."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex

import pytest


#: pytest-benchmark flag -> what to use instead, for the options a policy of one call per round has no use for.
REFUSED = {
    "--benchmark-min-time": "each round is one call here: set --min-time-ms (ms of measured calls per benchmark)",
    "--benchmark-calibration-precision": "rounds are planned from a pilot of calls here: set --precision-pct",
    "--benchmark-timer": "each call is timed here by a synchronized perf_counter and CUDA events, not a chosen timer",
    "--benchmark-warmup": "every benchmark warms up here: set --benchmark-warmup-iterations and --warmup-ms",
}


def given_flags(config) -> set[str]:
    """Long flags given in the arguments, ``PYTEST_ADDOPTS`` and the ini's ``addopts``."""
    args = [*map(str, config.invocation_params.args), *shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))]
    with contextlib.suppress(ValueError, KeyError):
        args += [str(a) for a in config.getini("addopts")]
    return {a.split("=", 1)[0] for a in args if a.startswith("--")}


def apply(config) -> None:
    """Set the suite's round options from pytest-benchmark's given, or to the defaults; pytest.UsageError (one line) for
    a refused option or a value the suite's parser refuses."""
    import pytest_benchmark.utils as utils

    from cudagraph_bench.options import MATRIX_OPTIONS, PYTEST_BENCHMARK_SPELLING, pytest_argument

    given = given_flags(config)
    for flag, why in REFUSED.items():
        if flag in given:
            raise pytest.UsageError(f"{flag} is not read by cudagraph-bench's timing: {why}")
    parsers = {o.flag: o for o in MATRIX_OPTIONS}
    # how pytest-benchmark's parser of each flag reads its text (--benchmark-warmup-iterations: int)
    spelled = {"--benchmark-min-rounds": utils.parse_rounds, "--benchmark-max-time": utils.parse_seconds}
    for suite_flag, (flag, _, parse) in PYTEST_BENCHMARK_SPELLING.items():
        option, dest = parsers[suite_flag], flag[2:].replace("-", "_")    # pytest-benchmark's dest of its flag
        if flag not in given:
            setattr(config.option, option.dest, option.default)
            # the run JSON's "options" then record the suite's value, not pytest-benchmark's unused default
            text = pytest_argument(suite_flag, str(option.default))[1]
            setattr(config.option, dest, spelled.get(flag, int)(text))
            continue
        try:
            setattr(config.option, option.dest, parse(str(config.getoption(dest))))
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise pytest.UsageError(f"{flag} {config.getoption(dest)}: {exc}") from None
