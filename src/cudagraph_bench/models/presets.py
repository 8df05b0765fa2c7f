"""Model presets, built offline from transformers configs with random weights and a fixed seed (gpt-fast style:
latency does not depend on weight values). Any local ``save_pretrained()`` directory also loads, offline.

Presets (``PRESETS``; parameters counted from the built model, ``tests/test_presets.py`` checks them):

==================  ========  =====================================================  ======  =========  ====================
name                kind      shape                                                  params  positions  source config
==================  ========  =====================================================  ======  =========  ====================
``gpt2``            causal    12 layers, hidden 768, 12 heads, vocab 50257          124M    1024       openai-community/gpt2
``distilgpt2``      causal    6 layers, hidden 768, 12 heads, vocab 50257           82M     1024       distilbert/distilgpt2
``bert-tiny``       encoder   2 layers, hidden 128, 2 heads, intermediate 512        4.4M    512        prajjwal1/bert-tiny
``tinyllama-1.1b``  causal    Llama: 22 layers, hidden 2048, 32 heads, 4 KV heads    1.10B   2048       TinyLlama/TinyLlama-1.1B-Chat-v1.0
``smollm2-360m``    causal    Llama: 32 layers, hidden 960, 15 heads, 5 KV heads     362M    8192       HuggingFaceTB/SmolLM2-360M
``qwen2.5-0.5b``    causal    Qwen2: 24 layers, hidden 896, 14 heads, 2 KV heads,    494M    32768      Qwen/Qwen2.5-0.5B
                              QKV bias, vocab 151936, tied embeddings
``llama-3.2-1b``    causal    Llama: 16 layers, hidden 2048, 32 heads, 8 KV heads,   1.24B   131072     meta-llama/Llama-3.2-1B
                              llama3 RoPE scaling (factor 32), vocab 128256
``gemma-2-2b``      causal    Gemma2: 26 layers, hidden 2304, 8 heads, 4 KV heads,   2.61B   8192       google/gemma-2-2b
                              sliding window 4096 on alternating layers, attention
                              and final logit soft-capping, vocab 256000
``phi-3.5-mini``    causal    Phi3: 32 layers, hidden 3072, 32 heads, LongRoPE       3.82B   131072     microsoft/Phi-3.5-mini-instruct
                              (short/long factors, 4096 original positions)
``mistral-7b``      causal    Mistral: 32 layers, hidden 4096, 32 heads, 8 KV       7.24B   32768      mistralai/Mistral-7B-v0.1
                              heads, sliding window 4096
``olmoe-1b-7b``     causal    OLMoE mixture of experts: 16 layers, hidden 2048,      6.92B   4096       allenai/OLMoE-1B-7B-0924
                              64 experts, top-8 routing (1.3B active)
``qwen3-0.6b``      causal    Qwen3: 28 layers, hidden 1024, 16 heads, 8 KV heads,   596M    40960      Qwen/Qwen3-0.6B
                              head_dim 128, QK-norm, vocab 151936, tied embeddings
``qwen3-30b-a3b``   causal    Qwen3-MoE: 48 layers, hidden 2048, 32 heads, 4 KV      30.5B   40960      Qwen/Qwen3-30B-A3B
                              heads, 128 experts, top-8 routing (3.3B active),
                              expert width 768
``gemma-3-1b``      causal    Gemma3 text: 26 layers, hidden 1152, 4 heads, 1 KV     1.00B   32768      google/gemma-3-1b-it
                              head, head_dim 256, sliding window 512 on 5 of every
                              6 layers (local RoPE base 10000), vocab 262144
``gpt-oss-20b``     causal    GPT-OSS mixture of experts: 24 layers, hidden 2880,    20.9B   131072     openai/gpt-oss-20b
                              64 heads, 8 KV heads, 32 experts, top-4 (3.6B
                              active), attention sinks, sliding window 128 on
                              alternating layers, YaRN RoPE (factor 32)
==================  ========  =====================================================  ======  =========  ====================

Each model runs its own attention (:mod:`cudagraph_bench.models.attention`), mixtures of experts a graph-safe
experts implementation (:func:`graph_safe_experts_implementation`).
``qwen3-30b-a3b`` (61 GB in bfloat16) and ``gpt-oss-20b`` (42 GB) need a GPU of that memory."""

