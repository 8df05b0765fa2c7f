"""Tiny model sizes by config field name: :func:`shrink_fields` shrinks (never grows) any transformers config so every
causal-LM architecture builds in milliseconds with its structure kept."""

from __future__ import annotations

#: Model width (tokens' hidden size) of a tiny model: ``HEADS x HEAD_DIM``.
HIDDEN = 64
#: Attention heads (query heads) of a tiny model.
HEADS = 4
#: Width of one attention head.
HEAD_DIM = 16
#: Vocabulary (token ids); large enough for every special token id the shrink keeps.
VOCAB = 512
#: Sliding window / attention chunk (tokens): shorter than a zoo prompt, so the window is exercised.
WINDOW = 16
#: Routed experts and top-k: all of them, so a tiny random router's near ties cannot flip between caches.
EXPERTS = 4
TOP_K = EXPERTS
#: Most layers a tiny model gets while covering every kind of layer of the original.
MAX_LAYERS = 8

#: field name -> the size it shrinks to (at most: a smaller original is kept).
WIDTH_FIELDS = dict.fromkeys(
    ("hidden_size", "n_embd", "d_model", "embed_dim", "emb_dim", "word_embed_proj_dim", "embedding_size",
     "input_embedding_size", "output_embedding_size", "attention_hidden_size", "lru_width", "embedding_dim",
     "hidden_size_global", "adapter_in_dim", "adapter_input_size"), HIDDEN)
#: Widths of a dense MLP.
MLP_FIELDS = dict.fromkeys(
    ("intermediate_size", "n_inner", "ffn_dim", "decoder_ffn_dim", "encoder_ffn_dim", "ffn_hidden_size",
     "intermediate_size_mlp", "dense_intermediate_size", "feed_forward_size", "dim_ff", "dff", "d_inner",
     "mlp_hidden_size", "hidden_dim"), 128)
#: Widths of one expert's MLP (and of shared experts).
EXPERT_MLP_FIELDS = dict.fromkeys(
    ("moe_intermediate_size", "shared_expert_intermediate_size", "expert_ffn_hidden_size", "shared_intermediate_size",
     "moe_shared_expert_intermediate_size", "shared_experts_intermediate_size", "expert_intermediate_size"),
    32)
HEAD_COUNT_FIELDS = ("num_attention_heads", "n_head", "num_heads", "n_heads", "decoder_attention_heads",
                     "encoder_attention_heads", "attention_heads", "num_decoder_attention_heads",
                     "num_encoder_attention_heads", "swa_num_attention_heads", "index_n_heads")
KV_HEAD_FIELDS = ("num_key_value_heads", "num_kv_heads", "multi_query_group_num", "num_query_groups",
                  "swa_num_key_value_heads", "n_kv_heads")
HEAD_DIM_FIELDS = dict.fromkeys(
    ("head_dim", "attention_head_dim", "kv_channels", "d_head", "dim_head", "attention_head_size", "swa_head_dim",
     "index_head_dim", "v_head_dim", "qk_head_dim"), HEAD_DIM)
#: Multi-head latent attention (DeepSeek-V2/V3): the rotary and non-rotary parts of a query/key head, low ranks.
MLA_FIELDS = {"qk_rope_head_dim": HEAD_DIM // 2, "qk_nope_head_dim": HEAD_DIM // 2, "kv_lora_rank": 32,
              "q_lora_rank": 32, "o_lora_rank": 32}
LAYER_COUNT_FIELDS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "decoder_layers", "encoder_layers",
                      "num_decoder_layers", "num_encoder_layers")
EXPERT_FIELDS = dict.fromkeys(("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"), EXPERTS)
#: The experts one token is routed to: :data:`TOP_K` whatever the original routes.
TOP_K_FIELDS = dict.fromkeys(("num_experts_per_tok", "num_experts_per_token", "moe_topk", "top_k",
                              "num_selected_experts", "moe_k"), TOP_K)
#: Expert groups of group-limited routing (DeepSeek-V3): one group, so any top-k fits.
GROUP_FIELDS = {"n_group": 1, "num_expert_group": 1, "topk_group": 1, "n_shared_experts": 1, "num_shared_experts": 1}
#: Position limits: a decode request of the zoo (prompt + new tokens) fits many times over.
POSITION_FIELDS = dict.fromkeys(("max_position_embeddings", "n_positions", "max_seq_len", "n_ctx",
                                 "max_sequence_length", "seq_length", "max_target_positions",
                                 "max_source_positions", "original_max_position_embeddings"), 512)
