"""The padded and bucketed graphs that a model's prompt lengths share: captured by the first case of a model,
dtype and variant, replayed by its other prompt lengths, as a server captures its buckets once."""

from __future__ import annotations

from typing import Callable


class PaddingGraphs:
    """Holds the :class:`~cudagraph_bench.capture.buckets.BucketedGraphs` of at most one model and dtype;
    ``release`` frees what dropped graphs left (:func:`cudagraph_bench.plugin.memory.release`)."""

    def __init__(self, release: Callable[..., None]):
        self._release = release
        #: ``(model, dtype, variant, lengths)`` -> the graphs its cases replay
        self._graphs: dict = {}

    def variant_for(self, spec, model):
        """The ``padded`` / ``bucketed`` variant of ``spec`` (a :class:`~cudagraph_bench.measure.case.CaseSpec`),
        not owning the graphs of its model, dtype and lengths it replays (captured by the first such case); the
        graphs of another model or dtype are closed first. None for a variant that is not padded.

        Raises:
            CaseFailed: phase ``build``: the capture or the variant raised (e.g. a
                :class:`~cudagraph_bench.errors.RequestTooLongError` for a prompt above every length)."""
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
        """Whether graphs of this model and dtype are held (they keep its weights' memory in use)."""
        return any(k[:2] == (model, dtype) for k in self._graphs)

    def drop(self) -> None:
        """Close the held graphs and free their pools."""
        if self._graphs:
            for graphs in self._graphs.values():
                graphs.close()
            self._graphs.clear()
            self._release()
