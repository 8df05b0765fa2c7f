"""The measurement pipeline of a forward case (docs/measurement.md, "The forward pipeline"): :func:`prepare_case`
builds, checks and draws inputs; the plugin times :meth:`PreparedCase.call`, then ``finish`` and ``close``."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from cudagraph_bench import variants
from cudagraph_bench.capture.compiling import SkipReasons, compile_counters
from cudagraph_bench.errors import CudagraphBenchError
from cudagraph_bench.measure.correctness import (assert_matches_eager, fp64_reference_model, fp64_rmse_check,
                                                 max_abs_diff)
from cudagraph_bench.measure.forward_variants import ForwardVariant, VariantFailure, build_variant
from cudagraph_bench.measure.settings import MeasureSettings
from cudagraph_bench.measure.timing import median_ci_pct
from cudagraph_bench.models.attention import attention_of
from cudagraph_bench.models.presets import experts_implementation, model_forward, random_input_ids

#: Random inputs ``[1, seq_len]`` the timed calls cycle through.
INPUT_POOL = 8


@dataclass
class CaseSpec(MeasureSettings):
    """One forward case; the run's settings are keyword-only."""

    model: str
    dtype: str
    seq_len: int
    variant: str

    @property
    def variant_spec(self):
        """The registry row of :attr:`variant` (:class:`~cudagraph_bench.variants.Variant`)."""
        return variants.variant(variants.FORWARD, self.variant)


def model_record(model) -> dict:
    """``attn_implementation`` and ``experts_implementation`` of ``model``, where it has them."""
    fields = (("attn_implementation", attention_of(model)), ("experts_implementation", experts_implementation(model)))
    return {key: value for key, value in fields if value}


