"""The architecture zoo: every causal-LM model type of the installed transformers as a tiny random model from its
default config, saved as a ``save_pretrained`` folder that ``--models`` loads offline."""

from __future__ import annotations

import os

from cudagraph_bench.errors import CudagraphBenchError

#: Seed of a tiny model's random weights (latency does not depend on weight values).
ZOO_SEED = 0
#: ``initializer_range`` of a tiny model: wide random logits, so greedy tokens vary and a wrong decode shows.
INITIALIZER_RANGE = 0.2


#: Per-layer lists some configs derive from other fields (not in ``to_dict()``).
DERIVED_LAYER_LISTS = ("layer_types", "layers_block_type")


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


def _first_line(exc: BaseException, width: int = 200) -> str:
    """``"Type: first line"`` (two lines when the first ends with ``:``), cut to ``width``."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()] or [""]
    text = f"{lines[0]} {lines[1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= width else text[: width - 3] + "..."


def tiny_fields(model_type: str) -> dict:
    """The default config's fields shrunk, with the override on top; ZooBuildError when it cannot be built."""
    from transformers import CONFIG_MAPPING

    from cudagraph_bench.models.zoo_overrides import OVERRIDES
    from cudagraph_bench.models.zoo_sizes import shrink_fields

    if model_type not in CONFIG_MAPPING:
        raise ZooBuildError(f"transformers has no config for model type {model_type!r}")
    config_class = CONFIG_MAPPING[model_type]
    try:
        default = config_class()
    except Exception as exc:   # noqa: BLE001 - any failure of transformers' own default is the reason
        raise ZooBuildError(f"transformers' default {config_class.__name__} does not build: {_first_line(exc)}") \
            from None
    derived = [getattr(default, name, None) for name in DERIVED_LAYER_LISTS]
    fields = shrink_fields(default.to_dict(), patterns=[d for d in derived if isinstance(d, list)])
    fields = _merged(fields, OVERRIDES.get(model_type, ({}, ""))[0])
    fields["initializer_range"] = INITIALIZER_RANGE
    if "is_decoder" in fields:
        fields["is_decoder"] = True          # a causal LM of an encoder family (BERT, RoBERTa) attends causally
    drop = {"transformers_version", "model_type", "architectures", "_name_or_path"}
    return {k: v for k, v in fields.items() if k not in drop}


def _merged(fields: dict, override: dict) -> dict:
    """A sub-config dict is merged field by field, not replaced."""
    out = dict(fields)
    for name, value in override.items():
        out[name] = _merged(out[name], value) if isinstance(value, dict) and isinstance(out.get(name), dict) else value
    return out


def tiny_config(model_type: str):
    """The tiny config, ``architectures`` naming the causal-LM class; ZooBuildError on failure."""
    from transformers import CONFIG_MAPPING

    fields = tiny_fields(model_type)
    config_class = CONFIG_MAPPING[model_type]
    try:
        config = config_class(**fields)
    except Exception as exc:   # noqa: BLE001
        raise ZooBuildError(f"the tiny {config_class.__name__} does not build: {_first_line(exc)}") from None
    config.architectures = [causal_lm_class_name(model_type)]
    return config


def tiny_model(model_type: str, config=None):
    """A tiny random model (weights by :data:`ZOO_SEED`) in ``eval()`` on the CPU; ``config`` None: the tiny config.
    ZooBuildError when it cannot be built (a missing optional package, a config its code rejects)."""
    import torch
    from transformers import AutoModelForCausalLM

    config = tiny_config(model_type) if config is None else config
    torch.manual_seed(ZOO_SEED)
    try:
        with torch.device("cpu"):
            model = AutoModelForCausalLM.from_config(config)
    except Exception as exc:   # noqa: BLE001
        raise ZooBuildError(f"{causal_lm_class_name(model_type)} does not build from its tiny config: "
                            f"{_first_line(exc)}") from None
    return model.eval()


def save_tiny(obj, model_type: str, folder: str | os.PathLike) -> str:
    """``obj.save_pretrained(folder/<model_type>)`` (a tiny config writes ``config.json`` only); returns that path, or
    raises ZooBuildError."""
    path = os.path.join(os.fspath(folder), model_type)
    try:
        obj.save_pretrained(path)
    except Exception as exc:   # noqa: BLE001
        raise ZooBuildError(f"the tiny {type(obj).__name__} cannot be saved: {_first_line(exc)}") from None
    return path
