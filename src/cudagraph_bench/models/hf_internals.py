"""Every place where cudagraph-bench touches a transformers internal (:data:`INTERNALS`); the function that reaches each
says why. :func:`check_internals` lists what the installed transformers lacks."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
from unittest import mock

from cudagraph_bench.errors import NotGraphableError
from cudagraph_bench.models.positions import WINDOWED_LAYER_TYPES, check_windows_recorded

#: transformers releases the suite is tested with (CPU CI runs the oldest and the newest).
TESTED_RANGE = ">=5.17,<6"

#: module -> the attributes of it this module reaches into.
INTERNALS = {
    "transformers.masking_utils": ("_ignore_causal_mask_sdpa", "_ignore_bidirectional_mask_sdpa",
                                   "find_packed_sequence_indices", "is_tracing", "sdpa_mask", "AttentionMaskInterface"),
    "transformers.cache_utils": ("StaticLayer", "get_layer_types_and_kwargs", "STATIC_LAYER_TYPE_MAPPING",
                                 "LinearAttentionAndStaticFullAttentionLayer"),
    "transformers.modeling_rope_utils": ("dynamic_rope_update",),
    "transformers.utils.import_utils": ("is_cuda_stream_capturing",),
}
#: transformers' own attention (``attn_implementation="eager"``): every class has it; not the eager variant.
EAGER_ATTENTION = "eager"
#: Class attributes of ``PreTrainedModel`` that say which attention implementation a model class runs.
ATTENTION_SUPPORT_FLAGS = {"sdpa": "_supports_sdpa", "flash_attention_2": "_supports_flash_attn",
                           "flex_attention": "_supports_flex_attn"}

#: Every layer type :func:`static_cache_for_graphs` holds -> what it holds of it: ``"kv"`` full-length keys and values
#: (a sliding window is applied by the attention mask), ``"state"`` a fixed-shape recurrent or convolution state (Mamba,
#: gated delta nets, short convolutions), ``"hybrid"`` both, None nothing (an MoE or MLP block; a layer that reads
#: another layer's keys and values).
CACHE_LAYER_TYPES = {"full_attention": "kv", "sliding_attention": "kv", "linear_attention": "state", "conv": "state",
                     "hybrid": "hybrid", "hybrid_sliding": "hybrid", "dummy": None, "moe": None, "mlp": None}
#: RoPE types whose frequencies depend on a host-side branch on the largest position.
HOST_BRANCH_ROPE_TYPES = ("dynamic", "longrope")


def check_internals() -> list[str]:
    """One line per internal the installed transformers lacks, naming the fix (empty when everything is there)."""
    import transformers
    import transformers.cache_utils as cache_utils

    problems = [f"{module}.{attr} is missing" for module, attrs in INTERNALS.items() for attr in attrs
                if not hasattr(importlib.import_module(module), attr)]
    if not hasattr(transformers.PreTrainedModel, "_supports_sdpa"):
        problems.append("transformers.PreTrainedModel._supports_sdpa is missing")
    if hasattr(cache_utils, "StaticLayer"):
        counter = getattr(cache_utils.StaticLayer(max_cache_len=4), "cumulative_length", None)
        if counter is None or isinstance(counter, int):
            problems.append("transformers.cache_utils.StaticLayer has no device-side cumulative_length tensor")
    return [f"{p} in transformers {transformers.__version__}: install a release in {TESTED_RANGE}" for p in problems]


def supports_attention(model_class, implementation: str) -> bool:
    """``eager``: every class; ``sdpa``, ``flash_attention_2``, ``flex_attention``: the class's flag."""
    if implementation == EAGER_ATTENTION:
        return True
    flag = ATTENTION_SUPPORT_FLAGS.get(implementation)
    return bool(flag and getattr(model_class, flag, False))


def capture_code_path():
    """A context in which transformers takes a capture's code path, for the host-work check before the capture."""
    import transformers.utils.import_utils as import_utils

    return mock.patch.object(import_utils, "is_cuda_stream_capturing", lambda: True)


# --- attention masks during capture -------------------------------------------------------------

