"""The benchmark matrix as plain test parameters (pytest-benchmark's ``params``, so ``--benchmark-group-by=param:model``
works), and the case fixtures built from them."""

from __future__ import annotations

import pytest

from cudagraph_bench import variants
from cudagraph_bench.cases import Case, DecodeCase
from cudagraph_bench.models.presets import kind_of

#: Prompt lengths (tokens) of the padding benchmarks, among ``--prompt-lengths``.
PAD_LENGTHS = (16, 50, 128, 512)
#: Parameter names of the forward, correctness, kernel-count and padding tests (pytest-benchmark's ``params``).
CASE_ARGNAMES = ("model", "dtype", "seq_len", "variant")
#: Parameter names of the decode benchmarks (``seq_len``: prompt tokens).
DECODE_ARGNAMES = ("model", "dtype", "seq_len", "new_tokens", "variant")


def selected_variants(config, suite: str) -> tuple[variants.Variant, ...]:
    """Forward: ``--variants`` (plus compiled with ``--with-compile``); decode: all but compiled unless
    ``--with-compile``; with ``--device cpu`` only those needing no CUDA GPU."""
    opt = config.getoption
    with_compile = opt("with_compile")
    if suite == variants.FORWARD:
        chosen = [variants.variant(suite, name) for name in opt("variants")]
        chosen += [v for v in variants.of_suite(suite) if with_compile and v.compiled and v not in chosen]
        chosen.sort(key=lambda v: variants.display_rank(suite, v.name))
    else:
        chosen = list(variants.of_suite(suite, compiled=with_compile))
    if opt("device") == "cpu":
        chosen = [v for v in chosen if not v.needs_cuda]
    return tuple(chosen)


def _parametrize_cases(metafunc, argnames, cases: list, empty_reason: str | None = None,
                       empty_id: str = "nothing-to-measure") -> None:
    """One parameter set per case, ids ``Case.test_id``; none: one set ``empty_id`` skipped with ``empty_reason``."""
    if not cases and empty_reason:
        metafunc.parametrize(argnames, [pytest.param(*(None,) * len(argnames), id=empty_id,
                                                     marks=pytest.mark.skip(reason=empty_reason))])
        return
    metafunc.parametrize(argnames, [tuple(getattr(c, name) for name in argnames) for c in cases],
                         ids=[c.test_id for c in cases])


def pytest_generate_tests(metafunc):
    """The matrix as parameters; a test with two case fixtures or its own is a duplicate error."""
    opt = metafunc.config.getoption
    models, lengths, dtypes = opt("models"), opt("prompt_lengths"), opt("dtypes")
    names = metafunc.fixturenames
    if "fwd_case" in names or "pad_case" in names:
        forward = selected_variants(metafunc.config, variants.FORWARD)
        if "fwd_case" in names:
            at_length = [v for v in forward if not v.lengths]
            cases = [Case(m, d, n, v.name) for m in models for d in dtypes for n in lengths for v in at_length]
            _parametrize_cases(metafunc, CASE_ARGNAMES, cases, _no_forward_variant_reason(metafunc.config))
        else:
            pad_lengths = [n for n in lengths if n in PAD_LENGTHS] or [n for n in lengths if n < opt("pad_to")]
            padding = [v for v in forward if v.lengths]
            cases = [Case(m, d, n, v.name) for m in models for d in dtypes for n in pad_lengths for v in padding]
            reason = (f"padding benchmarks: no padded or bucketed variant among the selected "
                      f"({','.join(v.name for v in forward) or 'none'})" if not padding else
                      f"padding benchmarks: no --prompt-lengths below --pad-to {opt('pad_to')}")
            _parametrize_cases(metafunc, CASE_ARGNAMES, cases, reason)
    for fixture, variant in (("corr_case", variants.GATED), ("count_case", variants.FORWARD_REFERENCE)):
        if fixture in names:
            _parametrize_cases(metafunc, CASE_ARGNAMES[:3],
                               [Case(m, d, n, variant) for m in models for d in dtypes for n in lengths])
    if "decode_case" in names:
        causal = causal_models(models)
        decode = selected_variants(metafunc.config, variants.DECODE)
        cases = [DecodeCase(m, d, n, k, v.name) for m in causal for d in opt("decode_dtypes")
                 for n in opt("decode_prompt_lengths") for k in opt("new_tokens") for v in decode]
        _parametrize_cases(metafunc, DECODE_ARGNAMES, cases, None if causal else _no_causal_reason(models),
                           "no-causal-model")
    if "causal_model" in names:
        causal = causal_models(models)
        skipped = pytest.param(None, id="no-causal-model", marks=pytest.mark.skip(reason=_no_causal_reason(models)))
        metafunc.parametrize("causal_model", causal or [skipped])


def _no_forward_variant_reason(config) -> str:
    chosen = ",".join(config.getoption("variants"))
    if config.getoption("device") == "cpu":
        cpu = ",".join(v.name for v in variants.of_suite(variants.FORWARD) if not v.needs_cuda)
        return (f"forward benchmarks: --device cpu runs only the variants that need no CUDA GPU ({cpu}), and "
                f"--variants {chosen} names none of them: add {cpu} to --variants, or run on a GPU")
    return (f"forward benchmarks: no variant of --variants {chosen} runs at the prompt's own length (padded and "
            "bucketed are the padding benchmarks'): add eager or graph to --variants")


def causal_models(models) -> list[str]:
    """The causal LMs among ``models`` (the ones with decode benchmarks)."""
    return [m for m in models if kind_of(m) == "causal"]


def _no_causal_reason(models) -> str:
    return (f"decode needs a causal LM: --models {','.join(models)} holds none (encoders such as bert-tiny have no "
            "decode)")


def case_of_item(item) -> Case | DecodeCase | None:
    """The case a collected test measures, or None for another kind of test."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    names = set(getattr(item, "fixturenames", ()))
    if "decode_case" in names and variants.find(variants.DECODE, params.get("variant")) is not None:
        return DecodeCase(*(params[a] for a in DECODE_ARGNAMES))
    if {"fwd_case", "pad_case"} & names and variants.find(variants.FORWARD, params.get("variant")) is not None:
        return Case(*(params[a] for a in CASE_ARGNAMES))
    return None


def forward_case(model, dtype, seq_len, variant) -> Case:
    """A forward benchmark's :class:`~cudagraph_bench.cases.Case` (``pad_case``: variant ``padded`` or ``bucketed``)."""
    return Case(model, dtype, seq_len, variant)


fwd_case = pytest.fixture(forward_case, name="fwd_case")
pad_case = pytest.fixture(forward_case, name="pad_case")


@pytest.fixture
def corr_case(model, dtype, seq_len) -> Case:
    """Variant ``graph``."""
    return Case(model, dtype, seq_len, variants.GATED)


@pytest.fixture
def count_case(model, dtype, seq_len) -> Case:
    """Variant ``eager``."""
    return Case(model, dtype, seq_len, variants.FORWARD_REFERENCE)


@pytest.fixture
def decode_case(model, dtype, seq_len, new_tokens, variant) -> DecodeCase:
    """A decode benchmark's :class:`~cudagraph_bench.cases.DecodeCase`."""
    return DecodeCase(model, dtype, seq_len, new_tokens, variant)
