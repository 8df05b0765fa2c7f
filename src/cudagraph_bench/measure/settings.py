"""The settings a run applies to every case (:class:`MeasureSettings`). No torch import."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Callable

from cudagraph_bench.measure.timing import RoundPolicy
from cudagraph_bench.options import (DEFAULT_BUCKETS, DEFAULT_CHECK_INPUTS, DEFAULT_COMPILE_GRAPH_MODE,
                                     DEFAULT_MAX_ROUNDS, DEFAULT_MAX_TIME_MS, DEFAULT_MIN_TIME_MS, DEFAULT_PAD_TO,
                                     DEFAULT_PRECISION_PCT, DEFAULT_ROUNDS, DEFAULT_WARMUP_MS, DEFAULT_WARMUP_ROUNDS,
                                     MATRIX_OPTIONS)


@dataclass(kw_only=True)
class MeasureSettings:
    """How every case of a run is measured; keyword-only so subclasses keep their positional fields. Times in ms;
    ``pad_to``/``buckets`` in tokens; ``attn_implementation`` None: each model's own; ``max_positions`` (tokens) bounds
    models whose config records none (None: the longest request)."""

    rounds: int = DEFAULT_ROUNDS
    warmup_rounds: int = DEFAULT_WARMUP_ROUNDS
    precision_pct: float = DEFAULT_PRECISION_PCT
    max_rounds: int = DEFAULT_MAX_ROUNDS
    max_time_ms: float = DEFAULT_MAX_TIME_MS
    warmup_ms: float = DEFAULT_WARMUP_MS
    min_time_ms: float = DEFAULT_MIN_TIME_MS
    compile_mode: str = DEFAULT_COMPILE_GRAPH_MODE
    pad_to: int = DEFAULT_PAD_TO
    buckets: tuple[int, ...] = DEFAULT_BUCKETS
    check_inputs: int = DEFAULT_CHECK_INPUTS
    seed: int = 0
    device: str = "cuda"
    attn_implementation: str | None = None
    max_positions: int | None = None

    def __post_init__(self):
        self.buckets = tuple(self.buckets)

    def round_policy(self, **changes) -> RoundPolicy:
        """The RoundPolicy, after replacing ``changes`` fields (e.g. ``rounds=3``)."""
        s = replace(self, **changes) if changes else self
        return RoundPolicy(rounds=s.rounds, warmup=s.warmup_rounds, warmup_ms=s.warmup_ms, min_time_ms=s.min_time_ms,
                           precision_pct=s.precision_pct, max_rounds=s.max_rounds, max_time_ms=s.max_time_ms)

    @classmethod
    def from_options(cls, option: Callable[[str], Any], **kw):
        """``option(dest)`` gives each of :data:`OPTION_FIELDS`; ``kw`` the other fields."""
        return cls(**{name: option(name) for name in OPTION_FIELDS}, **kw)


#: The :class:`MeasureSettings` fields that are shared options (``--rounds`` ...), pytest and ``run`` alike.
OPTION_FIELDS = tuple(f.name for f in fields(MeasureSettings) if f.name in {o.dest for o in MATRIX_OPTIONS})
