"""Benchmarks: greedy decode, batch 1, for every causal model in ``--models``: prompts of
``--decode-prompt-lengths`` tokens (default 50), ``--new-tokens`` new tokens (default 64 and 128).

Variants: ``generate`` (HF generate, default dynamic cache), ``static-eager`` (static KV cache, eager
loop), ``graph`` (static KV cache, the decode steps replayed as graphs, ``--decode-steps-per-graph`` steps
per graph) and, with ``--with-compile``, ``compile+graph`` (the decode step compiled by inductor,
``--compile-mode`` under the inductor settings of ``--decode-compile-tuning``, by default gpt-fast's coordinate-descent
tuning, and captured like ``graph``, its prefill a graph of the prompt right-padded to the smallest of
``--buckets`` that holds it; ``compile_ms``, ``capture_ms``, ``compile_tuning``, ``inductor_options``,
``prefill_bucket``) and
``generate-static-compile`` (HF generate with a static cache and ``torch.compile(model.forward,
mode="reduce-overhead", fullgraph=True)``, :mod:`cudagraph_bench.measure.static_generate`); a compile variant
that compiles and warms up for longer than ``--compile-timeout-s`` (recorded as ``compile_timeout_s``) fails
with that reason. Each round is one whole request (prefill + decode); extra_info has ms_per_token and tokens_per_s from the median, and the bytes
one token reads (``weight_bytes``, ``kv_bytes_per_token``, ``bytes_per_token``, ``context_tokens``:
:func:`~cudagraph_bench.measure.roofline.request_bytes_per_token`) for the decode roofline. Requests per
variant: at least 3, at most ``--decode-rounds``, the precision target deciding in between.

Checks: every decoder but ``generate`` records the comparison with HF ``generate``
(:func:`~cudagraph_bench.measure.correctness.check_decode_against_generate`: tokens identical, or a rounding
tie, with each step's logits as close to a float64 run as ``generate``'s): ``matches_generate`` (tokens
identical), ``generate_check_passed``, ``generate_check`` (the sentence) and ``distinct_reference_tokens``.
``graph`` must give the tokens of ``static-eager`` exactly (same kernels, same cache: ``correct``,
``check="tokens == static-eager"``); ``compile+graph`` runs other kernels, so it is judged against
``static-eager`` by the rule of the generate check (``matches_static_eager``, ``static_eager_check_passed``,
``static_eager_check``; ``correct``). A model that cannot be graphed is skipped with the reason; a capture
that fails fails its case only. A compile variant that raises is listed with its reason under
``["cudagraph_bench"]["failures"]`` of the JSON , so
the report shows the row as failed: ``compile+graph`` then fails its test (a bug of the suite), the peer
``generate-static-compile`` is an xfail (a known failure of the documented HF path on some set-ups, e.g.
"accessing tensor output of CUDAGraphs that has been overwritten", which must not hide the other results).
A check that fails is recorded with the timing and then fails the test. The pipeline is
:mod:`cudagraph_bench.measure.decode_case`, run by :meth:`cudagraph_bench.plugin.Session.measure` like every
forward case.
"""

import pytest

pytestmark = pytest.mark.gpu


def test_decode(benchmark, cgb, decode_case, request):
    cgb.measure(benchmark, decode_case, request)
