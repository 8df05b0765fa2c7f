"""Forward-pass variants behind one interface, the measurement of one case, and crash isolation.

Variants (:data:`RUN_VARIANTS`), all called as ``variant(input_ids [1, seq_len] int64) -> Tensor``:

===================  ==========================================================================
``eager``            ``model(input_ids)`` under ``torch.inference_mode()`` (the reference)
``graph``            :class:`~cudagraph_bench.capture.graphed.GraphedForward`: static buffers, capture, replay
``padded``           one graph at ``pad_to`` tokens (capped at the model's positions); the prompt is
                     right-padded with an attention mask, the output sliced to the real length
``bucketed``         the graph of the smallest bucket length >= L (padded like ``padded``)
``compile``          ``torch.compile(mode="reduce-overhead")``: inductor kernels + inductor's own
                     CUDA graphs (cudagraph trees)
``compile+graph``    ``torch.compile(mode="max-autotune-no-cudagraphs")`` (fused kernels, no inductor
                     graphs), then captured and replayed by the suite's ``GraphedForward``
===================  ==========================================================================

Use from a benchmark (the pytest suite does exactly this)::

    v = build_variant(model, "compile+graph", seq_len, pad_to=1024, dtype="float32")
    try:
        out = v(input_ids)          # [1, seq_len, vocab] (causal) or [1, seq_len, hidden] (encoder)
        print(v.compile_ms, v.capture_ms)
    finally:
        v.close()

The returned tensor is valid until the next call (graph variants return their static output buffer,
``compile`` returns a cudagraph-tree output that the next call overwrites): ``.clone()`` it to keep it.
Building a ``compile*`` variant calls ``torch._dynamo.reset()``: build one compiled variant at a time.

Risky variants (by default ``compile`` and ``compile+graph``: a device-side assert kills the CUDA
context and with it the process) run in a worker subprocess, ``python -m cudagraph_bench.measure.variants
--worker``, that measures a queue of cases and streams one JSON line per finished case;
:func:`run_isolated` restarts a dead or hung worker and records the in-flight case as failed.
Only :func:`build_variant`, :func:`measure_case` and the worker import torch.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable

from cudagraph_bench.errors import CudagraphBenchError, CudaUnavailableError, UsageError
from cudagraph_bench.options import (DEFAULT_BUCKETS, DEFAULT_PAD_TO, DEFAULT_ROUNDS, DEFAULT_WARMUP_ROUNDS,
                                     FORWARD_VARIANTS)

#: Variants that :func:`build_variant` and ``cudagraph-bench run`` know, in display order.
RUN_VARIANTS = FORWARD_VARIANTS
#: Variants that need a CUDA GPU.
CUDA_VARIANTS = frozenset(RUN_VARIANTS) - {"eager"}
#: Variants that use torch.compile (compile time is reported separately from latency).
COMPILE_VARIANTS = frozenset({"compile", "compile+graph"})
#: Variants that run other kernels than eager: when the strict check fails they are judged by the
#: float64-reference RMSE check (:func:`cudagraph_bench.measure.correctness.fp64_rmse_check`). ``graph`` is not
#: here: its replay runs the eager kernels, so any difference from eager is a bug.
CROSS_KERNEL_VARIANTS = frozenset({"padded", "bucketed", "compile", "compile+graph"})
#: Default per-case timeout of an isolated worker, in seconds (a max-autotune compile can take minutes).
DEFAULT_CASE_TIMEOUT_S = 300.0
#: A timing is "stable" when two consecutive warm-up calls differ by less than this factor.
STABLE_FACTOR = 1.5
#: Case statuses: measured and correct / measured but outputs differ from eager / not measured / not run.
STATUSES = ("ok", "mismatch", "failed", "skipped")
_PROTOCOL_KEY = "cgb"


class VariantFailure(CudagraphBenchError, RuntimeError):
    """A variant was built but does not do what it claims (e.g. inductor skipped its CUDA graphs)."""


# --------------------------------------------------------------------------------------------------
# variants


class ForwardVariant:
    """One way to run a fixed-length forward pass. Call ``variant(input_ids)`` with ``input_ids``
    ``[1, seq_len]`` int64 on the model's device; the result (logits ``[1, seq_len, vocab]`` or
    ``last_hidden_state [1, seq_len, hidden]``) is valid until the next call.

    Attributes:
        name: the variant name (one of :data:`RUN_VARIANTS`).
        seq_len: prompt length in tokens.
        compile_ms: wall ms spent by torch.compile before the timing is stable (first calls beyond
            steady-state calls), or None for variants without torch.compile.
        capture_ms: wall ms of warmup + CUDA graph capture, or None without a suite-captured graph.
        pad_to: padded length in tokens (``padded``/``bucketed``), else None.
        notes: short remarks to show next to the result (e.g. recompilations).
    """

    name = "?"

    def __init__(self, seq_len: int):
        self.seq_len = seq_len
        self.compile_ms: float | None = None
        self.capture_ms: float | None = None
        self.pad_to: int | None = None
        self.notes: list[str] = []

    @property
    def static_output(self):
        """The static output buffer that each replay writes (poisoned with NaN by the correctness
        check to prove the replay wrote it), or None when the variant has none."""
        return None

    def __call__(self, input_ids):  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        """Release graphs, compiled code and buffers. Idempotent."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class CallableVariant(ForwardVariant):
    """Any ``fn(input_ids [1, seq_len]) -> Tensor`` (e.g. a :class:`~cudagraph_bench.capture.graphed.GraphedForward`
    or :class:`~cudagraph_bench.capture.buckets.BucketedGraphs` timed by the pytest benchmarks) seen as a
    variant, so :func:`check_against_eager` can check it; ``static_output``: the buffer its replays
    write (poisoned with NaN by the check), or None."""

    def __init__(self, name: str, fn, seq_len: int, static_output=None):
        super().__init__(seq_len)
        self.name, self._fn, self._static = name, fn, static_output

    @property
    def static_output(self):
        return self._static

    def __call__(self, input_ids):
        return self._fn(input_ids)


