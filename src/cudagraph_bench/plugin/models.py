"""The session's one model cache: each model built once per dtype, the least recently used dropped when the
cached weights pass a share of the GPU's memory (so that 7B presets fit one after another in one session)."""

from __future__ import annotations

from typing import Callable

#: Largest share of GPU memory that the cached models may hold before the least recently used is dropped.
MODEL_CACHE_SHARE = 0.3


class ModelCache:
    """Models by ``(name, dtype)`` on ``device``, most recently used last.

    Args:
        device: ``"cuda"`` (cuda:0) or ``"cpu"``.
        on_evict: called with the evicted ``(name, dtype)`` before its model is dropped (e.g. to close graphs
            that hold its weights), then the caller's memory is released by ``release``.
        release: frees what an evicted model left (:func:`cudagraph_bench.plugin.memory.release`).
        share: :data:`MODEL_CACHE_SHARE`.
    """

    def __init__(self, device: str = "cuda", *, on_evict: Callable[[tuple[str, str]], None] | None = None,
                 release: Callable[..., None] | None = None, share: float = MODEL_CACHE_SHARE):
        self.device, self.share = device, share
        self._on_evict, self._release = on_evict, release
        self._models: dict[tuple[str, str], object] = {}

    def get(self, name: str, dtype: str):
        """The model ``name`` (a preset or a ``save_pretrained`` folder) in ``dtype``, built once
        (:func:`~cudagraph_bench.models.presets.load_model`). Raises what building it raises."""
        from cudagraph_bench.models.presets import load_model

        key = (name, dtype)
        if key not in self._models:
            self._evict_for(name)
            self._models[key] = load_model(name, dtype, self.device)
        self._models[key] = self._models.pop(key)   # most recently used last
        return self._models[key]

    def built(self, name: str):
        """A model of ``name`` already built (any dtype), or None: what its position limit can be read from."""
        return next((m for (n, _), m in self._models.items() if n == name), None)

    def _evict_for(self, name: str) -> None:
        """Drop the least recently used models (never ``name``'s other dtypes first) while the cached weights
        take more than :attr:`share` of the GPU's memory."""
        if self.device != "cuda" or not self._models:
            return
        import torch

        total = torch.cuda.get_device_properties(0).total_memory

        def cached_bytes():
            return sum(p.numel() * p.element_size() for m in self._models.values() for p in m.parameters())

        while self._models and cached_bytes() > self.share * total:
            victim = next((k for k in self._models if k[0] != name), next(iter(self._models)))
            if self._on_evict is not None:
                self._on_evict(victim)
            del self._models[victim]
            if self._release is not None:
                self._release(everything=True)

    def clear(self) -> None:
        """Drop every model."""
        self._models.clear()


def position_limit(name: str, cache: ModelCache | None = None) -> int:
    """The position limit (tokens) of model ``name``: of its built model when the cache holds one, else read
    from its config without building it (:func:`cudagraph_bench.models.presets.max_positions`, the one rule)."""
    from types import SimpleNamespace

    from cudagraph_bench.models.presets import PRESETS, directory_config, max_positions, preset_config

    built = cache.built(name) if cache is not None else None
    if built is not None:
        return max_positions(built)
    # a preset name wins over a folder of that name, as in load_model
    config = preset_config(name) if name in PRESETS else directory_config(name)
    return max_positions(SimpleNamespace(config=config))
