"""``save_pretrained`` directories: the checks a checkpoint passes before any case (``config.json``'s fields, its build
on ``meta``, its weights), each an UnknownModelError with the reason and the fix in one line, so a hand-edited field
refuses that directory instead of stopping the session; and the class it loads as."""

from __future__ import annotations

import contextlib
import json
import math
import os
import traceback

from cudagraph_bench.errors import UnknownModelError
from cudagraph_bench.models.hf_internals import state_layer_types
from cudagraph_bench.models.positions import POSITION_FIELDS

#: Config fields that count what a model cannot have none of: a value that is a whole number < 1 is refused.
POSITIVE_FIELDS = ("num_attention_heads", "n_head", "num_hidden_layers", "n_layer", "hidden_size", "n_embd",
                   "vocab_size")
#: The fix every refusal here ends with.
FIX = "fix config.json or re-save the model with save_pretrained()"


def _is_whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_config_fields(file: str, data: dict) -> None:
    """Refuse fields transformers would fail on or the suite would misread: an unknown ``dtype``, a
    :data:`POSITIVE_FIELDS` count < 1, a NaN or infinite number (top level or one level down: every output would be
    NaN), a position limit that is no whole number >= 1 (missing or ``null``: no limit). UnknownModelError naming the
    file, field, value and fix."""
    import torch

    for key in ("dtype", "torch_dtype"):
        value = data.get(key)
        if isinstance(value, str) and not isinstance(getattr(torch, value, None), torch.dtype):
            raise UnknownModelError(f'{file}: "{key}": {json.dumps(value)} is not a torch dtype: set it to the dtype '
                                    'the weights were saved in ("float32", "bfloat16", "float16") or re-save the '
                                    "model with save_pretrained()")
    for key in POSITIVE_FIELDS:
        value = data.get(key)
        if _is_whole(value) and value < 1:
            raise UnknownModelError(f'{file}: "{key}" is {value}: a model needs at least 1: {FIX}')
    nested = [(f"{key}.{inner}", v) for key, sub in data.items() if isinstance(sub, dict) for inner, v in sub.items()]
    for key, value in [*data.items(), *nested]:
        if isinstance(value, float) and not math.isfinite(value):
            raise UnknownModelError(f'{file}: "{key}" is {json.dumps(value)}, not a finite number: {FIX}')
    for key in POSITION_FIELDS:
        value = data.get(key)
        if value is not None and not (_is_whole(value) and value >= 1):
            raise UnknownModelError(f'{file}: "{key}" is {json.dumps(value)}, not a position limit (a whole number of '
                                    "tokens >= 1): set it to the length the model was trained for (a model without a "
                                    "limit, ALiBi or NoPE, records none)")


def config_error_reason(exc: BaseException, *, source_line: bool = True) -> str:
    """``exc`` in one line (message cut to 200 characters): type and message, and the raising source line when it
    names no field."""
    message = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    message = message if len(message) <= 200 else message[:197] + "..."
    text = f"{type(exc).__name__}: {message}" if str(exc).strip() else type(exc).__name__
    frames = traceback.extract_tb(exc.__traceback__)
    if source_line and "field" not in str(exc).lower() and frames:
        line = (frames[-1].line or "").strip()    # extract_tb reads the source line through linecache
        if line:
            text += f" (at: {line[:120]})"
    return text


def meta_model(config, model_class):
    """No memory, no weights."""
    import torch

    with torch.device("meta"):
        return model_class._from_config(config)


def check_builds(path: str, config, model_class) -> None:
    """Build the model on ``meta`` so a config that does not build is refused before any case (meta-only errors pass).
    UnknownModelError: ``path``, the class, the error (and the field holding an unknown key) and the fix."""
    try:
        meta_model(config, model_class)
    except Exception as exc:  # noqa: BLE001 - any error of the model's own code
        if isinstance(exc, (RuntimeError, NotImplementedError)) and "meta" in str(exc).lower():
            return      # an error of the meta device itself, which a real load does not meet
        key = exc.args[0] if isinstance(exc, KeyError) and exc.args else None
        fields = []
        if isinstance(key, str):
            with contextlib.suppress(Exception):    # a config that does not serialize names no field
                fields = [name for name, held in config.to_dict().items() if isinstance(held, str) and held == key]
        reason = config_error_reason(exc, source_line=not fields)
        if fields:
            reason += f' (the value of "{fields[0]}")'
        raise UnknownModelError(f"{path}: its config does not build a {model_class.__name__}: {reason}: "
                                f"{FIX}") from None


def _shape(dims) -> str:
    return "[" + ", ".join(str(int(d)) for d in dims) + "]"