from __future__ import annotations

import contextlib
import os
from array import array
from typing import TYPE_CHECKING, Any

from cudagraph_bench.errors import CheckpointMismatchError, UnknownModelError, UsageError
from cudagraph_bench.models.attention import choose_attention
from cudagraph_bench.models.checkpoints import (FIX, directory_config, directory_model_class, names_lm_head,
                                                weight_shape_mismatch)
from cudagraph_bench.models.positions import max_positions, position_limit  # noqa: F401 - max_positions: re-exported
from cudagraph_bench.models.zoo_sizes import EXPERT_FIELDS
from cudagraph_bench.options import DTYPES, PRESET_NAMES

if TYPE_CHECKING:  # pragma: no cover
    import torch

#: Phi-3.5-mini-instruct's LongRoPE rescaling factors (48 per table: head_dim 96 / 2), from its config.json: float32
#: values, written shortest and widened exactly by ``array("f")``.
_PHI35_LONG_FACTOR = list(array("f", [
    1.08, 1.11, 1.14, 1.34, 1.5899999, 1.6, 1.62, 2.6200001, 3.23, 3.23, 4.79, 7.4, 7.7000003, 9.09, 12.2, 17.67,
    24.460001, 28.570002, 30.420002, 30.840002, 32.590004, 32.930004, 42.320004, 44.960003, 50.340004, 50.450005,
    57.550003, 57.930004, 58.210003, 60.140003, 62.610004, 62.620003, 62.710003, 63.140003, 63.140003, 63.770004,
    63.930004, 63.960003, 63.97, 64.03, 64.07, 64.08, 64.12, 64.41, 64.48, 64.51, 64.53, 64.84]))
_PHI35_SHORT_FACTOR = list(array("f", [
    1.0, 1.02, 1.03, 1.03, 1.05, 1.05, 1.05, 1.05, 1.05, 1.0699999, 1.0999999, 1.1099999, 1.1599998, 1.1599998,
    1.1699998, 1.2899998, 1.3399998, 1.6799998, 1.7899998, 1.8199998, 1.8499998, 1.8799998, 1.9099997, 1.9399997,
    1.9899997, 2.0199997, 2.0199997, 2.0199997, 2.0199997, 2.0199997, 2.0199997, 2.0299997, 2.0299997, 2.0299997,
    2.0299997, 2.0299997, 2.0299997, 2.0299997, 2.0299997, 2.0299997, 2.0799997, 2.0899997, 2.1899996, 2.2199996,
    2.5899994, 2.7299995, 2.7499995, 2.8399994]))


def _preset(config_class: str, source: str, kind: str = "causal", **config) -> dict[str, Any]:
    return {"kind": kind, "config_class": config_class, "source": source, "config": config}


