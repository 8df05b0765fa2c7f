"""Benchmarks: greedy decode, batch 1, for every causal model in ``--models``: prompts of
``--decode-prompt-lengths`` tokens (default 50), ``--new-tokens`` new tokens (default 64 and 128).

Variants: ``generate`` (HF generate, default dynamic cache), ``static-eager`` (static KV cache, eager
loop), ``graph`` (static KV cache, every decode step a graph replay). Each round is one whole request
(prefill + decode); extra_info has ms_per_token and tokens_per_s from the median, and the bytes one token
reads (``weight_bytes``, ``kv_bytes_per_token``, ``bytes_per_token``, ``context_tokens``:
:func:`~cudagraph_bench.measure.roofline.request_bytes_per_token`) for the decode roofline. Checks:
``graph`` must give the tokens of ``static-eager`` (same kernels, same cache: ``correct``,
``check="tokens == static-eager"``); both record the comparison with HF ``generate``
(:func:`~cudagraph_bench.measure.correctness.check_decode_against_generate`: tokens identical, or a rounding tie,
with each step's logits as close to a float64 run as ``generate``'s): ``matches_generate`` (tokens
identical), ``generate_check_passed``, ``generate_check`` (the sentence) and
``distinct_reference_tokens``. A model that cannot be graphed is skipped
with the reason; a capture that fails fails its case only.
"""

import pytest

from cudagraph_bench.plugin import MIN_DECODE_ROUNDS, benchmark_call, decode_cache_len, round_policy

pytestmark = pytest.mark.gpu


def test_decode(benchmark, cgb, decode_case):
    import torch

    from cudagraph_bench.measure.correctness import check_decode_against_generate
    from cudagraph_bench.capture.decode import GreedyDecoder
    from cudagraph_bench.errors import NotGraphableError
    from cudagraph_bench.measure.roofline import request_bytes_per_token
    from cudagraph_bench.models.presets import experts_implementation, max_positions

    model_name, dtype, prompt_len, new_tokens, variant = decode_case
    cgb.skip_if_too_long(model_name, prompt_len + new_tokens)
    model = cgb.model(model_name, dtype)
    (ids,) = cgb.inputs(model, prompt_len, n=1, seed=11)
    reference, reference_logits = cgb.generate_tokens(model_name, dtype, ids, new_tokens)   # [1, new_tokens]
    decoder = None
    if variant == "generate":
        mask = torch.ones_like(ids)

        def request():
            return model.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=new_tokens,
                                  eos_token_id=None, pad_token_id=0)
    else:
        cache_len = decode_cache_len(prompt_len, cgb.option("new_tokens"), max_positions(model))
        try:
            decoder = GreedyDecoder(model, cache_len, use_graph=(variant == "graph"))
        except NotGraphableError as exc:
            pytest.skip(f"{model_name} cannot be graphed: {exc}")

        def request():
            return decoder.generate(ids, new_tokens)
    try:
        info = {"suite": "decode", "model": model_name, "dtype": dtype, "seq_len": prompt_len,
                "new_tokens": new_tokens, "variant": variant, "batch": 1}
        if experts_implementation(model) is not None:
            info["experts_implementation"] = experts_implementation(model)
        info.update(request_bytes_per_token(model, prompt_len, new_tokens))   # the decode roofline's bytes
        if decoder is not None:
            tokens, logits = decoder.generate(ids, new_tokens, return_logits=True)
            vs_generate = check_decode_against_generate(tokens, logits, reference, reference_logits,
                                                        cgb.fp64_decode_logits(model_name, dtype, ids, reference),
                                                        dtype)
            info.update(matches_generate=vs_generate.identical, generate_check_passed=vs_generate.passed,
                        generate_check=vs_generate.summary,
                        distinct_reference_tokens=vs_generate.distinct_reference_tokens,
                        max_cache_len=decoder.max_cache_len)
            if variant == "graph":
                eager = GreedyDecoder(model, decoder.max_cache_len, use_graph=False)
                same = bool(torch.equal(tokens, eager.generate(ids, new_tokens)))
                eager.close()
                info.update(correct=same, check="tokens == static-eager")
                if not same:
                    info.update(status="mismatch", reason="graphed decode tokens differ from the eager static-cache "
                                                          "loop's")
        benchmark_call(benchmark, cgb, request, group=f"decode {model_name} {dtype} L={prompt_len} new={new_tokens}",
                       extra_info=info, policy=round_policy(cgb, rounds=min(MIN_DECODE_ROUNDS, cgb.option("decode_rounds")),
                                                            warmup=1, max_rounds=cgb.option("decode_rounds")))
        median_ms = benchmark.stats.stats.median * 1e3
        benchmark.extra_info["ms_per_token"] = median_ms / new_tokens
        benchmark.extra_info["tokens_per_s"] = new_tokens / (median_ms / 1e3)
    finally:
        if decoder is not None:
            decoder.close()
        cgb.release()
