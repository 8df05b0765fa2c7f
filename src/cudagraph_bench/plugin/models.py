"""The session's model cache: each model built once per dtype, the least recently used dropped when the weights pass a
share of GPU memory (so 7B presets fit one after another); and the padded and bucketed graphs shared by a model's prompt
lengths: captured by the first case of a model, dtype and variant, replayed by the others, as a server captures its
buckets once."""

from __future__ import annotations

from typing import Callable

from cudagraph_bench.models.positions import position_limit
from cudagraph_bench.models.presets import load_model, model_position_limit
from cudagraph_bench.plugin.memory import release

#: Largest share of GPU memory that the cached models may hold before the least recently used is dropped.
MODEL_CACHE_SHARE = 0.3


class ModelCache:
    """Models by ``(name, dtype)`` on ``device``, all with ``attn_implementation`` (None: their own). An evicted model's
    graphs held by ``padding`` are closed before it is dropped, and the memory released after."""

    def __init__(self, device: str = "cuda", *, padding: PaddingGraphs | None = None,
                 attn_implementation: str | None = None):
        self.device, self.attn_implementation, self._padding = device, attn_implementation, padding
        self._models: dict[tuple[str, str], object] = {}

    def get(self, name: str, dtype: str):
        """Built once; raises what building it raises."""
        key = (name, dtype)
        if key not in self._models:
            self._evict_for(name)
            self._models[key] = load_model(name, dtype, self.device, attn_implementation=self.attn_implementation)
        self._models[key] = self._models.pop(key)   # most recently used last
        return self._models[key]

    def position_limit(self, name: str, bound=None) -> int:
        """Position limit (tokens) from a built model of ``name`` (any dtype) or its config, else ``bound`` (or a
        callable giving it). UsageError when neither records one."""
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
            if self._padding is not None and self._padding.holds(*victim):
                self._padding.drop()
            del self._models[victim]
            release(everything=True)

    def clear(self) -> None:
        """Drop every model."""
        self._models.clear()


class PaddingGraphs:
    """The bucketed graphs of at most one model and dtype."""

    def __init__(self, release: Callable[..., None]):
        self._release = release
        #: ``(model, dtype, variant, lengths)`` -> the graphs its cases replay
        self._graphs: dict = {}

    def variant_for(self, spec, model):
        """The padded/bucketed variant of ``spec``, replaying (not owning) graphs shared with its model, dtype and
        lengths; another model's graphs are closed first. None when not padded. CaseFailed (phase ``build``) when the
        capture or the variant raised."""
        from cudagraph_bench.measure.case import CaseFailed, describe_exception
        from cudagraph_bench.measure.forward_variants import PaddedVariant, build_variant, padding_lengths

        if any(k[:2] != (spec.model, spec.dtype) for k in self._graphs):
            self.drop()
        if not spec.variant_spec.lengths:
            return None
        lengths = padding_lengths(spec.variant, spec.pad_to, spec.buckets)
        key = (spec.model, spec.dtype, spec.variant, lengths)
        try:
            if key not in self._graphs:
                self._graphs[key] = PaddedVariant.graphs_for(model, lengths, spec.variant, spec.seq_len)
            return build_variant(model, spec.variant, spec.seq_len, pad_to=spec.pad_to, dtype=spec.dtype,
                                 buckets=spec.buckets, graphs=self._graphs[key])
        except Exception as exc:  # a variant's failure is its case's result
            raise CaseFailed("build", describe_exception(exc), exc) from exc

    def holds(self, model: str, dtype: str) -> bool:
        """They keep the model's weights in use."""
        return any(k[:2] == (model, dtype) for k in self._graphs)

    def drop(self) -> None:
        """Close the held graphs and free their pools."""
        if self._graphs:
            for graphs in self._graphs.values():
                graphs.close()
            self._graphs.clear()
            self._release()