def weight_shape_mismatch(path: str, config, model_class) -> str | None:
    """The first safetensors weight whose shape differs from the model ``config`` builds, as ``"<name> is [512, 64] in
    model.safetensors, [1024, 64] in the model config.json builds"``; else None."""
    from safetensors import safe_open

    try:
        shapes = {name: tuple(t.shape) for name, t in meta_model(config, model_class).state_dict().items()}
    except Exception:  # noqa: BLE001 - nothing to compare with
        return None
    for file in safetensors_files(path):
        with safe_open(file, framework="pt") as fh:
            for name in fh.keys():
                saved = tuple(fh.get_slice(name).get_shape())
                if name in shapes and shapes[name] != saved:
                    return (f"{name} is {_shape(saved)} in {os.path.basename(file)}, {_shape(shapes[name])} in the "
                            "model config.json builds")
    return None


def _first_line(exc: BaseException, width: int = 160) -> str:
    line = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
    return line if len(line) <= width else line[: width - 3] + "..."


def check_config_json(path: str) -> dict:
    """The parsed ``config.json``, checked before transformers reads it. UnknownModelError: unreadable, not UTF-8 JSON
    or an object, an unknown ``model_type``, a field the config checks refuse, or a multimodal config whose text model
    records no vocabulary (transformers would build its class's default, not the weights' own)."""
    import transformers

    file = os.path.join(path, "config.json")
    try:
        with open(file, encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        raise UnknownModelError(f"{file} is not valid JSON (line {exc.lineno}: {exc.msg}): rewrite it with "
                                "save_pretrained()") from None
    except UnicodeDecodeError:
        raise UnknownModelError(f"{file} is not UTF-8 text: rewrite it with save_pretrained()") from None
    except OSError as exc:
        raise UnknownModelError(f"cannot read {file}: {exc.strerror or exc}: give a readable directory written by "
                                "save_pretrained()") from None
    if not isinstance(data, dict):
        raise UnknownModelError(f"{file} holds a JSON {type(data).__name__}, not an object: rewrite it with "
                                "save_pretrained()")
    model_type = data.get("model_type")
    if model_type is not None and model_type not in transformers.CONFIG_MAPPING:
        raise UnknownModelError(f"transformers {transformers.__version__} does not know model_type {model_type!r} "
                                f"of {file}: upgrade transformers or use a supported architecture")
    check_config_fields(file, data)
    text = data.get("text_config")
    vocab = text.get("vocab_size") if isinstance(text, dict) else None
    subs = getattr(transformers.CONFIG_MAPPING[model_type], "sub_configs", {}) if model_type is not None else {}
    if "text_config" in subs and "vocab_size" not in data and not (_is_whole(vocab) and vocab >= 1):
        shown = json.dumps(vocab) if isinstance(text, dict) and "vocab_size" in text else "missing"
        raise UnknownModelError(f'{file}: "text_config.vocab_size" is {shown}: a multimodal model is measured on its '
                                "text model, whose vocabulary (the rows of its token embedding, a whole number >= 1) "
                                "config.json must record: set it, or re-save the model with save_pretrained()")
    return data


def directory_config(path: str):
    """The transformers config of a directory (offline). UnknownModelError: no usable ``config.json``, an
    encoder-decoder (T5, BART), vision or audio without a causal-LM head (ViT, CLIP), or a recurrent state transformers'
    cache does not hold (RWKV, xLSTM). A multimodal causal LM passes and is measured on ``input_ids`` alone."""
    import transformers

    check_config_json(path)
    try:
        config = transformers.AutoConfig.from_pretrained(path, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - a field transformers refuses, whatever its error type
        raise UnknownModelError(f"{path}: transformers {transformers.__version__} cannot load config.json "
                                f"({config_error_reason(exc)}): {FIX}") from None
    if getattr(config, "is_encoder_decoder", False):
        raise UnknownModelError(f"{path}: {config.__class__.__name__} is an encoder-decoder model, which the suite "
                                f"does not measure: use a decoder-only causal LM or an encoder")
    if _not_text_only(config):
        raise UnknownModelError(f"{path}: {config.__class__.__name__} is a vision, audio or multimodal model that "
                                "config.json does not name as a causal LM of transformers' causal-LM mapping, which "
                                "the suite does not measure: it measures text models that take input_ids only; save "
                                "the text model alone (e.g. from its text_config)")
    if not has_attention_heads(config) and not state_layer_types(config):
        raise UnknownModelError(f"{path}: {config.__class__.__name__} has no attention heads (num_attention_heads) "
                                "and no state layers transformers' cache holds (layer types): a recurrent model "
                                "that keeps its state in its own outputs, which the suite does not measure: use a "
                                "model with attention or Mamba layers")
    directory_model_class(config)
    return config


def has_attention_heads(config) -> bool:
    """Whether a config or a sub-config records attention heads (also per layer); False for Mamba, RWKV."""
    subs = [getattr(config, name, None) for name in (getattr(config, "sub_configs", None) or {})]
    for part in (config, *subs):
        try:
            value = getattr(part, "num_attention_heads", None)
        except Exception:       # transformers' per-layer guard: heads are recorded, layer by layer
            return True
        if isinstance(value, int) and value > 0:
            return True
    return False


def _not_text_only(config) -> bool:
    """No ``vocab_size``, or vision or audio without an LM head."""
    sub_configs = getattr(config, "sub_configs", None) or {}
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if getattr(config, "vocab_size", None) is None and getattr(text, "vocab_size", None) is None:
        return True
    return any(name in sub_configs for name in ("vision_config", "audio_config")) and not names_lm_head(config)


#: The weight files ``save_pretrained`` writes: one of them must be in a model directory.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


def check_model_directory(path: str):
    """The config of a directory the suite can load, checked before any case: :func:`directory_config`'s checks, named
    ``architectures``, readable weights on disk, and a config that builds its class on ``meta``. UnknownModelError: the
    reason and the fix, in one line."""
    config = directory_config(path)
    if not config.architectures:
        raise UnknownModelError(f"{path}: config.json names no architectures, so it is unclear whether to load a "
                                "causal LM or an encoder: save the directory with save_pretrained() from the model, "
                                "or add "
                                f'"architectures": ["{config.__class__.__name__.removesuffix("Config")}ForCausalLM"] '
                                "(or the base model's class) to config.json")
    if not any(os.path.isfile(os.path.join(path, name)) for name in WEIGHT_FILES):
        raise UnknownModelError(f"{path}: no weights on disk (none of {', '.join(WEIGHT_FILES)}): save_pretrained() "
                                "the model into this directory (a config alone has no weights)")
    check_safetensors(path)
    check_builds(path, config, directory_model_class(config))
    return config


def safetensors_files(path: str) -> list[str]:
    """``model.safetensors``, else every shard the index maps a weight to (in order); empty when neither.
    UnknownModelError when the index is no JSON with a ``weight_map`` of file names."""
    single = os.path.join(path, WEIGHT_FILES[0])
    if os.path.isfile(single):
        return [single]
    index = os.path.join(path, WEIGHT_FILES[1])
    if not os.path.isfile(index):
        return []
    try:
        with open(index, encoding="utf-8") as fh:
            weight_map = json.load(fh)["weight_map"]
        shards = list(dict.fromkeys(weight_map.values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UnknownModelError(f"{index}: not a readable safetensors index ({_first_line(exc)}): save_pretrained() "
                                "the model into this directory again") from None
    if not all(isinstance(name, str) and name for name in shards):
        raise UnknownModelError(f"{index}: its weight_map names no files: save_pretrained() the model into this "
                                "directory again")
    return [os.path.join(path, name) for name in shards]


def check_safetensors(path: str) -> None:
    """UnknownModelError naming a safetensors file whose header is truncated or damaged."""
    from safetensors import safe_open

    for name in safetensors_files(path):
        if not os.path.isfile(name):
            raise UnknownModelError(f"{name}: missing, but model.safetensors.index.json maps weights to it: copy the "
                                    "whole checkpoint, or save_pretrained() the model into this directory again")
        try:
            with safe_open(name, framework="pt"):
                pass
        except Exception as exc:  # noqa: BLE001 - safetensors' own error type, OSError, ...
            reason = f"{name}: not a readable safetensors file ({_first_line(exc)})"
            raise UnknownModelError(f"{reason}: the file is truncated or damaged; copy it whole, or save_pretrained() "
                                    "the model again") from None


def head_note(path: str, config) -> str | None:
    """A line when ``architectures`` names a head the suite does not build (measured as base model), or None."""
    if names_lm_head(config):
        return None
    base = directory_model_class(config).__name__
    heads = [name for name in config.architectures or [] if name != base]
    if not heads:
        return None
    return (f"{path}: {heads[0]} is measured as its base model {base} (the head is left out, no decode benchmarks; "
            "save a ...ForCausalLM checkpoint to measure decode)")


def names_lm_head(config) -> bool:
    """True when ``config.architectures`` names a causal-LM head (in the auto mapping, or a name ending like one)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    causal = {n for v in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values() for n in ((v,) if isinstance(v, str) else v)}
    return any(a in causal or a.endswith(("LMHeadModel", "ForCausalLM")) for a in (config.architectures or []))


def directory_model_class(config):
    """The causal-LM class for an LM head, else the base model; UnknownModelError when none exists."""
    import transformers

    causal = names_lm_head(config)
    with contextlib.suppress(KeyError):
        return (transformers.MODEL_FOR_CAUSAL_LM_MAPPING if causal else transformers.MODEL_MAPPING)[type(config)]
    named = [getattr(transformers, name, None) for name in (config.architectures or [])] if causal else []
    for model_class in named:
        if model_class is not None and getattr(model_class, "config_class", None) is type(config):
            return model_class
    raise UnknownModelError(f"transformers {transformers.__version__} has no {'causal-LM' if causal else 'base'} "
                            f"model class for {config.__class__.__name__}: save the directory with "
                            "save_pretrained() from a causal LM or an encoder")
