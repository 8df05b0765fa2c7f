"""The forward variants (the registry's forward rows; docs/measurement.md) behind one interface,
``variant(input_ids [1, seq_len] int64) -> Tensor``, and :func:`build_variant`. Building a ``compile*`` variant calls
``torch._dynamo.reset()``: one compiled variant at a time."""

from __future__ import annotations

from typing import Iterable

from cudagraph_bench.capture.buckets import BucketedGraphs, cap_buckets, select_bucket
from cudagraph_bench.capture.compiling import (SkipReasons, compile_counters, device_sync, inductor_or_error_patch,
                                               no_recompile, warm_until_stable)
from cudagraph_bench.capture.graphed import Closing, GraphedForward
from cudagraph_bench import variants as registry
from cudagraph_bench.errors import CudagraphBenchError, CudaUnavailableError, UsageError
from cudagraph_bench.models.presets import max_positions, model_forward, random_input_ids
from cudagraph_bench.options import COMPILE_GRAPH_MODES, DEFAULT_BUCKETS, DEFAULT_COMPILE_GRAPH_MODE, DEFAULT_PAD_TO


class VariantFailure(CudagraphBenchError, RuntimeError):
    """A variant was built but does not do what it claims (e.g. inductor skipped its CUDA graphs)."""


class ForwardVariant(Closing):
    """One way to run a fixed-length forward: ``variant(input_ids [1, seq_len] int64)`` on the model's device returns
    logits ``[1, seq_len, vocab]`` or ``last_hidden_state [1, seq_len, hidden]``, valid until the next call.
    ``compile_ms`` / ``capture_ms``: wall ms beyond steady state / of warmup + capture, None when not compiled /
    captured; ``pad_to``: padded tokens, else None."""

    name = "?"
    #: The static output buffer each replay writes (the check poisons it with NaN), or None.
    static_output = None
    #: ``(shortest, longest)`` lengths replaying ``seq_len``'s graph; None: ``seq_len`` only.
    check_range: tuple[int, int] | None = None

    def __init__(self, seq_len: int):
        self.seq_len = seq_len
        self.compile_ms: float | None = None
        self.capture_ms: float | None = None
        self.pad_to: int | None = None
        self.notes: list[str] = []

    def __call__(self, input_ids):  # pragma: no cover - abstract
        raise NotImplementedError

    def check_buffers(self, on: bool) -> None:
        """Before each replay check no static buffer's ``data_ptr()`` changed; no-op without a graph."""

    def close(self) -> None:
        """Release graphs, compiled code and buffers. Idempotent."""

    def _note_graphs_compiled(self, before: dict) -> None:
        """Set ``graphs_compiled`` since the counters ``before``; more than one is a note."""
        self.graphs_compiled = compile_counters()["unique_graphs"] - before["unique_graphs"]
        if self.graphs_compiled > 1:
            self.notes.append(f"{self.graphs_compiled} compiled graphs (graph breaks or recompiles)")

    def record(self) -> dict:
        """``compile_ms``, ``capture_ms`` (ms) and ``pad_to`` (tokens), where set."""
        fields = (("compile_ms", self.compile_ms), ("capture_ms", self.capture_ms), ("pad_to", self.pad_to))
        return {key: value for key, value in fields if value is not None}


class EagerVariant(ForwardVariant):
    """The eager forward (no graph, no compile); the reference of every correctness check."""

    def __init__(self, model, seq_len: int):
        super().__init__(seq_len)
        self._model = model

    def __call__(self, input_ids):
        import torch

        with torch.inference_mode():
            return model_forward(self._model, input_ids)

    def close(self) -> None:
        self._model = None


class GraphVariant(ForwardVariant):
    """:class:`~cudagraph_bench.capture.graphed.GraphedForward` at exactly ``seq_len`` tokens."""

    def __init__(self, model, seq_len: int, *, warmup_iters: int = 3, forward=None):
        super().__init__(seq_len)
        # a compiled forward (compile+graph) must not see patched HF globals nor torch modes: dynamo guards on them
        kwargs = {"forward": forward, "eager_sdpa_dispatch": False, "host_work_check": False} \
            if forward is not None else {}
        self._graph = GraphedForward(model, seq_len, warmup_iters=warmup_iters, **kwargs)
        self.capture_ms = self._graph.capture_ms

    @property
    def static_output(self):
        return self._graph.static_output if self._graph is not None else None

    def __call__(self, input_ids):
        return self._graph(input_ids)

    def check_buffers(self, on: bool) -> None:
        if self._graph is not None:
            self._graph.check_data_ptrs = on

    def close(self) -> None:
        if self._graph is not None:
            self._graph.close()
            self._graph = None


