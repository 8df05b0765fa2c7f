"""Benchmarks: greedy decode of a 50-token prompt, 64 and 128 new tokens, batch 1.

Variants: ``generate`` (HF generate, default dynamic cache), ``static-eager`` (StaticCache, eager
loop), ``graph`` (StaticCache, every decode step a graph replay). Each round is one whole request
(prefill + decode); extra_info has ms_per_token and tokens_per_s from the median.
"""

import pytest

from cudagraph_bench.plugin import DECODE_PROMPT_LEN, benchmark_call

pytestmark = pytest.mark.gpu


def test_decode(benchmark, cgb, decode_case):
    import torch

    from cudagraph_bench.decode import GreedyDecoder

    model_name, dtype, new_tokens, variant = decode_case
    model = cgb.model(model_name, dtype)
    (ids,) = cgb.inputs(model, DECODE_PROMPT_LEN, n=1, seed=11)
    decoder = None
    if variant == "generate":
        mask = torch.ones_like(ids)

        def request():
            return model.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=new_tokens,
                                  eos_token_id=None, pad_token_id=0)
    else:
        decoder = GreedyDecoder(model, 256, use_graph=(variant == "graph"))

        def request():
            return decoder.generate(ids, new_tokens)
    try:
        info = {"suite": "decode", "model": model_name, "dtype": dtype, "seq_len": DECODE_PROMPT_LEN,
                "new_tokens": new_tokens, "variant": variant, "batch": 1}
        benchmark_call(benchmark, cgb, request, group=f"decode {model_name} {dtype} new={new_tokens}",
                       extra_info=info, rounds=cgb.option("decode_rounds"), warmup=1)
        median_ms = benchmark.stats.stats.median * 1e3
        benchmark.extra_info["ms_per_token"] = median_ms / new_tokens
        benchmark.extra_info["tokens_per_s"] = new_tokens / (median_ms / 1e3)
    finally:
        if decoder is not None:
            decoder.close()
        cgb.release()
