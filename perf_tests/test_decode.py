"""Correctness of greedy decode with a static KV cache (GPU): graphed decode vs HF generate, the decode step
compiled by inductor and captured (vs generate and the eager loop), multi-step graphs vs the 1-step graph,
and the failure kinds practitioners have reported for graphed decode."""

import pytest

from cudagraph_bench.plugin.memory import reserved_mib

pytestmark = pytest.mark.gpu

PROMPT = 50


def _generate_ref(model, ids, new_tokens):
    from cudagraph_bench.plugin.references import generate_reference

    return generate_reference(model, ids, new_tokens)[0]


def _assert_matches_generate(model, ids, got, ref, ref_logits, dtype, what, fp64_logits=None):
    """``got`` = ``(tokens [1, n], logits)`` of a greedy decoder: the tokens of ``generate`` (``ref``,
    ``ref_logits``), or a rounding tie, with every compared step's logits as close to float64 as
    ``generate``'s (:func:`~cudagraph_bench.measure.correctness.check_decode_against_generate`)."""
    from cudagraph_bench.measure.correctness import check_decode_against_generate, fp64_decode_logits

    if fp64_logits is None:
        fp64_logits = fp64_decode_logits(model, ids, ref)
    tokens, logits = got
    result = check_decode_against_generate(tokens, logits, ref, ref_logits, fp64_logits, dtype)
    print(f"{what} {dtype}: {result.summary} ({result.distinct_reference_tokens} distinct tokens from generate)")
    assert result.passed, f"{what}: {result.summary}; ours {tokens[0].tolist()}, generate {ref[0].tolist()}"


