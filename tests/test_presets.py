"""Presets build offline from configs; local directories load with from_pretrained; bad names fail clearly."""


import json

import pytest
import torch

from cudagraph_bench.errors import UnknownModelError, UsageError
from cudagraph_bench.models.checkpoints import WEIGHT_FILES, check_model_directory, directory_config, head_note
from cudagraph_bench.models.positions import PADDING_OFFSET_POSITIONS
from cudagraph_bench.models.presets import (PRESETS, load_model, max_positions, model_forward, model_kind,
                                           model_position_limit, preset_config, random_input_ids)
from cudagraph_bench.plugin.models import ModelCache

TINY = {
    "gpt2": dict(n_layer=1, n_embd=32, n_head=2),
    "distilgpt2": dict(n_layer=1, n_embd=32, n_head=2),
    "bert-tiny": {},
    "tinyllama-1.1b": dict(num_hidden_layers=1, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                           intermediate_size=128),
}
_SMALL_LLM = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=128, vocab_size=512)
TINY.update({
    "smollm2-360m": _SMALL_LLM,
    "qwen2.5-0.5b": _SMALL_LLM,
    "llama-3.2-1b": dict(_SMALL_LLM, head_dim=16),
    "gemma-2-2b": dict(_SMALL_LLM, head_dim=16, query_pre_attn_scalar=16, sliding_window=4),
    "phi-3.5-mini": dict(_SMALL_LLM, num_key_value_heads=4, pad_token_id=0, eos_token_id=1,
                         rope_scaling={"rope_type": "longrope", "long_factor": [2.0] * 8, "short_factor": [1.5] * 8}),
    "mistral-7b": dict(_SMALL_LLM, sliding_window=4),
    "olmoe-1b-7b": dict(_SMALL_LLM, num_experts=4, num_experts_per_tok=2, pad_token_id=0, eos_token_id=1),
    "qwen3-0.6b": dict(_SMALL_LLM, head_dim=16),
    "qwen3-30b-a3b": dict(_SMALL_LLM, head_dim=16, moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2),
    # untied: with tied random embeddings one token (the one of the largest embedding norm) wins every step
    "gemma-3-1b": dict(_SMALL_LLM, head_dim=16, query_pre_attn_scalar=16, sliding_window=4,
                       layer_types=["sliding_attention", "full_attention"], tie_word_embeddings=False),
    "gpt-oss-20b": dict(_SMALL_LLM, head_dim=16, num_local_experts=4, num_experts_per_tok=2, sliding_window=4,
                        pad_token_id=0, eos_token_id=1),
})
#: The presets of models served now (gpt-oss, Qwen3 dense and MoE, Gemma 3).
SERVED_NOW = ("qwen3-0.6b", "qwen3-30b-a3b", "gemma-3-1b", "gpt-oss-20b")


def _n_params_meta(name):
    import transformers

    config = preset_config(name)
    auto = transformers.AutoModelForCausalLM if PRESETS[name]["kind"] == "causal" else transformers.AutoModel
    with torch.device("meta"):
        model = auto.from_config(config)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name, low, high", [
    ("gpt2", 124e6, 125e6),            # 124,439,808
    ("distilgpt2", 81e6, 83e6),        # 81,912,576
    ("bert-tiny", 4.3e6, 4.5e6),       # 4,385,920 (with pooler)
    ("tinyllama-1.1b", 1.09e9, 1.11e9),  # 1,100,048,384
])
def test_preset_sizes_match_the_published_models(name, low, high):
    assert low <= _n_params_meta(name) <= high


def test_tinyllama_shape():
    c = preset_config("tinyllama-1.1b")
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads,
            c.intermediate_size, c.vocab_size) == (2048, 22, 32, 4, 5632, 32000)


