"""The session's model cache: each model built once per dtype, the least recently used dropped when the weights pass a
share of GPU memory (so 7B presets fit one after another)."""

from __future__ import annotations

from typing import Callable

#: Largest share of GPU memory that the cached models may hold before the least recently used is dropped.
MODEL_CACHE_SHARE = 0.3


class ModelCache:
    """Models by ``(name, dtype)`` on ``device``, all with ``attn_implementation`` (None: their own). ``on_evict`` runs
    before an evicted model is dropped (to close its graphs), ``release`` after."""

    def __init__(self, device: str = "cuda", *, on_evict: Callable[[tuple[str, str]], None] | None = None,
                 release: Callable[..., None] | None = None, attn_implementation: str | None = None):
        self.device, self.attn_implementation = device, attn_implementation
        self._on_evict, self._release = on_evict, release
        self._models: dict[tuple[str, str], object] = {}

    def get(self, name: str, dtype: str):
        """Built once; raises what building it raises."""
        from cudagraph_bench.models.presets import load_model

        key = (name, dtype)
        if key not in self._models:
            self._evict_for(name)
            self._models[key] = load_model(name, dtype, self.device, attn_implementation=self.attn_implementation)
        self._models[key] = self._models.pop(key)   # most recently used last
        return self._models[key]

    def position_limit(self, name: str, bound=None) -> int:
        """Position limit (tokens) from a built model of ``name`` (any dtype) or its config, else ``bound`` (or a
        callable giving it). UsageError when neither records one."""
        from cudagraph_bench.models.positions import position_limit
        from cudagraph_bench.models.presets import model_position_limit

        built = next((m for (n, _), m in self._models.items() if n == name), None)
        return position_limit(built.config, bound) if built is not None else model_position_limit(name, bound=bound)

    def _evict_for(self, name: str) -> None:
        """Drop least recently used models (``name``'s other dtypes last) while the weights exceed the share."""
        if self.device != "cuda" or not self._models:
            return
        import torch

        total = torch.cuda.get_device_properties(0).total_memory

        def cached_bytes():
            return sum(p.numel() * p.element_size() for m in self._models.values() for p in m.parameters())

        while self._models and cached_bytes() > MODEL_CACHE_SHARE * total:
            victim = next((k for k in self._models if k[0] != name), next(iter(self._models)))
            if self._on_evict is not None:
                self._on_evict(victim)
            del self._models[victim]
            if self._release is not None:
                self._release(everything=True)

    def clear(self) -> None:
        """Drop every model."""
        self._models.clear()
