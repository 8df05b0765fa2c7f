"""``--models`` checked entry by entry before any case (pytest suite and ``run`` alike): an unmeasurable entry is
refused with its one-line reason and the others run; only an all-refused list is a usage error, a partly refused one
exits non-zero."""

from __future__ import annotations

from dataclasses import dataclass

from cudagraph_bench.errors import UnknownModelError
from cudagraph_bench.models.attention import check_attention_installed, choose_attention
from cudagraph_bench.models.checkpoints import (check_model_directory, directory_model_class, has_attention_heads,
                                                head_note)
from cudagraph_bench.models.positions import POSITION_FIELDS, recorded_position_limit
from cudagraph_bench.models.presets import preset_config
from cudagraph_bench.options import PRESET_NAMES, model_name_problem


@dataclass(frozen=True)
class Refusal:
    """``model`` as given, ``reason`` one line with the fix; listed as a dict under the run JSON's
    ``["cudagraph_bench"]["refused"]``."""

    model: str
    reason: str


@dataclass(frozen=True)
class ModelChecks:
    """``accepted`` names in order, ``refused`` entries, ``notes``: a line per accepted model worth a remark."""

    accepted: tuple[str, ...]
    refused: tuple[Refusal, ...] = ()
    notes: tuple[str, ...] = ()


def check_model(name: str, attn_implementation: str | None = None) -> list[str]:
    """The notes of one entry the suite can measure, from its config only (a directory's model built on ``meta``).
    UnknownModelError: why not, in one line with the fix."""
    problem = model_name_problem(name)
    if problem:
        raise UnknownModelError(problem)
    if name in PRESET_NAMES:
        if attn_implementation is not None:
            preset_config(name, attn_implementation=attn_implementation)
        return []
    config = check_model_directory(name)
    choose_attention(config, directory_model_class(config), attn_implementation)
    notes = [note for note in (head_note(name, config),) if note]
    if recorded_position_limit(config) is None:
        kind = "no attention: a state-space model" if not has_attention_heads(config) else "ALiBi or NoPE attention"
        notes.append(f"{name}: {config.__class__.__name__} records no position limit ({'/'.join(POSITION_FIELDS)}: "
                     f"{kind}): its prompts and caches are bounded by --max-positions, else by the longest request")
    return notes


def check_models(names, attn_implementation: str | None = None) -> ModelChecks:
    """Check every entry; UsageError, before any entry, when ``attn_implementation`` is not installed."""
    check_attention_installed(attn_implementation)
    accepted, refused, notes = [], [], []
    for name in names:
        try:
            notes += check_model(name, attn_implementation)
        except UnknownModelError as exc:
            refused.append(Refusal(name, str(exc)))
        else:
            accepted.append(name)
    return ModelChecks(tuple(accepted), tuple(refused), tuple(notes))


def refusal_lines(refused) -> list[str]:
    """``"<model>: <reason>"`` per refused entry (a reason that already names the entry as it is)."""
    return [r.reason if r.model in r.reason else f"{r.model}: {r.reason}" for r in refused]


def all_refused_message(refused) -> str:
    """``--models: <reason>`` for one entry; for more, a head line and a line per entry."""
    lines = refusal_lines(refused)
    if len(lines) == 1:
        return f"--models: {lines[0]}"
    return "\n".join([f"--models: every model was refused ({len(lines)}): give at least one the suite can measure",
                      *(f"  {line}" for line in lines)])


def exit_status(status: int, refused) -> int:
    """``status``, or 1 where it would be 0 and models were refused."""
    return 1 if refused and int(status) == 0 else int(status)