@pytest.mark.parametrize("name", list(PRESETS))
def test_tiny_presets_run_on_cpu(name):
    model = load_model(name, "float32", "cpu", overrides=TINY[name])
    ids = random_input_ids(model, 9, device="cpu")
    assert ids.shape == (1, 9) and ids.dtype == torch.int64
    with torch.inference_mode():
        out = model_forward(model, ids)
    if PRESETS[name]["kind"] == "causal":
        assert model_kind(model) == "causal"
        assert out.shape == (1, 9, model.config.vocab_size)
    else:
        assert model_kind(model) == "encoder"
        assert out.shape == (1, 9, model.config.hidden_size)
    assert not model.training


def test_same_seed_same_weights_and_bfloat16():
    a = load_model("gpt2", "bfloat16", "cpu", overrides=TINY["gpt2"], seed=1)
    b = load_model("gpt2", "bfloat16", "cpu", overrides=TINY["gpt2"], seed=1)
    c = load_model("gpt2", "bfloat16", "cpu", overrides=TINY["gpt2"], seed=2)
    wa, wb, wc = (m.transformer.h[0].attn.c_attn.weight for m in (a, b, c))
    assert wa.dtype == torch.bfloat16
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)


def test_positions():
    assert max_positions(load_model("bert-tiny", "float32", "cpu")) == 512
    assert max_positions(load_model("gpt2", "float32", "cpu", overrides=TINY["gpt2"])) == 1024


_ENCODER = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, vocab_size=64,
                max_position_embeddings=40)
LEARNED_POSITION_CONFIGS = {
    "bert": _ENCODER,
    **{model_type: dict(_ENCODER, pad_token_id=1) for model_type in sorted(PADDING_OFFSET_POSITIONS)},
    "xlm-roberta": dict(_ENCODER, pad_token_id=3),
    "gpt2": dict(n_embd=32, n_layer=1, n_head=2, vocab_size=64, n_positions=40),
    "opt": dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, ffn_dim=64, vocab_size=64,
                max_position_embeddings=40, word_embed_proj_dim=32),
}


@pytest.mark.parametrize("model_type", list(LEARNED_POSITION_CONFIGS))
def test_positions_of_learned_position_embeddings_are_the_longest_prompt_that_runs(tmp_path, model_type):
    """With learned position embeddings the limit is exact: a prompt of max_positions tokens runs and one
    more token indexes past the table. RoBERTa's family starts its positions after the padding index, so
    of its max_position_embeddings rows pad_token_id + 1 are never reached."""
    import transformers

    config = transformers.AutoConfig.for_model(model_type, **LEARNED_POSITION_CONFIGS[model_type])
    transformers.AutoModel.from_config(config).save_pretrained(tmp_path)
    model = load_model(str(tmp_path), "float32", "cpu")
    limit = max_positions(model)
    # the limit of the plugin and of run, before the model is built (read from config.json), is the built model's
    assert model_position_limit(str(tmp_path)) == limit
    # the plugin's limit before the model is built (read from config.json) is the built model's
    cache = ModelCache("cpu")
    assert cache.position_limit(str(tmp_path)) == limit
    assert cache.position_limit(str(tmp_path)) == max_positions(cache.get(str(tmp_path), "float32")) == limit
    ids = torch.full((1, limit + 1), 5)                       # no padding token: every position is used
    with torch.inference_mode():
        model_forward(model, ids[:, :limit])
        with pytest.raises((IndexError, RuntimeError)):
            model_forward(model, ids)


def test_local_directory_loads_offline(tmp_path):
    model = load_model("gpt2", "float32", "cpu", overrides=TINY["gpt2"])
    model.save_pretrained(tmp_path)
    again = load_model(str(tmp_path), "float32", "cpu")
    ids = random_input_ids(model, 5, device="cpu")
    with torch.inference_mode():
        torch.testing.assert_close(model_forward(again, ids), model_forward(model, ids))


def test_local_directory_without_weights_says_what_to_do(tmp_path):
    preset_config("gpt2").save_pretrained(tmp_path)  # config.json only
    with pytest.raises(UnknownModelError, match="save_pretrained"):
        load_model(str(tmp_path), "float32", "cpu")


def test_weight_file_names_are_transformers_own():
    from transformers.utils import SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME, WEIGHTS_INDEX_NAME, WEIGHTS_NAME

    assert set(WEIGHT_FILES) == {SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_NAME, WEIGHTS_INDEX_NAME}