#: name -> kind + config class + config fields (+ ``source``: the hub config the fields come from).
PRESETS: dict[str, dict[str, Any]] = {
    "gpt2": _preset("GPT2Config", "openai-community/gpt2", n_layer=12, n_embd=768, n_head=12, n_positions=1024,
                    vocab_size=50257),
    "distilgpt2": _preset("GPT2Config", "distilbert/distilgpt2", n_layer=6, n_embd=768, n_head=12, n_positions=1024,
                          vocab_size=50257),
    "bert-tiny": _preset("BertConfig", "prajjwal1/bert-tiny", kind="encoder", num_hidden_layers=2, hidden_size=128,
                         num_attention_heads=2, intermediate_size=512, max_position_embeddings=512, vocab_size=30522),
    "tinyllama-1.1b": _preset("LlamaConfig", "TinyLlama/TinyLlama-1.1B-Chat-v1.0", num_hidden_layers=22,
                              hidden_size=2048, num_attention_heads=32, num_key_value_heads=4, intermediate_size=5632,
                              vocab_size=32000, max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0,
                              bos_token_id=1, eos_token_id=2),
    "smollm2-360m": _preset("LlamaConfig", "HuggingFaceTB/SmolLM2-360M", num_hidden_layers=32, hidden_size=960,
                            num_attention_heads=15, num_key_value_heads=5, intermediate_size=2560, vocab_size=49152,
                            max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=100000.0,
                            tie_word_embeddings=True, bos_token_id=0, eos_token_id=0),
    "qwen2.5-0.5b": _preset("Qwen2Config", "Qwen/Qwen2.5-0.5B", num_hidden_layers=24, hidden_size=896,
                            num_attention_heads=14, num_key_value_heads=2, intermediate_size=4864, vocab_size=151936,
                            max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000.0,
                            tie_word_embeddings=True, use_sliding_window=False, bos_token_id=151643,
                            eos_token_id=151643),
    "llama-3.2-1b": _preset("LlamaConfig", "meta-llama/Llama-3.2-1B", num_hidden_layers=16, hidden_size=2048,
                            num_attention_heads=32, num_key_value_heads=8, head_dim=64, intermediate_size=8192,
                            vocab_size=128256, max_position_embeddings=131072, rms_norm_eps=1e-5,
                            tie_word_embeddings=True,
                            rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
                                          "rope_theta": 500000.0},
                            rope_theta=500000.0, bos_token_id=128000, eos_token_id=128001),
    "gemma-2-2b": _preset("Gemma2Config", "google/gemma-2-2b", num_hidden_layers=26, hidden_size=2304,
                          num_attention_heads=8, num_key_value_heads=4, head_dim=256, intermediate_size=9216,
                          vocab_size=256000, max_position_embeddings=8192, sliding_window=4096,
                          attn_logit_softcapping=50.0, final_logit_softcapping=30.0, query_pre_attn_scalar=256,
                          rms_norm_eps=1e-6, rope_theta=10000.0, hidden_activation="gelu_pytorch_tanh", bos_token_id=2,
                          eos_token_id=1, pad_token_id=0),
    "phi-3.5-mini": _preset("Phi3Config", "microsoft/Phi-3.5-mini-instruct", num_hidden_layers=32, hidden_size=3072,
                            num_attention_heads=32, num_key_value_heads=32, intermediate_size=8192, vocab_size=32064,
                            max_position_embeddings=131072, original_max_position_embeddings=4096, rms_norm_eps=1e-5,
                            rope_theta=10000.0,
                            rope_scaling={"rope_type": "longrope", "long_factor": _PHI35_LONG_FACTOR,
                                          "short_factor": _PHI35_SHORT_FACTOR},
                            sliding_window=262144, tie_word_embeddings=False, bos_token_id=1, eos_token_id=32000,
                            pad_token_id=32000),
    "mistral-7b": _preset("MistralConfig", "mistralai/Mistral-7B-v0.1", num_hidden_layers=32, hidden_size=4096,
                          num_attention_heads=32, num_key_value_heads=8, intermediate_size=14336, vocab_size=32000,
                          max_position_embeddings=32768, sliding_window=4096, rms_norm_eps=1e-5, rope_theta=10000.0,
                          bos_token_id=1, eos_token_id=2),
    "olmoe-1b-7b": _preset("OlmoeConfig", "allenai/OLMoE-1B-7B-0924", num_hidden_layers=16, hidden_size=2048,
                           num_attention_heads=16, num_key_value_heads=16, intermediate_size=1024, num_experts=64,
                           num_experts_per_tok=8, norm_topk_prob=False, vocab_size=50304, max_position_embeddings=4096,
                           rms_norm_eps=1e-5, rope_theta=10000.0, bos_token_id=None, eos_token_id=50279,
                           pad_token_id=1),
    "qwen3-0.6b": _preset("Qwen3Config", "Qwen/Qwen3-0.6B", num_hidden_layers=28, hidden_size=1024,
                          num_attention_heads=16, num_key_value_heads=8, head_dim=128, intermediate_size=3072,
                          vocab_size=151936, max_position_embeddings=40960, rms_norm_eps=1e-6,
                          rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, attention_bias=False,
                          use_sliding_window=False, sliding_window=None, max_window_layers=28,
                          tie_word_embeddings=True, bos_token_id=151643, eos_token_id=151645),
    # head_dim is no field of Qwen3MoeConfig in transformers 5.17-5.24: kept as an attribute, which the model reads
    "qwen3-30b-a3b": _preset("Qwen3MoeConfig", "Qwen/Qwen3-30B-A3B", num_hidden_layers=48, hidden_size=2048,
                             num_attention_heads=32, num_key_value_heads=4, head_dim=128, intermediate_size=6144,
                             moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8, norm_topk_prob=True,
                             decoder_sparse_step=1, mlp_only_layers=[], vocab_size=151936,
                             max_position_embeddings=40960, rms_norm_eps=1e-6,
                             rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, attention_bias=False,
                             use_sliding_window=False, sliding_window=None, router_aux_loss_coef=0.001,
                             tie_word_embeddings=False, bos_token_id=151643, eos_token_id=151645),
    # its config.json: sliding_window_pattern 6 (every 6th layer global), rope_theta 1e6, rope_local_base_freq 1e4
    "gemma-3-1b": _preset("Gemma3TextConfig", "google/gemma-3-1b-it", num_hidden_layers=26, hidden_size=1152,
                          num_attention_heads=4, num_key_value_heads=1, head_dim=256, intermediate_size=6912,
                          vocab_size=262144, max_position_embeddings=32768, sliding_window=512,
                          layer_types=["full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
                                       for i in range(26)],
                          rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                                           "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
                          query_pre_attn_scalar=256, rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh",
                          attn_logit_softcapping=None, final_logit_softcapping=None, attention_bias=False,
                          bos_token_id=2, eos_token_id=[1, 106], pad_token_id=0),
    # swiglu_limit: a field from transformers 5.24 on (5.17 hard-codes the same 7.0)
    "gpt-oss-20b": _preset("GptOssConfig", "openai/gpt-oss-20b", num_hidden_layers=24, hidden_size=2880,
                           num_attention_heads=64, num_key_value_heads=8, head_dim=64, intermediate_size=2880,
                           num_local_experts=32, num_experts_per_tok=4, vocab_size=201088,
                           max_position_embeddings=131072, sliding_window=128,
                           layer_types=["sliding_attention", "full_attention"] * 12, rms_norm_eps=1e-5,
                           rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0,
                                            "beta_fast": 32.0, "beta_slow": 1.0,
                                            "original_max_position_embeddings": 4096, "truncate": False},
                           attention_bias=True, hidden_act="silu", swiglu_limit=7.0, router_aux_loss_coef=0.9,
                           tie_word_embeddings=False, pad_token_id=199999, eos_token_id=200002),
}
assert tuple(PRESETS) == PRESET_NAMES  # options.py lists the names without importing transformers


