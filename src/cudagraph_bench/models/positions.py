"""Position limits (tokens): the one function that bounds prompts and KV caches, for the pytest plugin and
``cudagraph-bench run`` alike (:func:`cudagraph_bench.models.presets.model_position_limit`), and for a built model (:func:`max_positions`).

A model's config records its limit in a field (:data:`POSITION_FIELDS`: learned position embeddings,
rotary models' ``max_position_embeddings``). ALiBi (BLOOM: "Train Short, Test Long", Press et al. 2022,
https://arxiv.org/abs/2108.12409) and NoPE models record none: their attention has no table to run past,
so they are bounded by the request instead: ``--max-positions`` when given, else the longest request of
the matrix (:func:`longest_request`), and their KV caches are sized from the request.
"""

from __future__ import annotations

from cudagraph_bench.errors import UsageError

#: Config fields that hold a model's position limit, first found wins (MPT's ALiBi records its trained length,
#: ``max_seq_len``, which its attention mask is built for).
POSITION_FIELDS = ("n_positions", "max_position_embeddings", "max_seq_len")
#: Text encoders whose position ids start after the padding index (RoBERTa's
#: ``create_position_ids_from_input_ids``): of ``max_position_embeddings`` rows, ``pad_token_id + 1`` are
#: never reached by a token (roberta-base: 514 rows, 512 tokens).
#: (Those that load with SDPA; tests/test_presets.py runs each at its limit and one token past it.)
PADDING_OFFSET_POSITIONS = frozenset({"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "roberta-prelayernorm",
                                      "data2vec-text"})


def recorded_position_limit(config) -> int | None:
    """The position limit (tokens) that ``config`` records (gpt2 1024, bert-tiny 512; roberta-base 512 of its
    514 position rows), or None when it records none (ALiBi, NoPE; XLNet's relative positions, which its class
    gives as -1). A multimodal config's limit is its text config's (Gemma 3's ``text_config``). A
    ``save_pretrained`` directory whose config.json holds a limit below 1 is refused before this is read
    (:func:`cudagraph_bench.models.config_checks.check_config_fields`)."""
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
    """The position limit (tokens) of a model of ``config``: the one it records, else ``bound`` (tokens: the
    request or ``--max-positions``; or a function of no arguments that gives it, called only then) for a model
    that records none (ALiBi, NoPE).

    Raises:
        UsageError: the config records no limit and no ``bound`` is given."""
    recorded = recorded_position_limit(config)
    if recorded is not None:
        return recorded
    bound = bound() if callable(bound) else bound
    if bound is None:
        raise UsageError(f"{config.__class__.__name__} records no position limit ({'/'.join(POSITION_FIELDS)}; e.g. "
                         "ALiBi or NoPE attention): give --max-positions N to bound its prompts and KV caches")
    if bound < 1:
        raise UsageError(f"a position bound must be >= 1 token (got {bound})")
    return int(bound)


def max_positions(model, bound=None) -> int:
    """:func:`position_limit` of a built model (``model.config``)."""
    return position_limit(model.config, bound)


def prompt_does_not_fit(name: str, limit: int, seq_len: int) -> str:
    """Why a request of ``seq_len`` tokens (the prompt, plus the new tokens of a decode) of model ``name`` is
    skipped: it is longer than the model's ``limit`` positions (:func:`position_limit`). The reason the pytest
    session skips such a case with, and that ``cudagraph-bench run`` prints."""
    return f"{name} has {limit} positions: a request of {seq_len} tokens (prompt and any new tokens) does not fit"


def longest_request(prompt_lengths=(), decode_prompt_lengths=(), new_tokens=()) -> int:
    """The most positions (tokens) one request of a matrix uses: the longest forward prompt, or the longest
    decode prompt plus the most new tokens, whichever is longer: the bound of a model that records no
    position limit when ``--max-positions`` is not given.

    Raises:
        ValueError: no prompt length at all."""
    decode = max(decode_prompt_lengths) + max(new_tokens) if decode_prompt_lengths and new_tokens else 0
    longest = max([*prompt_lengths, decode])
    if longest < 1:
        raise ValueError("a matrix without prompt lengths has no longest request")
    return int(longest)


def position_bound(max_positions_option: int | None, *requests) -> int:
    """``--max-positions`` when given, else :func:`longest_request` of ``requests`` (its arguments)."""
    return max_positions_option if max_positions_option else longest_request(*requests)
