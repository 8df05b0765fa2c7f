"""Local attention under any config field name. A window model code applies itself (GPT-Neo's ``window_size``) is sized
from the keys it is handed, wrong over a full-length static cache: :func:`check_windows_recorded` refuses it."""

from __future__ import annotations

import re

from cudagraph_bench.errors import NotGraphableError

#: A config field that records a local-attention window or chunk (tokens), whatever the model calls it.
WINDOW_FIELD = re.compile(r"window|attn_chunk|attention_chunk|local_attention")
#: Fields matching :data:`WINDOW_FIELD` that hold no self-applied window (switches, counts, ``sliding_window``).
NOT_A_WINDOW = frozenset({"sliding_window", "use_sliding_window", "max_window_layers", "sliding_window_pattern",
                          "_sliding_window_pattern", "sliding_window_layers", "window_layers",
                          "global_attn_every_n_layers", "local_attention_probs_dropout_prob"})
#: Layer types under which transformers' masks apply the config's window (so the static cache follows it).
WINDOWED_LAYER_TYPES = frozenset({"sliding_attention", "hybrid_sliding", "chunked_attention"})


def check_windows_recorded(config, layer_types) -> None:
    """NotGraphableError (naming class, field, value) for a window shorter than the positions that the layer types do
    not record (no layer type is windowed); none when ``use_sliding_window=False``."""
    from cudagraph_bench.models.positions import recorded_position_limit

    config = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    if set(layer_types) & WINDOWED_LAYER_TYPES or getattr(config, "use_sliding_window", None) is False:
        return
    positions = recorded_position_limit(config)
    unrecorded = {name: value for name, value in sorted(config.to_dict().items())
                  if name not in NOT_A_WINDOW and WINDOW_FIELD.search(name) and isinstance(value, int)
                  and not isinstance(value, bool) and value > 0 and (positions is None or value < positions)}
    if unrecorded:
        fields = ", ".join(f"{name}={value}" for name, value in unrecorded.items())
        raise NotGraphableError(f"{config.__class__.__name__}.{fields}: a local attention window its model code "
                                "applies itself, which its layer types do not record as sliding-window layers: over a "
                                "static KV cache it would cut the wrong keys")
