"""Checkpoints beyond attention-only text models: a model of state layers only (Mamba) decodes over the static
cache's state layers, and a multimodal causal LM is measured on text alone (``input_ids``, no image)."""

import pytest
import torch

from cudagraph_bench.models.presets import load_model, model_forward, vocab_size
from cudagraph_bench.models.zoo_types import zoo_checkpoint
from cudagraph_bench.models.zoo_types import causal_lm_types, tiny_model

NEW_TOKENS = 12


def _need(model_type: str) -> None:
    if model_type not in causal_lm_types():
        pytest.skip(f"transformers has no {model_type} here")


@pytest.mark.parametrize("model_type", ["mamba", "mamba2"])
def test_a_state_only_checkpoint_decodes_on_the_static_cache_as_generate_does(model_type, tmp_path):
    """Mamba's forward takes its cache as ``cache_params`` before transformers 5.24 and would swallow
    ``past_key_values``; its state layers mask one token's hidden states by the whole mask it is given. The eager
    decode steps on the graph's static cache give ``generate``'s tokens only with both handled."""
    from cudagraph_bench.capture.decode import GreedyDecoder

    _need(model_type)
    model = load_model(zoo_checkpoint(model_type, tmp_path), "float32", "cpu")
    ids = torch.randint(0, vocab_size(model), (1, 9), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        expected = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, eos_token_id=None,
                                  max_new_tokens=NEW_TOKENS, pad_token_id=0)[:, ids.shape[1]:]
    assert len(set(expected[0].tolist())) > 1, "a constant greedy sequence would not show a lost state"
    decoder = GreedyDecoder(model, 64, use_graph=False)
    try:
        got = decoder.generate(ids, NEW_TOKENS)
    finally:
        decoder.close()
    assert torch.equal(got, expected), (got.tolist(), expected.tolist())


@pytest.mark.parametrize("model_type, class_name", [("gemma3", "Gemma3ForConditionalGeneration"),
                                                    ("mllama", "MllamaForCausalLM")])
def test_a_multimodal_causal_lm_is_accepted_and_measured_on_text_alone(model_type, class_name, tmp_path):
    """Gemma 3's image-text model takes ``input_ids`` alone; Mllama's causal LM is saved with its text config,
    which the auto mapping does not list, and loads as the class its ``architectures`` names. Both pass every
    checkpoint check and give the logits of the model they were saved from."""
    _need(model_type)
    loaded = load_model(zoo_checkpoint(model_type, tmp_path), "float32", "cpu")
    assert type(loaded).__name__ == class_name
    ids = torch.randint(0, vocab_size(loaded), (1, 11), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        got, expected = model_forward(loaded, ids), model_forward(tiny_model(model_type), ids)
    assert got.shape == (1, 11, vocab_size(loaded))
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-3)


def test_a_state_only_model_reads_no_kv_bytes_per_token():
    """The decode roofline of a Mamba model: its weights, and no per-token KV bytes (it has no attention layer and
    no head count to size one by); an attention model of the zoo has some."""
    from cudagraph_bench.measure.roofline import kv_bytes_per_context_token, request_bytes_per_token

    _need("mamba")
    mamba = tiny_model("mamba")
    assert kv_bytes_per_context_token(mamba) == []
    request = request_bytes_per_token(mamba, 9, NEW_TOKENS)
    weights = sum(p.numel() * p.element_size() for p in mamba.parameters())
    assert request["kv_bytes_per_token"] == 0 and request["bytes_per_token"] == weights
    assert kv_bytes_per_context_token(tiny_model("llama"))


def test_a_multimodal_config_takes_its_position_limit_from_its_text_config():
    """Gemma 3's image-text config records its positions in ``text_config``: that is its limit, so a longer prompt
    is skipped and no note calls it ALiBi or NoPE."""
    import transformers

    from cudagraph_bench.models.positions import recorded_position_limit

    config = transformers.Gemma3Config(text_config={"max_position_embeddings": 96})
    assert recorded_position_limit(config) == 96 == config.get_text_config().max_position_embeddings
