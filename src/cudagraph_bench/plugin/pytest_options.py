"""Options of the pytest plugin (the shared matrix plus ``--with-compile`` and decode options) and what they set up
before collection: the ``--models`` check and the skip of GPU tests without CUDA."""

from __future__ import annotations

import argparse

import pytest

from cudagraph_bench.errors import UsageError
from cudagraph_bench.models.refusals import ModelChecks, all_refused_message, check_models
from cudagraph_bench.options import (DEFAULT_COMPILE_TIMEOUT_S, DEFAULT_DECODE_COMPILE_TUNING,
                                     DEFAULT_DECODE_PROMPT_LENGTHS, DEFAULT_DECODE_STEPS_PER_GRAPH, DEFAULT_NEW_TOKENS,
                                     MAX_TOKENS, Option, add_to_pytest, parse_count, parse_decode_compile_tuning,
                                     parse_dtypes, parse_prompt_lengths, parse_timeout_s, parse_token_counts)
from cudagraph_bench.plugin.benchmark_timing import apply_benchmark_options
from cudagraph_bench.plugin.params import case_of_item

GPU_SKIP_REASON = "needs a CUDA GPU: torch.cuda.is_available() is False on this machine"
#: Fewest measured requests of a decode benchmark (``--decode-rounds`` is the most).
MIN_DECODE_ROUNDS = 3


def _fault(text: str):
    from cudagraph_bench.selftest.faults import parse_fault

    try:
        return parse_fault(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


#: The plugin's own options that take a value, after ``--with-compile`` in ``--help``.
PLUGIN_OPTIONS = (
    Option("--new-tokens", "new_tokens", parse_token_counts, DEFAULT_NEW_TOKENS,
           f"decode benchmarks: new tokens per request, each at most {MAX_TOKENS} (the largest position "
           "limit of any preset) (default: 64,128)"),
    Option("--decode-prompt-lengths", "decode_prompt_lengths", parse_prompt_lengths, DEFAULT_DECODE_PROMPT_LENGTHS,
           "decode benchmarks: prompt lengths in tokens (default: 50); every causal model in --models gets decode "
           "benchmarks"),
    Option("--decode-dtypes", "decode_dtypes", parse_dtypes, ("bfloat16",),
           "decode benchmarks: dtypes (default: bfloat16)"),
    Option("--decode-rounds", "decode_rounds", parse_count, 8,
           f"decode benchmarks: at most this many measured requests per variant, at least {MIN_DECODE_ROUNDS} (or "
           "all N when N is smaller); --precision-pct decides in between (default: 8)"),
    Option("--decode-steps-per-graph", "decode_steps_per_graph", parse_count, DEFAULT_DECODE_STEPS_PER_GRAPH,
           f"graphed decode: decode steps captured in one graph, the remainder replayed by a 1-step graph (default: "
           f"{DEFAULT_DECODE_STEPS_PER_GRAPH})"),
    Option("--compile-timeout-s", "compile_timeout_s", parse_timeout_s, DEFAULT_COMPILE_TIMEOUT_S,
           "decode compile variants (compile+graph, generate-static-compile): seconds of compiling and warm-up before "
           f"the case is recorded as failed with that reason; 0: no limit (default: {DEFAULT_COMPILE_TIMEOUT_S:g})"),
    Option("--decode-compile-tuning", "decode_compile_tuning", parse_decode_compile_tuning,
           DEFAULT_DECODE_COMPILE_TUNING,
           "decode compile+graph: inductor settings the decode step is compiled under: coordinate-descent (gpt-fast's: "
           "GEMVs become tuned Triton reductions fused with their neighbours; a slower compile) or none (inductor's "
           f"defaults) (default: {DEFAULT_DECODE_COMPILE_TUNING})"),
    Option("--plant-fault", "plant_fault", _fault, None,
           "self-test only: plant a known fault: delay:PCT (the gated graph's replay PCT %% slower on the GPU), "
           "stale-input (no input copy before replay), wrong-decode (the graphed decode gives other tokens), "
           "stale-mask (padded and bucketed graphs keep their first mask), stale-position (the graphed decode keeps "
           "its position), eager-layer (the output layer runs eagerly after each replay) or skip-inductor-graphs "
           "(compile+graph runs without its graph), the last two caught only by --replay-proof; the run records it, "
           "baseline refuses it (cudagraph-bench selftest uses this)", "FAULT"),
)


def pytest_addoption(parser):
    group = parser.getgroup("cudagraph-bench", "cudagraph-bench: eager vs CUDA graph replay")
    add_to_pytest(group)
    group.addoption("--with-compile", action="store_true", default=False,
                    help="also benchmark the torch.compile variants (forward: compile, compile+graph; decode: "
                         "compile+graph, generate-static-compile); slow, off by default")
    add_to_pytest(group, PLUGIN_OPTIONS)
    group.addoption("--replay-proof", dest="replay_proof", action="store_true", default=False,
                    help="after the last test, build each timed graph case again and profile one call "
                         "(torch.profiler, CUPTI): its graph launches and kernels launched outside a graph go into its "
                         "extra_info.replay; a graph that ran eagerly fails its check and the session. After all "
                         "timing, since CUPTI stays attached and slows later replays; off by default: it builds each "
                         "graph case twice")


#: What the ``--models`` check found (:class:`cudagraph_bench.models.refusals.ModelChecks`), on the config.
MODEL_CHECKS = pytest.StashKey[ModelChecks]()


def model_checks(config):
    """What the ``--models`` check found (``refused`` entries, ``notes`` on the accepted); none before it ran."""
    return config.stash.get(MODEL_CHECKS, ModelChecks(()))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """pytest-benchmark's calibration options honoured or refused, then every ``--models`` entry checked before
    collection: ``--models`` becomes the accepted ones, refusals and notes are kept (summary, run JSON, non-zero exit).
    pytest.UsageError: every entry refused, or ``--attn-implementation`` not installed."""
    apply_benchmark_options(config)
    models = config.getoption("models", None) or ()
    try:
        checks = check_models(models, config.getoption("attn_implementation", None))
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    if models and not checks.accepted:
        raise pytest.UsageError(all_refused_message(checks.refused))
    config.option.models = checks.accepted
    config.stash[MODEL_CHECKS] = checks
    for note in checks.notes:
        config.issue_config_time_warning(pytest.PytestConfigWarning(note), stacklevel=2)


def pytest_collection_modifyitems(config, items):
    """GPU tests skip without CUDA; with ``--device cpu`` all but the benchmark cases of variants needing no GPU."""
    on_cpu = config.getoption("device", "cuda") == "cpu"
    if not on_cpu:
        import torch

        if torch.cuda.is_available():
            return
    skip = pytest.mark.skip(reason="--device cpu: this test needs the CUDA GPU" if on_cpu else GPU_SKIP_REASON)
    for item in items:
        case = case_of_item(item) if on_cpu else None
        if item.get_closest_marker("gpu") is not None and (case is None or case.variant_spec.needs_cuda):
            item.add_marker(skip)