#: Windows and chunks of local attention, by whatever name a config gives them.
WINDOW_FIELDS = dict.fromkeys(("sliding_window", "window_size", "attention_window_size", "sliding_window_size",
                               "local_attention", "attention_chunk_size", "local_attention_window_len",
                               "local_attn_chunk_length", "lsh_attn_chunk_length", "keep_window_size"), WINDOW)
#: State-space / linear-attention widths (Mamba, Mamba-2, gated delta nets, RG-LRU).
STATE_FIELDS = {"mamba_d_state": 16, "state_size": 16, "ssm_state_size": 16, "mamba_dt_rank": 8, "time_step_rank": 8,
                "mamba_chunk_size": WINDOW, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
                "linear_key_head_dim": HEAD_DIM, "linear_value_head_dim": HEAD_DIM, "linear_num_heads": HEADS,
                "linear_head_dim": HEAD_DIM, "mamba_d_ssm": 2 * HIDDEN}
#: Every field shrunk to a fixed size, query head counts and the sparse-attention indexer's top-k (no expert routing)
#: too (layer and key/value head counts are handled apart).
FIXED = {**WIDTH_FIELDS, **MLP_FIELDS, **EXPERT_MLP_FIELDS, **HEAD_DIM_FIELDS, **MLA_FIELDS, **EXPERT_FIELDS,
         "index_topk": TOP_K, **GROUP_FIELDS, **POSITION_FIELDS, **WINDOW_FIELDS, **STATE_FIELDS,
         **dict.fromkeys(HEAD_COUNT_FIELDS, HEADS)}
#: Fields a default config leaves None that a model needs: their tiny value (KV heads None: the query heads).
REQUIRED = {"head_dim": HEAD_DIM, "num_key_value_heads": HEADS, "n_routed_experts": EXPERTS,
            "num_experts_per_tok": TOP_K, "n_shared_experts": 1}
#: Keys ``to_dict()`` writes into a sub-config that are no field of it (some sub-config classes refuse them back).
SERIALIZATION_FIELDS = ("_name_or_path", "output_attentions", "transformers_version")
#: Fields that hold token ids: kept below :data:`VOCAB`.
TOKEN_ID_SUFFIXES = ("_token_id", "_token_index", "_token_ids")


def layer_lists(fields: dict, layers: int | None) -> dict[str, list]:
    """The per-layer lists (as long as ``layers``) by field name."""
    return {k: v for k, v in fields.items()
            if layers and isinstance(v, list) and len(v) == layers and k != "architectures"}


def covering_prefix(values: list) -> int:
    """Length of the shortest prefix holding every distinct value: 1 + the latest first occurrence of a value."""
    return max({repr(v): i for i, v in reversed(list(enumerate(values)))}.values(), default=-1) + 1


def layer_count(fields: dict, original_layers: int, patterns=()) -> int:
    """2, or the shortest prefix of every per-layer list (and ``patterns``) keeping each kind of layer, at most
    :data:`MAX_LAYERS`; twice that with ``num_kv_shared_layers`` (Gemma 3n)."""
    if not original_layers:
        return 2
    lists = [*layer_lists(fields, original_layers).values(),
             *(p for p in patterns if isinstance(p, list) and len(p) == original_layers)]
    needed = max([2, *(covering_prefix(v) for v in lists)])
    return min(original_layers, (2 if fields.get("num_kv_shared_layers") else 1) * min(needed, MAX_LAYERS))


