"""The architecture zoo: every causal-LM model type of the installed transformers as a tiny random model from its
default config, saved as a ``save_pretrained`` folder that ``--models`` loads offline and put through every
``--models`` check as a user's checkpoint would be."""

from __future__ import annotations

import contextlib
import os
import tempfile

from cudagraph_bench.errors import CudagraphBenchError, UnknownModelError
from cudagraph_bench.models.checkpoints import directory_config
from cudagraph_bench.models.refusals import check_model
from cudagraph_bench.models.zoo_sizes import shrink_fields

#: Seed of a tiny model's random weights (latency does not depend on weight values).
ZOO_SEED = 0
#: ``initializer_range`` of a tiny model: wide random logits, so greedy tokens vary and a wrong decode shows.
INITIALIZER_RANGE = 0.2


#: Per-layer lists some configs derive from other fields (not in ``to_dict()``).
DERIVED_LAYER_LISTS = ("layer_types", "layers_block_type")

#: The token indexer's fields of Qwen4-exp (text config), and why they are set.
_INDEXER = {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 32,
            "indexer_compress_ratio": 4}
_INDEXER_REASON = "its default config leaves the token indexer's fields None (a checkpoint gives them)"

#: model_type -> (the config fields its tiny model needs beyond the size rules, set after the shrink; why in one line).
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


class ZooBuildError(CudagraphBenchError, RuntimeError):
    """A zoo type whose tiny config or model cannot be built; the message is the one-line reason."""


def causal_lm_types() -> list[str]:
    """Sorted model types of ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def causal_lm_class_name(model_type: str) -> str:
    """E.g. ``"LlamaForCausalLM"``."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]
    return name[0] if isinstance(name, (list, tuple)) else name


@contextlib.contextmanager
def _build_step(what: str):
    """ZooBuildError ``"<what>: Type: first line"`` (two lines when the first ends with ``:``; the exception part cut
    to 200 characters) for any exception of transformers' or the model's code inside."""
    try:
        yield
    except Exception as exc:   # noqa: BLE001 - any failure of that code is the reason
        lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()] or [""]
        text = f"{lines[0]} {lines[1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        raise ZooBuildError(f"{what}: {text if len(text) <= 200 else text[:197] + '...'}") from None


def _merged(fields: dict, override: dict) -> dict:
    """A sub-config dict is merged field by field, not replaced."""
    out = dict(fields)
    for name, value in override.items():
        out[name] = _merged(out[name], value) if isinstance(value, dict) and isinstance(out.get(name), dict) else value
    return out


def tiny_config(model_type: str):
    """The default config's fields shrunk, the override on top, ``architectures`` naming the causal-LM class;
    ZooBuildError when it cannot be built."""
    from transformers import CONFIG_MAPPING

    if model_type not in CONFIG_MAPPING:
        raise ZooBuildError(f"transformers has no config for model type {model_type!r}")
    config_class = CONFIG_MAPPING[model_type]
    with _build_step(f"transformers' default {config_class.__name__} does not build"):
        default = config_class()
    derived = [getattr(default, name, None) for name in DERIVED_LAYER_LISTS]
    fields = shrink_fields(default.to_dict(), patterns=[d for d in derived if isinstance(d, list)])
    fields = _merged(fields, OVERRIDES.get(model_type, ({}, ""))[0])
    fields["initializer_range"] = INITIALIZER_RANGE
    if "is_decoder" in fields:
        fields["is_decoder"] = True          # a causal LM of an encoder family (BERT, RoBERTa) attends causally
    drop = {"transformers_version", "model_type", "architectures", "_name_or_path"}
    with _build_step(f"the tiny {config_class.__name__} does not build"):
        config = config_class(**{k: v for k, v in fields.items() if k not in drop})
    config.architectures = [causal_lm_class_name(model_type)]
    return config


def tiny_model(model_type: str, config=None):
    """A tiny random model (weights by :data:`ZOO_SEED`) in ``eval()`` on the CPU; ``config`` None: the tiny config.
    ZooBuildError when it cannot be built (a missing optional package, a config its code rejects)."""
    import torch
    from transformers import AutoModelForCausalLM

    config = tiny_config(model_type) if config is None else config
    torch.manual_seed(ZOO_SEED)
    with _build_step(f"{causal_lm_class_name(model_type)} does not build from its tiny config"), torch.device("cpu"):
        model = AutoModelForCausalLM.from_config(config)
    return model.eval()


def save_tiny(obj, path: str) -> None:
    """``obj.save_pretrained(path)`` (a tiny config writes ``config.json`` only); ZooBuildError when it fails."""
    with _build_step(f"the tiny {type(obj).__name__} cannot be saved"):
        obj.save_pretrained(path)


class ZooRefused(UnknownModelError):
    """The one-line reason (no folder in it)."""


def _without_path(reason: str, path: str) -> str:
    prefix = f"{path}: "
    return reason[len(prefix):] if reason.startswith(prefix) else reason.replace(path, "<folder>")


def default_config_refusal(model_type: str) -> str | None:
    """Why ``directory_config`` refuses the type's default config, or None."""
    from transformers import CONFIG_MAPPING

    # any other failure (the default config does not build or save) is no refusal of the suite's: the build's reason
    with tempfile.TemporaryDirectory(prefix="cgb-zoo-") as folder, contextlib.suppress(Exception):
        path = os.path.join(folder, model_type)
        try:
            CONFIG_MAPPING[model_type]().save_pretrained(path)
            directory_config(path)
        except UnknownModelError as exc:
            return _without_path(str(exc), path)
    return None


def zoo_checkpoint(model_type: str, folder: str | os.PathLike, *, attn_implementation: str | None = None) -> str:
    """Save the tiny model into ``folder/<model_type>`` and check it as ``--models`` would; returns the path (an
    encoder-decoder: its causal-LM decoder alone). ZooRefused with the one-line reason."""
    if model_type in REFUSED:
        raise ZooRefused(REFUSED[model_type])
    try:
        config = tiny_config(model_type)
    except ZooBuildError as exc:
        raise ZooRefused(default_config_refusal(model_type) or str(exc)) from None
    path = os.path.join(os.fspath(folder), model_type)
    try:
        save_tiny(config, path)
        if not getattr(config, "is_encoder_decoder", False):
            directory_config(path)
        save_tiny(tiny_model(model_type, config), path)
        check_model(path, attn_implementation)
    except (ZooBuildError, UnknownModelError) as exc:
        raise ZooRefused(_without_path(str(exc), path)) from None
    return path
