"""Greedy static-cache decode on the CPU (eager loop): equals HF generate, with and without padded prefill,
also on the code path HF takes while a CUDA stream is capturing (emulated)."""

import pytest
import torch

from cudagraph_bench.capture.decode import GreedyDecoder, check_request
from cudagraph_bench.errors import RequestTooLongError, UsageError
from cudagraph_bench.models.presets import load_model
from tiny_models import TINY_CAUSAL

MODELS = TINY_CAUSAL


@pytest.fixture(scope="module", params=list(MODELS))
def model(request):
    return load_model(request.param, "float32", "cpu", overrides=MODELS[request.param])


def _reference(model, ids, n):
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=n)
    return out[:, ids.shape[1]:]


def test_check_request():
    check_request(50, 14, 64)
    with pytest.raises(RequestTooLongError, match="50\\) \\+ new tokens \\(15\\) = 65 exceeds the static KV cache"):
        check_request(50, 15, 64)
    with pytest.raises(RequestTooLongError, match="positions"):
        check_request(10, 10, 64, max_positions=16)
    with pytest.raises(UsageError):
        check_request(0, 5, 64)


@pytest.mark.parametrize("prefill_buckets", [None, (16, 32)])
@pytest.mark.parametrize("length", [5, 16, 17])
def test_eager_static_loop_equals_generate(model, length, prefill_buckets):
    gen = torch.Generator().manual_seed(length)
    ids = torch.randint(0, 1000, (1, length), generator=gen)
    ref = _reference(model, ids, 20)
    assert len(set(ref[0].tolist())) > 3, "degenerate reference"
    decoder = GreedyDecoder(model, 64, use_graph=False, prefill_buckets=prefill_buckets)
    assert torch.equal(decoder.generate(ids, 20), ref)
    assert torch.equal(decoder.generate(ids, 20), ref)   # reset between requests


def test_capture_code_path_equals_generate(model, monkeypatch):
    """While a stream captures, HF builds explicit masks instead of skipping them; emulate that path."""
    import transformers.masking_utils as masking_utils

    ids = torch.randint(0, 1000, (1, 13), generator=torch.Generator().manual_seed(0))
    ref = _reference(model, ids, 16)
    monkeypatch.setattr(masking_utils, "is_tracing", lambda *a, **k: True)
    for buckets in (None, (16,)):
        decoder = GreedyDecoder(model, 48, use_graph=False, prefill_buckets=buckets)
        assert torch.equal(decoder.generate(ids, 16), ref)


def test_cache_length_does_not_change_tokens(model):
    ids = torch.randint(0, 1000, (1, 8), generator=torch.Generator().manual_seed(1))
    runs = [GreedyDecoder(model, n, use_graph=False).generate(ids, n - 8)[0].tolist() for n in (16, 32, 64)]
    assert runs[0] == runs[1][:8] == runs[2][:8]
    assert runs[1] == runs[2][:24]


def test_request_errors(model):
    decoder = GreedyDecoder(model, 32, use_graph=False)
    with pytest.raises(RequestTooLongError, match="max_cache_len=32"):
        decoder.generate(torch.ones(1, 30, dtype=torch.int64), 3)
    with pytest.raises(UsageError, match="batch 1"):
        decoder.generate(torch.ones(2, 3, dtype=torch.int64), 3)
    bucketed = GreedyDecoder(model, 64, use_graph=False, prefill_buckets=(16,))
    with pytest.raises(RequestTooLongError, match="largest bucket"):
        bucketed.generate(torch.ones(1, 17, dtype=torch.int64), 3)


def test_encoder_is_refused():
    bert = load_model("bert-tiny", "float32", "cpu")
    with pytest.raises(UsageError, match="causal LM"):
        GreedyDecoder(bert, 64, use_graph=False)
    with pytest.raises(UsageError, match="positions"):
        GreedyDecoder(load_model("gpt2", "float32", "cpu", overrides=MODELS["gpt2"]), 2048, use_graph=False)


def _generate_with_logits(model, ids, n):
    from cudagraph_bench.plugin.references import generate_reference

    return generate_reference(model, ids, n)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_decode_check_passes_our_loop_and_judges_every_step(dtype):
    """Our static-cache loop against generate: the logits it returns are the ones its tokens were chosen
    from, and the float64 judge accepts every step."""
    from cudagraph_bench.measure.correctness import check_decode_against_generate, fp64_decode_logits

    model = load_model("tinyllama-1.1b", dtype, "cpu", overrides=MODELS["tinyllama-1.1b"])
    ids = torch.randint(0, 1000, (1, 11), generator=torch.Generator().manual_seed(3))
    ref, ref_logits = _generate_with_logits(model, ids, 12)
    tokens, logits = GreedyDecoder(model, 32, use_graph=False).generate(ids, 12, return_logits=True)
    assert len(logits) == 12 and logits[0].shape == (1, model.config.vocab_size)
    assert torch.equal(torch.cat([x.argmax(-1, keepdim=True) for x in logits], dim=1), tokens)
    fp64 = fp64_decode_logits(model, ids, ref)
    assert fp64.dtype == torch.float64 and fp64.shape == (12, model.config.vocab_size)
    check = check_decode_against_generate(tokens, logits, ref, ref_logits, fp64, dtype)
    assert check.passed, check.summary
    assert check.identical == torch.equal(tokens, ref)
    assert check.steps == (12 if check.identical else check.first_diff + 1)
    assert check.distinct_reference_tokens == len(set(ref[0].tolist()))


