"""Capture one fixed-shape forward in a CUDA graph and replay it with new inputs (PyTorch's "CUDA Graphs" notes,
whole-network capture; vLLM's ``compilation/cuda_graph.py``)."""

from __future__ import annotations

import contextlib
import time
from typing import Callable

from cudagraph_bench.capture.host_work import (DeviceConstants, capture_path_host_work,
                                               host_work_in_failed_capture, root_exception)
from cudagraph_bench.errors import (CaptureError, CudaUnavailableError, NotGraphableError, ShapeMismatchError,
                                     StaticBufferError)
from cudagraph_bench.models.hf_internals import eager_sdpa_dispatch_during_capture, static_rope_during_capture
from cudagraph_bench.models.presets import model_forward


#: One warmup side stream per device: cuBLAS keeps a workspace (32 MiB on Hopper) per (handle, stream) for life.
_SIDE_STREAMS: dict = {}


class Closing:
    """A context manager whose exit calls ``self.close()``."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _cuda_index(device) -> int:
    """``device``'s CUDA index (None or ``"cuda"``: the current device's)."""
    import torch

    index = torch.device(device).index if device is not None else None
    return torch.cuda.current_device() if index is None else index


@contextlib.contextmanager
def _on_side_stream(device):
    """The body runs on ``device``'s warmup stream, after the current stream's queued work and before its next."""
    import torch

    key = _cuda_index(device)
    if key not in _SIDE_STREAMS:
        _SIDE_STREAMS[key] = torch.cuda.Stream(device=key)
    _SIDE_STREAMS[key].wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(_SIDE_STREAMS[key]):
        yield
    torch.cuda.current_stream(device).wait_stream(_SIDE_STREAMS[key])


def root_cause(exc: BaseException, limit: int = 300) -> str:
    """``"Type: first line"`` of the exception that started ``exc``'s chain, cut to ``limit`` characters."""
    exc = root_exception(exc)
    text = (str(exc).strip().splitlines() or [""])[0]
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def cuda_context_usable(device=None) -> bool:
    """True when a random draw, a captured add, its replay and a synchronize all succeed with the right result."""
    import torch

    try:
        torch.cuda.synchronize(device)
        x = torch.randint(0, 100, (8,), device=device)
        graph = torch.cuda.CUDAGraph()
        with _on_side_stream(device):
            y = x + 1
        with torch.cuda.graph(graph):
            y = x + 1
        graph.replay()
        torch.cuda.synchronize(device)
        return bool(torch.equal(y, x + 1))
    except Exception:   # noqa: BLE001 - any failure means "not usable"
        return False