def torch_dtype(dtype: "str | torch.dtype") -> "torch.dtype":
    """``"bfloat16"`` -> ``torch.bfloat16``; UsageError for other names."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise UsageError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPES)}")
    return getattr(torch, dtype)


def preset_config(name: str, overrides: dict | None = None, *, attn_implementation: str | None = None):
    """A preset's transformers config with field ``overrides`` (``layer_types`` cut to an overridden
    ``num_hidden_layers``) and its attention. Raises UnknownModelError: not a preset, or its class does not run
    ``attn_implementation``."""
    import transformers

    if name not in PRESETS:
        raise UnknownModelError(f"unknown preset {name!r}: use one of {', '.join(PRESETS)}")
    spec, overrides = PRESETS[name], overrides or {}
    fields = {**spec["config"], **overrides}
    if "layer_types" in spec["config"] and "num_hidden_layers" in overrides and "layer_types" not in overrides:
        fields["layer_types"] = list(spec["config"]["layer_types"][:overrides["num_hidden_layers"]])
    config = getattr(transformers, spec["config_class"])(**fields)
    mapping = transformers.MODEL_FOR_CAUSAL_LM_MAPPING if spec["kind"] == "causal" else transformers.MODEL_MAPPING
    config._attn_implementation = choose_attention(config, mapping[type(config)], attn_implementation)
    return config


def load_model(name_or_path: str, dtype: "str | torch.dtype" = "float32", device: "str | torch.device" = "cuda",
               *, seed: int = 0, overrides: dict | None = None,
               attn_implementation: str | None = None) -> "torch.nn.Module":
    """Build a preset (random weights, fixed ``seed``) or load a ``save_pretrained`` directory, in ``eval()`` on
    ``device`` in ``dtype``; ``eos_token_id`` is cleared so ``generate`` stops only at ``max_new_tokens``.
    UnknownModelError: no preset nor directory, no weights, a class that does not run ``attn_implementation``, or a
    weight that does not fit; UsageError: unknown dtype, or ``overrides`` for a directory."""
    import torch
    import transformers

    tdtype = torch_dtype(dtype)
    if name_or_path in PRESETS:
        config = preset_config(name_or_path, overrides, attn_implementation=attn_implementation)
        causal = PRESETS[name_or_path]["kind"] == "causal"
        auto = transformers.AutoModelForCausalLM if causal else transformers.AutoModel
        torch.manual_seed(seed)
        with torch.device(device):
            model = auto.from_config(config, dtype=tdtype, attn_implementation=config._attn_implementation)
    elif os.path.isdir(name_or_path):
        if overrides:
            raise UsageError("config overrides apply to presets only, not to a checkpoint directory")
        model = _load_directory(name_or_path, tdtype, device, attn_implementation)
    else:
        raise UnknownModelError(
            f"unknown model {name_or_path!r}: use a preset ({', '.join(PRESETS)}) or a local directory "
            f"written by save_pretrained() (no model hub is reachable)")
    use_graph_safe_experts(model, tdtype)
    if model_kind(model) == "causal" and model.generation_config is not None:
        model.generation_config.eos_token_id = None
        model.generation_config.pad_token_id = 0
    return model.eval()


def is_mixture_of_experts(model_or_config) -> bool:
    """True for a mixture-of-experts model (its config counts experts under a name of ``zoo_sizes.EXPERT_FIELDS``)."""
    config = getattr(model_or_config, "config", model_or_config)
    config = config.get_text_config() if hasattr(config, "get_text_config") else config
    return any(getattr(config, f, None) for f in EXPERT_FIELDS)


def graph_safe_experts_implementation(dtype: "str | torch.dtype") -> str:
    """``grouped_mm`` in bfloat16, else ``batched_mm`` (outside bfloat16 torch's grouped GEMM reads its offsets on the
    host, which a graph cannot capture)."""
    import torch

    return "grouped_mm" if torch_dtype(dtype) == torch.bfloat16 else "batched_mm"


def use_graph_safe_experts(model, dtype) -> None:
    """Switch a mixture-of-experts model to :func:`graph_safe_experts_implementation`; others are left alone."""
    if is_mixture_of_experts(model) and hasattr(model, "set_experts_implementation"):
        with contextlib.suppress(ValueError, KeyError, ImportError):   # experts it cannot switch: keep its own
            model.set_experts_implementation(graph_safe_experts_implementation(dtype))


def experts_implementation(model) -> str | None:
    """``"grouped_mm"``, ``"batched_mm"``, ``"eager"``, or None for a dense model."""
    if not is_mixture_of_experts(model):
        return None
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    return getattr(config, "_experts_implementation", None) or "eager"


def _load_directory(path: str, tdtype, device, attn_implementation: str | None):
    """CheckpointMismatchError naming a weight that does not fit its config: another shape, or one the model lacks or
    the weights lack (transformers would drop it or initialise it at random, measuring another model)."""
    config = directory_config(path)
    model_class = directory_model_class(config)
    attention = choose_attention(config, model_class, attn_implementation)
    try:
        model, loaded = model_class.from_pretrained(path, dtype=tdtype, local_files_only=True,
                                                    attn_implementation=attention, output_loading_info=True)
    except OSError as exc:
        raise UnknownModelError(f"{path}: weights are not on disk ({str(exc).splitlines()[0]}); download them "
                                f"on a machine with hub access and save_pretrained() into this directory") from None
    except RuntimeError as exc:     # transformers' "size mismatch ... look at the above report": name the weight
        mismatch = weight_shape_mismatch(path, config, model_class)
        if mismatch is None:
            raise
        raise CheckpointMismatchError(f"{path}: its weights do not fit its config: {mismatch}: {FIX}") from exc
    own = {name for name, _ in model.named_children()}      # a head the suite does not build (score.*) is no misfit
    for key, what in (("missing_keys", "missing from the weights (would be initialised at random)"),
                      ("unexpected_keys", "not in the model config.json builds (would be dropped)")):
        keys = [k for k in loaded.get(key) or () if key == "missing_keys" or k.split(".")[0] in own]
        if keys:     # tied weights and those the class may lack are not listed by transformers
            raise CheckpointMismatchError(f"{path}: its weights do not fit its config: {min(keys)} is {what}: {FIX}")
    return model.to(device)


def kind_of(name_or_path: str) -> str:
    """``"causal"`` or ``"encoder"`` from the config (no model built); UnknownModelError for anything else."""
    if name_or_path in PRESETS:
        return PRESETS[name_or_path]["kind"]
    return "causal" if names_lm_head(directory_config(name_or_path)) else "encoder"


def model_kind(model) -> str:
    """``"causal"`` when the model returns next-token logits, else ``"encoder"``."""
    return "causal" if hasattr(model, "lm_head") or model.__class__.__name__.endswith(("LMHeadModel", "ForCausalLM")) \
        else "encoder"


def vocab_size(model) -> int:
    """Token ids a model's embeddings take, ``[0, vocab_size)``."""
    config = model.config
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    return int(getattr(config, "vocab_size", None) or text.vocab_size)