class PaddedVariant(ForwardVariant):
    """Graphs at padded lengths, capped at the model's positions: ``padded`` one at ``pad_to``, ``bucketed`` one per
    bucket in one pool; the prompt replays the smallest >= ``seq_len``, right-padded with a mask, output sliced.
    ``graphs``: captured already, replayed but not owned. RequestTooLongError when ``seq_len`` is above the padded
    length / the largest bucket; ValueError when ``graphs`` hold other lengths."""

    def __init__(self, model, seq_len: int, *, lengths, name: str, warmup_iters: int = 3, graphs=None):
        super().__init__(seq_len)
        self.name = name
        capped = self.graph_lengths(model, lengths, name, seq_len)
        length = select_bucket(seq_len, capped)
        self._owns_graphs = graphs is None
        if graphs is None:
            graphs = self.graphs_for(model, lengths, name, seq_len, warmup_iters=warmup_iters)
        elif tuple(sorted(graphs.buckets)) != tuple(sorted(capped)):
            raise ValueError(f"graphs of lengths {sorted(graphs.buckets)} given to a {name} variant of lengths "
                             f"{sorted(capped)}: capture them with PaddedVariant.graphs_for")
        self.graphs_reused = graphs.served > 0
        graphs.served += 1
        self._graphs = graphs
        self.pad_to = length
        self.capture_ms = next(c.capture_ms for c in self._graphs.captures if c.bucket == length)
        self.check_range = (max((b for b in capped if b < length), default=0) + 1, length)   # above the next bucket

    @staticmethod
    def graph_lengths(model, lengths, name: str, seq_len: int) -> tuple[int, ...]:
        """The lengths (tokens) a ``name`` variant captures for ``seq_len``: every bucket capped at the positions
        (``bucketed``) or the one padded length (``padded``). RequestTooLongError when ``seq_len`` is above them all."""
        capped = cap_buckets(lengths, max_positions(model, bound=max(lengths, default=1)))   # ALiBi, NoPE
        length = select_bucket(seq_len, capped)
        return capped if registry.variant(registry.FORWARD, name).lengths == "buckets" else (length,)

    @classmethod
    def graphs_for(cls, model, lengths, name: str, seq_len: int, *, warmup_iters: int = 3):
        """Capture the graphs a ``name`` variant replays for ``seq_len`` (close them when done). Raises
        RequestTooLongError, before any capture, when ``seq_len`` is above every length."""
        return BucketedGraphs(model, cls.graph_lengths(model, lengths, name, seq_len), warmup_iters=warmup_iters)

    def record(self) -> dict:
        captures = self._graphs.captures if self._graphs is not None else []
        reused = {"graphs_reused": True} if self.graphs_reused else {}
        return {**super().record(), "bucket": self.pad_to, "buckets": [c.bucket for c in reversed(captures)],
                "capture_ms_by_bucket": {str(c.bucket): c.capture_ms for c in captures},
                "pool_mib_by_bucket": {str(c.bucket): c.pool_mib for c in captures}, **reused}

    @property
    def static_output(self):
        return self._graphs.graphs[self.pad_to].static_output if self._graphs is not None else None

    def __call__(self, input_ids):
        return self._graphs(input_ids)

    def close(self) -> None:
        if self._graphs is not None and self._owns_graphs:
            self._graphs.close()
        self._graphs = None


def _compile_forward(model, seq_len: int, mode: str):
    """Reset dynamo and compile the forward: ``(compiled, example input [1, seq_len], counters before)``."""
    import torch

    torch._dynamo.reset()
    before = compile_counters()

    def forward(input_ids):
        return model_forward(model, input_ids)

    compiled = torch.compile(forward, mode=mode, dynamic=False)
    example = random_input_ids(model, seq_len, device=next(model.parameters()).device)
    return compiled, example, before


