"""Local attention under any config field name: the windows and chunks a causal LM's config records, and the check
that a decode over a static KV cache follows each one or is refused up front (:func:`check_windows_recorded`).

A graphed decode reads keys and values from a full-length static cache and relies on the model's own mask to keep
attention inside a window (:func:`~cudagraph_bench.models.hf_internals.static_cache_for_graphs`). transformers
builds that mask for the layers its config records as windowed (``sliding_attention``, ``hybrid_sliding``;
``chunked_attention`` is refused as a layer type). A window some model code applies by itself, from a field of its
own name (GPT-Neo's ``window_size`` over its local layers, Doge's ``keep_window_size``), is sized from the keys it
is handed: with a static cache those are ``max_cache_len`` keys, not the tokens so far, and the window lands on
the wrong positions; the tokens then differ from ``generate`` and nothing says why. Such a window is refused
before any decode, naming the field.
"""

from __future__ import annotations

import re

from cudagraph_bench.errors import NotGraphableError

#: A config field that records a local-attention window or chunk (tokens), whatever the model calls it.
WINDOW_FIELD = re.compile(r"window|attn_chunk|attention_chunk|local_attention")
#: Fields that match :data:`WINDOW_FIELD` but hold no window a model applies by itself: switches, layer counts,
#: patterns, and ``sliding_window``, the field transformers' own layer types and masks are built from (a layer
#: typed full attention ignores it; without ``layer_types`` it makes every layer a sliding-window layer).
NOT_A_WINDOW = frozenset({"sliding_window", "use_sliding_window", "max_window_layers", "sliding_window_pattern",
                          "_sliding_window_pattern", "sliding_window_layers", "window_layers",
                          "global_attn_every_n_layers", "local_attention_probs_dropout_prob"})
#: Layer types under which transformers' masks apply the config's window (so the static cache follows it).
WINDOWED_LAYER_TYPES = frozenset({"sliding_attention", "hybrid_sliding", "chunked_attention"})


def window_fields(config) -> dict[str, int]:
    """The local-attention windows and chunks ``config`` records (field name -> tokens), by
    :data:`WINDOW_FIELD`: positive integers only, a window switched off (``use_sliding_window=False``) left out.
    A text config inside a multimodal one is read."""
    config = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    if getattr(config, "use_sliding_window", None) is False:
        return {}
    out = {}
    for name, value in sorted(config.to_dict().items()):
        if name in NOT_A_WINDOW or not WINDOW_FIELD.search(name):
            continue
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            out[name] = value
    return out


def unrecorded_windows(config, layer_types, positions: int | None = None) -> dict[str, int]:
    """The windows of :func:`window_fields` that ``layer_types`` (transformers' layer types of the model) do not
    record: none when some layer type is windowed (:data:`WINDOWED_LAYER_TYPES`: transformers' masks apply the
    window there), else every window shorter than ``positions`` (a window at least as long as the positions never
    cuts anything off)."""
    if set(layer_types) & WINDOWED_LAYER_TYPES:
        return {}
    return {name: value for name, value in window_fields(config).items() if positions is None or value < positions}


def check_windows_recorded(config, layer_types) -> None:
    """Refuse, before any decode, a model whose config records a local-attention window that its layer types do
    not (:func:`unrecorded_windows`, within its position limit).

    Raises:
        NotGraphableError: naming the config class, the field and its value."""
    from cudagraph_bench.models.positions import recorded_position_limit

    config = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    unrecorded = unrecorded_windows(config, layer_types, recorded_position_limit(config))
    if unrecorded:
        fields = ", ".join(f"{name}={value}" for name, value in unrecorded.items())
        raise NotGraphableError(f"{config.__class__.__name__}.{fields}: a local attention window its model code "
                                "applies itself, which its layer types do not record as sliding-window layers: over a "
                                "static KV cache it would cut the wrong keys")
