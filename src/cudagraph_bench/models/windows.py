"""Local attention under any config field name. A window that model code applies by itself (GPT-Neo's
``window_size``) rather than through transformers' masks for windowed layer types is sized from the keys it is
handed, which over a full-length static cache lands on the wrong positions: :func:`check_windows_recorded`
refuses it before any decode."""

from __future__ import annotations

import re

from cudagraph_bench.errors import NotGraphableError

#: A config field that records a local-attention window or chunk (tokens), whatever the model calls it.
WINDOW_FIELD = re.compile(r"window|attn_chunk|attention_chunk|local_attention")
#: Fields that match :data:`WINDOW_FIELD` but hold no window a model applies by itself (switches, layer counts,
#: and ``sliding_window``, which transformers' own layer types and masks are built from).
NOT_A_WINDOW = frozenset({"sliding_window", "use_sliding_window", "max_window_layers", "sliding_window_pattern",
                          "_sliding_window_pattern", "sliding_window_layers", "window_layers",
                          "global_attn_every_n_layers", "local_attention_probs_dropout_prob"})
#: Layer types under which transformers' masks apply the config's window (so the static cache follows it).
WINDOWED_LAYER_TYPES = frozenset({"sliding_attention", "hybrid_sliding", "chunked_attention"})


def window_fields(config) -> dict[str, int]:
    """The local-attention windows and chunks ``config`` (or its text config) records, field name -> tokens
    (positive integers; none when ``use_sliding_window=False``)."""
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
    """The windows of :func:`window_fields` that ``layer_types`` do not record: none when some layer type is
    windowed, else every window shorter than ``positions``."""
    if set(layer_types) & WINDOWED_LAYER_TYPES:
        return {}
    return {name: value for name, value in window_fields(config).items() if positions is None or value < positions}


def check_windows_recorded(config, layer_types) -> None:
    """Refuse a model whose config records a local-attention window that its layer types do not
    (:func:`unrecorded_windows`, within its position limit).

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
