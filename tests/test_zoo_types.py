"""The architecture zoo on the CPU: every causal-LM model type of the installed transformers is listed, gets a tiny
config or a one-line reason, a sample of them loads from its save_pretrained folder and runs; the classification
of known cases (recurrent state, local attention under its own field name, chunked attention, host work) is made
up front, and the decode of a hybrid and of a sliding-window model gives generate's tokens."""

import pytest
import torch

from cudagraph_bench.errors import NotGraphableError
from cudagraph_bench.models import zoo_sizes
from cudagraph_bench.models.zoo_types import (ZooBuildError, ZooRefused, causal_lm_types, tiny_config, tiny_model,
                                              zoo_checkpoint)

#: The types are checked in this many groups, so pytest-xdist spreads them over its workers.
GROUPS = 4
#: Types that load from their checkpoint and run one forward here: dense, GQA, MoE, MLA, sliding window, hybrid.
SAMPLE = ("gpt2", "llama", "mixtral", "deepseek_v3", "mistral", "qwen3_next", "bart")   # bart: BartForCausalLM


def _text(config):
    return config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config


def test_the_zoo_lists_every_causal_lm_type_of_transformers():
    from transformers import CONFIG_MAPPING, MODEL_FOR_CAUSAL_LM_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from cudagraph_bench.plugin.zoo_tests import selected_types

    types = causal_lm_types()
    assert set(types) == set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) and len(types) == len(set(types))
    config_classes = {CONFIG_MAPPING[t] for t in types}
    assert set(MODEL_FOR_CAUSAL_LM_MAPPING.keys()) <= config_classes | {
        c for c in MODEL_FOR_CAUSAL_LM_MAPPING.keys() if c.model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES}
    halves = [selected_types("1/2"), selected_types("2/2")]
    assert sorted(halves[0] + halves[1]) == sorted(types) and not set(halves[0]) & set(halves[1])


@pytest.mark.parametrize("group", range(GROUPS))
def test_every_type_gets_a_tiny_config_or_a_reason(group):
    """A tiny config keeps the original's kinds of layers (a hybrid keeps its state and its attention layers) in
    few, narrow layers; a type without one says why in one line."""
    from transformers import CONFIG_MAPPING

    from cudagraph_bench.models.hf_internals import _layer_types_and_kwargs
    from cudagraph_bench.models.zoo_types import OVERRIDES, REFUSED

    built = 0
    for model_type in causal_lm_types()[group::GROUPS]:
        if model_type in REFUSED:
            continue
        try:
            config = tiny_config(model_type)
        except ZooBuildError as exc:
            reason = str(exc)
            assert reason and "\n" not in reason, model_type
            continue
        built += 1
        text = _text(config)
        assert getattr(text, "hidden_size", zoo_sizes.HIDDEN) <= 2 * zoo_sizes.HIDDEN, model_type
        assert getattr(text, "vocab_size", 0) <= zoo_sizes.VOCAB, model_type
        layers = getattr(text, "num_hidden_layers", None)
        assert layers is None or layers <= 2 * zoo_sizes.MAX_LAYERS, model_type
        try:
            tiny_kinds = set(_layer_types_and_kwargs(text)[0])
            default_kinds = set(_layer_types_and_kwargs(_text(CONFIG_MAPPING[model_type]()))[0])
        except Exception:    # noqa: BLE001 - a config transformers' cache cannot type (no layer count)
            continue
        # every kind kept; an override may add one the default config lacks (Bamba's attention), with its reason
        assert default_kinds <= tiny_kinds, (model_type, tiny_kinds, default_kinds)
        assert tiny_kinds == default_kinds or OVERRIDES[model_type][1], model_type
    assert built > 0


@pytest.mark.parametrize("model_type", SAMPLE)
def test_a_tiny_checkpoint_loads_through_the_suites_path_and_runs_the_same_forward(model_type, tmp_path):
    from cudagraph_bench.models.presets import load_model, model_forward

    path = zoo_checkpoint(model_type, tmp_path)
    loaded = load_model(path, "float32", "cpu")
    built = tiny_model(model_type)
    ids = torch.randint(0, loaded.config.vocab_size, (1, 21), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        got, expected = model_forward(loaded, ids), model_forward(built, ids)
    assert got.shape == (1, 21, loaded.config.vocab_size)
    built_weights = built.state_dict()
    assert all(torch.equal(w, built_weights[name]) for name, w in loaded.state_dict().items())
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-3)      # its attention may be another kernel
    assert got.std() > 0.1, "degenerate random logits"


@pytest.mark.parametrize(("model_type", "reason"), [
    ("rwkv", "RwkvConfig has no attention heads .* and no state layers transformers' cache holds"),
    ("xlstm", "xLSTMConfig has no attention heads"),
    ("gemma4_unified_assistant", "drafting assistant"),
])
def test_types_the_suite_does_not_measure_are_refused_with_the_reason(model_type, reason, tmp_path):
    if model_type not in causal_lm_types():
        pytest.skip(f"transformers has no {model_type} here")
    with pytest.raises(ZooRefused, match=reason) as refused:
        zoo_checkpoint(model_type, tmp_path)
    assert str(tmp_path) not in str(refused.value)