class EagerVariant(ForwardVariant):
    """The eager forward (no graph, no compile); the reference of every correctness check."""

    name = "eager"

    def __init__(self, model, seq_len: int):
        super().__init__(seq_len)
        self._model = model

    def __call__(self, input_ids):
        import torch

        from cudagraph_bench.models.presets import model_forward

        with torch.inference_mode():
            return model_forward(self._model, input_ids)

    def close(self) -> None:
        self._model = None


class GraphVariant(ForwardVariant):
    """:class:`~cudagraph_bench.capture.graphed.GraphedForward` at exactly ``seq_len`` tokens."""

    name = "graph"

    def __init__(self, model, seq_len: int, *, warmup_iters: int = 3, forward=None):
        super().__init__(seq_len)
        from cudagraph_bench.capture.graphed import GraphedForward

        # a compiled forward (compile+graph) must not see patched HF globals: dynamo guards on them
        kwargs = {"forward": forward, "eager_sdpa_dispatch": False} if forward is not None else {}
        self._graph = GraphedForward(model, seq_len, warmup_iters=warmup_iters, **kwargs)
        self.capture_ms = self._graph.capture_ms

    @property
    def static_output(self):
        return self._graph.static_output if self._graph is not None else None

    def __call__(self, input_ids):
        return self._graph(input_ids)

    def close(self) -> None:
        if self._graph is not None:
            self._graph.close()
            self._graph = None


class PaddedVariant(ForwardVariant):
    """One graph at a padded length (``padded``: ``pad_to`` capped at the model's positions;
    ``bucketed``: the smallest bucket >= ``seq_len``), built with
    :class:`~cudagraph_bench.capture.buckets.BucketedGraphs` holding that single length. The prompt is
    right-padded with an attention mask (1 on real tokens); the output is sliced to ``seq_len``.

    Raises:
        RequestTooLongError: ``seq_len`` is above the padded length.
    """

    def __init__(self, model, seq_len: int, *, lengths, name: str, warmup_iters: int = 3):
        super().__init__(seq_len)
        from cudagraph_bench.capture.buckets import BucketedGraphs, cap_buckets, select_bucket
        from cudagraph_bench.models.presets import max_positions

        self.name = name
        length = select_bucket(seq_len, cap_buckets(lengths, max_positions(model)))
        self._graphs = BucketedGraphs(model, (length,), warmup_iters=warmup_iters)
        self.pad_to = length
        self.capture_ms = self._graphs.captures[0].capture_ms

    @property
    def static_output(self):
        return self._graphs.graphs[self.pad_to].static_output if self._graphs is not None else None

    def __call__(self, input_ids):
        return self._graphs(input_ids)

    def close(self) -> None:
        if self._graphs is not None:
            self._graphs.close()
            self._graphs = None