def model_forward(model, input_ids: "torch.Tensor", attention_mask: "torch.Tensor | None" = None) -> "torch.Tensor":
    """One forward pass without a KV cache. ``input_ids``: ``[batch, seq_len]`` int64; ``attention_mask``: ``[batch,
    seq_len]`` int64 (1 real, 0 padding) or None. Returns logits ``[batch, seq_len, vocab]`` (causal LM) or
    last_hidden_state ``[batch, seq_len, hidden]`` (encoder)."""
    if model_kind(model) == "causal":
        return model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
    return model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def random_input_ids(model, seq_len: int, *, batch: int = 1, device="cuda", generator=None) -> "torch.Tensor":
    """Uniform random token ids ``[batch, seq_len]`` int64 in ``[0, vocab)``."""
    import torch

    return torch.randint(0, vocab_size(model), (batch, seq_len), device=device, dtype=torch.int64,
                         generator=generator)


def model_position_limit(name_or_path: str, *, bound=None) -> int:
    """The position limit (tokens) of a preset (which wins over a folder) or a ``save_pretrained`` directory, from its
    config alone, else ``bound``. UnknownModelError: a directory it cannot measure; UsageError: neither."""
    config = preset_config(name_or_path) if name_or_path in PRESETS else directory_config(name_or_path)
    return position_limit(config, bound)
