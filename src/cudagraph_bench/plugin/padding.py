"""Padded and bucketed graphs shared by a model's prompt lengths: captured by the first case of a model, dtype and
variant, replayed by the others, as a server captures its buckets once."""

from __future__ import annotations

from typing import Callable


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