def _sync(model) -> Callable[[], None]:
    import torch

    device = next(model.parameters()).device
    return (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)


def warm_until_stable(call: Callable[[], object], sync: Callable[[], None], *, min_calls: int = 2,
                      max_calls: int = 10, factor: float = STABLE_FACTOR) -> tuple[float, list[float]]:
    """Call ``call()`` (each call synchronized) until two consecutive calls take times within
    ``factor`` of each other, at least ``min_calls`` and at most ``max_calls`` times.

    Returns ``(excess_ms, times_ms)``: ``times_ms`` the wall ms of every call, ``excess_ms`` what the
    calls took beyond steady state: ``sum(times_ms) - len(times_ms) * min(last two times)`` (the
    compilation / recording cost of a torch.compile'd function).
    """
    times: list[float] = []
    for _ in range(max_calls):
        t0 = time.perf_counter()
        call()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
        if len(times) >= max(min_calls, 2):
            a, b = times[-2], times[-1]
            if max(a, b) <= factor * min(a, b):
                break
    steady = min(times[-2:])
    return sum(times) - steady * len(times), times


def _compile_counters() -> dict:
    from torch._dynamo.utils import counters

    return {"unique_graphs": int(counters["stats"]["unique_graphs"]),
            "cudagraph_skips": int(counters["inductor"]["cudagraph_skips"])}


def _inductor_or_error_patch():
    """Make inductor raise (instead of logging "skipping cudagraphs due to ...") when it cannot use
    CUDA graphs, so the reason becomes the variant's failure. A no-op on torch without the flag."""
    import contextlib

    import torch._inductor.config as inductor_config

    if hasattr(inductor_config.triton, "cudagraph_or_error"):
        return inductor_config.patch({"triton.cudagraph_or_error": True})
    return contextlib.nullcontext()


#: Logger that inductor's ``log_cudagraph_skip_and_bump_counter`` writes "skipping cudagraphs due to ..." to.
_CUDAGRAPH_SKIP_LOGGER = "torch._inductor.cudagraph_utils.__cudagraphs"


class _SkipReasons:
    """Collects inductor's "skipping cudagraphs due to ..." messages while active (a handler on
    inductor's cudagraphs logger, which does not propagate unless ``TORCH_LOGS`` enables it)."""

    def __init__(self):
        import logging

        self.messages: list[str] = []
        outer = self

        class _Handler(logging.Handler):
            def emit(self, record):
                outer.messages.append(record.getMessage())

        self._handler = _Handler(level=logging.WARNING)
        self._logger = logging.getLogger(_CUDAGRAPH_SKIP_LOGGER)

    def __enter__(self):
        self._logger.addHandler(self._handler)
        return self

    def __exit__(self, *exc):
        self._logger.removeHandler(self._handler)

    def text(self) -> str:
        unique = list(dict.fromkeys(m.strip() for m in self.messages if m.strip()))
        return "; ".join(unique) if unique else "reason not logged"


def _no_recompile(torch):
    """Context in which a dynamo recompile raises instead of compiling (``set_stance`` on torch >= 2.6)."""
    set_stance = getattr(torch.compiler, "set_stance", None)
    if set_stance is not None:
        return set_stance("fail_on_recompile")
    return torch._dynamo.config.patch(error_on_recompile=True)


