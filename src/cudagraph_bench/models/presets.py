"""Model presets, built offline from transformers configs with a fixed seed (gpt-fast style: a dict of
configs). Latency does not depend on weight values, so random init measures the same kernels as a
trained checkpoint. Any local directory written by ``save_pretrained()`` also loads, offline.

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
==================  ========  =====================================================  ======  =========  ====================

Every model runs SDPA attention, except models with attention logit soft-capping (Gemma 2), which
SDPA cannot do: they run transformers' eager attention (:func:`attention_implementation`).
Mixture-of-experts models are built with a graph-safe experts implementation
(:func:`graph_safe_experts_implementation`): transformers' default grouped GEMM reads its group
offsets on the host outside bfloat16, which a capture forbids; the choice is recorded per case.

Causal LMs return logits ``[batch, seq_len, vocab]``; encoders return ``last_hidden_state``
``[batch, seq_len, hidden]`` (see :func:`model_forward`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from cudagraph_bench.errors import UnknownModelError, UsageError
from cudagraph_bench.models.hf_internals import supports_sdpa
from cudagraph_bench.options import DTYPES, PRESET_NAMES

if TYPE_CHECKING:  # pragma: no cover
    import torch

#: Phi-3.5-mini-instruct's LongRoPE rescaling factors (48 per table: head_dim 96 / 2), from its config.json.
_PHI35_LONG_FACTOR = [
    1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601, 1.5899999141693115,
    1.600000023841858, 1.6200000047683716, 2.620000123977661, 3.2300000190734863, 3.2300000190734863,
    4.789999961853027, 7.400000095367432, 7.700000286102295, 9.09000015258789, 12.199999809265137,
    17.670000076293945, 24.46000099182129, 28.57000160217285, 30.420001983642578, 30.840002059936523,
    32.590003967285156, 32.93000411987305, 42.320003509521484, 44.96000289916992, 50.340003967285156,
    50.45000457763672, 57.55000305175781, 57.93000411987305, 58.21000289916992, 60.1400032043457,
    62.61000442504883, 62.62000274658203, 62.71000289916992, 63.1400032043457, 63.1400032043457,
    63.77000427246094, 63.93000411987305, 63.96000289916992, 63.970001220703125, 64.02999877929688,
    64.06999969482422, 64.08000183105469, 64.12000274658203, 64.41000366210938, 64.4800033569336,
    64.51000213623047, 64.52999877929688, 64.83999633789062]
_PHI35_SHORT_FACTOR = [
    1.0, 1.0199999809265137, 1.0299999713897705, 1.0299999713897705, 1.0499999523162842, 1.0499999523162842,
    1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0699999332427979, 1.0999999046325684,
    1.1099998950958252, 1.1599998474121094, 1.1599998474121094, 1.1699998378753662, 1.2899998426437378,
    1.339999794960022, 1.679999828338623, 1.7899998426437378, 1.8199998140335083, 1.8499997854232788,
    1.8799997568130493, 1.9099997282028198, 1.9399996995925903, 1.9899996519088745, 2.0199997425079346,
    2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346,
    2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
    2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0799996852874756,
    2.0899996757507324, 2.189999580383301, 2.2199995517730713, 2.5899994373321533, 2.729999542236328,
    2.749999523162842, 2.8399994373321533]

#: name -> kind + config class (in ``transformers``) + config fields (+ ``source``: the published config
#: on the Hugging Face hub that the fields were copied from; weights are random).
PRESETS: dict[str, dict[str, Any]] = {
    "gpt2": {"kind": "causal", "config_class": "GPT2Config", "source": "openai-community/gpt2",
             "config": dict(n_layer=12, n_embd=768, n_head=12, n_positions=1024, vocab_size=50257)},
    "distilgpt2": {"kind": "causal", "config_class": "GPT2Config", "source": "distilbert/distilgpt2",
                   "config": dict(n_layer=6, n_embd=768, n_head=12, n_positions=1024, vocab_size=50257)},
    "bert-tiny": {"kind": "encoder", "config_class": "BertConfig", "source": "prajjwal1/bert-tiny",
                  "config": dict(num_hidden_layers=2, hidden_size=128, num_attention_heads=2,
                                 intermediate_size=512, max_position_embeddings=512, vocab_size=30522)},
    "tinyllama-1.1b": {"kind": "causal", "config_class": "LlamaConfig",
                       "source": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
                       "config": dict(num_hidden_layers=22, hidden_size=2048, num_attention_heads=32,
                                      num_key_value_heads=4, intermediate_size=5632, vocab_size=32000,
                                      max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0,
                                      bos_token_id=1, eos_token_id=2)},
    "smollm2-360m": {"kind": "causal", "config_class": "LlamaConfig", "source": "HuggingFaceTB/SmolLM2-360M",
                     "config": dict(num_hidden_layers=32, hidden_size=960, num_attention_heads=15, num_key_value_heads=5,
                                    intermediate_size=2560, vocab_size=49152, max_position_embeddings=8192,
                                    rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True,
                                    bos_token_id=0, eos_token_id=0)},
    "qwen2.5-0.5b": {"kind": "causal", "config_class": "Qwen2Config", "source": "Qwen/Qwen2.5-0.5B",
                     "config": dict(num_hidden_layers=24, hidden_size=896, num_attention_heads=14, num_key_value_heads=2,
                                    intermediate_size=4864, vocab_size=151936, max_position_embeddings=32768,
                                    rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
                                    use_sliding_window=False, bos_token_id=151643, eos_token_id=151643)},
    "llama-3.2-1b": {"kind": "causal", "config_class": "LlamaConfig", "source": "meta-llama/Llama-3.2-1B",
                     "config": dict(num_hidden_layers=16, hidden_size=2048, num_attention_heads=32, num_key_value_heads=8,
                                    head_dim=64, intermediate_size=8192, vocab_size=128256,
                                    max_position_embeddings=131072, rms_norm_eps=1e-5, tie_word_embeddings=True,
                                    rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
                                                  "rope_theta": 500000.0},
                                    rope_theta=500000.0, bos_token_id=128000, eos_token_id=128001)},
    "gemma-2-2b": {"kind": "causal", "config_class": "Gemma2Config", "source": "google/gemma-2-2b",
                   "config": dict(num_hidden_layers=26, hidden_size=2304, num_attention_heads=8, num_key_value_heads=4,
                                  head_dim=256, intermediate_size=9216, vocab_size=256000, max_position_embeddings=8192,
                                  sliding_window=4096, attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                                  query_pre_attn_scalar=256, rms_norm_eps=1e-6, rope_theta=10000.0,
                                  hidden_activation="gelu_pytorch_tanh", bos_token_id=2, eos_token_id=1, pad_token_id=0)},
    "phi-3.5-mini": {"kind": "causal", "config_class": "Phi3Config", "source": "microsoft/Phi-3.5-mini-instruct",
                     "config": dict(num_hidden_layers=32, hidden_size=3072, num_attention_heads=32, num_key_value_heads=32,
                                    intermediate_size=8192, vocab_size=32064, max_position_embeddings=131072,
                                    original_max_position_embeddings=4096, rms_norm_eps=1e-5, rope_theta=10000.0,
                                    rope_scaling={"rope_type": "longrope", "long_factor": _PHI35_LONG_FACTOR,
                                                  "short_factor": _PHI35_SHORT_FACTOR},
                                    sliding_window=262144, tie_word_embeddings=False,
                                    bos_token_id=1, eos_token_id=32000, pad_token_id=32000)},
    "mistral-7b": {"kind": "causal", "config_class": "MistralConfig", "source": "mistralai/Mistral-7B-v0.1",
                   "config": dict(num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                                  intermediate_size=14336, vocab_size=32000, max_position_embeddings=32768,
                                  sliding_window=4096, rms_norm_eps=1e-5, rope_theta=10000.0,
                                  bos_token_id=1, eos_token_id=2)},
    "olmoe-1b-7b": {"kind": "causal", "config_class": "OlmoeConfig", "source": "allenai/OLMoE-1B-7B-0924",
                    "config": dict(num_hidden_layers=16, hidden_size=2048, num_attention_heads=16, num_key_value_heads=16,
                                   intermediate_size=1024, num_experts=64, num_experts_per_tok=8, norm_topk_prob=False,
                                   vocab_size=50304, max_position_embeddings=4096, rms_norm_eps=1e-5,
                                   rope_theta=10000.0, bos_token_id=None, eos_token_id=50279, pad_token_id=1)},
}
assert tuple(PRESETS) == PRESET_NAMES  # options.py lists the names without importing transformers


def torch_dtype(dtype: "str | torch.dtype") -> "torch.dtype":
    """``"bfloat16"`` -> ``torch.bfloat16``. Raises :class:`UsageError` for other names."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise UsageError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPES)}")
    return getattr(torch, dtype)


