"""``--models`` checked entry by entry before any case, for the pytest suite and ``cudagraph-bench run`` alike:
an entry the suite cannot measure is refused with its one-line reason and the others run; only a list with every
entry refused is a usage error, a partly refused one ends with a non-zero exit."""

from __future__ import annotations

from dataclasses import dataclass, field

from cudagraph_bench.errors import UnknownModelError


@dataclass(frozen=True)
class Refusal:
    """A ``--models`` entry the suite does not measure: ``model`` as given, ``reason`` one line with the fix."""

    model: str
    reason: str

    def as_json(self) -> dict:
        return {"model": self.model, "reason": self.reason}


@dataclass(frozen=True)
class ModelChecks:
    """The outcome of :func:`check_models`: ``accepted`` names in their order, ``refused`` entries with their
    reasons, ``notes``: one line per accepted model measured in a way worth saying (a classification head left
    out, a position limit taken from the request)."""

    accepted: tuple[str, ...]
    refused: tuple[Refusal, ...] = ()
    notes: tuple[str, ...] = field(default=())


def check_model(name: str, attn_implementation: str | None = None) -> list[str]:
    """The notes of one ``--models`` entry the suite can measure (:class:`ModelChecks`), checked from its config
    only (a directory's model is built on ``meta``; a preset with its own attention imports no transformers).

    Raises:
        UnknownModelError: why the suite does not measure it, in one line with the fix."""
    from cudagraph_bench.options import PRESET_NAMES, model_name_problem

    problem = model_name_problem(name)
    if problem:
        raise UnknownModelError(problem)
    if name in PRESET_NAMES:
        if attn_implementation is not None:
            from cudagraph_bench.models.presets import preset_config

            preset_config(name, attn_implementation=attn_implementation)
        return []
    from cudagraph_bench.models.attention import choose_attention
    from cudagraph_bench.models.checkpoints import (check_model_directory, directory_model_class, has_attention_heads,
                                                    head_note)
    from cudagraph_bench.models.positions import POSITION_FIELDS, recorded_position_limit

    config = check_model_directory(name)
    choose_attention(config, directory_model_class(config), attn_implementation)
    notes = [note for note in (head_note(name, config),) if note]
    if recorded_position_limit(config) is None:
        kind = "no attention: a state-space model" if not has_attention_heads(config) else "ALiBi or NoPE attention"
        notes.append(f"{name}: {config.__class__.__name__} records no position limit ({'/'.join(POSITION_FIELDS)}: "
                     f"{kind}): its prompts and caches are bounded by --max-positions, else by the longest request")
    return notes


def check_models(names, attn_implementation: str | None = None) -> ModelChecks:
    """Check every entry of ``--models`` (:func:`check_model`): the accepted ones in their order, every refused
    one with its reason.

    Raises:
        UsageError: ``attn_implementation`` is not installed here (one line naming what is), before any entry."""
    from cudagraph_bench.models.attention import check_attention_installed

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
    """The usage error of a ``--models`` list that holds no model the suite can measure: ``--models: <reason>``
    for one entry; for more, a head line, then one line per refused entry."""
    lines = refusal_lines(refused)
    if len(lines) == 1:
        return f"--models: {lines[0]}"
    return "\n".join([f"--models: every model was refused ({len(lines)}): give at least one the suite can measure",
                      *(f"  {line}" for line in lines)])


def refused_json(refused) -> list[dict]:
    """``[{"model": ..., "reason": ...}]``: what the run JSON lists under ``["cudagraph_bench"]["refused"]``."""
    return [r.as_json() for r in refused]


def exit_status(status: int, refused) -> int:
    """The exit status of a session or run that ``refused`` models: ``status``, or 1 where it would be 0."""
    return 1 if refused and int(status) == 0 else int(status)