class CompileVariant(ForwardVariant):
    """``torch.compile(forward, mode="reduce-overhead", dynamic=False)``: inductor kernels replayed
    in inductor's own CUDA graphs (cudagraph trees).

    Built by compiling and calling it until the timing is stable (``compile_ms``). When inductor skips
    its CUDA graphs (it logs "skipping cudagraphs due to mutated inputs" and carries on without
    graphs), the build raises: inductor is told to raise (``triton.cudagraph_or_error``), and its
    ``cudagraph_skips`` counter and skip log messages are checked as well; the
    :class:`VariantFailure` carries inductor's reason.

    Each call starts a new cudagraph-tree generation (``torch.compiler.cudagraph_mark_step_begin()``):
    the previous output is overwritten by the next call, like a graph's static output.
    Source: PyTorch docs, "CUDAGraph Trees" (torch.compiler_cudagraph_trees).
    """

    name = "compile"

    def __init__(self, model, seq_len: int):
        super().__init__(seq_len)
        import torch

        from cudagraph_bench.models.presets import model_forward, random_input_ids

        torch._dynamo.reset()
        self._torch = torch
        before = _compile_counters()

        def forward(input_ids):
            return model_forward(model, input_ids)

        self._fn = torch.compile(forward, mode="reduce-overhead", dynamic=False)
        device = next(model.parameters()).device
        example = random_input_ids(model, seq_len, device=device)
        with _inductor_or_error_patch(), _SkipReasons() as reasons:
            self.compile_ms, _ = warm_until_stable(lambda: self(example), _sync(model), min_calls=3)
        after = _compile_counters()
        skips = after["cudagraph_skips"] - before["cudagraph_skips"]
        if skips or reasons.messages:
            raise VariantFailure(f"inductor did not use CUDA graphs ({max(skips, 1)} skip(s): {reasons.text()}): "
                                 "not a graph replay")
        self.graphs_compiled = after["unique_graphs"] - before["unique_graphs"]
        if self.graphs_compiled > 1:
            self.notes.append(f"{self.graphs_compiled} compiled graphs (graph breaks or recompiles)")

    def __call__(self, input_ids):
        torch = self._torch
        torch.compiler.cudagraph_mark_step_begin()
        with torch.inference_mode():
            return self._fn(input_ids)

    def close(self) -> None:
        if self._fn is not None:
            self._fn = None
            self._torch._dynamo.reset()  # also frees the cudagraph trees and their memory pool


class CompileGraphVariant(ForwardVariant):
    """``torch.compile(forward, mode="max-autotune-no-cudagraphs", dynamic=False)`` (kernel fusion,
    autotuned GEMMs, no inductor CUDA graphs), captured and replayed by the suite's
    :class:`~cudagraph_bench.capture.graphed.GraphedForward` with static buffers.

    Compilation happens before capture: the compiled forward is called under
    ``torch.inference_mode()`` (as ``GraphedForward`` calls it) until the timing is stable
    (``compile_ms``). During the capture itself dynamo is set to ``fail_on_recompile``, so a guard
    failure raises instead of compiling inside a stream capture.
    """

    name = "compile+graph"

    def __init__(self, model, seq_len: int, *, warmup_iters: int = 3):
        super().__init__(seq_len)
        import torch

        from cudagraph_bench.models.presets import model_forward, random_input_ids

        torch._dynamo.reset()
        self._torch = torch
        before = _compile_counters()

        def forward(input_ids):
            return model_forward(model, input_ids)

        compiled = torch.compile(forward, mode="max-autotune-no-cudagraphs", dynamic=False)
        device = next(model.parameters()).device
        example = random_input_ids(model, seq_len, device=device)

        def call_example():
            with torch.inference_mode():
                return compiled(example)

        self.compile_ms, _ = warm_until_stable(call_example, _sync(model), min_calls=2)

        def captured_forward(_model, input_ids, attention_mask=None):
            if torch.cuda.is_current_stream_capturing():
                with _no_recompile(torch):
                    return compiled(input_ids)
            return compiled(input_ids)

        self._inner = GraphVariant(model, seq_len, warmup_iters=warmup_iters, forward=captured_forward)
        self.capture_ms = self._inner.capture_ms
        self.graphs_compiled = _compile_counters()["unique_graphs"] - before["unique_graphs"]
        if self.graphs_compiled > 1:
            self.notes.append(f"{self.graphs_compiled} compiled graphs (graph breaks or recompiles)")

    @property
    def static_output(self):
        return self._inner.static_output if self._inner is not None else None

    def __call__(self, input_ids):
        return self._inner(input_ids)

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()
            self._inner = None
            self._torch._dynamo.reset()