def preset_config(name: str, overrides: dict | None = None):
    """The transformers config of a preset, with optional field overrides (tests shrink layers)."""
    import transformers

    if name not in PRESETS:
        raise UnknownModelError(f"unknown preset {name!r}: use one of {', '.join(PRESETS)}")
    spec = PRESETS[name]
    fields = {**spec["config"], **(overrides or {})}
    config = getattr(transformers, spec["config_class"])(**fields)
    config._attn_implementation = attention_implementation(config)
    return config


def load_model(name_or_path: str, dtype: "str | torch.dtype" = "float32", device: "str | torch.device" = "cuda",
               *, seed: int = 0, overrides: dict | None = None) -> "torch.nn.Module":
    """Build a preset (random weights, fixed ``seed``) or load a local ``save_pretrained`` directory.

    The model is in ``eval()`` mode, with SDPA attention, on ``device`` in ``dtype``. Preset weights
    are initialised directly on ``device`` (fast on a GPU). Generation stops only at
    ``max_new_tokens``: ``generation_config.eos_token_id`` is cleared so that HF ``generate`` and the
    suite's decoders produce the same number of tokens.

    Raises:
        UnknownModelError: ``name_or_path`` is neither a preset nor a directory, or the directory has
            no weights on disk (no hub access: the message says to download and ``save_pretrained``).
        UsageError: unknown dtype.
    """
    import torch
    import transformers

    tdtype = torch_dtype(dtype)
    if name_or_path in PRESETS:
        config = preset_config(name_or_path, overrides)
        auto = (transformers.AutoModelForCausalLM if PRESETS[name_or_path]["kind"] == "causal"
                else transformers.AutoModel)
        torch.manual_seed(seed)
        with torch.device(device):
            model = auto.from_config(config, dtype=tdtype, attn_implementation=attention_implementation(config))
    elif os.path.isdir(name_or_path):
        if overrides:
            raise UsageError("config overrides apply to presets only, not to a checkpoint directory")
        model = _load_directory(name_or_path, tdtype, device)
    else:
        raise UnknownModelError(
            f"unknown model {name_or_path!r}: use a preset ({', '.join(PRESETS)}) or a local directory "
            f"written by save_pretrained() (no model hub is reachable)")
    use_graph_safe_experts(model, tdtype)
    if model_kind(model) == "causal" and model.generation_config is not None:
        model.generation_config.eos_token_id = None
        model.generation_config.pad_token_id = 0
    return model.eval()