@contextlib.contextmanager
def eager_sdpa_dispatch_during_capture():
    """A context in which transformers takes its eager SDPA path (``is_causal`` / no mask) while a stream captures
    (where ``is_tracing()`` would build an explicit mask), so replay runs eager's kernels. Only for forwards whose
    positions are ``arange(seq_len)``. ``CGB_HF_SDPA_SKIP=0`` turns it off."""
    import transformers.masking_utils as mu

    def untraced(original):
        def decide(padding_mask, *args, **kwargs):
            with contextlib.nullcontext() if padding_mask is not None else \
                    mock.patch.object(mu, "is_tracing", lambda *a, **k: False):
                return original(padding_mask, *args, **kwargs)
        return decide

    with contextlib.ExitStack() as patches:
        if os.environ.get("CGB_HF_SDPA_SKIP", "1") != "0" and hasattr(mu, "is_tracing"):
            for name in (n for n in ("_ignore_causal_mask_sdpa", "_ignore_bidirectional_mask_sdpa") if hasattr(mu, n)):
                patches.enter_context(mock.patch.object(mu, name, untraced(getattr(mu, name))))
            if hasattr(mu, "find_packed_sequence_indices"):
                patches.enter_context(mock.patch.object(mu, "find_packed_sequence_indices", lambda *a, **k: None))
        yield


def capture_safe_eager_mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=None,
                            attention_mask=None, dtype=None, allow_is_bidirectional_skip=False, use_vmap=False,
                            device="cpu", **kwargs):
    """transformers' ``eager_mask`` (``[batch, 1, q_length, kv_length]`` float, 0 attended, the dtype's minimum
    elsewhere; None when a bidirectional mask can be skipped) without the host-to-device copy a capture refuses."""
    import torch
    from transformers.masking_utils import causal_mask_function, sdpa_mask

    kwargs.pop("allow_is_causal_skip", None)
    mask = sdpa_mask(batch_size=batch_size, q_length=q_length, kv_length=kv_length, q_offset=q_offset,
                     kv_offset=kv_offset, mask_function=mask_function or causal_mask_function,
                     attention_mask=attention_mask, allow_is_causal_skip=False,
                     allow_is_bidirectional_skip=allow_is_bidirectional_skip, use_vmap=use_vmap, device=device,
                     **kwargs)
    if mask is None:
        return None
    dtype = dtype or torch.float32
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, torch.finfo(dtype).min)


def use_capture_safe_eager_mask() -> None:
    """Register :func:`capture_safe_eager_mask` as the mask of eager attention (idempotent)."""
    from transformers.masking_utils import AttentionMaskInterface

    AttentionMaskInterface.register("eager", capture_safe_eager_mask)


# --- static KV cache -----------------------------------------------------------------------------

def _layer_types_and_kwargs(config) -> tuple[list[str], list[dict]]:
    from transformers.cache_utils import get_layer_types_and_kwargs

    config = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    layer_types, kwargs = get_layer_types_and_kwargs(config)
    return list(layer_types), (list(kwargs) if isinstance(kwargs, list) else [dict(kwargs)] * len(layer_types))


def _cache_layers(config, only: str) -> tuple[list[str], list[dict]]:
    """NotGraphableError for a layer type outside :data:`CACHE_LAYER_TYPES`, ``only`` saying what is supported."""
    layer_types, per_layer = _layer_types_and_kwargs(config)
    unsupported = sorted(set(layer_types) - CACHE_LAYER_TYPES.keys())
    if unsupported:
        raise NotGraphableError(f"{config.__class__.__name__} has {', '.join(unsupported)} layers: {only}")
    return layer_types, per_layer


def state_layer_types(config) -> list[str]:
    """Sorted state layer types of ``config``; empty for an attention-only model."""
    return sorted({t for t in _layer_types_and_kwargs(config)[0] if CACHE_LAYER_TYPES.get(t) in ("state", "hybrid")})


