"""Position limits (tokens) that bound prompts and KV caches. ALiBi (Press et al. 2022, arXiv:2108.12409) and NoPE
models record none and are bounded by ``--max-positions``, else the matrix's longest request."""

from __future__ import annotations

from cudagraph_bench.errors import UsageError

#: Config fields holding a model's position limit, first found wins (MPT's ALiBi: ``max_seq_len``).
POSITION_FIELDS = ("n_positions", "max_position_embeddings", "max_seq_len")
#: Encoders whose position ids start after the padding index: ``pad_token_id + 1`` rows are never reached.
PADDING_OFFSET_POSITIONS = frozenset({"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "roberta-prelayernorm",
                                      "data2vec-text"})


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