def attention_implementation(config) -> str:
    """``"sdpa"``, or ``"eager"`` for a model with attention logit soft-capping (Gemma 2): SDPA cannot
    soft-cap (transformers 5.17 silently skips it under SDPA, 5.24 refuses SDPA for such models). Eager
    attention gets a mask that a CUDA graph can capture
    (:func:`~cudagraph_bench.models.hf_internals.use_capture_safe_eager_mask`)."""
    if _soft_capped(config):
        from cudagraph_bench.models.hf_internals import use_capture_safe_eager_mask

        use_capture_safe_eager_mask()
        return "eager"
    return "sdpa"


def _soft_capped(config) -> bool:
    """True for a model with attention logit soft-capping (Gemma 2), which runs eager attention."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return bool(getattr(text, "attn_logit_softcapping", None))


def is_mixture_of_experts(model_or_config) -> bool:
    """True for a mixture-of-experts model (its config counts experts)."""
    config = getattr(model_or_config, "config", model_or_config)
    config = config.get_text_config() if hasattr(config, "get_text_config") else config
    return any(getattr(config, f, None) for f in ("num_experts", "num_local_experts", "n_routed_experts"))


def graph_safe_experts_implementation(dtype: "str | torch.dtype") -> str:
    """The transformers experts implementation a CUDA graph can capture, for ``dtype``.

    ``grouped_mm`` (transformers' default) is one grouped GEMM over the tokens sorted by expert,
    with the group offsets on the device; torch runs it natively in bfloat16 only, and in other
    dtypes falls back to a loop that reads the offsets on the host (``Cannot copy between CPU and
    CUDA tensors during CUDA graph capture``). ``batched_mm`` gathers each (token, expert) pair's
    weights and runs one batched GEMM: no host read in any dtype, but it reads
    ``tokens x top_k`` expert matrices, so it is the choice only outside bfloat16.
    """
    import torch

    return "grouped_mm" if torch_dtype(dtype) == torch.bfloat16 else "batched_mm"


def use_graph_safe_experts(model, dtype) -> None:
    """Switch a mixture-of-experts model to :func:`graph_safe_experts_implementation` (public
    ``set_experts_implementation``); other models are left as they are. The same model serves eager
    and graph variants, so both run the same experts code."""
    if not is_mixture_of_experts(model) or not hasattr(model, "set_experts_implementation"):
        return
    try:
        model.set_experts_implementation(graph_safe_experts_implementation(dtype))
    except (ValueError, KeyError, ImportError):   # an architecture without switchable experts: keep its own
        pass


def experts_implementation(model) -> str | None:
    """The experts implementation a mixture-of-experts model runs (``"grouped_mm"``, ``"batched_mm"``,
    ``"eager"``), or None for a dense model."""
    if not is_mixture_of_experts(model):
        return None
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    return getattr(config, "_experts_implementation", None) or "eager"


def _load_directory(path: str, tdtype, device):
    import transformers

    config = directory_config(path)
    auto = transformers.AutoModelForCausalLM if _names_lm_head(config) else transformers.AutoModel
    try:
        model = auto.from_pretrained(path, dtype=tdtype, local_files_only=True,
                                     attn_implementation=attention_implementation(config))
    except OSError as exc:
        raise UnknownModelError(f"{path}: weights are not on disk ({str(exc).splitlines()[0]}); download them "
                                f"on a machine with hub access and save_pretrained() into this directory") from None
    return model.to(device)


def _first_line(exc: BaseException, width: int = 160) -> str:
    """The first line of an exception's message, cut to ``width`` characters (its type when empty)."""
    line = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
    return line if len(line) <= width else line[: width - 3] + "..."


def check_config_json(path: str) -> dict:
    """The parsed ``config.json`` of a ``save_pretrained`` directory, checked before transformers reads it.

    Raises UnknownModelError naming the cause and the fix: the file cannot be read, is not valid JSON
    (with the line), is not a JSON object, or names a ``model_type`` this transformers does not know."""
    import json

    import transformers

    file = os.path.join(path, "config.json")
    try:
        with open(file, encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        raise UnknownModelError(f"{file} is not valid JSON (line {exc.lineno}: {exc.msg}): rewrite it with "
                                "save_pretrained()") from None
    except UnicodeDecodeError:
        raise UnknownModelError(f"{file} is not UTF-8 text: rewrite it with save_pretrained()") from None
    except OSError as exc:
        raise UnknownModelError(f"cannot read {file}: {exc.strerror or exc}: give a readable directory written by "
                                "save_pretrained()") from None
    if not isinstance(data, dict):
        raise UnknownModelError(f"{file} holds a JSON {type(data).__name__}, not an object: rewrite it with "
                                "save_pretrained()")
    model_type = data.get("model_type")
    if model_type is not None and model_type not in transformers.CONFIG_MAPPING:
        raise UnknownModelError(f"transformers {transformers.__version__} does not know model_type {model_type!r} "
                                f"of {file}: upgrade transformers or use a supported architecture")
    return data


def directory_config(path: str):
    """The transformers config of a ``save_pretrained`` directory (offline).

    Raises:
        UnknownModelError: no usable ``config.json``, an encoder-decoder model (T5, BART): the suite
            measures decoder-only causal LMs and encoders, a vision, audio or multimodal model (ViT, CLIP, LLaVA),
            or a config without a position limit (:data:`POSITION_FIELDS`; BLOOM's ALiBi, Mamba)."""
    import transformers

    check_config_json(path)
    try:
        config = transformers.AutoConfig.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise UnknownModelError(f"{path}: transformers {transformers.__version__} cannot load config.json "
                                f"({_first_line(exc)}): write the directory with save_pretrained()") from None
    if getattr(config, "is_encoder_decoder", False):
        raise UnknownModelError(f"{path}: {config.__class__.__name__} is an encoder-decoder model, which the suite "
                                f"does not measure: use a decoder-only causal LM or an encoder")
    if _not_text_only(config):
        raise UnknownModelError(f"{path}: {config.__class__.__name__} is a vision, audio or multimodal model, which the "
                                "suite does not measure: it measures text models that take input_ids only; save the "
                                "text model alone (e.g. from its text_config)")
    if not any(getattr(config, field, None) for field in POSITION_FIELDS):
        raise UnknownModelError(f"{path}: {config.__class__.__name__} records no position limit "
                                f"({'/'.join(POSITION_FIELDS)}; e.g. ALiBi or state-space models), which the suite "
                                "needs to bound prompts and KV caches: use a model with learned or rotary positions")
    model_class = directory_model_class(config)
    if not _soft_capped(config) and not supports_sdpa(model_class):
        raise UnknownModelError(f"{path}: {model_class.__name__} has no SDPA attention in transformers "
                                f"{transformers.__version__} (the attention the suite measures eager and graphed): use "
                                "a model whose class supports attn_implementation='sdpa'")
    return config


def _not_text_only(config) -> bool:
    """True for a vision, audio or multimodal config: it holds a vision or audio sub-config (LLaVA, CLIP,
    Gemma 3's image-text model) or no ``vocab_size`` (ViT: no token embeddings)."""
    sub_configs = getattr(config, "sub_configs", None) or {}
    return (any(name in sub_configs for name in ("vision_config", "audio_config"))
            or getattr(config, "vocab_size", None) is None)


#: The weight files ``save_pretrained`` writes (transformers.utils ``SAFE_WEIGHTS_NAME``,
#: ``SAFE_WEIGHTS_INDEX_NAME``, ``WEIGHTS_NAME``, ``WEIGHTS_INDEX_NAME``): one of them must be in a model directory.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


def check_model_directory(path: str):
    """The config of a ``save_pretrained`` directory that the suite can load and measure, checked before
    any case: :func:`directory_config`'s checks, then a class named in ``config.architectures`` (without it
    transformers would load the headless base model and the checkpoint's weights would not match) and weights
    on disk (:data:`WEIGHT_FILES`).

    Raises:
        UnknownModelError: the reason and the fix, in one line."""
    config = directory_config(path)
    if not config.architectures:
        raise UnknownModelError(f"{path}: config.json names no architectures, so it is unclear whether to load a causal "
                                f"LM or an encoder: save the directory with save_pretrained() from the model, or add "
                                f'"architectures": ["{config.__class__.__name__.removesuffix("Config")}ForCausalLM"] '
                                "(or the base model's class) to config.json")
    if not any(os.path.isfile(os.path.join(path, name)) for name in WEIGHT_FILES):
        raise UnknownModelError(f"{path}: no weights on disk (none of {', '.join(WEIGHT_FILES)}): save_pretrained() "
                                "the model into this directory (a config alone has no weights)")
    return config


def head_note(path: str, config) -> str | None:
    """One line for a ``save_pretrained`` directory whose ``config.architectures`` names a head the suite does not
    build (a classification or masked-LM head: ``Qwen3ForSequenceClassification``, ``BertForMaskedLM``): it is
    measured as its base model (:func:`directory_model_class`), without the head and without decode benchmarks.
    None for a causal LM or a base model."""
    if _names_lm_head(config):
        return None
    base = directory_model_class(config).__name__
    heads = [name for name in config.architectures or [] if name != base]
    if not heads:
        return None
    return (f"{path}: {heads[0]} is measured as its base model {base} (the head is left out, no decode benchmarks; "
            "save a ...ForCausalLM checkpoint to measure decode)")


def _names_lm_head(config) -> bool:
    """True when ``config.architectures`` names a causal LM head: the directory loads as a causal LM."""
    return any(a.endswith(("LMHeadModel", "ForCausalLM")) for a in (config.architectures or []))


def directory_model_class(config):
    """The transformers class a ``save_pretrained`` directory of ``config`` loads as (:func:`_load_directory`'s
    choice: the causal-LM class when ``config.architectures`` names an LM head, else the base model)."""
    import transformers

    causal = _names_lm_head(config)
    try:
        return (transformers.MODEL_FOR_CAUSAL_LM_MAPPING if causal else transformers.MODEL_MAPPING)[type(config)]
    except KeyError:
        raise UnknownModelError(f"transformers {transformers.__version__} has no {'causal-LM' if causal else 'base'} "
                                f"model class for {config.__class__.__name__}: save the directory with "
                                "save_pretrained() from a causal LM or an encoder") from None


def kind_of(name_or_path: str) -> str:
    """``"causal"`` or ``"encoder"`` for a preset or a ``save_pretrained`` directory, read from its config
    (no model is built). Raises :class:`UnknownModelError` for anything else."""
    if name_or_path in PRESETS:
        return PRESETS[name_or_path]["kind"]
    config = directory_config(name_or_path)
    causal = any(a.endswith(("LMHeadModel", "ForCausalLM")) for a in (config.architectures or []))
    return "causal" if causal else "encoder"


def model_kind(model) -> str:
    """``"causal"`` when the model returns logits for next-token prediction, else ``"encoder"``."""
    return "causal" if hasattr(model, "lm_head") or model.__class__.__name__.endswith(("LMHeadModel", "ForCausalLM")) \
        else "encoder"


#: Config fields that hold a model's position limit, first found wins.
POSITION_FIELDS = ("n_positions", "max_position_embeddings")
#: Text encoders whose position ids start after the padding index (RoBERTa's
#: ``create_position_ids_from_input_ids``): of ``max_position_embeddings`` rows, ``pad_token_id + 1`` are
#: never reached by a token (roberta-base: 514 rows, 512 tokens).
#: (Those that load with SDPA; tests/test_presets.py runs each at its limit and one token past it.)
PADDING_OFFSET_POSITIONS = frozenset({"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "roberta-prelayernorm",
                                      "data2vec-text"})


def max_positions(model) -> int:
    """Position limit of the model in tokens (gpt2 1024, bert-tiny 512, tinyllama 2048; roberta-base 512 of
    its 514 position rows)."""
    config = model.config
    for field in POSITION_FIELDS:
        value = getattr(config, field, None)
        if value:
            pad = getattr(config, "pad_token_id", None)
            offset = pad + 1 if getattr(config, "model_type", None) in PADDING_OFFSET_POSITIONS and \
                isinstance(pad, int) else 0
            return int(value) - offset
    raise UsageError(f"{config.__class__.__name__} has no {'/'.join(POSITION_FIELDS)}: use a model with learned "
                     "or rotary positions")


def vocab_size(model) -> int:
    return int(model.config.vocab_size)


def model_forward(model, input_ids: "torch.Tensor", attention_mask: "torch.Tensor | None" = None) -> "torch.Tensor":
    """One forward pass without a KV cache.

    Args:
        input_ids: ``[batch, seq_len]`` int64.
        attention_mask: ``[batch, seq_len]`` int64, 1 on real tokens and 0 on padding, or None.

    Returns:
        causal LM: logits ``[batch, seq_len, vocab]``; encoder: last_hidden_state ``[batch, seq_len, hidden]``.
    """
    if model_kind(model) == "causal":
        return model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
    return model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def random_input_ids(model, seq_len: int, *, batch: int = 1, device="cuda", generator=None) -> "torch.Tensor":
    """Uniform random token ids ``[batch, seq_len]`` int64 in ``[0, vocab)`` (never all zeros)."""
    import torch

    return torch.randint(0, vocab_size(model), (batch, seq_len), device=device, dtype=torch.int64,
                         generator=generator)
