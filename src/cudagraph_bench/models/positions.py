"""Position limits (tokens) that bound prompts and KV caches, and local attention windows under any config field name.
ALiBi (Press et al. 2022, arXiv:2108.12409) and NoPE models record no limit and are bounded by ``--max-positions``,
else the matrix's longest request. A window model code applies itself (GPT-Neo's ``window_size``) is sized from the
keys it is handed, wrong over a full-length static cache: :func:`check_windows_recorded` refuses it."""

from __future__ import annotations

import re

from cudagraph_bench.errors import NotGraphableError, UsageError

#: Config fields holding a model's position limit, first found wins (MPT's ALiBi: ``max_seq_len``).
POSITION_FIELDS = ("n_positions", "max_position_embeddings", "max_seq_len")
#: Encoders whose position ids start after the padding index: ``pad_token_id + 1`` rows are never reached.
PADDING_OFFSET_POSITIONS = frozenset({"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "roberta-prelayernorm",
                                      "data2vec-text"})
#: A config field that records a local-attention window or chunk (tokens), whatever the model calls it.
WINDOW_FIELD = re.compile(r"window|attn_chunk|attention_chunk|local_attention")
#: Fields matching :data:`WINDOW_FIELD` that hold no self-applied window (switches, counts, ``sliding_window``).
NOT_A_WINDOW = frozenset({"sliding_window", "use_sliding_window", "max_window_layers", "sliding_window_pattern",
                          "_sliding_window_pattern", "sliding_window_layers", "window_layers",
                          "global_attn_every_n_layers", "local_attention_probs_dropout_prob"})
#: Layer types under which transformers' masks apply the config's window (so the static cache follows it).
WINDOWED_LAYER_TYPES = frozenset({"sliding_attention", "hybrid_sliding", "chunked_attention"})


def recorded_position_limit(config) -> int | None:
    """The limit ``config`` (or its text config) records, or None (ALiBi, NoPE, XLNet's -1)."""
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    for part in ([config] if text is config else [config, text]):
        for field in POSITION_FIELDS:
            value = getattr(part, field, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:   # XLNet's -1: no limit
                pad = getattr(part, "pad_token_id", None)
                offset = pad + 1 if getattr(part, "model_type", None) in PADDING_OFFSET_POSITIONS and \
                    isinstance(pad, int) else 0
                return int(value) - offset
    return None


def position_limit(config, bound=None) -> int:
    """The recorded limit, else ``bound`` (tokens >= 1, as parsed or derived from the requests, or a callable giving
    it). UsageError when neither exists."""
    recorded = recorded_position_limit(config)
    if recorded is not None:
        return recorded
    bound = bound() if callable(bound) else bound
    if bound is None:
        raise UsageError(f"{config.__class__.__name__} records no position limit ({'/'.join(POSITION_FIELDS)}; e.g. "
                         "ALiBi or NoPE attention): give --max-positions N to bound its prompts and KV caches")
    return int(bound)


def max_positions(model, bound=None) -> int:
    """:func:`position_limit` of a built model (``model.config``)."""
    return position_limit(model.config, bound)


def prompt_does_not_fit(name: str, limit: int, seq_len: int) -> str:
    """The skip reason of a request longer than ``limit``."""
    return f"{name} has {limit} positions: a request of {seq_len} tokens (prompt and any new tokens) does not fit"


def position_bound(max_positions_option: int | None, prompt_lengths=(), decode_prompt_lengths=(), new_tokens=()) -> int:
    """``--max-positions`` when given, else the most positions one request uses; ValueError without either."""
    if max_positions_option:
        return max_positions_option
    decode = max(decode_prompt_lengths) + max(new_tokens) if decode_prompt_lengths and new_tokens else 0
    longest = max([*prompt_lengths, decode])
    if longest < 1:
        raise ValueError("a matrix without prompt lengths has no longest request")
    return int(longest)


def check_windows_recorded(config, layer_types) -> None:
    """NotGraphableError (naming class, field, value) for a window shorter than the positions that the layer types do
    not record (no layer type is windowed); none when ``use_sliding_window=False``."""
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