def test_a_saved_model_passes_the_directory_check_and_a_config_alone_does_not(tmp_path):
    """A save_pretrained directory of a model is accepted; the same directory without its weights, or whose
    config.json names no architectures, is refused before any case with the fix."""
    import json

    model = load_model("gpt2", "float32", "cpu", overrides=TINY["gpt2"])
    model.save_pretrained(tmp_path / "saved")
    assert type(check_model_directory(str(tmp_path / "saved"))) is type(model.config)
    model.config.save_pretrained(tmp_path / "config-only")
    with pytest.raises(UnknownModelError, match="no weights on disk.*save_pretrained"):
        check_model_directory(str(tmp_path / "config-only"))
    config = json.loads((tmp_path / "saved" / "config.json").read_text())
    assert config.pop("architectures") == [type(model).__name__]
    (tmp_path / "saved" / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnknownModelError, match="names no architectures.*GPT2ForCausalLM"):
        check_model_directory(str(tmp_path / "saved"))


@pytest.mark.parametrize("head", ["GPT2ForSequenceClassification", "GPT2LMHeadModel", "GPT2Model"])
def test_a_head_the_suite_does_not_build_is_noted_and_the_base_model_is_what_loads(tmp_path, head):
    """A classification checkpoint loads as its base model (no decode benchmarks) and the note says so; a causal
    LM or a base model gets no note."""
    import transformers

    config = preset_config("gpt2", {**TINY["gpt2"], "pad_token_id": 0})
    getattr(transformers, head)(config).save_pretrained(tmp_path)
    note = head_note(str(tmp_path), check_model_directory(str(tmp_path)))
    loaded = load_model(str(tmp_path), "float32", "cpu")
    if head == "GPT2ForSequenceClassification":
        assert note is not None and head in note and type(loaded).__name__ in note and model_kind(loaded) == "encoder"
    else:
        assert note is None and type(loaded).__name__ == head


@pytest.mark.parametrize("config_class, fields", [
    ("ViTConfig", dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)),
    ("CLIPConfig", dict()),
    ("LlavaConfig", dict()),
])
def test_vision_and_multimodal_models_are_refused_as_such(tmp_path, config_class, fields):
    """ViT (no token embeddings), CLIP and LLaVA (a vision sub-config) are refused for what they are, not
    for a missing position limit."""
    import transformers

    getattr(transformers, config_class)(**fields).save_pretrained(tmp_path)
    with pytest.raises(UnknownModelError, match="vision, audio or multimodal model") as reason:
        directory_config(str(tmp_path))
    assert "position limit" not in str(reason.value)


def test_unknown_model_lists_presets():
    with pytest.raises(UnknownModelError, match="gpt2, distilgpt2, bert-tiny, tinyllama-1.1b"):
        load_model("gpt-5", "float32", "cpu")


def test_unknown_dtype():
    with pytest.raises(UsageError, match="float32, bfloat16, float16"):
        load_model("bert-tiny", "float8", "cpu")


def _docstring_rows():
    """name -> (params text, positions) from the table in the presets module docstring."""
    import re

    import cudagraph_bench.models.presets as presets

    rows = {}
    for line in presets.__doc__.splitlines():
        m = re.match(r"``([\w.\-]+)``\s+(causal|encoder)\s+.*?\s(\d+(?:\.\d+)?[MB])\s+(\d+)\s+\S+$", line)
        if m:
            rows[m.group(1)] = (m.group(3), int(m.group(4)))
    return rows


@pytest.mark.parametrize("name", list(PRESETS))
def test_docstring_row_gives_the_built_models_parameters_and_positions(name):
    text, positions = _docstring_rows()[name]
    value = float(text[:-1]) * (1e9 if text.endswith("B") else 1e6)
    n = _n_params_meta(name)
    digits = len(text[:-1].replace(".", "").lstrip("0"))          # significant digits shown
    assert abs(n - value) <= 0.5 * 10 ** (len(str(int(value))) - digits) + 1, f"{name}: docstring {text}, built {n:,}"
    config = preset_config(name)
    assert positions == (getattr(config, "n_positions", None) or config.max_position_embeddings)