def _is_size(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _shrunk(value, size):
    return min(value, size) if _is_size(value) else value


def _shrink_one(name: str, value, fields: dict):
    """The tiny value of field ``name``, or ``value`` itself."""
    hidden = fields.get("hidden_size") if _is_size(fields.get("hidden_size")) else None
    if value is None and name in REQUIRED:
        return REQUIRED[name]
    if isinstance(value, dict) and ("model_type" in value or name.endswith("_config")):
        return {k: v for k, v in shrink_fields(value).items() if k not in SERIALIZATION_FIELDS}
    if name in WIDTH_FIELDS and name != "hidden_size" and hidden and _is_size(value) and value > hidden \
            and value % hidden == 0:      # a multiple of the width (hidden state and embeddings side by side)
        return HIDDEN * (value // hidden)
    if name in TOP_K_FIELDS:
        return TOP_K if _is_size(value) else value
    if name in FIXED:
        return _shrunk(value, FIXED[name])
    if name in KV_HEAD_FIELDS and _is_size(value):     # all for multi-head attention, 1 for multi-query, else half
        heads = next((fields[k] for k in HEAD_COUNT_FIELDS if _is_size(fields.get(k))), None)
        return HEADS if heads is None or value >= heads else 1 if value == 1 else HEADS // 2
    if "vocab_size" in name or name.endswith("_vocab"):
        return _shrunk(value, VOCAB)
    if name.endswith("_per_layer_input"):
        return _shrunk(value, HEAD_DIM)
    if name.endswith("embed_dim"):
        return _shrunk(value, HIDDEN)
    if name.endswith(TOKEN_ID_SUFFIXES):
        return _token_ids(value)
    return value


def shrink_fields(fields: dict, patterns=()) -> dict:
    """``fields`` (``to_dict()``) with sizes, counts, lists and token ids shrunk; others kept."""
    out = {name: _shrink_one(name, value, fields) for name, value in fields.items() if name != "per_layer_config"}
    count = None
    layers_field = next((k for k in LAYER_COUNT_FIELDS if _is_size(fields.get(k))), None)
    if layers_field:
        original = fields[layers_field]
        count = layer_count(fields, original, patterns)
        for name in LAYER_COUNT_FIELDS:
            if fields.get(name) == original:
                out[name] = count
        for name, values in layer_lists(fields, original).items():
            out[name] = values[:count]
        if _is_size(fields.get("num_kv_shared_layers")):
            out["num_kv_shared_layers"] = count // 2
    if isinstance(fields.get("per_layer_config"), dict):     # layer index (or layer type) -> that layer's fields
        out["per_layer_config"] = {k: _shrink_layer(v, fields) for k, v in fields["per_layer_config"].items()
                                   if isinstance(v, dict) and (count is None or not str(k).isdigit() or int(k) < count)}
    return tie_fields(out, fields)


def _shrink_layer(layer: dict, fields: dict) -> dict:
    whole = {k: v for k, v in fields.items() if k != "per_layer_config"}
    shrunk = shrink_fields({**whole, **layer})
    return {k: shrunk[k] for k in layer}


def _token_ids(value):
    """An id past the tiny vocabulary becomes its remainder."""
    if isinstance(value, list):
        return [_token_ids(v) for v in value]
    return value % VOCAB if _is_size(value) and value >= VOCAB else value


#: (heads field, head width field) of a state-space mixer, whose product must be its inner width, expand x hidden.
MIXER_HEADS = (("mamba_n_heads", "mamba_d_head"), ("mamba_num_heads", "mamba_head_dim"),
               ("n_mamba_heads", "mamba_headdim"))


def tie_fields(out: dict, original: dict) -> dict:
    """``out`` with ``original``'s tying constraints restored: mixer heads x head width = expand x hidden, MLA widths,
    top-k <= experts, one state group, rotary width <= head width."""
    out = dict(out)
    hidden = out.get("hidden_size") if _is_size(out.get("hidden_size")) else HIDDEN
    pairs = [p for p in MIXER_HEADS if p[0] in out and p[1] in out]
    if "state_size" in out and "expand" in out and "num_heads" in out and "head_dim" in out:   # Mamba-2
        pairs.append(("num_heads", "head_dim"))
    for heads_field, dim_field in pairs:
        expand = out.get("mamba_expand", out.get("expand", 2)) or 2
        dim = min(int(out[dim_field] or HEAD_DIM), HEAD_DIM)
        out[dim_field] = dim
        out[heads_field] = max(1, int(expand * hidden) // dim)
    rope, nope = original.get("qk_rope_head_dim"), original.get("qk_nope_head_dim")
    if _is_size(rope) and _is_size(nope):
        if "qk_head_dim" in out:
            out["qk_head_dim"] = out["qk_rope_head_dim"] + out["qk_nope_head_dim"]
        if original.get("head_dim") == rope:       # DeepSeek's head_dim: the rotary part
            out["head_dim"] = out["qk_rope_head_dim"]
        elif original.get("head_dim") == rope + nope:
            out["head_dim"] = out["qk_rope_head_dim"] + out["qk_nope_head_dim"]
    experts = next((out[f] for f in EXPERT_FIELDS if _is_size(out.get(f))), None)
    for name in TOP_K_FIELDS:
        if experts and _is_size(out.get(name)):
            out[name] = min(out[name], experts)        # HunYuan's one expert: routed to it alone
    for groups in ("mamba_n_groups", "n_groups", "mamba_ngroups"):
        if _is_size(out.get(groups)):
            out[groups] = 1
    if _is_size(out.get("rotary_dim")):
        out["rotary_dim"] = min(out["rotary_dim"], HEAD_DIM)
    return out
