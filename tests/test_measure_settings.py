"""The settings every case shares have one owner (:class:`~cudagraph_bench.measure.settings.MeasureSettings`):
their defaults are the options', and ``cudagraph-bench run`` hands the pytest session the flags that give a case
the same settings as a plain pytest run with those flags."""

import argparse
import dataclasses

import pytest

from cudagraph_bench.cases import Case
from cudagraph_bench.commands import run as runcmd
from cudagraph_bench.measure.case import CaseSpec
from cudagraph_bench.measure.settings import OPTION_FIELDS, MeasureSettings
from cudagraph_bench.options import MATRIX_OPTIONS, RUN_FLAGS, add_to_argparse, pytest_argument, show_default

#: A non-default value of every shared option (the test checks that each one differs from its default).
FLAGS = ("--rounds", "7", "--warmup-rounds", "2", "--precision-pct", "0.5", "--max-rounds", "50",
         "--max-time-ms", "40.5", "--warmup-ms", "3", "--min-time-ms", "1", "--compile-mode",
         "max-autotune-no-cudagraphs", "--pad-to", "64", "--buckets", "16,32", "--check-inputs", "2",
         "--attn-implementation", "eager", "--max-positions", "4096", "--device", "cpu")


def test_defaults_are_the_options_defaults():
    defaults = {o.dest: o.default for o in MATRIX_OPTIONS}
    assert set(OPTION_FIELDS) <= set(defaults)
    for cls, kw in ((MeasureSettings, {}), (CaseSpec, dict(model="gpt2", dtype="float32", seq_len=8, variant="eager"))):
        obj = cls(**kw)
        assert {name: getattr(obj, name) for name in OPTION_FIELDS} == {name: defaults[name] for name in OPTION_FIELDS}


def test_every_shared_setting_is_a_config_key_of_run_with_its_flags_parser():
    by_dest = {o.dest: o for o in MATRIX_OPTIONS}
    settable = [f.name for f in dataclasses.fields(MeasureSettings) if f.name != "seed"]
    assert set(settable) == set(OPTION_FIELDS) <= set(runcmd._PARSERS)
    assert all(runcmd._PARSERS[name] is by_dest[name].type for name in OPTION_FIELDS)


def pytest_options(argv) -> dict:
    """The shared options as the pytest plugin parses them (the same parsers, :func:`add_to_argparse`)."""
    parser = argparse.ArgumentParser()
    add_to_argparse(parser, MATRIX_OPTIONS)
    return vars(parser.parse_args(list(argv)))


def config_of(options: dict):
    """A stand-in of pytest's config with these options."""
    return argparse.Namespace(getoption=lambda name, default=None: options.get(name, default))


def test_run_gives_the_pytest_session_the_settings_of_its_flags():
    """The options ``cudagraph-bench run`` passes to its pytest processes (:class:`runner.matrix_processes.Matrix`)
    give a case the settings that the same flags give a plain pytest session, and the round policies agree."""
    from cudagraph_bench.cli import build_parser
    from cudagraph_bench.plugin import Session
    from cudagraph_bench.plugin.benchmark_timing import round_policy

    options = pytest_options(FLAGS)
    defaults = MeasureSettings()
    assert all(options[name] != getattr(defaults, name) for name in OPTION_FIELDS)   # every flag is tested
    case = Case("gpt2", "float32", 16, "eager")
    session = Session(config_of(options))
    from_session = session.case_spec(case)
    pairs = list(zip(FLAGS[::2], FLAGS[1::2]))
    before = [t for flag, text in pairs if flag in RUN_FLAGS for t in (flag, text)]
    after = [t for flag, text in pairs if flag not in RUN_FLAGS for t in pytest_argument(flag, text)]
    (matrix,) = runcmd.matrices(build_parser().parse_args(["run", "--variants", "eager", *before, "--", *after]))
    flags = {o.dest: o.flag for o in MATRIX_OPTIONS}
    passed = [text for dest, v in matrix.values for text in (flags[dest], show_default(v))]
    from_run = Session(config_of(pytest_options(passed))).case_spec(case)
    assert from_run == from_session
    assert from_session.round_policy() == round_policy(session.option) == from_run.round_policy()
    assert round_policy(session.option, rounds=3, warmup=0).rounds == 3
    assert round_policy(session.option, rounds=3, warmup=0) == from_session.round_policy(rounds=3, warmup_rounds=0)


def test_case_spec_positional_fields_and_keyword_only_settings():
    spec = CaseSpec("gpt2", "float32", 8, "graph", device="cpu")
    assert (spec.model, spec.dtype, spec.seq_len, spec.variant, spec.device) == ("gpt2", "float32", 8, "graph", "cpu")
    with pytest.raises(TypeError):
        CaseSpec("gpt2", "float32", 8, "graph", 5)   # a 5th positional was once ``rounds``: never silently another