def static_cache_for_graphs(model, max_cache_len: int):
    """A ``Cache`` whose tensors keep shape and address from step to step: a full-length ``StaticLayer`` (``[1,
    kv_heads, max_cache_len, head_dim]``) per attention layer (sliding too: the mask keeps the window), a fixed-shape
    state layer per state layer, both for a hybrid (vLLM's pattern). NotGraphableError: a layer type a fixed-shape
    cache cannot hold (chunked, sparse attention) or an unrecorded window."""
    import transformers.cache_utils as cache_utils
    from transformers.cache_utils import Cache, StaticLayer

    config = model.config.get_text_config(decoder=True)
    layer_types, per_layer = _cache_layers(config, "graphed decode supports full and sliding-window attention, state "
                                                   "(mamba, linear attention, short conv) and hybrid layers only")
    check_windows_recorded(config, layer_types)
    layers = []
    for layer_type, kwargs in zip(layer_types, per_layer, strict=True):
        states = {"number_of_states": kwargs["number_of_states"]} if "number_of_states" in kwargs else {}
        if CACHE_LAYER_TYPES[layer_type] == "kv":
            layers.append(StaticLayer(max_cache_len=max_cache_len))
        elif CACHE_LAYER_TYPES[layer_type] == "hybrid":       # full length: a sliding window is kept by the mask
            layers.append(cache_utils.LinearAttentionAndStaticFullAttentionLayer(max_cache_len, **states))
        else:
            layers.append(cache_utils.STATIC_LAYER_TYPE_MAPPING[layer_type](max_cache_len=max_cache_len, **states))
    return Cache(layers=layers)


def attention_windows(config) -> list[int | None]:
    """Per KV-cache layer of a causal LM's ``config``: the sliding window (tokens), or None for full attention.
    NotGraphableError for a layer type :func:`static_cache_for_graphs` does not hold."""
    config = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    layer_types, per_layer = _cache_layers(config, "only full and sliding-window attention layers have a KV-byte model")
    return [int(kwargs["sliding_window"]) if t in WINDOWED_LAYER_TYPES and kwargs.get("sliding_window") else None
            for t, kwargs in zip(layer_types, per_layer, strict=True) if CACHE_LAYER_TYPES[t] in ("kv", "hybrid")]


def set_cache_write_position(cache, length: int) -> None:
    """Point every static layer's device-side write counter at ``length`` tokens, in place. NotGraphableError when a
    key/value layer has no device-side counter (unsupported transformers release)."""
    from transformers.cache_utils import StaticLayer

    for layer in cache.layers:
        counter = getattr(layer, "cumulative_length", None)
        if counter is None and not isinstance(layer, StaticLayer):
            continue
        if counter is None or isinstance(counter, int):
            raise NotGraphableError(f"{type(layer).__name__} has no device-side cumulative_length: install "
                                    f"transformers{TESTED_RANGE}")
        counter.fill_(length)


def cache_keyword(model) -> str:
    """``cache`` (transformers >= 5.24), ``past_key_values`` or ``cache_params``; ``**kwargs`` eats a wrong one."""
    params = inspect.signature(model.forward).parameters
    return next((name for name in ("cache", "past_key_values", "cache_params") if name in params), "past_key_values")


# --- RoPE ---------------------------------------------------------------------------------------

def original_rope_positions(module, rope_type: str) -> int | None:
    """Below these positions a ``dynamic``/``longrope`` RoPE keeps its original frequencies."""
    config = getattr(module, "config", None)
    params = getattr(config, "rope_parameters", None) or {}
    flat = isinstance(params, dict) and isinstance(params.get("rope_type"), str)   # not one dict per layer type
    value = (params.get("original_max_position_embeddings") if flat else None) or \
        getattr(config, "original_max_position_embeddings", None)
    if rope_type.startswith("dynamic"):
        value = getattr(module, "original_max_seq_len", None) or value
    return int(value) if value else None


def static_rope_during_capture(model, max_position: int):
    """A context in which ``dynamic``/``longrope`` RoPE runs as ``default`` RoPE for a capture, exact below the original
    positions. ``max_position``: the largest position + 1 the graph is used for. NotGraphableError when it is past a
    module's original positions."""
    changed = []
    for module in model.modules():
        rope_type = getattr(module, "rope_type", None)
        if not isinstance(rope_type, str) or not hasattr(module, "inv_freq") or \
                not rope_type.startswith(HOST_BRANCH_ROPE_TYPES):
            continue
        limit = original_rope_positions(module, rope_type)
        if limit is None or max_position > limit:
            raise NotGraphableError(f"{rope_type} RoPE changes its frequencies past {limit} positions on the host; "
                                    f"a graph for {max_position} positions cannot be captured: use at most {limit}")
        changed.append(module)
    return _rope_as_default(changed)


@contextlib.contextmanager
def _rope_as_default(modules):
    with contextlib.ExitStack() as patches:
        originals = [module.rope_type for module in modules]
        for module in modules:
            patches.enter_context(mock.patch.object(module, "rope_type", "default"))
        yield originals