def test_every_preset_names_its_source_config():
    assert all(spec.get("source", "").count("/") == 1 for spec in PRESETS.values())


@pytest.mark.parametrize("name", SERVED_NOW)
def test_served_now_presets_take_every_field_of_their_published_config(name):
    """Every field of the newer presets reaches the built config as given (transformers 5's names: a field of the
    config class, or an attribute the model reads, such as Qwen3-MoE's head_dim), and the built model has the
    published parameter count of its docstring row (test_docstring_row_gives_...)."""
    import dataclasses

    import transformers

    spec = PRESETS[name]
    config = preset_config(name)
    fields = {f.name for f in dataclasses.fields(getattr(transformers, spec["config_class"]))}
    for key, value in spec["config"].items():
        got = getattr(config, key)
        assert got == value or (isinstance(value, list) and list(got) == value), f"{name}.{key}: {got!r} != {value!r}"
        assert key in fields or key in vars(config), f"{name}.{key} is neither a field nor an attribute"


@pytest.mark.parametrize("name", SERVED_NOW)
def test_tiny_served_now_presets_decode_the_tokens_of_generate(name):
    """A tiny version of each newer preset (two layers, a 4-token sliding window where the architecture has
    one, small experts): the suite's static-cache greedy loop gives HF generate's tokens, on the eager path and
    on the path HF takes while a stream captures, across the window."""
    import transformers.masking_utils as masking_utils

    from cudagraph_bench.capture.decode import GreedyDecoder
    from cudagraph_bench.models.hf_internals import capture_code_path

    model = load_model(name, "float32", "cpu", overrides={**TINY[name], "initializer_range": 0.2})
    ids = torch.randint(0, model.config.vocab_size, (1, 11), generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        ref = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=16)[:, 11:]
    assert len(set(ref[0].tolist())) > 3, "degenerate reference"
    assert torch.equal(GreedyDecoder(model, 32, use_graph=False).generate(ids, 16), ref)
    assert torch.equal(GreedyDecoder(model, 32, use_graph=False, prefill_buckets=(16,)).generate(ids, 16), ref)
    with capture_code_path():
        assert masking_utils.is_tracing()
        assert torch.equal(GreedyDecoder(model, 32, use_graph=False, prefill_buckets=(16,)).generate(ids, 16), ref)


def test_a_config_without_a_position_limit_is_bounded_by_the_request_or_max_positions():
    """BLOOM (ALiBi) records no position limit: its limit is the bound it is given (--max-positions, else the
    longest request), and without one the error names --max-positions; a recorded limit wins over any bound."""
    import transformers

    from cudagraph_bench.models.positions import position_bound, position_limit

    bloom = transformers.BloomConfig(n_layer=1, hidden_size=16, n_head=2, vocab_size=64)
    with pytest.raises(UsageError, match="BloomConfig records no position limit .*: give --max-positions N"):
        position_limit(bloom)
    assert position_limit(bloom, 300) == 300
    assert position_limit(preset_config("gpt2"), 300) == 1024
    assert position_bound(None, (16, 50, 128), (50,), (64, 128)) == 178
    assert position_bound(None, (16, 1024), (50,), (64, 128)) == 1024
    assert position_bound(None, (16,)) == 16
    assert position_bound(None, (16, 50), (50,), (64,)) == 114 and position_bound(4096, (16,)) == 4096


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("name", SERVED_NOW)
def test_tiny_served_now_presets_do_no_host_work_on_the_capture_path(name, dtype):
    """The forward (with and without a padding mask) and the decode steps of a tiny version of each newer preset,
    on the ``meta`` device, on the capture's code path, with the graph-safe experts of the dtype (grouped_mm in
    bfloat16, batched_mm else) and the model's own attention (gpt-oss: eager): no host work is left."""
    from capture_path import decode_steps_host_work, meta_host_work

    model = load_model(name, dtype, "meta", overrides=TINY[name])
    ids = torch.randint(0, model.config.vocab_size, (1, 9), device="meta")
    mask = torch.ones(1, 9, dtype=torch.int64, device="meta")
    assert meta_host_work(model, lambda: model_forward(model, ids), 9) is None
    assert meta_host_work(model, lambda: model_forward(model, ids, mask), 9) is None
    assert decode_steps_host_work(model)[0] is None


