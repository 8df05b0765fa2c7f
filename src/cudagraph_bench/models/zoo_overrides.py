"""The few architectures whose tiny config needs fields the size rules cannot derive (set after the shrink), and the
types that cannot run alone, each with the reason."""

from __future__ import annotations

#: The token indexer's fields of Qwen4-exp (text config), and why they are set.
_INDEXER = {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 32,
            "indexer_compress_ratio": 4}
_INDEXER_REASON = "its default config leaves the token indexer's fields None (a checkpoint gives them)"

#: model_type -> (the config fields its tiny model needs beyond the size rules, why in one line).
OVERRIDES: dict[str, tuple[dict, str]] = {
    "gpt_neo": ({"attention_types": [[["global", "local"], 1]]},
                "attention_types counts layers in (pattern, repeats) pairs: one global and one local layer"),
    "jetmoe": ({"num_key_value_heads": 1},
               "its attention heads are key/value heads times the experts each token is routed to (4)"),
    "lfm2": ({"num_hidden_layers": 2, "layer_types": ["conv", "full_attention"]},
             "its default config makes every layer attention; LFM2 checkpoints interleave short-convolution "
             "layers with attention: one of each"),
    "lfm2_moe": ({"num_hidden_layers": 3, "layer_types": ["conv", "full_attention", "conv"],
                  "num_dense_layers": 1},
                 "its default config leaves layer_types None (a checkpoint gives them): conv and attention "
                 "layers as LFM2-8B-A1B interleaves them; one dense layer before the mixture of experts"),
    "cohere_compass_text": ({"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0,
                                                                     "mrope_section": [3, 3, 2]}}},
                            "its default config leaves rope_parameters empty (a checkpoint gives them); its "
                            "multimodal RoPE sections must add up to half a head (8 of 16)"),
    "reformer": ({"is_decoder": True, "attn_layers": ["local", "lsh"], "axial_pos_shape": [16, 32],
                  "axial_pos_embds_dim": [32, 32], "num_buckets": 4},
                 "ReformerModelWithLMHead needs is_decoder; its axial position shape must multiply to the "
                 "positions and its axial widths add up to the hidden size"),
    "dbrx": ({"attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0}},
             "its default attention sub-config has no rope_theta and no clip_qkv, which its attention "
             "clamps by (DBRX's checkpoint gives 500000 and 8)"),
    "xmod": ({"default_language": "en_XX"},
             "X-MOD picks a language adapter per input: the default language of its default config"),
    "bamba": ({"attn_layer_indices": [1]},
              "its default config has no attention layer (attn_layer_indices None), on which transformers' "
              "generate fails; Bamba-9B puts attention among its mamba layers: one after one mamba layer"),
    "granitemoehybrid": ({"layer_types": ["mamba", "attention"]},
                         "its default config is all mamba layers, on which transformers' generate fails; "
                         "Granite-4.0 hybrids put attention among them: one after one mamba layer"),
    "hrm_text": ({"num_hidden_layers": 1, "num_layers_per_stack": None},
                 "num_hidden_layers is the layers of one stack, which the config multiplies by its cycles"),
    "blt": ({"encoder_config": {"hidden_size_global": 128}, "decoder_config": {"hidden_size_global": 128},
             "global_config": {"hidden_size": 128, "head_dim": 32}},
            "its global transformer is cross_attn_k (2) times as wide as its byte-level encoder and decoder"),
    "dory": ({"num_hidden_layers": 8, "n_input_layers": 2, "n_recurrent_layers": 4, "n_output_layers": 2},
             "its input, looped and output layers must add up to the layer count"),
    "zamba": ({"num_hidden_layers": 4,
               "layers_block_type": ["linear_attention", "hybrid", "linear_attention", "hybrid"]},
              "its hybrid layers share one attention block, whose weights are tied over at least two of them"),
    "zaya": ({"num_experts_per_tok": 1}, "ZAYA routes each token to one expert only (its config refuses more)"),
    "qwen4_exp": ({"text_config": _INDEXER}, _INDEXER_REASON),
    "qwen4_exp_text": (_INDEXER, _INDEXER_REASON),
}

#: model_type -> why the zoo refuses it before building it: models that cannot run alone.
REFUSED = {
    "gemma4_assistant": "a drafting assistant (multi-token prediction): its layers read the keys and values of the "
                        "target model it drafts for, so it does not run alone",
    "gemma4_unified_assistant": "a drafting assistant (multi-token prediction): its layers read the keys and values "
                                "of the target model it drafts for (shared_kv_states), so it does not run alone",
}
