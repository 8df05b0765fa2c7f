"""The self-test's ``eager-layer`` fault: the forward graph with its output layer run eagerly after each replay, outside
the graph. Such a graph is correct and fast, so only the replay proof can catch it."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from unittest import mock


@dataclass(frozen=True)
class OutputLayer:
    """``name``, ``module``, output ``shape``/``dtype``/``device``, ``tuple_len`` (0: the tensor; n: an n-tuple)."""

    name: str
    module: object
    shape: tuple
    dtype: object
    device: object
    tuple_len: int = 0


def _first_tensor(output):
    import torch

    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    return None


def output_layer(model, input_ids, forward=None) -> OutputLayer:
    """The last block or leaf module whose output is the forward's output tensor itself, found by one hooked eager
    forward of ``input_ids``. ValueError when none returns it (the model post-processes it)."""
    import torch
    from torch import nn

    from cudagraph_bench.models.presets import model_forward

    blocks = {id(m) for lst in model.modules() if isinstance(lst, nn.ModuleList) for m in lst}
    finished = []

    def hook(module, args, output, name):
        tensor = _first_tensor(output)
        if tensor is not None:
            finished.append((name, module, tensor.data_ptr(), tuple(tensor.shape), tensor.dtype, tensor.device,
                             0 if isinstance(output, torch.Tensor) else len(output)))

    handles = [m.register_forward_hook(lambda mod, a, out, name=n: hook(mod, a, out, name))
               for n, m in model.named_modules() if n and (id(m) in blocks or next(m.children(), None) is None)]
    try:
        with torch.inference_mode():
            out = (forward or model_forward)(model, input_ids)
            for name, module, ptr, shape, dtype, device, n in reversed(finished):
                if ptr == out.data_ptr() and shape == tuple(out.shape) and dtype == out.dtype:
                    return OutputLayer(name, module, shape, dtype, device, n)
    finally:
        for h in handles:
            h.remove()
    raise ValueError(f"{type(model).__name__}: no layer returns the forward's output tensor (it is post-processed "
                     "after its last layer): the eager-layer fault cannot keep the outputs correct")


class SkippedLayer:
    """``layer`` skipped inside :meth:`skipped`: a call keeps its arguments and returns ``placeholder`` (an empty tensor
    of its output's shape); :meth:`run` runs the real layer and copies into ``placeholder``."""

    def __init__(self, layer: OutputLayer):
        self.layer = layer
        self.placeholder = None
        self._args, self._kwargs = (), {}

    @contextlib.contextmanager
    def skipped(self):
        import torch

        layer = self.layer

        def keep(*args, **kwargs):
            self._args, self._kwargs = args, kwargs
            self.placeholder = torch.empty(layer.shape, dtype=layer.dtype, device=layer.device)
            return (self.placeholder, *(None,) * (layer.tuple_len - 1)) if layer.tuple_len else self.placeholder

        with mock.patch.object(layer.module, "forward", keep):    # restores an instance's own forward, or deletes
            yield self

    def run(self):
        import torch

        if self.placeholder is None:
            raise RuntimeError("the layer was never skipped: nothing to run")
        with torch.inference_mode():
            self.placeholder.copy_(_first_tensor(self.layer.module(*self._args, **self._kwargs)))
        return self.placeholder


class EagerLayerGraph:
    """The forward graph at ``seq_len`` with its output layer run eagerly after each replay. ValueError: no output
    layer, or the captured output is not the skipped layer's; else what GraphedForward raises."""

    def __init__(self, model, seq_len: int, *, warmup_iters: int = 3):
        import torch

        from cudagraph_bench.capture.graphed import GraphedForward
        from cudagraph_bench.models.presets import model_forward, random_input_ids

        ids = random_input_ids(model, seq_len, device=next(model.parameters()).device)
        layer = output_layer(model, ids)
        self.layer_name = layer.name
        self._skip = SkippedLayer(layer)

        def forward(m, input_ids, attention_mask=None):
            if not torch.cuda.is_current_stream_capturing():
                return model_forward(m, input_ids, attention_mask)
            with self._skip.skipped():
                return model_forward(m, input_ids, attention_mask)

        self._graph = GraphedForward(model, seq_len, warmup_iters=warmup_iters, forward=forward)
        self.capture_ms = self._graph.capture_ms
        if self._graph.static_output.data_ptr() != self._skip.placeholder.data_ptr():
            self._graph.close()
            raise ValueError(f"the captured forward's output is not {layer.name}'s: the eager-layer fault cannot keep "
                             "the outputs correct")

    @property
    def static_output(self):
        return self._graph.static_output

    def __call__(self, input_ids):
        self._graph(input_ids)
        return self._skip.run()

    def close(self) -> None:
        if self._graph is not None:
            self._graph.close()
            self._graph = None
        self._skip = None
