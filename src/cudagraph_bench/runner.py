"""Capture one fixed-shape forward pass in a CUDA graph and replay it with new inputs.

Follows the pattern of PyTorch's "CUDA Graphs" notes (``torch.cuda.graph``, whole-network capture)
and vLLM's ``compilation/cuda_graph.py`` wrapper.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Callable

from cudagraph_bench.errors import CudaUnavailableError, ShapeMismatchError, StaticBufferError
from cudagraph_bench.presets import model_forward


#: One warmup side stream per device, reused by every GraphedForward. cuBLAS keeps a workspace per
#: (handle, stream) for the life of the process (32 MiB on Hopper), so a new stream per capture leaked
#: about 34 MiB of reserved memory per graph case in the first H200 run (the plugin's memory ledger).
_SIDE_STREAMS: dict = {}


def _side_stream(device):
    import torch

    key = torch.device(device).index if torch.device(device).index is not None else torch.cuda.current_device()
    if key not in _SIDE_STREAMS:
        _SIDE_STREAMS[key] = torch.cuda.Stream(device=key)
    return _SIDE_STREAMS[key]


#: transformers.masking_utils functions that decide whether SDPA may skip the attention mask.
_HF_SKIP_DECIDERS = ("_ignore_causal_mask_sdpa", "_ignore_bidirectional_mask_sdpa")


@contextlib.contextmanager
def eager_sdpa_dispatch_during_capture():
    """Let HF transformers take its eager SDPA path (``is_causal`` / no mask) while a stream captures.

    transformers' ``is_tracing()`` is True while a CUDA stream is capturing, and then its mask
    helpers always build an explicit attention mask, so a captured forward would run other SDPA
    kernels than the same forward in eager mode (different rounding; slower attention). When no
    padding mask is given, the skip decision depends only on shapes (no device sync), so during
    capture this context answers it as in eager mode. Likewise the packed-sequence detection that
    HF runs on ``position_ids`` when there is neither a mask nor a cache: eager mode finds one
    sequence for the ``arange`` positions the model builds itself (after a host sync, which a
    capture forbids), so during capture it answers "not packed" directly. With a padding mask or a
    KV cache, the library's own capture-safe path is left untouched. ``CGB_HF_SDPA_SKIP=0`` turns
    this off. Only for forwards whose positions are ``arange(seq_len)`` (what GraphedForward runs).
    """
    try:
        import transformers.masking_utils as mu
    except ImportError:  # pragma: no cover - transformers is a dependency
        yield
        return
    if os.environ.get("CGB_HF_SDPA_SKIP", "1") == "0" or not hasattr(mu, "is_tracing"):
        yield
        return
    originals = {name: getattr(mu, name) for name in _HF_SKIP_DECIDERS if hasattr(mu, name)}

    def wrap(original):
        def decide(padding_mask, *args, **kwargs):
            if padding_mask is not None:
                return original(padding_mask, *args, **kwargs)
            is_tracing = mu.is_tracing
            mu.is_tracing = lambda *a, **k: False
            try:
                return original(padding_mask, *args, **kwargs)
            finally:
                mu.is_tracing = is_tracing
        return decide

    for name, original in originals.items():
        setattr(mu, name, wrap(original))
    if hasattr(mu, "find_packed_sequence_indices"):
        originals["find_packed_sequence_indices"] = mu.find_packed_sequence_indices
        mu.find_packed_sequence_indices = lambda *args, **kwargs: None
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(mu, name, original)


class GraphedForward:
    """A forward pass captured once in a CUDA graph and replayed with new inputs.

    Workflow:

    1. allocate static input buffers on the model's device: ``input_ids [batch, seq_len]`` int64 and,
       when ``with_attention_mask``, ``attention_mask [batch, seq_len]`` int64 (filled with 1);
    2. warm up ``warmup_iters`` (>= 3) forward passes on a side stream (one per device, reused), so
       lazy initialisation, cuBLAS handles and autotuning happen outside the capture;
    3. capture one forward pass with ``torch.cuda.graph`` (into ``pool`` if given, so several graphs
       can share one graph memory pool); the output tensor allocated during capture becomes the
       static output buffer. Without a padding mask, HF's SDPA dispatch is kept as in eager mode
       (:func:`eager_sdpa_dispatch_during_capture`), so replay runs the same kernels as eager;
    4. ``__call__``: ``copy_`` the new inputs into the static buffers, ``graph.replay()``, return the
       static output.

    The returned tensor IS the static output buffer: the next replay overwrites it. ``.clone()`` it to
    keep it. Runs under ``torch.inference_mode()``.

    What it does not do: dynamic shapes (see :mod:`cudagraph_bench.buckets` for padding and buckets),
    KV caches (see :mod:`cudagraph_bench.decode`), multiple streams, or synchronisation: the caller
    synchronises before reading results on the host.

    Args:
        model: a module on a CUDA device, in eval mode.
        seq_len: static sequence length in tokens.
        batch: static batch size.
        with_attention_mask: also capture a static ``attention_mask`` input.
        warmup_iters: side-stream warmup passes before capture (at least 3).
        pool: a graph memory pool (``torch.cuda.graph_pool_handle()``) shared with other graphs.
        check_data_ptrs: before each replay, check that no static buffer was re-pointed
            (``data_ptr()`` changed, e.g. by ``.set_()``); raise :class:`StaticBufferError` if so.
        forward: ``forward(model, input_ids, attention_mask) -> Tensor``; default
            :func:`~cudagraph_bench.presets.model_forward`.
        eager_sdpa_dispatch: capture inside :func:`eager_sdpa_dispatch_during_capture` (default). Pass
            False for a ``torch.compile``-d model: patching module globals could trip dynamo's guards.

    Raises:
        CudaUnavailableError: CUDA is not available or the model is not on a CUDA device.
        ValueError: ``warmup_iters < 3``, ``seq_len < 1`` or ``batch < 1``.
    """

    def __init__(self, model, seq_len: int, *, batch: int = 1, with_attention_mask: bool = False,
                 warmup_iters: int = 3, pool=None, check_data_ptrs: bool = False,
                 forward: Callable = model_forward, eager_sdpa_dispatch: bool = True):
        import torch

        if warmup_iters < 3:
            raise ValueError(f"warmup_iters must be >= 3 (got {warmup_iters}): lazy init must finish before capture")
        if seq_len < 1 or batch < 1:
            raise ValueError(f"seq_len and batch must be >= 1 (got seq_len={seq_len}, batch={batch})")
        device = next(model.parameters()).device
        if not torch.cuda.is_available() or device.type != "cuda":
            raise CudaUnavailableError(
                f"CUDA graphs need the model on a CUDA device (model is on {device}; "
                f"torch.cuda.is_available()={torch.cuda.is_available()})")
        self._model = model
        self._forward = forward
        self.check_data_ptrs = check_data_ptrs
        self.shape = (batch, seq_len)
        # [batch, seq_len] int64; ids drawn from [1, 100) so warmup never runs on all zeros.
        self._input_ids = torch.randint(1, 100, self.shape, dtype=torch.int64, device=device)
        self._attention_mask = (torch.ones(self.shape, dtype=torch.int64, device=device)
                                if with_attention_mask else None)
        self._graph = torch.cuda.CUDAGraph()
        start = time.perf_counter()
        with torch.inference_mode():
            side = _side_stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):
                for _ in range(warmup_iters):
                    self._run()
            torch.cuda.current_stream(device).wait_stream(side)
            torch.cuda.synchronize(device)
            dispatch = eager_sdpa_dispatch_during_capture() if eager_sdpa_dispatch else contextlib.nullcontext()
            with dispatch, torch.cuda.graph(self._graph, pool=pool):
                self._output = self._run()
        torch.cuda.synchronize(device)
        self.capture_ms = (time.perf_counter() - start) * 1e3
        self._ptrs = self._data_ptrs()

    def _run(self):
        return self._forward(self._model, self._input_ids, self._attention_mask)

    def _data_ptrs(self) -> tuple:
        return tuple(t.data_ptr() if t is not None else 0
                     for t in (self._input_ids, self._attention_mask, self._output))

    @property
    def static_input_ids(self):
        """Static ``[batch, seq_len]`` int64 input buffer baked into the graph (read-only attribute)."""
        return self._input_ids

    @property
    def static_attention_mask(self):
        """Static ``[batch, seq_len]`` int64 mask buffer, or None when captured without a mask."""
        return self._attention_mask

    @property
    def static_output(self):
        """Static output buffer written by every replay (logits or last_hidden_state)."""
        return self._output

    @property
    def graph(self):
        """The captured ``torch.cuda.CUDAGraph``."""
        return self._graph

    def _check_input(self, name: str, value, static) -> None:
        if static is None:
            raise ShapeMismatchError(f"{name} was given but this graph was captured without it: "
                                     f"construct GraphedForward(..., with_attention_mask=True)")
        if tuple(value.shape) != tuple(static.shape) or value.dtype != static.dtype:
            raise ShapeMismatchError(
                f"{name} is {list(value.shape)} {value.dtype} but the graph was captured for "
                f"{list(static.shape)} {static.dtype}: pad to that shape (cudagraph_bench.buckets) or capture another graph")

    def __call__(self, input_ids, attention_mask=None):
        """Copy ``input_ids`` ``[batch, seq_len]`` int64 (and ``attention_mask``) into the static buffers and
        replay. Returns the static output (overwritten by the next replay).

        Raises:
            ShapeMismatchError: an input's shape or dtype differs from the captured buffer, or a mask is
                given to a graph captured without one.
            StaticBufferError: ``check_data_ptrs`` is on and a static buffer was re-pointed.
            RuntimeError: after :meth:`close`.
        """
        import torch

        if self._graph is None:
            raise RuntimeError("this GraphedForward was closed; capture a new one")
        self._check_input("input_ids", input_ids, self._input_ids)
        if attention_mask is not None:
            self._check_input("attention_mask", attention_mask, self._attention_mask)
        if self.check_data_ptrs and self._data_ptrs() != self._ptrs:
            raise StaticBufferError("a static buffer's data_ptr() changed since capture (baked-pointer hazard): "
                                    "never .set_()/.resize_() the static buffers; capture a new graph instead")
        with torch.inference_mode():
            self._input_ids.copy_(input_ids)
            if self._attention_mask is not None:
                if attention_mask is None:
                    self._attention_mask.fill_(1)
                else:
                    self._attention_mask.copy_(attention_mask)
            self._graph.replay()
        return self._output

    replay = __call__

    def close(self) -> None:
        """Drop the graph and its buffers so the graph pool can be released (then ``torch.cuda.empty_cache()``)."""
        self._graph = None
        self._output = None
        self._input_ids = None
        self._attention_mask = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
