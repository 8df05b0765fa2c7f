"""The measurement of one case: build its variant, check it against eager, time it (:func:`measure_case`).

:class:`CaseSpec` says what to measure and :class:`CaseResult` what came out; both are JSON-serialisable,
since they cross into the worker processes of :mod:`cudagraph_bench.measure.isolation`. Only
:func:`measure_case` (and what it calls) imports torch.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from cudagraph_bench.measure.variants import (COMPILE_VARIANTS, CROSS_KERNEL_VARIANTS, ForwardVariant, VariantFailure,
                                              build_variant, compile_counters)
from cudagraph_bench.options import DEFAULT_BUCKETS, DEFAULT_PAD_TO, DEFAULT_ROUNDS, DEFAULT_WARMUP_ROUNDS

#: Case statuses: measured and correct / measured but outputs differ from eager / not measured / not run.
STATUSES = ("ok", "mismatch", "failed", "skipped")


@dataclass
class CaseSpec:
    """Everything needed to measure one case, JSON-serialisable (it crosses into worker processes).

    ``overrides``: preset config fields (tests use tiny models); ``check_inputs``: fresh random inputs
    of the correctness check; ``pad_to``/``buckets`` in tokens; ``device`` ``"cuda"`` or ``"cpu"``.
    """

    model: str
    dtype: str
    seq_len: int
    variant: str
    rounds: int = DEFAULT_ROUNDS
    warmup_rounds: int = DEFAULT_WARMUP_ROUNDS
    pad_to: int = DEFAULT_PAD_TO
    buckets: tuple[int, ...] = DEFAULT_BUCKETS
    check_inputs: int = 3
    device: str = "cuda"
    seed: int = 0
    overrides: dict | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["buckets"] = list(self.buckets)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "CaseSpec":
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        known["buckets"] = tuple(known.get("buckets", cls.buckets))
        return cls(**known)

    @property
    def model_key(self) -> tuple:
        """Cases with the same key share one loaded model."""
        return (self.model, self.dtype, self.device, self.seed, json.dumps(self.overrides, sort_keys=True))


@dataclass
class CaseResult:
    """The outcome of one case (JSON-serialisable). Times in ms.

    ``status``: ``ok`` (measured, matches eager), ``mismatch`` (measured, outputs differ from eager
    beyond tolerance), ``failed`` (not measured: ``reason`` says why, ``phase`` where), ``skipped``
    (not run). ``check``: how correctness was decided (``strict`` or ``fp64-rmse``, see
    :class:`CheckOutcome`), ``fp64_rmse_ratio`` the worst RMSE ratio of the fp64 check. ``wall_ms``/``event_ms``: per-round synchronized wall time and CUDA-event time
    (``event_ms`` empty on CPU).
    """

    model: str
    dtype: str
    seq_len: int
    variant: str
    status: str
    reason: str | None = None
    phase: str | None = None
    wall_ms: list[float] = field(default_factory=list)
    event_ms: list[float] = field(default_factory=list)
    compile_ms: float | None = None
    capture_ms: float | None = None
    pad_to: int | None = None
    max_abs_diff: float | None = None
    check: str | None = None
    fp64_rmse_ratio: float | None = None
    isolated: bool = False
    device: str = "cuda"
    notes: list[str] = field(default_factory=list)
    experts_implementation: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "CaseResult":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    @classmethod
    def of(cls, spec: CaseSpec, status: str, reason: str | None = None, phase: str | None = None,
           **kw) -> "CaseResult":
        return cls(spec.model, spec.dtype, spec.seq_len, spec.variant, status, reason, phase,
                   device=spec.device, **kw)


def describe_exception(exc: BaseException, limit: int = 300) -> str:
    """``"TypeName: first line of the message"`` cut to ``limit`` characters. When the first line
    only introduces the cause (ends with ``:``, as in dynamo's ``backend='inductor' raised:``), the
    next line is kept too."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    head = lines[0] if lines else ""
    if head.endswith(":") and len(lines) > 1:
        head = f"{head} {lines[1]}"
    text = f"{type(exc).__name__}: {head}" if head else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _time_cpu(fn: Callable[[], object], *, rounds: int, warmup: int):
    """Wall-clock timing without CUDA (``--device cpu``): same shape as ``timing.time_call`` (garbage
    collector off too)."""
    from cudagraph_bench.measure.timing import Timing, gc_disabled

    wall = []
    with gc_disabled():
        for _ in range(warmup):
            fn()
        for _ in range(rounds):
            t0 = time.perf_counter()
            fn()
            wall.append((time.perf_counter() - t0) * 1e3)
    return Timing(wall_ms=wall, event_ms=[])


@dataclass(frozen=True)
class CheckOutcome:
    """How a variant compared with eager (:func:`check_against_eager`).

    ``max_abs_diff``: max |variant - eager| over the check inputs (output units, e.g. logits); None
    when the output held NaN.
    ``method``: ``strict`` (every input within the dtype's ``assert_close`` tolerance) or ``fp64-rmse``
    (a cross-kernel variant outside it, judged by :func:`~cudagraph_bench.measure.correctness.fp64_rmse_check`).
    ``fp64_rmse_ratio``: the worst RMSE(variant, fp64) / RMSE(eager, fp64) (``fp64-rmse`` only).
    ``reason``: why it failed, None when ``passed``.
    """

    max_abs_diff: float | None
    method: str
    passed: bool
    fp64_rmse_ratio: float | None = None
    reason: str | None = None


def check_against_eager(variant: ForwardVariant, model, spec: CaseSpec, generator) -> CheckOutcome:
    """Correctness of ``variant`` against the eager forward on ``spec.check_inputs`` fresh random
    inputs ``[1, seq_len]``. Before each call the variant's static output (if any) is filled with NaN,
    so a replay that did not write it fails.

    Every input must pass the strict check (``assert_close`` at the dtype tolerance). A variant in
    :data:`CROSS_KERNEL_VARIANTS` that does not is judged instead by the fp64 RMSE check on that input
    (a float64 copy of the model is built once, then dropped): it must not be farther from float64
    than ``multiplier`` x eager's own distance (see :mod:`cudagraph_bench.measure.correctness`).

    Returns:
        :class:`CheckOutcome` (never raises for a numerical mismatch; NaN in the output is a failed
        outcome whatever the variant).
    """
    import torch

    from cudagraph_bench.measure.correctness import (assert_matches_eager, fp64_reference_model, fp64_rmse_check,
                                             max_abs_diff)
    from cudagraph_bench.models.presets import model_forward, random_input_ids

    device = next(model.parameters()).device
    cross_kernel = spec.variant in CROSS_KERNEL_VARIANTS
    worst, strict_error, checks, ref64 = 0.0, None, [], None
    try:
        for _ in range(spec.check_inputs):
            ids = random_input_ids(model, spec.seq_len, device=device, generator=generator)
            with torch.inference_mode():
                expected = model_forward(model, ids).clone()
                static = variant.static_output
                if static is not None and static.is_floating_point():
                    static.fill_(float("nan"))
                actual = variant(ids).clone()
            if torch.isnan(actual).any() and not torch.isnan(expected).any():
                return CheckOutcome(None, "strict", False, reason=(
                    "outputs differ from eager: output holds NaN after the call (the replay did not write "
                    "the NaN-poisoned static output)"))
            worst = max(worst, max_abs_diff(actual, expected))
            try:
                assert_matches_eager(actual, expected, spec.dtype)
                continue
            except AssertionError as exc:
                strict_error = strict_error or exc
                if not cross_kernel:
                    return CheckOutcome(worst, "strict", False,
                                        reason="outputs differ from eager: " + describe_exception(exc, 240))
            if ref64 is None:
                ref64 = fp64_reference_model(model)
            with torch.inference_mode():
                checks.append(fp64_rmse_check(actual, expected, model_forward(ref64, ids), spec.dtype))
    finally:
        del ref64
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if strict_error is None:
        return CheckOutcome(worst, "strict", True)
    bad = max(checks, key=lambda c: c.ratio)
    ratio = bad.ratio
    if all(c.passed for c in checks):
        return CheckOutcome(worst, "fp64-rmse", True, fp64_rmse_ratio=ratio)
    return CheckOutcome(worst, "fp64-rmse", False, fp64_rmse_ratio=ratio, reason=(
        f"outputs differ from eager (max |diff| {worst:.1e}) and from float64 more than eager does: "
        f"RMSE {bad.rmse:.2e} > limit {bad.limit:.2e} ({ratio:.2f}x eager's RMSE {bad.eager_rmse:.2e})"))


def measure_case(spec: CaseSpec, model) -> CaseResult:
    """Build ``spec.variant`` for ``model``, check it against eager, time it, close it. Never raises
    for a failure of the variant: the result's ``status``/``reason``/``phase`` say what happened.

    Timing: ``spec.warmup_rounds`` untimed and ``spec.rounds`` timed calls, each on one of
    ``warmup_rounds + rounds`` pre-generated random inputs ``[1, seq_len]`` (new data every call), with
    :func:`~cudagraph_bench.measure.timing.time_call` (synchronized wall time + CUDA events) on a GPU.
    """
    import torch

    from cudagraph_bench.models.presets import experts_implementation, random_input_ids
    from cudagraph_bench.measure.timing import time_call

    device = next(model.parameters()).device
    experts = {"experts_implementation": experts_implementation(model)}
    generator = torch.Generator(device=device).manual_seed(spec.seed * 1_000_003 + spec.seq_len)
    try:
        variant = build_variant(model, spec.variant, spec.seq_len, pad_to=spec.pad_to, dtype=spec.dtype,
                                buckets=spec.buckets)
    except Exception as exc:  # a variant's failure is its result, never a crash of the run
        return CaseResult.of(spec, "failed", describe_exception(exc), "build", **experts)
    extra = dict(compile_ms=variant.compile_ms, capture_ms=variant.capture_ms, pad_to=variant.pad_to, **experts)
    status, reason, diff, phase, check = "ok", None, None, "check", None
    try:
        if spec.variant != "eager":
            check = check_against_eager(variant, model, spec, generator)
            diff = check.max_abs_diff
            if not check.passed:
                status, reason = "mismatch", check.reason
        else:
            diff = 0.0
        extra.update(check=check.method if check else "reference",
                     fp64_rmse_ratio=check.fp64_rmse_ratio if check else None)
        phase = "timing"
        counters_before = compile_counters() if spec.variant in COMPILE_VARIANTS else None
        inputs = [random_input_ids(model, spec.seq_len, device=device, generator=generator)
                  for _ in range(spec.rounds + spec.warmup_rounds)]
        calls = iter(range(len(inputs)))

        def one_call():
            return variant(inputs[next(calls)])

        timer = time_call if device.type == "cuda" else _time_cpu
        timing = timer(one_call, rounds=spec.rounds, warmup=spec.warmup_rounds)
        if counters_before is not None:
            after = compile_counters()
            new_graphs = after["unique_graphs"] - counters_before["unique_graphs"]
            if new_graphs:
                variant.notes.append(f"recompiled {new_graphs} time(s) while timed")
            if after["cudagraph_skips"] > counters_before["cudagraph_skips"]:
                raise VariantFailure("inductor skipped its CUDA graphs while timed (see the worker log)")
    except Exception as exc:  # includes CUDA errors: the result says so, the caller decides what next
        _close_quietly(variant)
        return CaseResult.of(spec, "failed", describe_exception(exc), phase, max_abs_diff=diff, **extra)
    _close_quietly(variant)
    return CaseResult.of(spec, status, reason, "check" if status == "mismatch" else None,
                         wall_ms=[float(x) for x in timing.wall_ms], event_ms=[float(x) for x in timing.event_ms],
                         max_abs_diff=diff, notes=list(variant.notes), **extra)


def _close_quietly(variant: ForwardVariant) -> None:
    try:
        variant.close()
    except Exception:  # closing must not mask the case's own result
        pass
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:
        pass


class ModelCache:
    """Keeps the last loaded model (one at a time, to bound GPU memory) keyed by :attr:`CaseSpec.model_key`."""

    def __init__(self):
        self._key = None
        self._model = None

    def get(self, spec: CaseSpec):
        from cudagraph_bench.models.presets import load_model

        if spec.model_key != self._key:
            self.clear()
            self._model = load_model(spec.model, spec.dtype, spec.device, seed=spec.seed, overrides=spec.overrides)
            self._key = spec.model_key
        return self._model

    def clear(self) -> None:
        self._model = None
        self._key = None
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except Exception:
            pass


def measure_with_cache(spec: CaseSpec, models: ModelCache) -> CaseResult:
    """:func:`measure_case` with the model taken from ``models`` (a load failure is a ``failed`` result)."""
    try:
        model = models.get(spec)
    except Exception as exc:
        return CaseResult.of(spec, "failed", describe_exception(exc), "load")
    return measure_case(spec, model)
