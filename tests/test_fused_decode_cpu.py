"""The fused decode loop on the CPU: the step code that graphs capture runs eagerly here (same static buffers,
same replay plan), so its tokens are checked against HF generate; the compiled step (dynamo with the
``aot_eager`` backend, and real inductor code), the HF static-cache + torch.compile peer's set-up and
restore, and the decoder's argument errors."""

import pytest
import torch

from cudagraph_bench.capture.decode import GreedyDecoder, replay_plan
from cudagraph_bench.errors import CompileError, CudaUnavailableError, UsageError
from cudagraph_bench.measure.correctness import check_decode_against_generate, fp64_decode_logits
from cudagraph_bench.models.presets import load_model
from cudagraph_bench.options import COMPILE_GRAPH_MODES, DECODE_COMPILE_TUNINGS
from cudagraph_bench.plugin.references import generate_reference
from tiny_models import TINY_CAUSAL

MODELS = TINY_CAUSAL


@pytest.fixture(scope="module", params=list(MODELS))
def model(request):
    return load_model(request.param, "float32", "cpu", overrides=MODELS[request.param])


def _prompt(length: int, seed: int):
    return torch.randint(0, 1000, (1, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("steps_per_graph", [1, 3, 8])
@pytest.mark.parametrize("steps", [0, 1, 7, 8, 9, 47])
def test_replay_plan_covers_every_step_with_the_fewest_replays(steps, steps_per_graph):
    plan = replay_plan(steps, steps_per_graph)
    assert sum(n * count for n, count in plan) == steps
    assert all(count > 0 and n in (steps_per_graph, 1) for n, count in plan)
    assert sum(count for _, count in plan) == steps // steps_per_graph + steps % steps_per_graph
    assert [n for n, _ in plan] == sorted({n for n, _ in plan}, reverse=True)    # the long graph first


def test_replay_plan_refuses_what_no_plan_can_do():
    with pytest.raises(ValueError, match="steps_per_graph must be >= 1"):
        replay_plan(4, 0)
    with pytest.raises(ValueError, match="steps must be >= 0"):
        replay_plan(-1, 8)


@pytest.mark.parametrize("new_tokens", [1, 2, 20])
def test_unrolled_steps_give_generates_tokens_and_the_same_logits(model, new_tokens):
    """The eager loop runs the replay plan of its ``steps_per_graph`` (the steps a graph would hold, in a
    row): any number of steps per graph gives generate's tokens and the same logits bit for bit."""
    ids = _prompt(11, new_tokens)
    ref = generate_reference(model, ids, new_tokens)[0]
    runs = {k: GreedyDecoder(model, 64, use_graph=False, steps_per_graph=k).generate(ids, new_tokens,
                                                                                      return_logits=True)
            for k in (1, 3, 8)}
    for k, (tokens, logits) in runs.items():
        assert torch.equal(tokens, ref), f"{k} steps per graph"
        assert len(logits) == new_tokens
        assert all(torch.equal(a, b) for a, b in zip(logits, runs[1][1], strict=True)), f"{k} steps per graph"
        assert torch.equal(torch.cat([x.argmax(-1, keepdim=True) for x in logits], dim=1), tokens)


def test_steps_per_graph_is_capped_by_the_cache(model):
    assert GreedyDecoder(model, 6, use_graph=False, steps_per_graph=8).steps_per_graph == 5
    ids = _prompt(3, 2)
    assert torch.equal(GreedyDecoder(model, 6, use_graph=False, steps_per_graph=8).generate(ids, 3),
                       generate_reference(model, ids, 3)[0])


def test_a_request_returns_its_own_tensor(model):
    """The output is a copy of the static buffer: a later request does not change an earlier result."""
    decoder = GreedyDecoder(model, 64, use_graph=False)
    first = decoder.generate(_prompt(9, 1), 12)
    kept = first.clone()
    decoder.generate(_prompt(9, 2), 20)
    assert torch.equal(first, kept)


def test_compiled_step_traces_once_and_gives_the_eager_loops_tokens_and_logits(model, monkeypatch):
    """The step compiled by dynamo (``aot_eager``: dynamo's graph and functionalized input mutations, eager
    kernels): one graph, no recompile across steps and requests (both run under ``fail_on_recompile``), and
    exactly the eager loop's tokens and logits.

    transformers >= 5.24 runs a one-token GQA query through SDPA on the key/value heads (``pack_gqa``) in
    eager mode but repeats the key/value heads while dynamo traces: other kernels, logits a few 1e-6 apart.
    ``TRANSFORMERS_SDPA_FORCE_GQA=1`` (read at each call; older releases ignore it) gives both the same
    SDPA call, so the comparison stays one of the same kernels."""
    monkeypatch.setenv("TRANSFORMERS_SDPA_FORCE_GQA", "1")
    ids = _prompt(13, 3)
    want_tokens, want_logits = GreedyDecoder(model, 64, use_graph=False).generate(ids, 20, return_logits=True)
    decoder = GreedyDecoder(model, 64, use_graph=False, compile_mode="default", compile_backend="aot_eager")
    try:
        assert decoder.compile_ms > 0 and decoder.graphs_compiled >= 1 and decoder.capture_ms is None
        with torch.compiler.set_stance("fail_on_recompile"):
            tokens, logits = decoder.generate(ids, 20, return_logits=True)
            again = decoder.generate(_prompt(5, 4), 30)
        assert torch.equal(tokens, want_tokens) and torch.equal(tokens, generate_reference(model, ids, 20)[0])
        assert all(torch.equal(a, b) for a, b in zip(logits, want_logits, strict=True))
        assert torch.equal(again, generate_reference(model, _prompt(5, 4), 30)[0])
    finally:
        decoder.close()


def test_inductor_compiled_step_passes_the_generate_check():
    """Real inductor code of the step (``mode="default"``; on the CPU inductor writes C++): its tokens are
    generate's or a rounding tie by the float64 rule, also against the eager static loop.

    Scalar C++ (``cpp.vec_isa_ok=False``): inductor otherwise first compiles and loads a probe program per SIMD
    instruction set, about half of this test's time with a cold cache; the kernels of the GPU's path are Triton's,
    not these."""
    import torch._inductor.config as inductor_config

    model = load_model("gpt2", "float32", "cpu", overrides=MODELS["gpt2"])
    ids = _prompt(10, 5)
    ref, ref_logits = generate_reference(model, ids, 12)
    eager_tokens, eager_logits = GreedyDecoder(model, 32, use_graph=False).generate(ids, 12, return_logits=True)
    with inductor_config.patch({"cpp.vec_isa_ok": False}):
        decoder = GreedyDecoder(model, 32, use_graph=False, compile_mode="default")
        try:
            tokens, logits = decoder.generate(ids, 12, return_logits=True)
        finally:
            decoder.close()
    assert decoder.graphs_compiled >= 1
    vs_generate = check_decode_against_generate(tokens, logits, ref, ref_logits, fp64_decode_logits(model, ids, ref))
    assert vs_generate.passed, vs_generate.summary
    vs_eager = check_decode_against_generate(tokens, logits, eager_tokens, eager_logits,
                                             fp64_decode_logits(model, ids, eager_tokens),
                                             reference_name="static-eager")
    assert vs_eager.passed, vs_eager.summary
    assert "static-eager" in vs_eager.summary and "generate" not in vs_eager.summary


@pytest.mark.parametrize("tuning", list(DECODE_COMPILE_TUNINGS))
def test_compile_options_hold_while_the_step_compiles_and_are_restored(tuning):
    """Every ``--decode-compile-tuning``'s inductor fields are set while dynamo hands the step's graph to the
    backend (where inductor reads them) and back to their previous values once the decoder is built."""
    import torch._inductor.config as inductor_config

    fields = DECODE_COMPILE_TUNINGS[tuning]
    probe = fields or {"coordinate_descent_tuning": True}
    before = {k: getattr(inductor_config, k) for k in probe}
    seen = []

    def spy_backend(graph_module, _example_inputs):
        seen.append({k: getattr(inductor_config, k) for k in probe})
        return graph_module.forward

    model = load_model("gpt2", "float32", "cpu", overrides=MODELS["gpt2"])
    decoder = GreedyDecoder(model, 32, use_graph=False, compile_mode="default", compile_backend=spy_backend,
                            compile_options=fields)
    try:
        assert decoder.compile_options == fields
        assert decoder.generate(_prompt(6, 2), 4).shape == (1, 4)
    finally:
        decoder.close()
    assert seen, "the backend never compiled the step"
    assert all(s == {**before, **fields} for s in seen), seen
    assert {k: getattr(inductor_config, k) for k in probe} == before


def test_an_unknown_inductor_field_is_refused_before_compiling(model):
    with pytest.raises(UsageError, match="torch._inductor.config has no field no_such_field"):
        GreedyDecoder(model, 32, use_graph=False, compile_mode="default", compile_options={"no_such_field": 1})


#: The inductor fields of every ``--decode-compile-tuning`` (each a bool, e.g. ``coordinate_descent_tuning``).
TUNING_FIELDS = sorted({k for fields in DECODE_COMPILE_TUNINGS.values() for k in fields})


@pytest.mark.parametrize("options", [next(iter(DECODE_COMPILE_TUNINGS)), TUNING_FIELDS, {1: True}],
                         ids=["a tuning's name", "a list of fields", "a non-string field"])
def test_compile_options_that_are_not_fields_and_values_are_one_usage_error(model, options):
    with pytest.raises(UsageError, match="compile_options|torch._inductor.config has no field"):
        GreedyDecoder(model, 32, use_graph=False, compile_mode="default", compile_backend="aot_eager",
                      compile_options=options)


@pytest.mark.parametrize("field", TUNING_FIELDS)
def test_a_value_of_another_type_than_the_inductor_fields_is_refused(model, field):
    """A bool field set to the string ``"yes"`` would be set as such (``inductor_config.patch`` does not check
    types) and read as true, whatever the caller meant; ``False`` for a bool field is taken."""
    import torch._inductor.config as inductor_config

    assert isinstance(getattr(inductor_config, field), bool)
    with pytest.raises(UsageError, match=f"{field}.*takes a bool"):
        GreedyDecoder(model, 32, use_graph=False, compile_mode="default", compile_backend="aot_eager",
                      compile_options={field: "yes"})
    decoder = GreedyDecoder(model, 32, use_graph=False, compile_mode="default", compile_backend="aot_eager",
                            compile_options={field: False})
    assert decoder.compile_options == {field: False}
    decoder.close()


def test_compile_options_without_compile_mode_are_refused(model):
    """Nothing would compile under them, yet ``decoder.compile_options`` would report them (the note of the run)."""
    fields = next(f for f in DECODE_COMPILE_TUNINGS.values() if f)
    with pytest.raises(UsageError, match="pass compile_mode too"):
        GreedyDecoder(model, 32, use_graph=False, compile_options=fields)


def test_compile_without_dynamo_is_refused():
    """With dynamo disabled, torch.compile silently runs eager code: the decoder refuses to call that compiled."""
    model = load_model("gpt2", "float32", "cpu", overrides=MODELS["gpt2"])
    with torch._dynamo.config.patch(disable=True), pytest.raises(CompileError, match="compiled no graph"):
        GreedyDecoder(model, 32, use_graph=False, compile_mode="default", compile_backend="eager")


def test_bad_decoder_arguments_are_one_line_errors(model):
    with pytest.raises(UsageError, match="steps_per_graph must be >= 1"):
        GreedyDecoder(model, 32, use_graph=False, steps_per_graph=0)
    with pytest.raises(UsageError, match=f"use one of {', '.join(COMPILE_GRAPH_MODES)}"):
        GreedyDecoder(model, 32, use_graph=False, compile_mode="reduce-overhead")
    with pytest.raises(CudaUnavailableError, match="pass use_graph=False"):
        GreedyDecoder(model, 32)


def test_static_compile_peer_sets_up_the_guide_and_puts_the_model_back():
    """The peer row's set-up: while open, ``generate`` uses a StaticCache and the compiled forward and gives
    generate's tokens, with logits as close to float64 as generate's; closed, the model's attributes and
    generation config are as before."""
    from transformers import StaticCache

    from cudagraph_bench.measure.static_generate import StaticCompiledGenerate

    model = load_model("gpt2", "float32", "cpu", overrides=MODELS["gpt2"])
    ids = _prompt(9, 6)
    ref, ref_logits = generate_reference(model, ids, 10)
    before = dict(vars(model))
    cache_implementation = model.generation_config.cache_implementation
    peer = StaticCompiledGenerate(model, backend="eager")
    try:
        assert peer.warm(ids, 10) > 0 and peer.compile_ms > 0
        tokens, logits = peer.generate(ids, 10, return_logits=True)
        assert torch.equal(tokens, ref) and torch.equal(peer.generate(ids, 10), ref)
        check = check_decode_against_generate(tokens, logits, ref, ref_logits, fp64_decode_logits(model, ids, ref))
        assert check.identical and check.passed, check.summary   # a static cache attends over other lengths
        compiled = vars(model)["forward"]                  # torch.compile's wrapper of the model's own forward
        assert compiled._torchdynamo_orig_callable.__func__ is type(model).forward
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=2,
                             return_dict_in_generate=True, pad_token_id=0)
        assert isinstance(out.past_key_values, StaticCache)
    finally:
        peer.close()
    peer.close()   # idempotent
    assert vars(model).keys() == before.keys() and all(vars(model)[k] is v for k, v in before.items())
    assert model.generation_config.cache_implementation == cache_implementation
    with pytest.raises(RuntimeError, match="closed"):
        peer.generate(ids, 2)


@pytest.mark.parametrize("cache_len", [64, 200, 256])
def test_the_prefill_bucket_is_the_smallest_that_holds_the_prompt(cache_len):
    """Derived from the bucket list: the smallest bucket >= the prompt among those that fit the cache (the cache
    length itself when a larger bucket was asked for), None for a prompt longer than every such bucket."""
    from cudagraph_bench.options import DEFAULT_BUCKETS
    from cudagraph_bench.measure.decode_case import decode_prefill_bucket

    usable = sorted({b for b in DEFAULT_BUCKETS if b <= cache_len} | {cache_len})
    for length in range(1, cache_len + 20):
        want = next((b for b in usable if b >= length), None)
        assert decode_prefill_bucket(length, DEFAULT_BUCKETS, cache_len) == want, length
    assert decode_prefill_bucket(33, (16, 32), cache_len) is None


def _cpu_references(monkeypatch, arch: str):
    """The session's decode references (:class:`~cudagraph_bench.plugin.references.DecodeReferences`, what
    ``cgb.references`` is) over the tiny model of ``arch`` on the CPU, and a counter of the HF generate references
    it computes."""
    from cudagraph_bench.models.presets import max_positions
    from cudagraph_bench.plugin import references

    model = load_model(arch, "float32", "cpu", overrides=MODELS[arch])
    computed = []

    def counted(model, ids, new_tokens):
        computed.append(new_tokens)
        return generate_reference(model, ids, new_tokens)

    monkeypatch.setattr(references, "generate_reference", counted)
    return references.DecodeReferences(lambda name, dtype: model, lambda name: max_positions(model)), model, computed


@pytest.mark.parametrize("arch", list(MODELS))
def test_the_shorter_requests_share_the_longest_generate_reference(monkeypatch, arch):
    """A 5-token reference asked for with ``share_up_to=12`` is one 12-token generate: the 12-token request
    is served from it, and both are exactly what generate gives for their own lengths."""
    refs, model, computed = _cpu_references(monkeypatch, arch)
    ids = _prompt(9, 1)
    short_tokens, short_logits = refs.generate(arch, "float32", ids, 5, share_up_to=12)
    long_tokens, long_logits = refs.generate(arch, "float32", ids, 12)
    assert computed == [12]
    for tokens, logits, n in ((short_tokens, short_logits, 5), (long_tokens, long_logits, 12)):
        want_tokens, want_logits = generate_reference(model, ids, n)
        assert torch.equal(tokens, want_tokens) and len(logits) == n
        assert all(torch.equal(a, b) for a, b in zip(logits, want_logits, strict=True))
    refs.generate(arch, "float32", ids, 20)                     # longer than any so far: computed again
    assert computed == [12, 20]


def test_the_static_eager_reference_is_computed_once_and_is_the_eager_loops(monkeypatch):
    """:meth:`DecodeReferences.static_eager`: the eager static-cache loop's tokens and logits, computed once per
    prompt, new tokens and cache length (by the decoder given, or a fresh one)."""
    refs, model, _ = _cpu_references(monkeypatch, "tinyllama-1.1b")
    ids = _prompt(7, 2)
    want_tokens, want_logits = GreedyDecoder(model, 32, use_graph=False).generate(ids, 9, return_logits=True)
    runs = []
    decoder = GreedyDecoder(model, 32, use_graph=False)
    real = decoder.generate
    decoder.generate = lambda *a, **kw: runs.append(1) or real(*a, **kw)
    first = refs.static_eager("tinyllama-1.1b", "float32", ids, 9, 32, decoder=decoder)
    again = refs.static_eager("tinyllama-1.1b", "float32", ids, 9, 32)
    assert runs == [1] and again is first
    assert torch.equal(first[0], want_tokens)
    assert all(torch.equal(a, b) for a, b in zip(first[1], want_logits, strict=True))
    other = refs.static_eager("tinyllama-1.1b", "float32", ids, 9, 64)     # another cache: a fresh decoder
    assert torch.equal(other[0], want_tokens) and runs == [1]
