"""The variant registry (:mod:`cudagraph_bench.variants`): a consistent table whose builders import, every variant
of it a parametrized case of the suite, the plugin's selection (``--variants``, ``--with-compile``, ``--device cpu``)
read from it, and no module outside it that names a variant with a string literal."""

import argparse
import ast
import importlib
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


#: Every name of the registry.
NAMES = {v.name for v in variants.VARIANTS}
#: What the registry's docstring and docs/architecture.md state, and the scan below checks.
CLAIM = "no other module names a variant with a string literal"
ARCHITECTURE = SRC.parents[1] / "docs" / "architecture.md"
_CONTAINERS = (ast.Tuple, ast.List, ast.Set, ast.Starred)


def _holds_variant(text: str) -> bool:
    """Whether code (an expression, a parameter or keyword) holds a variant's name: ``variant``, ``case.variant``,
    ``info["variant"]``, ``kind.name``, ``reference_name``; ``attn_implementation`` or ``mode`` do not."""
    text = text.lower()
    return "variant" in text or "reference" in text or text == "name" or text.endswith(".name")


def _used_as_variant(inner, outer) -> bool:
    """Whether ``inner`` (a literal, or the tuple/list/set holding it) is used as a variant by ``outer``."""
    if isinstance(outer, ast.Compare):
        return any(_holds_variant(ast.unparse(o)) for o in (outer.left, *outer.comparators) if o is not inner)
    if isinstance(outer, ast.Dict):
        return inner in outer.keys
    if isinstance(outer, ast.Subscript):
        return inner is outer.slice and _holds_variant(ast.unparse(outer.value))
    if isinstance(outer, ast.keyword):
        return _holds_variant(outer.arg or "")
    if isinstance(outer, ast.arguments):
        params = [*zip(reversed([*outer.posonlyargs, *outer.args]), reversed(outer.defaults)),
                  *zip(outer.kwonlyargs, outer.kw_defaults)]
        return any(default is inner and _holds_variant(p.arg) for p, default in params)
    if isinstance(outer, (ast.Assign, ast.AnnAssign)):
        targets = outer.targets if isinstance(outer, ast.Assign) else [outer.target]
        return any(_holds_variant(ast.unparse(t)) for t in targets)
    if isinstance(outer, (ast.For, ast.comprehension)):
        return _holds_variant(ast.unparse(outer.target))
    return isinstance(outer, ast.Call) and ast.unparse(outer.func).endswith("Case")    # Case(model, ..., variant)


def variant_literals(source: str) -> list[int]:
    """The lines of ``source`` where a string literal of registry variant names (``"graph"``, ``"eager,graph"``)
    is used as a variant: compared with a variant, a dict key, an index of a variant table, a variant parameter's
    default, keyword or assignment, a loop over variants, a ``Case``'s variant or a ``--variants`` argument."""
    tree = ast.parse(source)
    parent = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    lines = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value
                and set(node.value.split(",")) <= NAMES):
            continue
        inner, outer = node, parent.get(node)
        before = [None, *getattr(outer, "elts", [])]
        after_option = node in before and getattr(before[before.index(node) - 1], "value", None) == "--variants"
        while isinstance(outer, _CONTAINERS):
            inner, outer = outer, parent.get(outer)
        if after_option or _used_as_variant(inner, outer):
            lines.add(node.lineno)
    return sorted(lines)


def test_the_scan_finds_the_literals_it_is_for():
    found = ['if variant == "graph": pass', "x = kind.name != 'eager'", 'if "bucketed" == name: pass',
             'if case.variant in ("eager", "graph"): pass', "for variant in ['compile+graph']: pass",
             'if name not in {"static-eager"}: pass', 'COLORS = {"eager": "gray"}', 'c = VARIANT_COLORS["graph"]',
             'def f(variant="loop"): pass', 'def f(*, reference_name: str = "generate"): pass',
             'check(reference_name="static-eager")', 'case = Case(m, d, n, "graph")',
             'args = ("--variants", "eager,graph", "--models")', 'class V:\n    name = "compile"']
    assert [line for line in found if not variant_literals(line)] == []
    assert [line for line in ('if suite == "forward": pass', 'rows["graph"]', 'variants.GATED == name',
                              'note = "graph of 16 tokens"', 'if attn_implementation == "eager": pass',
                              'ATTN = ("eager", "sdpa")', 'model.set_experts_implementation("eager")',
                              'torch.compile(fn, backend="eager")', 'for prefill in ("unpadded", "bucketed"): pass',
                              'info["compile+graph"] = 1', '"""A docstring names ``graph``."""')
            if variant_literals(line)] == []


def test_no_module_outside_the_registry_names_a_variant_with_a_string_literal():
    """The claim of the registry's docstring and of docs/architecture.md, checked over the package's source."""
    for text in (variants.__doc__, ARCHITECTURE.read_text(encoding="utf-8")):
        assert CLAIM in " ".join(text.lower().split())
    hits = []
    for path in sorted(SRC.rglob("*.py")):
        if path != SRC / "variants.py":
            text = path.read_text(encoding="utf-8")
            lines = text.split("\n")
            hits += [f"{path.relative_to(SRC)}:{n}: {lines[n - 1].strip()}" for n in variant_literals(text)]
    assert hits == [], "use the registry's fields, lookups or names (cudagraph_bench.variants) instead:\n" + \
        "\n".join(hits)