def build_variant(model, variant: str, seq_len: int, *, pad_to: int | None = None, dtype: str | None = None,
                  buckets: Iterable[int] | None = None, warmup_iters: int = 3) -> ForwardVariant:
    """Build one forward variant of ``model`` for prompts of ``seq_len`` tokens.

    Args:
        model: a module from :func:`~cudagraph_bench.models.presets.load_model` (eval mode; on a CUDA device
            for every variant but ``eager``).
        variant: one of :data:`RUN_VARIANTS`.
        seq_len: prompt length in tokens (the real, unpadded length).
        pad_to: padded length in tokens of ``padded`` (default 1024, capped at the model's positions).
        dtype: the model's dtype name, kept for the caller's records (``variant.dtype``).
        buckets: bucket lengths in tokens of ``bucketed`` (default :data:`options.DEFAULT_BUCKETS`).
        warmup_iters: side-stream warmup passes before each capture (>= 3).

    Returns:
        a :class:`ForwardVariant`: ``variant(input_ids [1, seq_len] int64) -> Tensor`` (valid until the
        next call), ``variant.close()``, ``variant.compile_ms`` / ``capture_ms`` / ``pad_to``.

    Raises:
        UsageError: unknown variant.
        CudaUnavailableError: a graph or compile variant on a model that is not on a CUDA device.
        RequestTooLongError: ``seq_len`` above the padded length or the largest bucket.
        VariantFailure: inductor skipped its CUDA graphs (``compile``).
        Exception: anything torch.compile or the capture raises (the caller reports it).
    """

    if variant not in RUN_VARIANTS:
        raise UsageError(f"unknown variant {variant!r}: use one of {', '.join(RUN_VARIANTS)}")
    if variant in CUDA_VARIANTS:
        device = next(model.parameters()).device
        if device.type != "cuda":
            raise CudaUnavailableError(f"variant {variant!r} needs the model on a CUDA GPU (it is on {device})")
    if variant == "eager":
        built: ForwardVariant = EagerVariant(model, seq_len)
    elif variant == "graph":
        built = GraphVariant(model, seq_len, warmup_iters=warmup_iters)
    elif variant == "padded":
        built = PaddedVariant(model, seq_len, lengths=(pad_to or 1024,), name="padded", warmup_iters=warmup_iters)
    elif variant == "bucketed":
        built = PaddedVariant(model, seq_len, lengths=tuple(buckets or DEFAULT_BUCKETS), name="bucketed",
                              warmup_iters=warmup_iters)
    elif variant == "compile":
        built = CompileVariant(model, seq_len)
    else:
        built = CompileGraphVariant(model, seq_len, warmup_iters=warmup_iters)
    built.dtype = dtype
    return built


# --------------------------------------------------------------------------------------------------
# one case: build, check against eager, time


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
        counters_before = _compile_counters() if spec.variant in COMPILE_VARIANTS else None
        inputs = [random_input_ids(model, spec.seq_len, device=device, generator=generator)
                  for _ in range(spec.rounds + spec.warmup_rounds)]
        calls = iter(range(len(inputs)))

        def one_call():
            return variant(inputs[next(calls)])

        timer = time_call if device.type == "cuda" else _time_cpu
        timing = timer(one_call, rounds=spec.rounds, warmup=spec.warmup_rounds)
        if counters_before is not None:
            after = _compile_counters()
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


# --------------------------------------------------------------------------------------------------
# isolation: worker subprocess + restarting parent


#: Exit code of a worker that stops because the CUDA context is unusable (parent restarts it).
WORKER_EXIT_CUDA_BROKEN = 70
_FATAL_CUDA_MARKERS = ("CUDA error", "device-side assert", "illegal memory access", "cudaError",
                       "CUBLAS_STATUS", "CUDNN_STATUS", "unspecified launch failure", "AcceleratorError")


def is_fatal_cuda_error(reason: str | None) -> bool:
    """True when a failure reason looks like a sticky CUDA error (device-side assert, illegal memory
    access, ...): after one, every later CUDA call of the process fails, so the process must end."""
    return bool(reason) and any(m.lower() in reason.lower() for m in _FATAL_CUDA_MARKERS)


def worker_command() -> list[str]:
    """The command of a real worker: this interpreter running ``-m cudagraph_bench.measure.variants --worker``."""
    return [sys.executable, "-m", "cudagraph_bench.measure.variants", "--worker"]


