"""The ``config.json`` fields of a ``save_pretrained`` directory checked before and while transformers reads them, so a
hand-edited field refuses that directory (UnknownModelError, one line) instead of stopping the session."""

from __future__ import annotations

import contextlib
import json
import os

from cudagraph_bench.errors import UnknownModelError

#: Config fields that count what a model cannot have none of: a value that is a whole number < 1 is refused.
POSITIVE_FIELDS = ("num_attention_heads", "n_head", "num_hidden_layers", "n_layer", "hidden_size", "n_embd",
                   "vocab_size")
#: The fix every refusal here ends with.
FIX = "fix config.json or re-save the model with save_pretrained()"


def _is_whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_config_fields(file: str, data: dict) -> None:
    """Refuse fields transformers would fail on or the suite would misread: an unknown ``dtype``, a
    :data:`POSITIVE_FIELDS` count < 1, a position limit that is no whole number >= 1 (missing or ``null``: no limit).
    UnknownModelError naming the file, field, value and fix."""
    import torch

    from cudagraph_bench.models.positions import POSITION_FIELDS

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
    for key in POSITION_FIELDS:
        value = data.get(key)
        if value is not None and not (_is_whole(value) and value >= 1):
            raise UnknownModelError(f'{file}: "{key}" is {json.dumps(value)}, not a position limit (a whole number of '
                                    "tokens >= 1): set it to the length the model was trained for (a model without a "
                                    "limit, ALiBi or NoPE, records none)")


def config_error_reason(exc: BaseException, *, source_line: bool = True) -> str:
    """``exc`` in one line (message cut to 200 characters): type and message, and the raising source line when it
    names no field."""
    import traceback

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

    from cudagraph_bench.models.checkpoints import safetensors_files

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
