"""The cases of a ``cudagraph-bench run`` (no model is built here): its resolved settings
(:class:`RunSettings`, one :class:`Matrix` per sub-matrix), and the plan that expands them into
:class:`~cudagraph_bench.measure.case.CaseSpec` s in execution order (:func:`plan_cases`), with the cases
that cannot run (a prompt longer than the model's positions, the padded length or the largest bucket)
recorded as skipped up front. :mod:`cudagraph_bench.measure.execute` runs the plan."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from types import SimpleNamespace

from cudagraph_bench.measure.case import CaseResult, CaseSpec
from cudagraph_bench.measure.isolation import DEFAULT_CASE_TIMEOUT_S
from cudagraph_bench.measure.variants import RUN_VARIANTS
from cudagraph_bench.options import (DEFAULT_BUCKETS, DEFAULT_CHECK_INPUTS, DEFAULT_COMPILE_GRAPH_MODE, DEFAULT_ISOLATED, DEFAULT_MAX_ROUNDS,
                                     DEFAULT_MAX_TIME_MS, DEFAULT_MIN_TIME_MS, DEFAULT_PAD_TO, DEFAULT_PRECISION_PCT,
                                     DEFAULT_ROUNDS, DEFAULT_WARMUP_MS, DEFAULT_WARMUP_ROUNDS)

#: Where ``run`` writes without ``-o``.
DEFAULT_OUTDIR = "out/run"


@dataclass(frozen=True)
class Matrix:
    """One sub-matrix: every model x dtype x prompt length x variant."""

    models: tuple[str, ...]
    prompt_lengths: tuple[int, ...]
    dtypes: tuple[str, ...]
    variants: tuple[str, ...]


@dataclass
class RunSettings:
    """Resolved settings of a run (command line over config over defaults)."""

    matrices: list[Matrix]
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
    isolate: tuple[str, ...] = DEFAULT_ISOLATED
    case_timeout_s: float = DEFAULT_CASE_TIMEOUT_S
    check_inputs: int = DEFAULT_CHECK_INPUTS
    seed: int = 0
    time_budget_s: float | None = None
    device: str = "cuda"
    outdir: str = DEFAULT_OUTDIR
    overrides: dict | None = None
    config: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def variants(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v for m in self.matrices for v in m.variants))

    def as_dict(self) -> dict:
        return {"matrices": [asdict(m) for m in self.matrices], "rounds": self.rounds,
                "warmup_rounds": self.warmup_rounds, "precision_pct": self.precision_pct,
                "max_rounds": self.max_rounds, "max_time_ms": self.max_time_ms, "warmup_ms": self.warmup_ms,
                "min_time_ms": self.min_time_ms,
                "compile_mode": self.compile_mode,
                "pad_to": self.pad_to, "buckets": list(self.buckets),
                "isolate": list(self.isolate), "case_timeout_s": self.case_timeout_s,
                "check_inputs": self.check_inputs, "seed": self.seed, "time_budget_s": self.time_budget_s,
                "device": self.device, "overrides": self.overrides, "config": self.config}


def position_limit(model: str, overrides: dict | None) -> int:
    """Position limit (tokens) of a preset or a local model dir, from its config (no weights built)."""
    from cudagraph_bench.models.presets import PRESETS, directory_config, max_positions, preset_config

    config = preset_config(model, overrides) if model in PRESETS else directory_config(model)
    return max_positions(SimpleNamespace(config=config))


def _skip_reason(spec: CaseSpec, positions: int) -> str | None:
    from cudagraph_bench.capture.buckets import cap_buckets

    if spec.seq_len > positions:
        return f"prompt of {spec.seq_len} tokens exceeds the model's {positions} positions"
    if spec.variant == "padded" and spec.seq_len > min(spec.pad_to, positions):
        return f"prompt of {spec.seq_len} tokens is longer than the padded length {min(spec.pad_to, positions)}"
    if spec.variant == "bucketed" and spec.seq_len > max(cap_buckets(spec.buckets, positions)):
        return f"prompt of {spec.seq_len} tokens is longer than the largest bucket"
    return None


@dataclass
class Plan:
    """Cases in execution order, grouped by (model, dtype): in-process cases first, then one queue per
    isolated variant. ``skipped`` are recorded up front with their reason."""

    groups: list[tuple[tuple[str, str], list[CaseSpec], dict[str, list[CaseSpec]]]]
    skipped: list[CaseResult]

    @property
    def n_cases(self) -> int:
        return sum(len(inproc) + sum(len(q) for q in iso.values()) for _, inproc, iso in self.groups)


def plan_cases(settings: RunSettings, positions=position_limit) -> Plan:
    """Expand the matrices into :class:`CaseSpec` s (unique, in a stable order) and split off the
    cases that cannot run (prompt longer than the model's positions or the padded length)."""
    specs: dict[tuple, CaseSpec] = {}
    for m in settings.matrices:
        for model in m.models:
            for dtype in m.dtypes:
                for seq_len in m.prompt_lengths:
                    for variant in m.variants:
                        spec = CaseSpec(model=model, dtype=dtype, seq_len=seq_len, variant=variant,
                                        rounds=settings.rounds, warmup_rounds=settings.warmup_rounds,
                                        precision_pct=settings.precision_pct, max_rounds=settings.max_rounds,
                                        max_time_ms=settings.max_time_ms,
                                        warmup_ms=settings.warmup_ms, min_time_ms=settings.min_time_ms,
                                        compile_mode=settings.compile_mode,
                                        pad_to=settings.pad_to, buckets=tuple(settings.buckets),
                                        check_inputs=settings.check_inputs, device=settings.device,
                                        seed=settings.seed, overrides=settings.overrides)
                        specs.setdefault((model, dtype, seq_len, variant), spec)
    order = {v: i for i, v in enumerate(RUN_VARIANTS)}
    limits: dict[str, int] = {}
    skipped: list[CaseResult] = []
    grouped: dict[tuple[str, str], tuple[list, dict]] = {}
    for key in sorted(specs, key=lambda k: (k[0], k[1], order[k[3]], k[2])):
        spec = specs[key]
        if spec.model not in limits:
            limits[spec.model] = positions(spec.model, settings.overrides)
        reason = _skip_reason(spec, limits[spec.model])
        if reason:
            skipped.append(CaseResult.of(spec, "skipped", reason, "plan"))
            continue
        inproc, iso = grouped.setdefault((spec.model, spec.dtype), ([], {}))
        if spec.variant in settings.isolate:
            iso.setdefault(spec.variant, []).append(spec)
        else:
            inproc.append(spec)
    ordered = sorted(grouped.items(), key=lambda kv: ([m for mx in settings.matrices for m in mx.models].index(kv[0][0]),
                                                      kv[0][1]))
    return Plan(groups=[(k, inproc, iso) for k, (inproc, iso) in ordered], skipped=skipped)