class CompileVariant(ForwardVariant):
    """``torch.compile(forward, mode="reduce-overhead", dynamic=False)``: inductor kernels in inductor's own CUDA graphs
    (PyTorch docs, "CUDAGraph Trees"); each call overwrites the previous output. Raises VariantFailure when inductor
    skipped its CUDA graphs."""

    def __init__(self, model, seq_len: int):
        super().__init__(seq_len)
        import torch

        self._torch = torch
        self._fn, example, before = _compile_forward(model, seq_len, "reduce-overhead")
        with inductor_or_error_patch(), SkipReasons() as reasons:
            self.compile_ms, _ = warm_until_stable(lambda: self(example), device_sync(example.device), min_calls=3)
        skips = compile_counters()["cudagraph_skips"] - before["cudagraph_skips"]
        if skips or reasons.messages:
            raise VariantFailure(f"inductor did not use CUDA graphs ({max(skips, 1)} skip(s): {reasons.text()}): "
                                 "not a graph replay")
        self._note_graphs_compiled(before)

    def __call__(self, input_ids):
        torch = self._torch
        torch.compiler.cudagraph_mark_step_begin()
        with torch.inference_mode():
            return self._fn(input_ids)

    def close(self) -> None:
        if self._fn is not None:
            self._fn = None
            self._torch._dynamo.reset()  # also frees the cudagraph trees and their memory pool


class CompileGraphVariant(GraphVariant):
    """``torch.compile(forward, mode=compile_mode, dynamic=False)`` without inductor's graphs, captured and replayed by
    the suite's GraphedForward (a recompile while capturing raises). ``compile_mode`` not in
    :data:`~cudagraph_bench.options.COMPILE_GRAPH_MODES`: UsageError."""

    def __init__(self, model, seq_len: int, *, warmup_iters: int = 3, compile_mode: str = DEFAULT_COMPILE_GRAPH_MODE):
        import torch

        if compile_mode not in COMPILE_GRAPH_MODES:
            raise UsageError(f"unknown compile mode {compile_mode!r}: use {' or '.join(COMPILE_GRAPH_MODES)}")
        self._torch = torch
        self.compile_mode = compile_mode
        compiled, example, before = _compile_forward(model, seq_len, compile_mode)

        def call_example():
            with torch.inference_mode():
                return compiled(example)

        compile_ms, _ = warm_until_stable(call_example, device_sync(example.device), min_calls=2)

        def captured_forward(_model, input_ids, attention_mask=None):
            if torch.cuda.is_current_stream_capturing():
                with no_recompile(torch):
                    return compiled(input_ids)
            return compiled(input_ids)

        super().__init__(model, seq_len, warmup_iters=warmup_iters, forward=captured_forward)
        self.compile_ms = compile_ms
        self._note_graphs_compiled(before)

    def record(self) -> dict:
        return {**super().record(), "compile_mode": self.compile_mode}

    def close(self) -> None:
        if self._graph is not None:
            super().close()
            self._torch._dynamo.reset()


def padding_lengths(variant: str, pad_to: int | None = None, buckets: Iterable[int] | None = None) -> tuple[int, ...]:
    """The lengths (tokens, before the cap at the positions) a padding variant uses: ``pad_to`` or ``buckets``."""
    kind = registry.variant(registry.FORWARD, variant)
    return (pad_to or DEFAULT_PAD_TO,) if kind.lengths == "pad_to" else tuple(buckets or DEFAULT_BUCKETS)


def build_variant(model, variant: str, seq_len: int, *, pad_to: int | None = None, dtype: str | None = None,
                  buckets: Iterable[int] | None = None, warmup_iters: int = 3,
                  compile_mode: str = DEFAULT_COMPILE_GRAPH_MODE, graphs=None) -> ForwardVariant:
    """Build one forward variant of ``model`` (on a CUDA device but for ``eager``) for prompts of ``seq_len`` real
    tokens (close it). ``pad_to``: tokens of ``padded`` (default 1024, capped at the positions); ``buckets``: tokens of
    ``bucketed``; ``warmup_iters`` >= 3; ``graphs``: captured already (:meth:`PaddedVariant.graphs_for`), not owned.
    Raises UsageError (unknown variant), CudaUnavailableError (a graph or compile variant off CUDA), RequestTooLongError
    (:meth:`PaddedVariant.graph_lengths`), VariantFailure (``compile`` without inductor's CUDA graphs), or what
    torch.compile or the capture raises."""
    try:
        kind = registry.variant(registry.FORWARD, variant)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    if kind.needs_cuda:
        device = next(model.parameters()).device
        if device.type != "cuda":
            raise CudaUnavailableError(f"variant {variant!r} needs the model on a CUDA GPU (it is on {device})")
    kwargs: dict = {"warmup_iters": warmup_iters} if kind.captured else {}
    if kind.lengths:
        kwargs.update(lengths=padding_lengths(variant, pad_to, buckets), name=variant, graphs=graphs)
    elif kind.compiled and kind.captured:
        kwargs["compile_mode"] = compile_mode
    built: ForwardVariant = kind.build_callable()(model, seq_len, **kwargs)
    built.name, built.dtype = kind.name, dtype
    return built
