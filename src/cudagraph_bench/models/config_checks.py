"""The fields of a ``save_pretrained`` directory's ``config.json`` checked before and while transformers reads them,
so that a hand-edited field is that directory's refusal (:class:`~cudagraph_bench.errors.UnknownModelError`, one
line naming the field and the fix) and never an error that stops the session:

- before transformers reads the file (:func:`check_config_fields`): a ``dtype`` (or ``torch_dtype``) that names no
  torch dtype, a count the model cannot have zero of (:data:`POSITIVE_FIELDS`: heads, layers, width, vocabulary),
  and a position limit (:data:`~cudagraph_bench.models.positions.POSITION_FIELDS`) that is not a whole number
  >= 1: only a missing or ``null`` limit means "no limit" (ALiBi, NoPE);
- what transformers raises while it builds the config (:func:`config_error_reason`): its strict field validation,
  a division by a zero field, any other error, with the field or the source line that refused it;
"""

from __future__ import annotations

import json

from cudagraph_bench.errors import UnknownModelError

#: Config fields that count what a model cannot have none of: a value that is a whole number < 1 is refused.
POSITIVE_FIELDS = ("num_attention_heads", "n_head", "num_hidden_layers", "n_layer", "hidden_size", "n_embd",
                   "vocab_size")
#: The fix every refusal here ends with.
FIX = "fix config.json or re-save the model with save_pretrained()"


def _is_whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_config_fields(file: str, data: dict) -> None:
    """Refuse the fields of the parsed ``config.json`` ``data`` (read from ``file``) that transformers would fail
    on or the suite would misread (module docstring).

    Raises:
        UnknownModelError: one line naming the file, the field, its value and the fix."""
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


def _source_line(exc: BaseException) -> str | None:
    """The source line of the innermost frame of ``exc``'s traceback, stripped (None when there is none)."""
    import linecache
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return None
    line = (frames[-1].line or linecache.getline(frames[-1].filename, frames[-1].lineno)).strip()
    return line or None


def _one_line(text: str, width: int = 200) -> str:
    line = " ".join(part.strip() for part in str(text).splitlines() if part.strip())
    return line if len(line) <= width else line[: width - 3] + "..."


def config_error_reason(exc: BaseException, *, source_line: bool = True) -> str:
    """What ``exc``, raised while transformers built a config, says, in one line: its type and message
    (every line of transformers' strict field validation, which names the field) and, for an error that names no
    field (a division by zero, a missing attribute) unless ``source_line`` is False, the source line that raised
    it."""
    text = f"{type(exc).__name__}: {_one_line(str(exc))}" if str(exc).strip() else type(exc).__name__
    if source_line and "field" not in str(exc).lower():
        line = _source_line(exc)
        if line:
            text += f" (at: {line[:120]})"
    return text
