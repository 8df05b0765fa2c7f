"""The measurement pipeline of a decode case (docs/measurement.md, "Decode"): build, check against the registry's
reference (and ``generate``; a captured decoder on a second request too), prepare the timed greedy request."""

from __future__ import annotations

import time
from dataclasses import dataclass

from cudagraph_bench.capture.buckets import cap_buckets, select_bucket
from cudagraph_bench.capture.decode import GreedyDecoder
from cudagraph_bench.cases import DecodeCase
from cudagraph_bench.errors import RequestTooLongError
from cudagraph_bench.measure import correctness
from cudagraph_bench.measure.case import model_record, require_finite
from cudagraph_bench.measure.roofline import request_bytes_per_token
from cudagraph_bench.measure.static_generate import StaticCompiledGenerate
from cudagraph_bench.models.presets import max_positions
from cudagraph_bench.options import DECODE_COMPILE_TUNINGS
from cudagraph_bench.variants import DECODE, DECODE_REFERENCE, Rule, variant

#: Static KV cache of the decode benchmarks: at least this many tokens (a multiple of it).
DECODE_CACHE_STEP = 256
#: Seed of the decode benchmarks' prompt, shared with the decode tests so both share one ``generate`` reference.
DECODE_PROMPT_SEED = 11


@dataclass(frozen=True)
class DecodeSpec(DecodeCase):
    """One decode case (its key's fields first) and its settings. ``longest_new_tokens``: the session's most new tokens
    (sizes the cache, shares references); ``compile_timeout_s`` 0: no limit; ``buckets``: prefill tokens of
    ``compile+graph``; ``rounds``, ``max_rounds``: measured requests, at least / at most."""

    longest_new_tokens: int
    steps_per_graph: int
    compile_mode: str
    compile_timeout_s: float
    compile_tuning: str
    buckets: tuple[int, ...]
    rounds: int
    max_rounds: int