@pytest.mark.parametrize("bucketed", [False, True], ids=["unpadded-prefill", "bucketed-prefill"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_graphed_decode_equals_generate(cgb, causal_model, dtype, bucketed):
    """Every causal model of ``--models``: graphed decode (and the eager static-cache loop) give the tokens
    of HF ``generate(do_sample=False)``, with an unpadded or a bucketed prefill, twice in a row."""
    import torch

    from cudagraph_bench.capture.decode import GreedyDecoder
    from cudagraph_bench.errors import NotGraphableError

    from cudagraph_bench.measure.decode_case import DECODE_PROMPT_SEED

    cgb.skip_if_too_long(causal_model, 128)
    model = cgb.model(causal_model, dtype)
    (ids,) = cgb.inputs(model, PROMPT, n=1, seed=DECODE_PROMPT_SEED)    # the decode benchmarks' prompt
    benchmarked = dtype in cgb.option("decode_dtypes") and PROMPT in cgb.option("decode_prompt_lengths")
    # the reference the decode benchmarks of this model, dtype and prompt use: one generate request for both
    ref, ref_logits = cgb.references.generate(causal_model, dtype, ids, 48,
                                          share_up_to=max(cgb.option("new_tokens")) if benchmarked else 0)
    buckets = (16, 64) if bucketed else None
    try:
        graphed = GreedyDecoder(model, 128, use_graph=True, prefill_buckets=buckets)
    except NotGraphableError as exc:
        pytest.skip(f"{causal_model} cannot be graphed: {exc}")
    eager = GreedyDecoder(model, 128, use_graph=False, prefill_buckets=buckets)
    try:
        got, got_logits = graphed.generate(ids, 48, return_logits=True)
        got_again = graphed.generate(ids, 48)        # the graph is reused across requests
        got_eager = eager.generate(ids, 48)
        torch.cuda.synchronize()
        print(f"{causal_model} {dtype}: generate {ref[0, :12].tolist()}...")
        assert torch.equal(got, got_eager), f"graphed {got[0].tolist()} != eager static loop {got_eager[0].tolist()}"
        assert torch.equal(got_again, got)
        _assert_matches_generate(model, ids, (got, got_logits), ref, ref_logits, dtype, causal_model,
                                 cgb.references.fp64_logits(causal_model, dtype, ids, ref))
    finally:
        graphed.close()
        eager.close()
        cgb.release()


#: Small configs of the architectures with sliding-window attention (window 16 tokens) and of
#: mixture-of-experts models, built from the presets' config classes with fewer, smaller layers.
SMALL = dict(num_hidden_layers=4, hidden_size=256, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=512, vocab_size=1024, max_position_embeddings=512, initializer_range=0.1)
SLIDING_CONFIGS = {
    "mistral": ("mistral-7b", dict(SMALL, sliding_window=16)),
    "gemma2": ("gemma-2-2b", dict(SMALL, head_dim=64, query_pre_attn_scalar=64, sliding_window=16)),
    "phi3-longrope": ("phi-3.5-mini", dict(SMALL, num_key_value_heads=4, sliding_window=16,
                                            original_max_position_embeddings=256,
                                            rope_scaling={"rope_type": "longrope", "long_factor": [2.0] * 32,
                                                          "short_factor": [1.5] * 32},
                                            eos_token_id=1, pad_token_id=0)),
}
MOE_CONFIGS = {
    "olmoe": ("olmoe-1b-7b", dict(SMALL, num_experts=8, num_experts_per_tok=2, pad_token_id=0, eos_token_id=1)),
}
#: (prompt tokens, new tokens) around a 16-token window: inside it, prompt inside and decode past it,
#: prompt longer than it.
WINDOW_REQUESTS = ((5, 8), (10, 40), (40, 30))


def _small_model(preset, overrides, dtype):
    from cudagraph_bench.models.presets import load_model

    return load_model(preset, dtype, "cuda", overrides=overrides, seed=5)


@pytest.fixture(scope="module")
def window_references():
    """The small model of an (arch, dtype) and, per request of :data:`WINDOW_REQUESTS`, its prompt, HF
    ``generate``'s tokens and logits and the float64 logits: computed by the first test of that arch and
    dtype (unpadded or bucketed prefill) and read by the other, which decodes the same prompts with the same
    weights. Holds one (arch, dtype) at a time."""
    held = {}

    def get(arch, dtype):
        import torch

        from cudagraph_bench.measure.correctness import fp64_decode_logits
        from cudagraph_bench.plugin.references import generate_reference

        if (arch, dtype) not in held:
            held.clear()
            preset, overrides = {**SLIDING_CONFIGS, **MOE_CONFIGS}[arch]
            model = _small_model(preset, overrides, dtype)
            requests = []
            for prompt, new in WINDOW_REQUESTS:
                gen = torch.Generator(device="cuda").manual_seed(prompt)
                ids = torch.randint(1, model.config.vocab_size, (1, prompt), device="cuda", generator=gen)
                ref, ref_logits = generate_reference(model, ids, new)
                requests.append((ids, new, ref, ref_logits, fp64_decode_logits(model, ids, ref)))
            held[arch, dtype] = (model, requests)
        return held[arch, dtype]

    yield get
    held.clear()


@pytest.mark.parametrize("bucketed", [False, True], ids=["unpadded-prefill", "bucketed-prefill"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("arch", list(SLIDING_CONFIGS) + list(MOE_CONFIGS))
def test_sliding_window_and_moe_decode_equal_generate(cgb, window_references, arch, dtype, bucketed):
    """Graphed decode across a 16-token sliding window (prompt inside it, decode past it, prompt longer
    than it) and on a mixture-of-experts model: the tokens of HF ``generate(do_sample=False)``."""
    import torch

    from cudagraph_bench.capture.decode import GreedyDecoder

    model, requests = window_references(arch, dtype)
    buckets = (16, 64) if bucketed else None
    decoder = GreedyDecoder(model, 128, use_graph=True, prefill_buckets=buckets)
    eager = GreedyDecoder(model, 128, use_graph=False, prefill_buckets=buckets)
    try:
        distinct = set()
        for ids, new, ref, ref_logits, fp64_logits in requests:
            prompt = ids.shape[1]
            got, got_logits = decoder.generate(ids, new, return_logits=True)
            assert torch.equal(got, eager.generate(ids, new)), f"{arch} prompt {prompt} + {new}: graph != eager loop"
            distinct |= set(ref[0].tolist())
            _assert_matches_generate(model, ids, (got, got_logits), ref, ref_logits, dtype,
                                     f"{arch} prompt {prompt} + {new}", fp64_logits)
        assert len(distinct) >= 3, "reference generations are nearly constant: the comparison would prove little"
    finally:
        decoder.close()
        eager.close()
        del model
        cgb.release()


#: Models of the compiled-decode tests: the gpt2 preset with 4 of its 12 layers (its widths and vocabulary,
#: so its kernels; inductor's compile time grows with the layers it traces, what the tests check does not:
#: the whole preset is compiled by the decode benchmarks' ``--with-compile``) and a small Llama config
#: (``SMALL``).
COMPILED_DECODE_MODELS = {"gpt2": ("gpt2", dict(n_layer=4)),
                          "small-llama": ("tinyllama-1.1b", dict(SMALL, initializer_range=0.2))}


def _compiled_decode_model(arch, dtype):
    preset, overrides = COMPILED_DECODE_MODELS[arch]
    return _small_model(preset, overrides, dtype)


@pytest.mark.parametrize("arch", list(COMPILED_DECODE_MODELS))
def test_compiled_graphed_decode_equals_generate(cgb, arch):
    """The decode step compiled by inductor (``--compile-mode``, no inductor graphs) and captured by the
    suite: the tokens of HF ``generate(do_sample=False)`` or a rounding tie (every compared step's logits as
    close to float64 as generate's), judged the same way against the eager static-cache loop; its
    multi-step graph gives exactly the tokens and logits of its 1-step graph (same compiled kernels), and a
    second request the same tokens."""
    import torch

    from cudagraph_bench.capture.decode import GreedyDecoder
    from cudagraph_bench.measure.correctness import check_decode_against_generate, fp64_decode_logits
    from cudagraph_bench.plugin.references import generate_reference

    dtype, new = "bfloat16", 48
    model = _compiled_decode_model(arch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(8)
    ids = torch.randint(1, model.config.vocab_size, (1, PROMPT), device="cuda", generator=gen)
    ref, ref_logits = generate_reference(model, ids, new)
    eager = GreedyDecoder(model, 256, use_graph=False)
    decoder = None
    try:
        eager_tokens, eager_logits = eager.generate(ids, new, return_logits=True)
        decoder = GreedyDecoder(model, 256, compile_mode=cgb.option("compile_mode"), steps_per_graph=8)
        assert decoder.compile_ms > 0 and decoder.capture_ms > 0 and decoder.graphs_compiled >= 1
        tokens, logits = decoder.generate(ids, new, return_logits=True)      # 47 steps: 5 x 8 + 7 x 1
        assert torch.equal(decoder.generate(ids, new), tokens)
        decoder.steps_per_graph = 1                                            # every step by the 1-step graph
        tokens_1, logits_1 = decoder.generate(ids, new, return_logits=True)
        assert torch.equal(tokens_1, tokens), f"8-step graph {tokens[0].tolist()} != 1-step {tokens_1[0].tolist()}"
        assert all(torch.equal(a, b) for a, b in zip(logits, logits_1, strict=True))
        print(f"{arch} compiled ({decoder.compile_mode}): compile {decoder.compile_ms:.0f} ms, "
              f"{decoder.graphs_compiled} graph(s), capture {decoder.capture_ms:.0f} ms")
        _assert_matches_generate(model, ids, (tokens, logits), ref, ref_logits, dtype, f"{arch} compiled")
        vs_eager = check_decode_against_generate(tokens, logits, eager_tokens, eager_logits,
                                                 fp64_decode_logits(model, ids, eager_tokens), dtype,
                                                 reference_name="static-eager")
        print(f"{arch} compiled vs static-eager: {vs_eager.summary}")
        assert vs_eager.passed, vs_eager.summary
        assert len(set(ref[0].tolist())) >= 3, "reference generation is nearly constant: the check would prove little"
    finally:
        if decoder is not None:
            decoder.close()
        eager.close()
        del model
        cgb.release()


@pytest.mark.parametrize("arch", list(COMPILED_DECODE_MODELS))
def test_multi_step_graph_equals_one_step_graph_and_eager_loop(cgb, arch):
    """Graphed decode with eager kernels: 8 steps per graph (plus the 1-step remainder), the 1-step graph
    alone, 3 steps per graph and the eager static-cache loop give the same tokens and logits, bit for bit."""
    import torch

    from cudagraph_bench.capture.decode import GreedyDecoder

    dtype, new = "bfloat16", 40
    model = _compiled_decode_model(arch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(9)
    ids = torch.randint(1, model.config.vocab_size, (1, PROMPT), device="cuda", generator=gen)
    decoders = {k: GreedyDecoder(model, 128, steps_per_graph=k) for k in (8, 3)}
    eager = GreedyDecoder(model, 128, use_graph=False)
    try:
        want_tokens, want_logits = eager.generate(ids, new, return_logits=True)
        runs = {k: d.generate(ids, new, return_logits=True) for k, d in decoders.items()}
        decoders[8].steps_per_graph = 1
        runs[1] = decoders[8].generate(ids, new, return_logits=True)
        for k, (tokens, logits) in runs.items():
            assert torch.equal(tokens, want_tokens), f"{k} steps per graph: {tokens[0].tolist()} != eager loop"
            assert all(torch.equal(a, b) for a, b in zip(logits, want_logits, strict=True)), f"{k} steps per graph"
    finally:
        for d in decoders.values():
            d.close()
        eager.close()
        del model
        cgb.release()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_moe_forward_replay_equals_eager(cgb, dtype):
    """A mixture-of-experts forward is captured with the graph-safe experts implementation and its
    replay equals eager exactly (same kernels)."""
    import torch

    from cudagraph_bench.models.presets import experts_implementation, graph_safe_experts_implementation, model_forward
    from cudagraph_bench.capture.graphed import GraphedForward

    preset, overrides = MOE_CONFIGS["olmoe"]
    model = _small_model(preset, overrides, dtype)
    assert experts_implementation(model) == graph_safe_experts_implementation(dtype)
    graph = GraphedForward(model, 50)
    try:
        for seed in (1, 2):
            gen = torch.Generator(device="cuda").manual_seed(seed)
            ids = torch.randint(0, model.config.vocab_size, (1, 50), device="cuda", generator=gen)
            with torch.inference_mode():
                expected = model_forward(model, ids)
            assert torch.equal(graph(ids), expected)
    finally:
        graph.close()
        del model
        cgb.release()


def test_failed_capture_fails_one_case_and_the_next_capture_works(cgb):
    """A forward that reads a GPU value on the host is refused before capture (NotGraphableError names the
    operation); one whose host work only the capture meets (a device-to-host copy while the stream captures) is
    refused by the capture, naming the error and the line; one that fails while capturing for another reason raises
    CaptureError. Each time the CUDA state is restored, and a graph of the same model captured right after equals
    eager."""
    import torch

    from cudagraph_bench.errors import CaptureError, NotGraphableError
    from cudagraph_bench.models.presets import model_forward
    from cudagraph_bench.capture.graphed import GraphedForward, cuda_context_usable

    model = cgb.model("gpt2", "float32")

    def host_read(m, ids, mask):
        logits = model_forward(m, ids, mask)
        return logits * float(logits.abs().max())     # a host read of a GPU value: found before the capture

    def copy_while_capturing(m, ids, mask):
        logits = model_forward(m, ids, mask)
        if torch.cuda.is_current_stream_capturing():
            logits.cpu()                               # a device-to-host copy: forbidden while capturing
        return logits

    def fails_while_capturing(m, ids, mask):
        logits = model_forward(m, ids, mask)
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError("a failure of the forward's own while the stream captures")
        return logits

    with pytest.raises(NotGraphableError, match="host read of a device value"):
        GraphedForward(model, 16, forward=host_read)
    with pytest.raises(NotGraphableError, match=r"seen by the capture: .* at .*test_decode\.py:\d+ "
                                                r"\(copy_while_capturing\)"):
        GraphedForward(model, 16, forward=copy_while_capturing)
    assert cuda_context_usable()
    with pytest.raises(CaptureError, match="capture failed: RuntimeError: a failure of the forward's own") as info:
        GraphedForward(model, 16, forward=fails_while_capturing)
    assert info.value.context_usable and cuda_context_usable()
    graph = GraphedForward(model, 16)
    try:
        (ids,) = cgb.inputs(model, 16, n=1, seed=4)
        with torch.inference_mode():
            expected = model_forward(model, ids)
        assert torch.equal(graph(ids), expected)
    finally:
        graph.close()
        cgb.release()


def test_dynamic_rope_past_its_positions_is_refused_before_capture(cgb):
    """``dynamic`` RoPE runs as plain RoPE inside its original positions (graph equals eager) and is
    refused with a one-line reason past them, before any warmup."""
    import torch

    from cudagraph_bench.errors import NotGraphableError
    from cudagraph_bench.models.presets import load_model, model_forward
    from cudagraph_bench.capture.graphed import GraphedForward

    model = load_model("tinyllama-1.1b", "float32", "cuda", overrides=dict(
        num_hidden_layers=2, hidden_size=256, num_attention_heads=4, num_key_value_heads=2, intermediate_size=512,
        vocab_size=1024, max_position_embeddings=64, rope_scaling={"rope_type": "dynamic", "factor": 2.0}))
    try:
        with pytest.raises(NotGraphableError, match="dynamic RoPE"):
            GraphedForward(model, 16, max_positions=128)
        graph = GraphedForward(model, 32)
        ids = torch.randint(0, 1024, (1, 32), device="cuda")
        with torch.inference_mode():
            expected = model_forward(model, ids)
        assert torch.equal(graph(ids), expected)
        graph.close()
    finally:
        del model
        cgb.release()


def test_tokens_do_not_depend_on_cache_length(cgb):
    from cudagraph_bench.capture.decode import GreedyDecoder

    model = cgb.model("gpt2", "float32")
    prompt = 16
    (ids,) = cgb.inputs(model, prompt, n=1, seed=3)
    runs = {}
    for max_cache_len in (32, 64, 128, 256):   # each cache filled: prompt + (max_cache_len - prompt) new tokens
        decoder = GreedyDecoder(model, max_cache_len)
        try:
            runs[max_cache_len] = decoder.generate(ids, max_cache_len - prompt)[0].tolist()
        finally:
            decoder.close()
    cgb.release()
    assert {k: len(v) for k, v in runs.items()} == {k: k - prompt for k in runs}
    longest = runs[max(runs)]
    for k, tokens in runs.items():
        assert tokens == longest[:k - prompt], f"{k}-token cache: {tokens} is not a prefix of {longest}"


def test_padded_prompt_gives_same_tokens(cgb):
    """Bucketed prefill (prompt right-padded to the bucket, with its mask) gives the tokens of the
    unpadded prompt, also right at bucket edges."""
    import torch

    from cudagraph_bench.capture.decode import GreedyDecoder

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

    from cudagraph_bench.capture.buckets import BucketedGraphs
    from cudagraph_bench.capture.decode import GreedyDecoder

    model = cgb.model("gpt2", "float32")
    start = reserved_mib()
    buckets = BucketedGraphs(model, cgb.option("buckets"))
    after_buckets = reserved_mib()
    decoder = GreedyDecoder(model, 1024)
    try:
        (ids,) = cgb.inputs(model, 16, n=1)
        decoder.generate(ids, 512)
        torch.cuda.synchronize()
        after_first = reserved_mib()
        for _ in range(2):
            out = decoder.generate(ids, 512)
        buckets(ids)
        torch.cuda.synchronize()
        after_more = reserved_mib()
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

    from cudagraph_bench.capture.decode import GreedyDecoder
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
