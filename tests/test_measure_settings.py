"""The settings every case shares have one owner (:class:`~cudagraph_bench.measure.settings.MeasureSettings`):
their defaults are the options', the pytest session and ``cudagraph-bench run`` give a case the same ones from
the same flags, and the JSON of a case (worker protocol) and of a run's settings (run.json) keep their layout,
checked against the committed runs."""

import argparse
import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from cudagraph_bench.cases import Case
from cudagraph_bench.commands import run as runcmd
from cudagraph_bench.measure.case import CaseSpec
from cudagraph_bench.measure.plan import Matrix, RunSettings, plan_cases
from cudagraph_bench.measure.settings import OPTION_FIELDS, MeasureSettings
from cudagraph_bench.options import MATRIX_OPTIONS, add_to_argparse

RESULTS = Path(__file__).resolve().parents[1] / "results"
#: A non-default value of every shared option (the test checks that each one differs from its default).
FLAGS = ("--rounds", "7", "--warmup-rounds", "2", "--precision-pct", "0.5", "--max-rounds", "50",
         "--max-time-ms", "40.5", "--warmup-ms", "3", "--min-time-ms", "1", "--compile-mode",
         "max-autotune-no-cudagraphs", "--pad-to", "64", "--buckets", "16,32", "--check-inputs", "2",
         "--attn-implementation", "eager", "--max-positions", "4096")


def committed_run_settings() -> list[tuple[Path, dict]]:
    """The ``settings`` of every committed run that ``cudagraph-bench run`` wrote (committed as ``.json.gz``)."""
    out = []
    for path in sorted(RESULTS.rglob("*.json.gz")):
        doc = json.loads(gzip.decompress(path.read_bytes()))
        info = doc.get("cudagraph_bench") if isinstance(doc, dict) else None
        if isinstance(info, dict) and info.get("tool") == "cudagraph-bench run":
            out.append((path, info["settings"]))
    return out


def test_defaults_are_the_options_defaults():
    defaults = {o.dest: o.default for o in MATRIX_OPTIONS}
    assert set(OPTION_FIELDS) <= set(defaults)
    for cls, kw in ((MeasureSettings, {}), (CaseSpec, dict(model="gpt2", dtype="float32", seq_len=8, variant="eager")),
                    (RunSettings, dict(matrices=[]))):
        obj = cls(**kw)
        assert {name: getattr(obj, name) for name in OPTION_FIELDS} == {name: defaults[name] for name in OPTION_FIELDS}


def test_every_shared_setting_is_a_config_key_of_run_with_its_flags_parser():
    by_dest = {o.dest: o for o in MATRIX_OPTIONS}
    settable = [f.name for f in dataclasses.fields(MeasureSettings) if f.name not in ("device", "overrides")]
    assert set(settable) <= set(runcmd.SETTING_KEYS)
    assert all(runcmd.SETTING_PARSERS[name] is by_dest[name].type for name in OPTION_FIELDS)


def test_pytest_session_and_run_give_a_case_the_same_settings_from_the_same_flags():
    from cudagraph_bench.session import Session, round_policy

    parser = argparse.ArgumentParser()
    add_to_argparse(parser, MATRIX_OPTIONS)
    options = vars(parser.parse_args(FLAGS)) | {"check_data_ptrs": False}
    defaults = MeasureSettings()
    assert all(options[name] != getattr(defaults, name) for name in OPTION_FIELDS)   # every flag is tested

    config = argparse.Namespace(getoption=options.__getitem__)
    session = Session(config)
    from_session = session.case_spec(Case("gpt2", "float32", 16, "graph"))
    run_settings = runcmd.merge_settings(runcmd_args("--prompt-lengths", "16", "--variants", "graph", *FLAGS))
    [(_, [from_run], _)] = plan_cases(run_settings).groups
    assert from_run == from_session
    assert from_session.round_policy() == round_policy(session) == run_settings.round_policy()
    assert round_policy(session, rounds=3, warmup=0).rounds == 3
    assert round_policy(session, rounds=3, warmup=0) == from_session.round_policy(rounds=3, warmup_rounds=0)


def runcmd_args(*argv):
    from cudagraph_bench.cli import build_parser

    return build_parser().parse_args(["run", *argv])


def test_plan_gives_every_case_all_the_runs_shared_settings():
    run_settings = RunSettings([Matrix(("gpt2",), (16, 50), ("float32",), ("eager", "graph"))], rounds=9,
                               warmup_rounds=0, precision_pct=0.0, max_rounds=9, max_time_ms=0.0, warmup_ms=0.0,
                               min_time_ms=2.0, compile_mode="max-autotune-no-cudagraphs", pad_to=50,
                               buckets=[16, 64], check_inputs=1, seed=5, device="cpu", overrides={"n_layer": 1},
                               attn_implementation="eager", max_positions=4096)
    assert all(value != getattr(MeasureSettings(), name) for name, value in run_settings.shared_fields().items())
    specs = [spec for _, inproc, iso in plan_cases(run_settings).groups for spec in [*inproc, *(x for q in iso.values() for x in q)]]
    assert len(specs) == 4
    assert all(spec.shared_fields() == run_settings.shared_fields() for spec in specs)
    assert run_settings.buckets == (16, 64)   # a list given: a tuple kept, as the parsers give it


def test_case_spec_positional_fields_and_keyword_only_settings():
    spec = CaseSpec("gpt2", "float32", 8, "graph", device="cpu")
    assert (spec.model, spec.dtype, spec.seq_len, spec.variant, spec.device) == ("gpt2", "float32", 8, "graph", "cpu")
    with pytest.raises(TypeError):
        CaseSpec("gpt2", "float32", 8, "graph", 5)   # a 5th positional was once ``rounds``: never silently another


def test_case_spec_dict_keeps_its_layout_and_reads_a_dict_from_before_a_setting():
    spec = CaseSpec("gpt2", "float32", 8, "graph", rounds=3, buckets=(16,), overrides={"n_layer": 1})
    d = spec.to_dict()
    assert list(d)[:4] == ["model", "dtype", "seq_len", "variant"]
    assert set(d) == {f.name for f in dataclasses.fields(CaseSpec)}
    assert d["buckets"] == [16]
    d["overrides"]["n_layer"] = 2   # the dict is a copy
    assert spec.overrides == {"n_layer": 1}
    older = {k: v for k, v in spec.to_dict().items() if k != "max_time_ms"} | {"no_longer_a_field": 1}
    assert CaseSpec.from_dict(older) == dataclasses.replace(spec, max_time_ms=MeasureSettings().max_time_ms)


@pytest.mark.parametrize("committed", [pytest.param(settings, id=str(path.relative_to(RESULTS)))
                                       for path, settings in committed_run_settings()])
def test_run_settings_json_has_the_committed_layout(committed):
    """Rebuilt from a committed run's settings, as_dict() writes the same JSON text for the keys that run had,
    in the same order (later settings add keys, never move one)."""
    own = {k: v for k, v in committed.items() if k != "matrices"}
    settings = RunSettings([Matrix(**{k: tuple(v) for k, v in m.items()}) for m in committed["matrices"]], **own)
    written = {k: v for k, v in settings.as_dict().items() if k in committed}
    assert json.dumps(written, indent=1) == json.dumps(committed, indent=1)
    assert set(settings.as_dict()) == {f.name for f in dataclasses.fields(RunSettings)} - {"outdir", "extra"}


def test_committed_runs_exist_for_the_layout_check():
    assert len(committed_run_settings()) >= 2
