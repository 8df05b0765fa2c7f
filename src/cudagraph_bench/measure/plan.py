"""The cases of a ``cudagraph-bench run`` (no model is built here): its resolved settings
(:class:`RunSettings`, one :class:`Matrix` per sub-matrix), and the plan that expands them into
:class:`~cudagraph_bench.measure.case.CaseSpec` s in execution order (:func:`plan_cases`), with the cases
that cannot run (a prompt longer than the model's positions, the padded length or the largest bucket)
recorded as skipped up front. :mod:`cudagraph_bench.measure.execute` runs the plan."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field

from cudagraph_bench.measure.case import CaseResult, CaseSpec
from cudagraph_bench.measure.isolation import DEFAULT_CASE_TIMEOUT_S
from cudagraph_bench.measure.variants import RUN_VARIANTS
from cudagraph_bench.measure.settings import MeasureSettings, json_dict
from cudagraph_bench.options import DEFAULT_ISOLATED

#: Where ``run`` writes without ``-o``.
DEFAULT_OUTDIR = "out/run"
#: Key order of :meth:`RunSettings.as_dict` (the ``settings`` of run.json, as committed runs have it).
_RUN_JSON_KEYS = ("matrices", "rounds", "warmup_rounds", "precision_pct", "max_rounds", "max_time_ms", "warmup_ms",
                  "min_time_ms", "compile_mode", "pad_to", "buckets", "isolate", "case_timeout_s", "check_inputs", "seed",
                  "time_budget_s", "device", "overrides", "config")


@dataclass(frozen=True)
class Matrix:
    """One sub-matrix: every model x dtype x prompt length x variant."""

    models: tuple[str, ...]
    prompt_lengths: tuple[int, ...]
    dtypes: tuple[str, ...]
    variants: tuple[str, ...]


@dataclass
class RunSettings(MeasureSettings):
    """Resolved settings of a run (command line over config over defaults): its ``matrices``, the
    :class:`~cudagraph_bench.measure.settings.MeasureSettings` every case gets (keyword-only), and the run's
    own: ``isolate`` (variants run in worker processes), ``case_timeout_s``, ``time_budget_s``, ``outdir``,
    ``config`` (the TOML file), ``extra``."""

    matrices: list[Matrix]
    _: KW_ONLY
    isolate: tuple[str, ...] = DEFAULT_ISOLATED
    case_timeout_s: float = DEFAULT_CASE_TIMEOUT_S
    time_budget_s: float | None = None
    outdir: str = DEFAULT_OUTDIR
    config: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def variants(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v for m in self.matrices for v in m.variants))

    def as_dict(self) -> dict:
        """The ``settings`` of run.json (``outdir`` and ``extra`` are not in it)."""
        return json_dict(self, _RUN_JSON_KEYS, exclude=("outdir", "extra"))


def position_limit(model: str, overrides: dict | None, bound: int | None = None) -> int:
    """Position limit (tokens) of a preset or a local model dir, from its config (no weights built): the
    function the pytest session uses too (:func:`cudagraph_bench.models.positions.model_position_limit`);
    ``bound``: that of a model whose config records none (ALiBi, NoPE; :func:`position_bound`).
    Raises UnknownModelError when the directory cannot be measured
    (:func:`~cudagraph_bench.models.presets.check_model_directory`)."""
    from cudagraph_bench.models.positions import model_position_limit

    return model_position_limit(model, overrides=overrides, bound=bound)


def position_bound(settings: "RunSettings") -> int:
    """The position bound (tokens) of a run's models whose config records no limit: ``--max-positions``, else
    the longest prompt of its matrices (:func:`cudagraph_bench.models.positions.position_bound`)."""
    from cudagraph_bench.models.positions import position_bound as bound_of

    return bound_of(settings.max_positions, [n for m in settings.matrices for n in m.prompt_lengths])


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


def plan_cases(settings: RunSettings, positions=None) -> Plan:
    """Expand the matrices into :class:`CaseSpec` s (unique, in a stable order) and split off the
    cases that cannot run (prompt longer than the model's positions or the padded length). ``positions(model,
    overrides)``: the position limit (default :func:`position_limit`, bounded by :func:`position_bound`)."""
    if positions is None:
        bound = position_bound(settings)

        def positions(model, overrides):
            return position_limit(model, overrides, bound)
    specs: dict[tuple, CaseSpec] = {}
    for m in settings.matrices:
        for model in m.models:
            for dtype in m.dtypes:
                for seq_len in m.prompt_lengths:
                    for variant in m.variants:
                        spec = CaseSpec(model, dtype, seq_len, variant, **settings.shared_fields())
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

