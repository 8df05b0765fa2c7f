"""Model presets, built offline from transformers configs with a fixed seed (gpt-fast style: a dict of
configs). Latency does not depend on weight values, so random init measures the same kernels as a
trained checkpoint. Any local directory written by ``save_pretrained()`` also loads, offline.

Presets (``PRESETS``):

==================  ========  ======================================================  ==========
name                kind      shape                                                   positions
==================  ========  ======================================================  ==========
``gpt2``            causal    12 layers, hidden 768, 12 heads, vocab 50257 (124M)     1024
``distilgpt2``      causal    6 layers, hidden 768, 12 heads, vocab 50257 (82M)       1024
``bert-tiny``       encoder   2 layers, hidden 128, 2 heads, intermediate 512         512
``tinyllama-1.1b``  causal    Llama: 22 layers, hidden 2048, 32 heads, 4 KV heads,    2048
                              intermediate 5632, vocab 32000 (1.1B)
==================  ========  ======================================================  ==========

Causal LMs return logits ``[batch, seq_len, vocab]``; encoders return ``last_hidden_state``
``[batch, seq_len, hidden]`` (see :func:`model_forward`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from cudagraph_bench.errors import UnknownModelError, UsageError
from cudagraph_bench.options import PRESET_NAMES

if TYPE_CHECKING:  # pragma: no cover
    import torch

#: name -> kind + config class (in ``transformers``) + config fields. Sources: the configs of
#: openai-community/gpt2, distilbert/distilgpt2, prajjwal1/bert-tiny, TinyLlama/TinyLlama-1.1B-Chat-v1.0.
PRESETS: dict[str, dict[str, Any]] = {
    "gpt2": {"kind": "causal", "config_class": "GPT2Config",
             "config": dict(n_layer=12, n_embd=768, n_head=12, n_positions=1024, vocab_size=50257)},
    "distilgpt2": {"kind": "causal", "config_class": "GPT2Config",
                   "config": dict(n_layer=6, n_embd=768, n_head=12, n_positions=1024, vocab_size=50257)},
    "bert-tiny": {"kind": "encoder", "config_class": "BertConfig",
                  "config": dict(num_hidden_layers=2, hidden_size=128, num_attention_heads=2,
                                 intermediate_size=512, max_position_embeddings=512, vocab_size=30522)},
    "tinyllama-1.1b": {"kind": "causal", "config_class": "LlamaConfig",
                       "config": dict(num_hidden_layers=22, hidden_size=2048, num_attention_heads=32,
                                      num_key_value_heads=4, intermediate_size=5632, vocab_size=32000,
                                      max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0,
                                      bos_token_id=1, eos_token_id=2)},
}
assert tuple(PRESETS) == PRESET_NAMES  # options.py lists the names without importing transformers

_DTYPES = ("float32", "bfloat16", "float16")


def torch_dtype(dtype: "str | torch.dtype") -> "torch.dtype":
    """``"bfloat16"`` -> ``torch.bfloat16``. Raises :class:`UsageError` for other names."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in _DTYPES:
        raise UsageError(f"unknown dtype {dtype!r}: use one of {', '.join(_DTYPES)}")
    return getattr(torch, dtype)


def preset_config(name: str, overrides: dict | None = None):
    """The transformers config of a preset, with optional field overrides (tests shrink layers)."""
    import transformers

    if name not in PRESETS:
        raise UnknownModelError(f"unknown preset {name!r}: use one of {', '.join(PRESETS)}")
    spec = PRESETS[name]
    fields = {**spec["config"], **(overrides or {})}
    config = getattr(transformers, spec["config_class"])(**fields)
    config._attn_implementation = "sdpa"
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
            model = auto.from_config(config, dtype=tdtype, attn_implementation="sdpa")
    elif os.path.isdir(name_or_path):
        if overrides:
            raise UsageError("config overrides apply to presets only, not to a checkpoint directory")
        model = _load_directory(name_or_path, tdtype, device)
    else:
        raise UnknownModelError(
            f"unknown model {name_or_path!r}: use a preset ({', '.join(PRESETS)}) or a local directory "
            f"written by save_pretrained() (no model hub is reachable)")
    if model_kind(model) == "causal" and model.generation_config is not None:
        model.generation_config.eos_token_id = None
        model.generation_config.pad_token_id = 0
    return model.eval()


def _load_directory(path: str, tdtype, device):
    import transformers

    try:
        config = transformers.AutoConfig.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise UnknownModelError(f"{path}: no usable config.json ({exc.__class__.__name__}); "
                                f"write the directory with save_pretrained()") from None
    has_lm_head = any(a.endswith(("LMHeadModel", "ForCausalLM")) for a in (config.architectures or []))
    auto = transformers.AutoModelForCausalLM if has_lm_head else transformers.AutoModel
    try:
        model = auto.from_pretrained(path, dtype=tdtype, local_files_only=True, attn_implementation="sdpa")
    except OSError as exc:
        raise UnknownModelError(f"{path}: weights are not on disk ({str(exc).splitlines()[0]}); download them "
                                f"on a machine with hub access and save_pretrained() into this directory") from None
    return model.to(device)


def model_kind(model) -> str:
    """``"causal"`` when the model returns logits for next-token prediction, else ``"encoder"``."""
    return "causal" if hasattr(model, "lm_head") or model.__class__.__name__.endswith(("LMHeadModel", "ForCausalLM")) \
        else "encoder"


def max_positions(model) -> int:
    """Position limit of the model in tokens (gpt2 1024, bert-tiny 512, tinyllama 2048)."""
    config = model.config
    for field in ("n_positions", "max_position_embeddings"):
        value = getattr(config, field, None)
        if value:
            return int(value)
    raise UsageError(f"{config.__class__.__name__} has no n_positions/max_position_embeddings")


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