def _worker_env() -> dict:
    env = dict(os.environ)
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def worker_main(stdin=None, measure: Callable[[CaseSpec, ModelCache], object] = measure_with_cache) -> int:
    """Body of ``python -m cudagraph_bench.measure.variants --worker`` (and of other workers that speak the same
    protocol, e.g. ``python -m cudagraph_bench.measure.kernel_counts --worker``).

    Reads ``{"cases": [CaseSpec dicts]}`` from stdin, then writes JSON lines to its original stdout:
    ``{"cgb": "ready"}`` once, and per case ``{"cgb": "start", "index": i}`` before and
    ``{"cgb": "result", "index": i, "result": ...}`` after ``measure(spec, models)`` (default
    :func:`measure_with_cache`; any result object with ``status``, ``reason``, ``isolated`` and
    ``to_dict()`` like :class:`CaseResult`). Everything else the process prints goes to stderr (file
    descriptor 1 is redirected), so library output never corrupts the protocol.
    """
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    job = json.load(stdin or sys.stdin)

    def emit(**msg):
        proto.write(json.dumps({_PROTOCOL_KEY: msg.pop("event"), **msg}) + "\n")
        proto.flush()

    emit(event="ready", pid=os.getpid())
    models = ModelCache()
    for i, raw in enumerate(job["cases"]):
        emit(event="start", index=i)
        spec = CaseSpec.from_dict(raw)
        result = measure(spec, models)
        result.isolated = True
        emit(event="result", index=i, result=result.to_dict())
        if result.status == "failed" and is_fatal_cuda_error(result.reason) and i + 1 < len(job["cases"]):
            print(f"worker: CUDA context unusable after {spec.variant} L={spec.seq_len}; exiting so that "
                  "a fresh worker takes the remaining cases", file=sys.stderr, flush=True)
            os._exit(WORKER_EXIT_CUDA_BROKEN)  # skip CUDA teardown, which may hang on a broken context
    return 0


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _tail(path: str, lines: int = 4, limit: int = 400) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 16384))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
    out = " | ".join(kept)
    return out if len(out) <= limit else "..." + out[-(limit - 3):]


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the worker and the processes it started (it leads its own process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    proc.wait()


@dataclass
class IsolationStats:
    """What :func:`run_isolated` did: workers started, and how many of them died or timed out."""

    workers: int = 0
    died: int = 0
    timed_out: int = 0


def run_isolated(specs: list[dict], *, timeout_s: float = DEFAULT_CASE_TIMEOUT_S,
                 worker_cmd: list[str] | None = None, deadline: float | None = None,
                 on_result: Callable[[int, dict], None] | None = None, log_path: str | None = None,
                 stats: IsolationStats | None = None) -> list[dict]:
    """Measure ``specs`` (JSON-able case dicts) in a worker subprocess, restarting it when it dies.

    The worker (``worker_cmd``, default :func:`worker_command`) gets the remaining specs on stdin and
    streams JSON lines (see :func:`worker_main`). When it exits early (crash, device-side assert,
    ``os.abort()``), the in-flight case becomes a ``failed`` result whose reason names the exit code
    or signal and the last stderr lines, and a new worker takes the cases after it. When no line
    arrives for ``timeout_s`` seconds (per case; model loading included), the worker's process group
    is killed and the case fails as timed out. A worker that dies before announcing itself
    (``ready``) fails all remaining cases with its reason (a startup error is not case-specific).

    Args:
        specs: case dicts (:meth:`CaseSpec.to_dict`); passed through to the worker unchanged.
        timeout_s: per-case limit in seconds.
        worker_cmd: argv of the worker process.
        deadline: ``time.monotonic()`` value after which the worker is stopped and the cases not
            finished become ``skipped`` ("time budget exhausted").
        on_result: called as ``on_result(index, result_dict)`` when each case finishes (also for
            failures produced here).
        log_path: file that collects the workers' stderr (appended); a temporary file if None.
        stats: filled with counts of workers started / died / timed out.

    Returns:
        one result dict per spec, in order (:class:`CaseResult` fields).
    """
    worker_cmd = worker_cmd or worker_command()
    stats = stats if stats is not None else IsolationStats()
    results: dict[int, dict] = {}
    own_log = log_path is None
    if own_log:
        fd, log_path = tempfile.mkstemp(prefix="cgb-worker-", suffix=".log")
        os.close(fd)

    def finish(index: int, result: dict) -> None:
        results[index] = result
        if on_result is not None:
            on_result(index, result)

    def synthetic(index: int, status: str, reason: str, phase: str) -> dict:
        s = specs[index]
        return {"model": s.get("model"), "dtype": s.get("dtype"), "seq_len": s.get("seq_len"),
                "variant": s.get("variant"), "status": status, "reason": reason, "phase": phase,
                "wall_ms": [], "event_ms": [], "isolated": True, "device": s.get("device", "cuda"), "notes": []}

    try:
        pending = list(range(len(specs)))
        while pending:
            if deadline is not None and time.monotonic() >= deadline:
                for i in pending:
                    finish(i, synthetic(i, "skipped", "time budget exhausted", "budget"))
                break
            stats.workers += 1
            with open(log_path, "ab") as log:
                log.write(f"\n=== worker {stats.workers}: {len(pending)} case(s) ===\n".encode())
                log.flush()
                proc = subprocess.Popen(worker_cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                        env=_worker_env(), start_new_session=True)
            lines: queue.Queue = queue.Queue()

            def read(stream=proc.stdout, q=lines):
                for raw in iter(stream.readline, b""):
                    q.put(raw)
                q.put(None)

            threading.Thread(target=read, daemon=True).start()
            try:
                proc.stdin.write(json.dumps({"cases": [specs[i] for i in pending]}).encode())
                proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
            ready, in_flight, done_local = False, None, set()
            last = time.monotonic()
            failure: tuple[str, str, str] | None = None  # (status, reason, phase) for the in-flight case
            while True:
                now = time.monotonic()
                wait = timeout_s - (now - last)
                budget_hit = deadline is not None and deadline - now < wait
                if budget_hit:
                    wait = deadline - now
                try:
                    raw = lines.get(timeout=max(wait, 0.0))
                except queue.Empty:
                    _kill_group(proc)
                    if budget_hit:
                        failure = ("skipped", "time budget exhausted (worker stopped)", "budget")
                    else:
                        stats.timed_out += 1
                        failure = ("failed", f"timed out after {timeout_s:g} s (per-case limit); worker killed",
                                   "timeout")
                    break
                if raw is None:  # EOF: the worker exited
                    code = proc.wait()
                    if len(done_local) == len(pending):
                        break
                    stats.died += 1
                    how = f"killed by {_signal_name(code)}" if code < 0 else f"exited with code {code}"
                    tail = _tail(log_path)
                    failure = ("failed", f"worker {how}" + (f"; stderr: {tail}" if tail else ""), "worker")
                    break
                try:
                    msg = json.loads(raw)
                except ValueError:
                    continue
                if not isinstance(msg, dict) or _PROTOCOL_KEY not in msg:
                    continue
                last = time.monotonic()
                event = msg[_PROTOCOL_KEY]
                if event == "ready":
                    ready = True
                elif event == "start":
                    in_flight = int(msg["index"])
                elif event == "result":
                    local = int(msg["index"])
                    done_local.add(local)
                    in_flight = None
                    result = dict(msg["result"])
                    result["isolated"] = True
                    finish(pending[local], result)
                    if len(done_local) == len(pending):
                        break  # all done: do not wait for the worker's exit
            _kill_group(proc)
            remaining = [pending[j] for j in range(len(pending)) if j not in done_local]
            if failure is None or not remaining:
                pending = remaining
                continue
            status, reason, phase = failure
            if status == "skipped":
                for i in remaining:
                    finish(i, synthetic(i, status, reason, phase))
                break
            if not ready:  # the worker never started: not the fault of one case
                for i in remaining:
                    finish(i, synthetic(i, status, reason + " (before the first case)", phase))
                break
            if in_flight is None and done_local:
                pending = remaining  # it exited between cases (e.g. after a CUDA error): just restart
                continue
            culprit = pending[in_flight] if in_flight is not None else remaining[0]
            finish(culprit, synthetic(culprit, status, reason, phase))
            pending = [i for i in remaining if i != culprit]
    finally:
        if own_log:
            try:
                os.unlink(log_path)
            except OSError:
                pass
    return [results[i] for i in range(len(specs))]


def _main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m cudagraph_bench.measure.variants",
                                     description="worker process of cudagraph-bench run (reads cases on stdin)")
    parser.add_argument("--worker", action="store_true", required=True,
                        help="measure the cases given as JSON on stdin; stream JSON lines to stdout")
    parser.parse_args(argv)
    return worker_main()


if __name__ == "__main__":
    sys.exit(_main())
