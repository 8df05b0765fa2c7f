"""The peer of the compiled graphed decode: HF ``generate`` with ``cache_implementation = "static"`` and
``model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)``, as transformers' guide "LLM
inference optimization" sets it up (``generate`` on CUDA also compiles ``model.__call__`` for a static cache)."""

from __future__ import annotations

from cudagraph_bench.capture.graphed import Closing

#: The guide's torch.compile settings of the forward.
GUIDE_COMPILE_MODE = "reduce-overhead"
GUIDE_FULLGRAPH = True


class StaticCompiledGenerate(Closing):
    """HF ``generate(do_sample=False)`` with a static cache and ``model.forward`` compiled as the guide does, greedy at
    batch 1. Changes ``model`` until :meth:`close`; calls ``torch._dynamo.reset()`` on construction and close: one
    compiled model at a time. ``backend`` other than ``"inductor"``: ``mode`` is not passed."""

    def __init__(self, model, *, mode: str = GUIDE_COMPILE_MODE, fullgraph: bool = GUIDE_FULLGRAPH,
                 backend: str = "inductor"):
        import torch

        self.model, self.mode, self.compile_ms = model, mode, None
        self._saved = dict(vars(model))     # the instance attributes, to put back exactly
        self._saved_cache_implementation = model.generation_config.cache_implementation
        torch._dynamo.reset()
        options = {"mode": mode} if backend == "inductor" else {}
        model.generation_config.cache_implementation = "static"
        model.forward = torch.compile(model.forward, backend=backend, fullgraph=fullgraph, **options)
        self._open = True

    def generate(self, input_ids, max_new_tokens: int, *, return_logits: bool = False):
        """``max_new_tokens`` greedy tokens after ``input_ids [1, L]`` int64 (no EOS stop): ``[1, max_new_tokens]``
        int64; with ``return_logits``, ``(tokens, logits)``, logits a tuple of ``[1, vocab]``."""
        import torch

        if not self._open:
            raise RuntimeError("this StaticCompiledGenerate was closed; build a new one")
        extra = {"return_dict_in_generate": True, "output_logits": True} if return_logits else {}
        with torch.inference_mode():
            out = self.model.generate(input_ids, attention_mask=torch.ones_like(input_ids), do_sample=False,
                                      max_new_tokens=max_new_tokens, eos_token_id=None, pad_token_id=0, **extra)
        length = input_ids.shape[1]
        return (out.sequences[:, length:], out.logits) if return_logits else out[:, length:]

    def warm(self, input_ids, max_new_tokens: int, *, timeout_s: float | None = None) -> float:
        """Run requests until their timing is stable; returns and sets ``compile_ms`` (wall ms beyond steady state).
        CompileTimeout past ``timeout_s`` wall seconds (None or 0: no limit)."""
        from cudagraph_bench.capture.compiling import device_sync, time_limit, warm_until_stable

        with time_limit(timeout_s, f"generate with a static cache and torch.compile(mode={self.mode!r})",
                        "raise --compile-timeout-s (0: no limit)"):
            self.compile_ms, _ = warm_until_stable(lambda: self.generate(input_ids, max_new_tokens),
                                                   device_sync(input_ids.device), min_calls=2)
        return self.compile_ms

    def close(self) -> None:
        """Put the model back and reset dynamo. Idempotent."""
        if not self._open:
            return
        import torch

        vars(self.model).clear()
        vars(self.model).update(self._saved)
        self.model.generation_config.cache_implementation = self._saved_cache_implementation
        self._open = False
        torch._dynamo.reset()