def test_a_window_under_its_own_field_name_is_refused_up_front():
    """GPT-Neo applies its local window (window_size) itself, sized from the keys it is handed: over a static cache
    it would cut the wrong keys; the decoder refuses it before any step, naming the field."""
    from cudagraph_bench.capture.decode import GreedyDecoder

    model = tiny_model("gpt_neo")
    with pytest.raises(NotGraphableError, match=r"GPTNeoConfig\.window_size=16"):
        GreedyDecoder(model, 64, use_graph=False)


def test_chunked_attention_is_refused_up_front():
    from cudagraph_bench.models.hf_internals import static_cache_for_graphs

    with pytest.raises(NotGraphableError, match="chunked_attention"):
        static_cache_for_graphs(tiny_model("llama4_text"), 64)


@pytest.mark.parametrize("model_type", ["mistral", "qwen3_next"])
def test_decode_over_a_sliding_window_and_over_recurrent_state_gives_generates_tokens(model_type):
    """The window (16 tokens) is crossed by the 37-token prompt; the hybrid's gated delta-net state lives in
    transformers' fixed-shape state layers. The eager steps of the graphed decoder give generate's tokens; a
    bucketed prefill of a model with state is refused (its padding would run through the state)."""
    from cudagraph_bench.capture.decode import GreedyDecoder
    from cudagraph_bench.plugin.references import generate_reference

    model = tiny_model(model_type)
    ids = torch.randint(1, model.config.vocab_size, (1, 37), generator=torch.Generator().manual_seed(7))
    reference, _ = generate_reference(model, ids, 24)
    assert len(set(reference[0].tolist())) > 3, "degenerate reference"
    decoder = GreedyDecoder(model, 96, use_graph=False)
    assert torch.equal(decoder.generate(ids, 24), reference)
    assert torch.equal(decoder.generate(ids, 24), reference)    # the state is reset between requests
    if decoder.has_state:
        with pytest.raises(NotGraphableError, match="padding of a bucketed prefill"):
            GreedyDecoder(model, 96, use_graph=False, prefill_buckets=(16, 64))
    else:
        bucketed = GreedyDecoder(model, 96, use_graph=False, prefill_buckets=(16, 64))
        assert torch.equal(bucketed.generate(ids, 24), reference)


def test_host_work_in_a_forward_is_named_before_any_gpu():
    """DBRX reads its expert routing on the host (nonzero): the pre-capture watch on a meta copy names the line."""
    from cudagraph_bench.measure.zoo_case import forward_outcome
    from cudagraph_bench.zoo_keys import AWAITS_GPU, NOT_GRAPHABLE

    outcome = forward_outcome(tiny_model("dbrx"), "cpu")
    assert outcome.status == NOT_GRAPHABLE
    assert "modeling_dbrx.py:" in outcome.reason and "a synchronize" in outcome.reason
    assert forward_outcome(tiny_model("llama"), "cpu").status == AWAITS_GPU


def test_a_model_without_a_position_limit_and_a_causal_head_of_any_name():
    from cudagraph_bench.models.checkpoints import names_lm_head
    from cudagraph_bench.models.positions import recorded_position_limit

    assert recorded_position_limit(tiny_config("xlnet")) is None           # XLNet records -1: relative positions
    config = tiny_config("bert-generation")
    assert config.architectures == ["BertGenerationDecoder"] and names_lm_head(config)


def test_decode_state_rebound_in_module_attributes_is_named_and_state_updated_in_place_is_not():
    """RecurrentGemma replaces its RG-LRU and convolution state tensors at every step (a graph would replay from the
    captured state); a hybrid whose state lives in transformers' state layers, updated in place, and an attention
    model keep theirs. The eager decoder still gives generate's tokens; the zoo calls the graph not graphable."""
    from cudagraph_bench.capture.decode import GreedyDecoder
    from cudagraph_bench.capture.module_state import state_rebound_by_step

    found = {t: GreedyDecoder(tiny_model(t), 64, use_graph=False).state_outside_cache
             for t in ("recurrent_gemma", "qwen3_next", "llama")}
    assert found == {"recurrent_gemma": "RecurrentGemmaRecurrentBlock.conv1d_state, RecurrentGemmaRglru.recurrent_states",
                     "qwen3_next": None, "llama": None}

    class Rebinds(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.state = torch.zeros(3)

        def forward(self):
            self.state = self.state + 1          # a new tensor: the attribute is rebound

    class InPlace(Rebinds):
        def forward(self):
            self.state.add_(1)

    assert state_rebound_by_step(Rebinds(), lambda m=None: None) is None        # nothing ran: nothing rebound
    rebinds, in_place = Rebinds(), InPlace()
    assert state_rebound_by_step(rebinds, rebinds) == "Rebinds.state"
    assert state_rebound_by_step(in_place, in_place) is None and torch.equal(in_place.state, torch.ones(3))
