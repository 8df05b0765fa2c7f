"""The transformers internals the suite touches (cudagraph_bench.models.hf_internals) exist in the installed release,
and the helpers built on them behave as documented."""

import pytest
import torch

from cudagraph_bench.errors import NotGraphableError
from cudagraph_bench.models.hf_internals import (TESTED_RANGE, cache_keyword, check_internals, set_cache_write_position,
                                          static_cache_for_graphs, static_rope_during_capture)
from cudagraph_bench.models.presets import load_model


def test_installed_transformers_has_every_internal_the_suite_touches():
    problems = check_internals()
    assert problems == [], "\n".join(problems)


def test_installed_transformers_is_in_the_tested_range():
    import transformers
    from packaging.specifiers import SpecifierSet

    assert transformers.__version__ in SpecifierSet(TESTED_RANGE), \
        f"transformers {transformers.__version__} is outside the tested range {TESTED_RANGE}"


def _small(name, **extra):
    return load_model(name, "float32", "cpu", overrides=dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                                             num_key_value_heads=2, intermediate_size=128,
                                                             vocab_size=256, **extra))


def test_static_cache_has_one_full_length_layer_per_attention_layer_sliding_ones_included():
    model = _small("gemma-2-2b", head_dim=16, query_pre_attn_scalar=16, sliding_window=4)
    cache = static_cache_for_graphs(model, 32)
    assert len(cache.layers) == model.config.num_hidden_layers
    assert {type(layer).__name__ for layer in cache.layers} == {"StaticLayer"}
    assert {layer.max_cache_len for layer in cache.layers} == {32}


def test_write_position_is_set_on_every_layer():
    model = _small("mistral-7b", sliding_window=4)
    cache = static_cache_for_graphs(model, 16)
    ids = torch.randint(0, 256, (1, 6))
    with torch.inference_mode():
        model(input_ids=ids, use_cache=True, **{cache_keyword(model): cache})
    assert {int(layer.cumulative_length) for layer in cache.layers} == {6}
    set_cache_write_position(cache, 3)
    assert {int(layer.cumulative_length) for layer in cache.layers} == {3}


def test_rope_with_a_host_branch_runs_as_default_only_inside_its_original_positions():
    model = _small("tinyllama-1.1b", max_position_embeddings=64, rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    rotary = model.model.rotary_emb
    with static_rope_during_capture(model, 64) as changed:
        assert changed == ["dynamic"] and rotary.rope_type == "default"
    assert rotary.rope_type == "dynamic"
    with pytest.raises(NotGraphableError, match="dynamic RoPE changes its frequencies past 64 positions"):
        static_rope_during_capture(model, 65)
    assert rotary.rope_type == "dynamic"


def test_rope_without_a_host_branch_is_left_alone():
    model = _small("llama-3.2-1b", head_dim=16)
    with static_rope_during_capture(model, 10**6) as changed:
        assert changed == []


@pytest.mark.parametrize("padding", [False, True])
def test_capture_safe_eager_mask_equals_the_librarys(padding):
    from transformers.masking_utils import causal_mask_function, eager_mask

    from cudagraph_bench.models.hf_internals import capture_safe_eager_mask

    attention_mask = torch.tensor([[1, 1, 1, 0, 1, 1]]).bool() if padding else None
    args = dict(batch_size=1, q_length=6, kv_length=6, mask_function=causal_mask_function,
                attention_mask=attention_mask, dtype=torch.bfloat16)
    expected = eager_mask(**args)
    got = capture_safe_eager_mask(**args)
    assert got.dtype == expected.dtype and torch.equal(got, expected)


def test_gemma2_runs_eager_attention_with_the_capture_safe_mask():
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    from cudagraph_bench.models.hf_internals import capture_safe_eager_mask

    model = _small("gemma-2-2b", head_dim=16, query_pre_attn_scalar=16, sliding_window=4)
    assert model.config._attn_implementation == "eager"
    assert ALL_MASK_ATTENTION_FUNCTIONS["eager"] is capture_safe_eager_mask


def test_capture_code_path_makes_transformers_answer_that_a_stream_captures():
    import transformers.masking_utils as mu

    from cudagraph_bench.models.hf_internals import capture_code_path

    assert not mu.is_tracing()
    with capture_code_path():
        assert mu.is_tracing()
    assert not mu.is_tracing()


def test_attention_support_is_read_from_the_class_flags():
    import transformers

    from cudagraph_bench.models.attention import default_attention, supported_attention
    from cudagraph_bench.models.hf_internals import ATTENTION_SUPPORT_FLAGS, supports_attention

    for cls in (transformers.GPT2LMHeadModel, transformers.GptOssForCausalLM, transformers.BloomForCausalLM):
        expected = ("eager",) + tuple(name for name, flag in ATTENTION_SUPPORT_FLAGS.items() if getattr(cls, flag))
        assert supported_attention(cls) == expected
        assert supports_attention(cls, "eager")
        assert default_attention(cls.config_class(), cls) == ("sdpa" if cls._supports_sdpa else "eager")