class GraphedForward(Closing):
    """A forward captured once in a CUDA graph and replayed with new inputs: static ``input_ids [batch, seq_len]`` int64
    (and an all-ones ``attention_mask``), warmup on a side stream, a host-work check, capture under inference mode. The
    returned tensor IS the static output (``.clone()`` to keep). Fixed shapes, one stream, no synchronize.
    ``warmup_iters`` >= 3; ``pool``: shared graph pool; ``check_data_ptrs``: raise StaticBufferError before a replay
    whose buffer was re-pointed; ``forward(model, input_ids, attention_mask) -> Tensor``; ``eager_sdpa_dispatch`` and
    ``host_work_check``: False for a compiled forward; ``max_positions``: largest position + 1 replayed (default
    ``seq_len``).

    Raises:
        CudaUnavailableError: CUDA is not available or the model is not on a CUDA device.
        NotGraphableError: the model cannot be captured correctly for ``max_positions`` (before any GPU work), or its
            forward does host work a capture forbids.
        CaptureError: the capture failed; the message names the operation that broke it.
        ValueError: ``warmup_iters < 3``, ``seq_len < 1`` or ``batch < 1``."""

    def __init__(self, model, seq_len: int, *, batch: int = 1, with_attention_mask: bool = False,
                 warmup_iters: int = 3, pool=None, check_data_ptrs: bool = False,
                 forward: Callable = model_forward, eager_sdpa_dispatch: bool = True,
                 max_positions: int | None = None, host_work_check: bool = True):
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
        self.host_work_check_ms = 0.0
        rope = static_rope_during_capture(model, max_positions or seq_len)   # NotGraphableError up front
        #: host data the forward makes on the device; holds the pinned memory the graph's copies read from
        self._constants = DeviceConstants(device) if host_work_check else contextlib.nullcontext()

        start = time.perf_counter()
        with torch.inference_mode():
            with _on_side_stream(device):
                for _ in range(warmup_iters):
                    self._run()
                if host_work_check:              # timed apart (synchronized): not part of capture_ms
                    torch.cuda.synchronize(device)
                    checked = time.perf_counter()
                    self._check_host_work(model, device, max_positions or seq_len, eager_sdpa_dispatch)
                    torch.cuda.synchronize(device)
                    self.host_work_check_ms = (time.perf_counter() - checked) * 1e3
            torch.cuda.synchronize(device)
            try:
                dispatch = eager_sdpa_dispatch_during_capture() if eager_sdpa_dispatch else contextlib.nullcontext()
                with rope, dispatch, self._constants, torch.cuda.graph(self._graph, pool=pool):
                    self._output = self._run()
            except NotGraphableError:
                raise
            except Exception as exc:
                self._graph = None
                # a failed capture leaves the default generator capturing (best-effort reset; the probe decides)
                with contextlib.suppress(Exception):
                    generator = torch.cuda.default_generators[_cuda_index(device)]
                    generator.graphsafe_set_state(generator.clone_state())
                usable = cuda_context_usable(device)
                found = host_work_in_failed_capture(exc) if usable else None
                if found:
                    raise NotGraphableError(f"{type(model).__name__} does host work in its forward that a CUDA "
                                            f"graph capture forbids, seen by the capture: {found}") from exc
                raise CaptureError(f"CUDA graph capture failed: {root_cause(exc)}"
                                   + ("" if usable else " (the CUDA context is no longer usable)"),
                                   context_usable=usable) from exc
        torch.cuda.synchronize(device)
        #: warmup + capture (ms), without the host-work check, which is ``host_work_check_ms`` (ms)
        self.capture_ms = (time.perf_counter() - start) * 1e3 - self.host_work_check_ms
        self._ptrs = self._data_ptrs()

    def _run(self):
        return self._forward(self._model, self._input_ids, self._attention_mask)

    def _check_host_work(self, model, device, max_positions: int, eager_sdpa_dispatch: bool) -> None:
        """NotGraphableError if one forward on the capture's path does host work; CaptureError if it raises."""
        try:
            found = capture_path_host_work(model, self._run, device, max_positions=max_positions,
                                           eager_sdpa_dispatch=eager_sdpa_dispatch, constants=self._constants)
        except NotGraphableError:
            raise
        except Exception as exc:
            raise CaptureError(f"the forward failed on the capture's code path before the capture: "
                               f"{root_cause(exc)}", context_usable=True) from exc
        if found:
            raise NotGraphableError(f"{type(model).__name__} does host work in its forward that a CUDA graph "
                                    f"capture forbids: {found}")

    def _data_ptrs(self) -> tuple:
        return tuple(t.data_ptr() if t is not None else 0
                     for t in (self._input_ids, self._attention_mask, self._output))

    # read-only: assigning a static buffer raises AttributeError
    static_input_ids = property(lambda self: self._input_ids, doc="``[batch, seq_len]`` int64.")
    static_attention_mask = property(lambda self: self._attention_mask,
                                     doc="``[batch, seq_len]`` int64, or None when captured without a mask.")
    static_output = property(lambda self: self._output, doc="Written by every replay (logits or last_hidden_state).")
    graph = property(lambda self: self._graph, doc="The captured ``torch.cuda.CUDAGraph``.")

    def _check_input(self, name: str, value, static) -> None:
        if static is None:
            raise ShapeMismatchError(f"{name} was given but this graph was captured without it: "
                                     f"construct GraphedForward(..., with_attention_mask=True)")
        if tuple(value.shape) != tuple(static.shape) or value.dtype != static.dtype:
            raise ShapeMismatchError(f"{name} is {list(value.shape)} {value.dtype} but the graph was captured for "
                                     f"{list(static.shape)} {static.dtype}: pad to that shape "
                                     "(cudagraph_bench.capture.buckets) or capture another graph")

    def __call__(self, input_ids, attention_mask=None):
        """Copy ``input_ids [batch, seq_len]`` int64 (and ``attention_mask``; none: all ones) in and replay; returns the
        static output. Raises ShapeMismatchError for a shape or dtype unlike the captured buffer's, or a mask to a graph
        without one; StaticBufferError when ``check_data_ptrs`` finds a re-pointed buffer; RuntimeError after
        :meth:`close`."""
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

    def close(self) -> None:
        """Drop the graph and its buffers so its pool can be released (then ``torch.cuda.empty_cache()``)."""
        self._graph = self._output = self._input_ids = self._attention_mask = self._constants = None