def decode_cache_len(prompt_len: int, new_tokens, positions: int) -> int:
    """Prompt + the most new tokens rounded up to a multiple of :data:`DECODE_CACHE_STEP`, at most ``positions``."""
    need = prompt_len + (new_tokens if isinstance(new_tokens, int) else max(new_tokens))
    return min(-(-need // DECODE_CACHE_STEP) * DECODE_CACHE_STEP, positions)


def decode_prefill_bucket(prompt_len: int, buckets, max_cache_len: int) -> int | None:
    """The smallest of ``buckets`` (capped at the cache) holding the prompt, or None (eager)."""
    try:
        return select_bucket(prompt_len, cap_buckets(buckets, max_cache_len))
    except RequestTooLongError:
        return None


def build_decoder(spec: DecodeSpec, model, info: dict):
    """The decoder of ``spec.variant``, its settings added to ``info``; None for ``generate``. Raises NotGraphableError
    (the case is skipped) or whatever compiling or capturing raises."""
    kind = spec.variant_spec
    if kind.is_reference:
        return None
    if kind.peer:
        decoder = StaticCompiledGenerate(model)
        info.update(compile_mode=decoder.mode)
        return decoder
    need = spec.seq_len + spec.longest_new_tokens
    # max_positions: ALiBi and NoPE models have no position table
    cache_len = decode_cache_len(spec.seq_len, spec.longest_new_tokens, max_positions(model, bound=need))
    bucket = decode_prefill_bucket(spec.seq_len, spec.buckets, cache_len) if kind.compiled else None
    decoder = GreedyDecoder(model, cache_len, use_graph=kind.captured, steps_per_graph=spec.steps_per_graph,
                            prefill_buckets=(bucket,) if bucket else None,
                            compile_mode=spec.compile_mode if kind.compiled else None,
                            compile_timeout_s=spec.compile_timeout_s,
                            compile_options=DECODE_COMPILE_TUNINGS[spec.compile_tuning] if kind.compiled else None)
    info.update(max_cache_len=decoder.max_cache_len, prefill_bucket=bucket)
    if decoder.use_graph:
        info.update(steps_per_graph=decoder.steps_per_graph, capture_ms=decoder.capture_ms)
    if kind.compiled:
        info.update(compile_mode=decoder.compile_mode, compile_tuning=spec.compile_tuning,
                    inductor_options=decoder.compile_options, compile_ms=decoder.compile_ms,
                    graphs_compiled=decoder.graphs_compiled)
    return decoder


class PreparedDecode:
    """A built and checked decoder like PreparedCase; each call is one whole request."""

    warm = True     # the checked request (or generate's reference) has just run the same code on the same prompt

    def __init__(self, spec: DecodeSpec, decoder, run_request, info: dict, checked_call_ms: float | None):
        self.spec, self.decoder, self._run, self.info = spec, decoder, run_request, info
        self.checked_call_ms = checked_call_ms
        self.round_limits = {"rounds": spec.rounds, "warmup": 0, "max_rounds": spec.max_rounds}

    @property
    def failed_check(self) -> str | None:
        """One line, or None."""
        if self.info.get("correct", True) and self.info.get("generate_check_passed", True):
            return None
        return str(self.info.get("reason") or "check failed")

    def call(self):
        return self._run()

    def finish(self) -> list[str]:
        return []

    def close(self) -> None:
        if self.decoder is not None:
            self.decoder.close()
            self.decoder = None


def prepare_decode(spec: DecodeSpec, model, ids, refs, plant=None) -> PreparedDecode:
    """Build the decoder, run one checked request on ``ids [1, seq_len]`` int64 and record its checks in ``info``.
    ``plant``: ``plant(decoder) -> decoder`` planting a self-test fault, or None. Raises NotGraphableError, or whatever
    building, compiling or the checked request raised (the decoder closed first); CaseFailed when ``generate``'s logits
    are not finite."""
    import torch

    kind = spec.variant_spec
    info = model_record(model)
    if kind.compiled:
        info["compile_timeout_s"] = spec.compile_timeout_s     # the limit its compilation ran under
    info.update(request_bytes_per_token(model, spec.seq_len, spec.new_tokens))   # the decode roofline's bytes
    reference, reference_logits = refs.generate(spec.model, spec.dtype, ids, spec.new_tokens,   # [1, new_tokens]
                                                share_up_to=spec.longest_new_tokens)
    require_finite(torch.cat(reference_logits), DECODE_REFERENCE)     # else NaN tokens would match NaN tokens
    if kind.is_reference:
        info["check"] = "reference"
        mask = torch.ones_like(ids)

        def run_generate():
            return model.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=spec.new_tokens,
                                  eos_token_id=None, pad_token_id=0)
        return PreparedDecode(spec, None, run_generate, info, None)
    decoder = kind.build_callable()(spec, model, info)     # the registry's builder: build_decoder
    if plant is not None:
        decoder = plant(decoder)
        info.update(decoder.fields)
    try:
        if kind.peer:
            info.update(compile_ms=decoder.warm(ids, spec.new_tokens,     # compiles and records its CUDA graphs
                                                timeout_s=spec.compile_timeout_s))
        start = time.perf_counter()
        checked_against_generate = variant(DECODE, kind.reference).is_reference
        if checked_against_generate and not kind.peer:    # static-eager: the graphed variants' reference too
            tokens, logits = refs.static_eager(spec.model, spec.dtype, ids, spec.new_tokens, decoder.max_cache_len,
                                               decoder=decoder)
        else:
            tokens, logits = decoder.generate(ids, spec.new_tokens, return_logits=True)
        if torch.cuda.is_available() and ids.is_cuda:
            torch.cuda.synchronize()
        checked_ms = (time.perf_counter() - start) * 1e3    # the pilot when it is that slow already
        vs_generate = correctness.check_decode_against_generate(
            tokens, logits, reference, reference_logits, refs.fp64_logits(spec.model, spec.dtype, ids, reference),
            spec.dtype)
        info.update(_fp64_rule_fields(vs_generate, "generate", judged=checked_against_generate,
                                      distinct_reference_tokens=vs_generate.distinct_reference_tokens))
        if not checked_against_generate:
            info.update(_check_against_static_eager(spec, refs, ids, decoder, tokens, logits))
            if not vs_generate.passed and "reason" not in info:
                info.update(status="mismatch", reason=f"against generate: {vs_generate.summary}")
        if kind.captured and "reason" not in info:
            # judged like the first: a buffer set once is stale by now, as in every timed request
            tokens, logits = decoder.generate(ids, spec.new_tokens, return_logits=True)
            second = _check_against_static_eager(spec, refs, ids, decoder, tokens, logits)
            info.update({"checked_requests": 2} if second["correct"] else {
                **second, "checked_requests": 2, "reason": f"second request on the same decoder: {second['reason']}"})
    except Exception:
        decoder.close()
        raise
    return PreparedDecode(spec, decoder, lambda: decoder.generate(ids, spec.new_tokens), info, checked_ms)


def _check_against_static_eager(spec: DecodeSpec, refs, ids, decoder, tokens, logits) -> dict:
    """Rule EXACT: tokens equal the eager static-cache loop's; rule FP64: that loop's per-step fp64 rule."""
    import torch

    eager_tokens, eager_logits = refs.static_eager(spec.model, spec.dtype, ids, spec.new_tokens, decoder.max_cache_len)
    if spec.variant_spec.rule is Rule.EXACT:
        same = bool(torch.equal(tokens, eager_tokens))
        fields = {"correct": same, "check": "tokens == static-eager"}
        return fields if same else {**fields, "status": "mismatch",
                                    "reason": "graphed decode tokens differ from the eager static-cache loop's"}
    vs_eager = correctness.check_decode_against_generate(
        tokens, logits, eager_tokens, eager_logits, refs.fp64_logits(spec.model, spec.dtype, ids, eager_tokens),
        spec.dtype, reference_name=spec.variant_spec.reference)
    return _fp64_rule_fields(vs_eager, "static-eager", judged=True)


def _fp64_rule_fields(check, name: str, *, judged: bool, **more) -> dict:
    """The fields of a decode ``check`` against ``name``; ``judged``: it is the case's ``correct`` (a failure sets
    ``status`` and ``reason``)."""
    key = name.replace("-", "_")
    fields = {f"matches_{key}": check.identical, f"{key}_check_passed": check.passed, f"{key}_check": check.summary,
              **more}
    if judged:
        fields.update(correct=check.passed, check=f"tokens vs {name}, fp64 rule")
        if not check.passed:
            fields.update(status="mismatch", reason=check.summary)
    return fields
