"""Correctness of greedy decode with a static KV cache (GPU): graphed decode vs HF generate, and the
failure kinds practitioners have reported for graphed decode."""

import pytest

pytestmark = pytest.mark.gpu

PROMPT = 50


def _generate_ref(model, ids, new_tokens):
    import torch

    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=new_tokens, eos_token_id=None, pad_token_id=0)
    return out[:, ids.shape[1]:]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("model_name", ["gpt2", "tinyllama-1.1b"])
def test_graphed_decode_equals_generate(cgb, model_name, dtype):
    import torch

    from cudagraph_bench.decode import GreedyDecoder

    model = cgb.model(model_name, dtype)
    (ids,) = cgb.inputs(model, PROMPT, n=1, seed=7)
    ref = _generate_ref(model, ids, 48)
    assert len(set(ref[0].tolist())) >= 2, "reference generation is constant: the comparison would prove little"
    graphed = GreedyDecoder(model, 128, use_graph=True)
    eager = GreedyDecoder(model, 128, use_graph=False)
    try:
        got = graphed.generate(ids, 48)
        got_again = graphed.generate(ids, 48)        # the graph is reused across requests
        got_eager = eager.generate(ids, 48)
        torch.cuda.synchronize()
        print(f"{model_name} {dtype}: generate {ref[0, :12].tolist()}...")
        assert torch.equal(got, ref), f"graphed {got[0].tolist()} != generate {ref[0].tolist()}"
        assert torch.equal(got_again, ref)
        assert torch.equal(got_eager, ref)
    finally:
        graphed.close()
        eager.close()
        cgb.release()


def test_tokens_do_not_depend_on_cache_length(cgb):
    from cudagraph_bench.decode import GreedyDecoder

    model = cgb.model("gpt2", "float32")
    (ids,) = cgb.inputs(model, 16, n=1, seed=3)
    runs = {}
    for max_cache_len in (32, 64, 128, 256):
        decoder = GreedyDecoder(model, max_cache_len)
        try:
            runs[max_cache_len] = decoder.generate(ids, max_cache_len - 16)[0].tolist()
        finally:
            decoder.close()
    cgb.release()
    common = min(len(v) for v in runs.values())
    assert common == 16
    prefixes = {k: v[:common] for k, v in runs.items()}
    assert all(p == prefixes[32] for p in prefixes.values()), prefixes
    longest = runs[256]
    assert runs[128] == longest[:112] and runs[64] == longest[:48]


def test_padded_prompt_gives_same_tokens(cgb):
    """Bucketed prefill (prompt right-padded to the bucket, with its mask) gives the tokens of the
    unpadded prompt, also right at bucket edges."""
    import torch

    from cudagraph_bench.decode import GreedyDecoder

    model = cgb.model("gpt2", "float32")
    padded = GreedyDecoder(model, 160, prefill_buckets=(16, 32, 64))
    try:
        for length in (15, 16, 17, 33):
            (ids,) = cgb.inputs(model, length, n=1, seed=length)
            ref = _generate_ref(model, ids, 32)
            assert torch.equal(padded.generate(ids, 32), ref), f"prompt of {length} tokens"
    finally:
        padded.close()
        cgb.release()


def test_memory_flat_after_buckets_and_512_decode_steps(cgb, record_property):
    import torch

    from cudagraph_bench.buckets import BucketedGraphs
    from cudagraph_bench.decode import GreedyDecoder

    model = cgb.model("gpt2", "float32")
    start = cgb.ledger.reserved_mib()
    buckets = BucketedGraphs(model, cgb.option("buckets"))
    after_buckets = cgb.ledger.reserved_mib()
    decoder = GreedyDecoder(model, 1024)
    try:
        (ids,) = cgb.inputs(model, 16, n=1)
        decoder.generate(ids, 512)
        torch.cuda.synchronize()
        after_first = cgb.ledger.reserved_mib()
        for _ in range(2):
            out = decoder.generate(ids, 512)
        buckets(ids)
        torch.cuda.synchronize()
        after_more = cgb.ledger.reserved_mib()
        assert out.shape == (1, 512)
    finally:
        decoder.close()
        buckets.close()
        cgb.release()
    numbers = {"start_mib": start, "after_bucket_capture_mib": after_buckets,
               "after_512_steps_mib": after_first, "after_2x512_more_steps_mib": after_more}
    record_property("reserved_memory", numbers)
    print("reserved GPU memory:", {k: round(v, 1) for k, v in numbers.items()})
    assert after_more == after_first


def test_request_longer_than_cache_fails_before_gpu_work(cgb, monkeypatch):
    """The request is refused before the cache, the static buffers or the model are touched (no
    device-side assert from an out-of-range cache write)."""
    import torch

    from cudagraph_bench.decode import GreedyDecoder
    from cudagraph_bench.errors import RequestTooLongError

    model = cgb.model("gpt2", "float32")
    decoder = GreedyDecoder(model, 64)
    try:
        ids = torch.ones(1, 50, dtype=torch.int64, device="cuda")
        calls = []
        with monkeypatch.context() as patch:
            patch.setattr(decoder.cache, "reset", lambda: calls.append("cache.reset"))
            patch.setattr(decoder, "_prefill_logits", lambda *a: calls.append("prefill"))
            mask_before = decoder._mask.clone()
            with pytest.raises(RequestTooLongError, match="max_cache_len=64"):
                decoder.generate(ids, 15)
            assert calls == [] and torch.equal(decoder._mask, mask_before)
        assert decoder.generate(ids, 14).shape == (1, 14)   # 50 + 14 = 64 fits exactly
    finally:
        decoder.close()
        cgb.release()