def describe_exception(exc: BaseException, limit: int = 300) -> str:
    """``"TypeName: first line"`` cut to ``limit`` characters; a first line ending with ``:`` keeps the next too."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    head = lines[0] if lines else ""
    if head.endswith(":") and len(lines) > 1:
        head = f"{head} {lines[1]}"
    text = f"{type(exc).__name__}: {head}" if head else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class CheckOutcome:
    """How a variant compared with eager: ``max_abs_diff`` (output units; None: the output held NaN), ``method``
    (``strict`` or ``fp64-rmse``), ``fp64_rmse_ratio`` (worst; ``fp64-rmse`` only), ``reason`` (None if ``passed``)."""

    max_abs_diff: float | None
    method: str
    passed: bool
    fp64_rmse_ratio: float | None = None
    reason: str | None = None


def check_lengths(seq_len: int, n: int, check_range: tuple[int, int] | None = None) -> list[int]:
    """Prompt lengths of a check's calls, in order: ``n`` at ``seq_len``, or for a graph serving ``check_range`` its
    shortest, ``seq_len`` and longest, then ``seq_len`` up to ``n``: a stale static mask shows only on a longer prompt
    after a shorter one."""
    if check_range is None:
        return [seq_len] * n
    distinct = sorted({check_range[0], seq_len, check_range[1]})
    return distinct + [seq_len] * max(0, n - len(distinct))


def check_against_eager(variant: ForwardVariant, model, spec: CaseSpec, generator) -> CheckOutcome:
    """Check ``variant`` against eager on fresh random inputs ``[1, L]``, one per :func:`check_lengths`, its static
    output NaN-filled before each call: the strict check, or for a variant of rule FP64 failing it the fp64 RMSE rule.
    A :class:`CheckOutcome`, never raising for a numerical mismatch (NaN always fails)."""
    import torch

    device = next(model.parameters()).device
    cross_kernel = spec.variant_spec.rule is variants.Rule.FP64
    check_range = getattr(variant, "check_range", None)
    lengths = check_lengths(spec.seq_len, spec.check_inputs, check_range)

    def where(i: int) -> str:
        if check_range is None:
            return ""
        return (f" (call {i + 1} of {len(lengths)}: a {lengths[i]}-token prompt in the {check_range[1]}-token graph"
                + (f", after {', '.join(map(str, lengths[:i]))}-token ones)" if i else ")"))

    worst, checks, ref64 = 0.0, [], None     # checks: the fp64 rule's, of the inputs failing the strict one
    try:
        for i, length in enumerate(lengths):
            ids = random_input_ids(model, length, device=device, generator=generator)
            if i and check_range is not None and length > lengths[0]:    # two blocks, split where the first ended
                ids[:, :lengths[0]] = ids[:, :1].clone()
                ids[:, lengths[0]:] = ids[:, lengths[0]:lengths[0] + 1].clone()
            with torch.inference_mode():
                expected = model_forward(model, ids).clone()
                require_finite(expected)
                static = variant.static_output
                if static is not None and static.is_floating_point():
                    static.fill_(float("nan"))
                actual = variant(ids).clone()
            if torch.isnan(actual).any() and not torch.isnan(expected).any():
                return CheckOutcome(None, "strict", False, reason=(
                    "outputs differ from eager: output holds NaN after the call (the replay did not write "
                    "the NaN-poisoned static output)" + where(i)))
            worst = max(worst, max_abs_diff(actual, expected))
            try:
                assert_matches_eager(actual, expected, spec.dtype)
                continue
            except AssertionError as exc:
                if not cross_kernel:
                    return CheckOutcome(worst, "strict", False,
                                        reason="outputs differ from eager" + where(i) + ": "
                                        + describe_exception(exc, 240))
            if ref64 is None:
                ref64 = fp64_reference_model(model)
            with torch.inference_mode():
                checks.append((fp64_rmse_check(actual, expected, model_forward(ref64, ids), spec.dtype), i))
    finally:
        del ref64
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if not checks:
        return CheckOutcome(worst, "strict", True)
    bad, i = max(checks, key=lambda c: (not c[0].passed, c[0].ratio))
    ratio = max(c.ratio for c, _ in checks)
    if all(c.passed for c, _ in checks):
        return CheckOutcome(worst, "fp64-rmse", True, fp64_rmse_ratio=ratio)
    return CheckOutcome(worst, "fp64-rmse", False, fp64_rmse_ratio=ratio, reason=(
        f"outputs differ from eager (max |diff| {worst:.1e}) and from float64 more than eager does{where(i)}: "
        f"RMSE {bad.rmse:.2e} > limit {bad.limit:.2e} ({bad.ratio:.2f}x eager's RMSE {bad.eager_rmse:.2e})"))


class CaseFailed(CudagraphBenchError, RuntimeError):
    """A case could not be measured: ``phase`` (``load``, ``build``, ``check``, ``timing``), ``reason`` (one line),
    ``cause`` (a NotGraphableError is reported as a skip)."""

    def __init__(self, phase: str, reason: str, cause: BaseException | None = None, info: dict | None = None):
        super().__init__(f"{phase}: {reason}")
        self.phase, self.reason, self.cause, self.info = phase, reason, cause, dict(info or {})


def require_finite(logits, reference: str = variants.FORWARD_REFERENCE) -> None:
    """CaseFailed (phase ``check``) when the reference's ``logits`` hold NaN or inf: they prove no variant correct,
    and NaN compared with NaN would pass a token check."""
    import torch

    if not bool(torch.isfinite(logits).all()):
        raise CaseFailed("check", f"{reference} logits are not finite (NaN or inf), so no variant can be checked "
                         "against them: check config.json for a NaN or inf float (such as rms_norm_eps) and the "
                         "weights for NaN")


class PreparedCase:
    """A built and checked variant, ready to be timed. ``status``: ``ok`` or ``mismatch`` (still timed, recorded as
    wrong); ``warm``, ``checked_call_ms``, ``round_limits``: set by a decode case (no cold pilot call, the checked
    call's wall ms, rounds replacing the session's)."""

    warm = False
    checked_call_ms: float | None = None
    round_limits: dict | None = None

    def __init__(self, spec: CaseSpec, variant: ForwardVariant, check: CheckOutcome | None, inputs: list, info: dict):
        self.spec, self.variant, self.check, self.info = spec, variant, check, info
        self.status = "mismatch" if check is not None and not check.passed else "ok"
        self._inputs = inputs
        self._i = 0
        self._counters = compile_counters() if spec.variant_spec.compiled else None
        #: a compiled variant's cudagraph skips while timed (:meth:`finish`): ``{"count": n, "reasons": [...]}``
        self.cudagraph_skips: dict | None = None
        self._logging = contextlib.ExitStack()
        self._skip_log = self._logging.enter_context(SkipReasons()) if self._counters is not None else None

    @property
    def failed_check(self) -> str | None:
        """One line, or None when it passed or there was none."""
        return self.check.reason if self.check is not None and not self.check.passed else None

    def call(self):
        """One call on the next timing input; the output is valid until the next call."""
        ids = self._inputs[self._i % len(self._inputs)]
        self._i += 1
        return self.variant(ids)

    def finish(self) -> list[str]:
        """Recompilations while timed become notes; VariantFailure if inductor skipped its graphs."""
        if self._counters is not None:
            after = compile_counters()
            new_graphs = after["unique_graphs"] - self._counters["unique_graphs"]
            if new_graphs:
                self.variant.notes.append(f"recompiled {new_graphs} time(s) while timed")
            skips = after["cudagraph_skips"] - self._counters["cudagraph_skips"]
            self._logging.close()
            self.cudagraph_skips = {"count": skips, "reasons": self._skip_log.messages}
            if skips > 0:
                raise VariantFailure(f"inductor skipped its CUDA graphs while timed ({skips} skip(s): "
                                     f"{self._skip_log.text()})")
        return list(self.variant.notes)

    def close(self) -> None:
        """Release the variant and the inputs. Idempotent, never raises."""
        self._logging.close()
        if self.variant is not None:
            _close_quietly(self.variant)
            self.variant = None
        self._inputs = []


def prepare_case(spec: CaseSpec, model, variant: ForwardVariant | None = None) -> PreparedCase:
    """Build ``spec.variant`` (or take ``variant``, now owned), check it against eager and draw :data:`INPUT_POOL`
    inputs; close the result. Raises CaseFailed (phase ``build`` / ``check``); a numerical mismatch is ``status ==
    "mismatch"``, not a failure."""
    import torch

    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(spec.seed * 1_000_003 + spec.seq_len)
    info = model_record(model)
    try:
        if variant is None:
            variant = build_variant(model, spec.variant, spec.seq_len, pad_to=spec.pad_to, dtype=spec.dtype,
                                    buckets=spec.buckets, compile_mode=spec.compile_mode)
    except Exception as exc:  # a variant's failure is its result, never a crash of the run
        raise CaseFailed("build", describe_exception(exc), exc, info) from exc
    info.update(variant.record())
    try:
        check = None
        if spec.variant_spec.is_reference:
            info["check"] = "reference"
        else:
            variant.check_buffers(True)
            check = check_against_eager(variant, model, spec, generator)
            variant.check_buffers(False)
            info.update(correct=check.passed, check=check.method, max_abs_diff=check.max_abs_diff)
            if check.fp64_rmse_ratio is not None:
                info["fp64_rmse_ratio"] = check.fp64_rmse_ratio
            if not check.passed:
                info.update(status="mismatch", reason=check.reason)
        inputs = [random_input_ids(model, spec.seq_len, device=device, generator=generator) for _ in range(INPUT_POOL)]
        if check is None:                   # the reference itself: its outputs must be finite to prove anything
            with torch.inference_mode():
                require_finite(model_forward(model, inputs[0]))
    except Exception as exc:
        _close_quietly(variant)
        reason = exc.reason if isinstance(exc, CaseFailed) else describe_exception(exc)
        raise CaseFailed("check", reason, exc, info) from exc
    return PreparedCase(spec, variant, check, inputs, info)


def timing_record(rounds: int, warmup: int, pilot_ms, samples_ms, precision_pct: float, *,
                  max_time_ms: float = 0.0) -> dict:
    """The timing's ``extra_info`` fields (``median_ci95_pct``: % of the median; None below 3 rounds)."""
    return {"warmup_rounds": warmup, "pilot_ms": [float(x) for x in pilot_ms], "precision_target_pct": precision_pct,
            "max_time_ms": max_time_ms, "median_ci95_pct": median_ci_pct(samples_ms)}


def _close_quietly(variant: ForwardVariant) -> None:
    with contextlib.suppress(Exception):  # closing must not mask the case's own result
        variant.close()
    with contextlib.suppress(Exception):
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