@pytest.mark.parametrize("name", SERVED_NOW)
def test_float64_in_place_gives_the_float64_copys_logits_and_restores_the_model(name, monkeypatch):
    """A model whose float64 copy does not fit on its device (gpt-oss-20b, Qwen3-30B-A3B on one H200) is run in
    float64 module by module: the tiny bfloat16 presets' teacher-forced logits equal the float64 copy's, and the
    model's weights (same tensors, same bits) and experts implementation are as before, also after a failure."""
    import cudagraph_bench.measure.correctness as correctness
    from cudagraph_bench.models.presets import experts_implementation

    model = load_model(name, "bfloat16", "cpu", overrides={**TINY[name], "initializer_range": 0.2})
    before = {k: v.clone() for k, v in model.state_dict().items()}
    experts = experts_implementation(model)
    ids = torch.randint(0, model.config.vocab_size, (1, 9), generator=torch.Generator().manual_seed(3))
    tokens = torch.randint(0, model.config.vocab_size, (1, 6), generator=torch.Generator().manual_seed(4))
    copied = correctness.fp64_decode_logits(model, ids, tokens)
    monkeypatch.setattr(correctness, "fp64_copy_fits", lambda m: False)
    in_place = correctness.fp64_decode_logits(model, ids, tokens)
    assert in_place.dtype == torch.float64 and in_place.shape == copied.shape == (6, model.config.vocab_size)
    torch.testing.assert_close(in_place, copied, rtol=1e-9, atol=1e-9)
    with pytest.raises(RuntimeError, match="planted"), correctness.float64_in_place(model), torch.no_grad():
        model.model.layers[0].register_forward_hook(lambda *a: (_ for _ in ()).throw(RuntimeError("planted")))
        model(input_ids=ids)
    after = model.state_dict()
    assert all(after[k].dtype == v.dtype and torch.equal(after[k], v) for k, v in before.items())
    assert experts_implementation(model) == experts


#: Hand-written pages that list the model presets: (page, the words that open the list).
PRESET_LISTS = (("README.md", "**Models**: presets"), ("docs/running.md", "Presets:"))


@pytest.mark.parametrize("page, opening", PRESET_LISTS)
def test_the_pages_that_list_the_presets_name_every_preset_the_cli_accepts(page, opening):
    """The list runs from its opening words to the presets module it names; each preset in backticks, once."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / page).read_text()
    assert text.count(opening) == 1, f"{page}: the preset list opens with {opening!r} once"
    listed = text.split(opening, 1)[1].split("src/cudagraph_bench/models/presets.py", 1)[0]
    names = re.findall(r"`([^`]+)`", listed)
    assert sorted(names) == sorted(PRESETS), f"{page} lists {names}, the CLI accepts {list(PRESETS)}"


@pytest.mark.parametrize("layers, weight, what", [(3, "h.2.", "missing from the weights"),
                                                  (1, "h.1.", "not in the model config.json builds")])
def test_a_config_whose_layer_count_the_weights_do_not_hold_is_refused(tmp_path, layers, weight, what):
    """Weights of 2 layers under a config of 3 (one layer would be random) or of 1 (one layer dropped): either way
    the suite would measure another model than the one on disk, so the load names the first such weight."""
    import transformers

    from cudagraph_bench.errors import CheckpointMismatchError

    config = preset_config("gpt2", {**TINY["gpt2"], "n_layer": 2})
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**saved, "n_layer": layers}))
    with pytest.raises(CheckpointMismatchError, match=rf"transformer\.{weight}.* is {what}.*save_pretrained"):
        load_model(str(tmp_path), "float32", "cpu")
