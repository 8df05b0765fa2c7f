"""The variant registry (:mod:`cudagraph_bench.variants`): a consistent table, every variant of it a parametrized
case of the suite, the plugin's selection (``--variants``, ``--with-compile``, ``--device cpu``) read from it, and
no module outside it that compares a variant's name with a string."""

import argparse
import importlib
import re
from pathlib import Path

import pytest

from cudagraph_bench import variants
from cudagraph_bench.options import MATRIX_OPTIONS, parse_variants
from cudagraph_bench.plugin.params import selected_variants
from in_process import collect_perf_tests

#: The module-scoped sessions are made once: all tests of this module in one pytest-xdist worker
#: (make test runs --dist loadgroup).
pytestmark = pytest.mark.xdist_group("registry-collection")
SRC = Path(__file__).resolve().parents[1] / "src" / "cudagraph_bench"


def test_every_suite_has_one_reference_and_every_check_has_a_reference_of_its_suite():
    for suite in variants.SUITES:
        rows = variants.of_suite(suite)
        assert len({v.name for v in rows}) == len(rows), suite
        assert [v.name for v in rows if v.is_reference] == [variants.reference_of(suite).name]
        for v in rows:
            assert (v.reference is None) == (v.rule is variants.Rule.REFERENCE), v
            if v.reference is not None:
                assert variants.find(suite, v.reference) is not None, v
            assert v.lengths in (None, "pad_to", "buckets"), v
            assert not v.compiled or v.isolated, f"{v}: a torch.compile variant runs in a process of its own"
    assert [v.key for v in variants.VARIANTS if v.gated] == [(variants.FORWARD, variants.GATED)]
    assert variants.exact_reference(variants.DECODE).name == "static-eager"
    assert variants.exact_reference(variants.FORWARD).name == variants.FORWARD_REFERENCE


def test_every_builder_is_importable():
    for v in variants.VARIANTS:
        module, _, name = v.builder.partition(":")
        assert v.build_callable() is getattr(importlib.import_module(module), name), v
        assert callable(v.build_callable()), v


def test_lookups_name_the_known_variants():
    with pytest.raises(KeyError, match="unknown forward variant 'graphs': use one of eager, graph"):
        variants.variant(variants.FORWARD, "graphs")
    assert variants.find(variants.DECODE, "padded") is None and variants.find(variants.DECODE, None) is None
    ranks = [variants.table_rank(variants.DECODE, n) for n in variants.DECODE_NAMES]
    peer = next(v.name for v in variants.of_suite(variants.DECODE) if v.peer)
    assert variants.table_rank(variants.DECODE, "generate") == 0 and variants.table_rank(variants.DECODE, peer) == 1
    assert len(set(ranks)) == len(ranks) and variants.table_rank(variants.DECODE, "unknown") > max(ranks)
    assert variants.PADDING_NAMES == tuple(v.name for v in variants.of_suite(variants.FORWARD) if v.lengths)


def test_the_device_option_names_the_variants_that_need_no_gpu():
    """``--device cpu``'s help (pytest and ``run``) says what runs without a GPU: the registry's rows."""
    (device,) = [o for o in MATRIX_OPTIONS if o.dest == "device"]
    cpu = [v for v in variants.VARIANTS if not v.needs_cuda]
    assert cpu and all(v.name in device.help for v in cpu)
    assert all(not v.captured and not v.compiled for v in cpu)


@pytest.fixture(scope="module")
def collected():
    """The perf tests with every variant selected (``--with-compile``)."""
    return collect_perf_tests("--models", "gpt2", "--prompt-lengths", "16", "--dtypes", "fp32", "--new-tokens",
                              "8", "--with-compile")


def params_of(collected, module, test):
    return [i["params"] for i in collected if i["nodeid"].startswith(f"perf_tests/{module}::{test}[")]


def test_every_variant_of_the_registry_is_a_parametrized_case(collected):
    forward = {p["variant"] for p in params_of(collected, "test_forward_bench.py", "test_forward")}
    padding = {p["variant"] for p in params_of(collected, "test_padding_bench.py", "test_padded_and_bucketed")}
    decode = {p["variant"] for p in params_of(collected, "test_decode_bench.py", "test_decode")}
    launch = {p["variant"] for p in params_of(collected, "test_launch.py", "test_launch_overhead")}
    assert forward | padding == set(variants.FORWARD_NAMES)
    assert padding == set(variants.PADDING_NAMES) and not forward & padding
    assert decode == set(variants.DECODE_NAMES)
    assert launch == set(variants.LAUNCH_NAMES)


def options(**given):
    """pytest's ``config.getoption`` over the options' defaults, ``given`` replacing some."""
    values = {"variants": parse_variants("eager,graph"), "with_compile": False, "device": "cuda", **given}
    return argparse.Namespace(getoption=lambda name, default=None: values.get(name, default))


def names(config, suite):
    return [v.name for v in selected_variants(config, suite)]


def test_selected_variants_follow_variants_with_compile_and_device():
    assert names(options(), variants.FORWARD) == ["eager", "graph"]
    # in the registry's display order, whatever order --variants gives
    assert names(options(variants=parse_variants("bucketed,eager")), variants.FORWARD) == ["eager", "bucketed"]
    compiled = [v.name for v in variants.of_suite(variants.FORWARD) if v.compiled]
    assert names(options(with_compile=True), variants.FORWARD) == ["eager", "graph", *compiled]
    assert names(options(variants=parse_variants("compile")), variants.FORWARD) == ["compile"]   # named: measured
    assert names(options(), variants.DECODE) == list(variants.names(variants.DECODE, compiled=False))
    assert names(options(with_compile=True), variants.DECODE) == list(variants.DECODE_NAMES)
    on_cpu = options(device="cpu", with_compile=True, variants=parse_variants(",".join(variants.FORWARD_NAMES)))
    assert names(on_cpu, variants.FORWARD) == [v.name for v in variants.of_suite(variants.FORWARD) if not v.needs_cuda]
    assert names(on_cpu, variants.DECODE) == [v.name for v in variants.of_suite(variants.DECODE) if not v.needs_cuda]


#: A variant's name compared with a string literal: ``== "graph"``, ``"eager" !=``, ``in ("eager", ...``.
_NAME = "|".join(re.escape(n) for n in sorted({v.name for v in variants.VARIANTS}, key=len, reverse=True))
NAME_COMPARED = re.compile(rf"""(?:==|!=)\s*(['"])(?:{_NAME})\1|(['"])(?:{_NAME})\2\s*(?:==|!=)"""
                           rf"""|\bin\s*[(\[{{]\s*(['"])(?:{_NAME})\3""")


def test_the_scan_finds_the_comparisons_it_is_for():
    found = [line for line in ('if variant == "graph":', "x = v != 'eager'", 'if "bucketed" == name:',
                               'if case.variant in ("eager", "graph"):', "for n in ['compile+graph']:",
                               'elif name not in {"static-eager"}:')
             if NAME_COMPARED.search(line)]
    assert len(found) == 6
    assert not [line for line in ('if suite == "forward":', 'rows["graph"]', 'variants.GATED == name',
                                  'note = "graph of 16 tokens"') if NAME_COMPARED.search(line)]


def test_no_module_outside_the_registry_compares_a_variant_name_with_a_string():
    hits = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "variants.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if NAME_COMPARED.search(code):
                hits.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    assert hits == [], "compare with the registry's fields or names (cudagraph_bench.variants) instead:\n" + \
        "\n".join(hits)