def test_decode_check_fails_logits_of_another_context():
    """A decoder that attends to the wrong context (here: the logits of another prompt, as a stale or
    misplaced KV cache would give) fails at the first step, even when a token happens to agree."""
    from cudagraph_bench.measure.correctness import check_decode_against_generate, fp64_decode_logits

    model = load_model("gpt2", "float32", "cpu", overrides=MODELS["gpt2"])
    gen = torch.Generator().manual_seed(4)
    ids, other = torch.randint(0, 1000, (2, 1, 9), generator=gen)
    ref, ref_logits = _generate_with_logits(model, ids, 6)
    _, wrong_logits = GreedyDecoder(model, 32, use_graph=False).generate(other, 6, return_logits=True)
    check = check_decode_against_generate(ref, wrong_logits, ref, ref_logits, fp64_decode_logits(model, ids, ref),
                                          "float32")
    assert check.identical and not check.passed
    assert "farther from float64" in check.summary


def test_decode_check_calls_a_divergence_at_equal_logits_a_tie():
    """Two decoders with the same logits that broke a tie differently: the first differing token is
    accepted, and only the steps up to it are compared (the contexts differ after it)."""
    from cudagraph_bench.measure.correctness import check_decode_against_generate, fp64_decode_logits

    model = load_model("gpt2", "float32", "cpu", overrides=MODELS["gpt2"])
    ids = torch.randint(0, 1000, (1, 7), generator=torch.Generator().manual_seed(5))
    ref, ref_logits = _generate_with_logits(model, ids, 8)
    ours = ref.clone()
    ours[0, 3:] = (ref[0, 3:] + 1) % model.config.vocab_size            # diverge at token 3
    check = check_decode_against_generate(ours, ref_logits, ref, ref_logits, fp64_decode_logits(model, ids, ref),
                                          "float32")
    assert check.passed and not check.identical
    assert (check.first_diff, check.steps) == (3, 4)
    assert "token 3 differs" in check.summary and "rounding tie" in check.summary
    with pytest.raises(ValueError, match="lengths differ"):
        check_decode_against_generate(ours[:, :5], ref_logits, ref, ref_logits, fp64_decode_logits(model, ids, ref))


def test_session_answers_fp64_logits_of_a_shorter_reference_from_the_longer_one():
    """DecodeReferences.fp64_logits (``cgb.references``): the 64-token benchmark's reference begins the shared
    128-token one (DecodeReferences.generate), so its float64 logits are the first rows of the longer reference's,
    computed once; tokens that do not begin the reference get their own run."""
    from cudagraph_bench.measure.correctness import fp64_decode_logits
    from cudagraph_bench.models.presets import max_positions
    from cudagraph_bench.plugin.references import DecodeReferences

    model = load_model("tinyllama-1.1b", "float32", "cpu", overrides=MODELS["tinyllama-1.1b"])
    refs = DecodeReferences(lambda name, dtype: model, lambda name: max_positions(model))
    ids = torch.randint(0, 1000, (1, 9), generator=torch.Generator().manual_seed(5))
    short, _ = refs.generate("tiny", "float32", ids, 6, share_up_to=12)
    longer, _ = refs.generate("tiny", "float32", ids, 12)
    assert torch.equal(longer[:, :6], short) and len(refs._generated) == 1     # one request for both
    got_short = refs.fp64_logits("tiny", "float32", ids, short)
    assert got_short.shape == (6, model.config.vocab_size) and len(refs._fp64) == 1
    torch.testing.assert_close(got_short, fp64_decode_logits(model, ids, short), rtol=0, atol=1e-9)
    got_longer = refs.fp64_logits("tiny", "float32", ids, longer)
    assert len(refs._fp64) == 1 and torch.equal(got_longer[:6], got_short)
    other = (short + 1) % model.config.vocab_size
    assert refs.fp64_logits("tiny", "float32", ids, other).shape == (6, model.config.vocab_size)
    assert len(refs._fp64) == 2


def test_a_decode_case_against_generate_logits_holding_nan_fails_naming_them():
    """NaN logits of ``generate`` prove no decoder correct (its argmax tokens would equal a NaN decoder's): the
    static-eager case (checked against them) and the generate reference itself fail before any request is timed."""
    from cudagraph_bench.measure.case import CaseFailed
    from cudagraph_bench.measure.decode_case import DecodeSpec, prepare_decode
    from cudagraph_bench.models.presets import max_positions
    from cudagraph_bench.plugin.references import DecodeReferences

    model = load_model("tinyllama-1.1b", "float32", "cpu", overrides=MODELS["tinyllama-1.1b"])
    with torch.no_grad():
        model.model.norm.weight.fill_(float("nan"))
    refs = DecodeReferences(lambda name, dtype: model, lambda name: max_positions(model))
    ids = torch.randint(0, 1000, (1, 9), generator=torch.Generator().manual_seed(5))
    for variant in ("static-eager", "generate"):
        spec = DecodeSpec("tiny", "float32", 9, 4, variant, longest_new_tokens=4, steps_per_graph=4,
                          compile_mode="default", compile_timeout_s=0, compile_tuning="none", buckets=(),
                          rounds=1, max_rounds=1)
        with pytest.raises(CaseFailed, match=r"^check: generate logits are not finite \(NaN or inf\)"):
            prepare_decode(spec, model, ids, refs)
