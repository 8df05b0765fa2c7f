"""Known faults planted into the real pipeline for ``cudagraph-bench selftest`` (docs/gate.md, "calibrate and
selftest"): a gate is worth the smallest regression it catches without crying wolf. A faulted case records
``extra_info["planted_fault"]``, so ``baseline`` refuses its run."""

from __future__ import annotations

from dataclasses import dataclass

from cudagraph_bench.variants import DECODE, FORWARD, Rule, gated, variant

#: Each fault's kind -> whether a variant (``row`` of :mod:`cudagraph_bench.variants`) of ``suite`` takes it.
_PLANTED_INTO = {
    "delay": lambda suite, row: row in gated(FORWARD),
    "stale-input": lambda suite, row: suite == FORWARD and row.rule is Rule.EXACT and row.captured,
    "wrong-decode": lambda suite, row: suite == DECODE and row.rule is Rule.EXACT and row.captured,
    "stale-mask": lambda suite, row: suite == FORWARD and bool(row.lengths),
    "stale-position": lambda suite, row: suite == DECODE and row.captured,
    "eager-layer": lambda suite, row: suite == FORWARD and row.rule is Rule.EXACT and row.captured,
    "skip-inductor-graphs": lambda suite, row: suite == FORWARD and row.compiled and row.captured,
}
KINDS = tuple(_PLANTED_INTO)


@dataclass(frozen=True)
class Fault:
    """``kind`` (:data:`KINDS`) and, for ``delay``, ``pct`` (percent of the case's own time)."""

    kind: str
    pct: float | None = None

    @property
    def label(self) -> str:
        return f"delay:{self.pct:g}" if self.kind == "delay" else self.kind

    def applies_to(self, suite: str, name: str) -> bool:
        """Whether this fault is planted into a case of variant ``name`` in ``suite``."""
        return _PLANTED_INTO[self.kind](suite, variant(suite, name))


def parse_fault(text: str) -> Fault:
    """``"delay:5"`` -> ``Fault("delay", 5.0)``; ValueError: another kind, or a delay outside (0, 1000]%."""
    kind, _, arg = text.strip().partition(":")
    if kind not in KINDS:
        raise ValueError(f"unknown fault {text!r}: use delay:PCT (e.g. delay:5), {', '.join(KINDS[1:-1])} or "
                         f"{KINDS[-1]}")
    if kind != "delay":
        if arg:
            raise ValueError(f"fault {kind} takes no argument (got {text!r})")
        return Fault(kind)
    try:
        pct = float(arg)
    except ValueError:
        pct = float("nan")
    if not 0 < pct <= 1000:
        raise ValueError(f"fault {text!r}: give delay:PCT with PCT in (0, 1000], e.g. delay:5 for +5% GPU time")
    return Fault(kind, pct)


#: How far (percentage points) the measured delay of a planted ``delay:PCT`` may land from ``PCT``.
PLANT_TOLERANCE_POINTS = 1.0
#: Captures of the delayed graph at most, each with its delay corrected by what the last one measured.
PLANT_ATTEMPTS = 3


def capture_delayed(model, seq_len: int, pct: float, *, warmup_iters: int = 3):
    """The forward graph captured with a ``torch.cuda._sleep`` of ``pct`` % of its own device time after the forward,
    recaptured with the miss corrected while more than :data:`PLANT_TOLERANCE_POINTS` off (at most
    :data:`PLANT_ATTEMPTS` times). Returns ``(graph, planted_* fields)``; ``planted_on_target``: within the tolerance
    (the self-test counts only such cases)."""
    import torch

    from cudagraph_bench.capture.graphed import GraphedForward
    from cudagraph_bench.measure.timing import back_to_back_ms, sleep_cycles_per_ms
    from cudagraph_bench.models.presets import model_forward, random_input_ids

    ids = random_input_ids(model, seq_len, device=next(model.parameters()).device)
    plain = GraphedForward(model, seq_len, warmup_iters=warmup_iters)
    try:
        base_ms = back_to_back_ms(lambda: plain(ids)).median_ms
    finally:
        plain.close()
    target_ms = base_ms * pct / 100.0
    delay_ms, graph, measured_pct = target_ms, None, float("nan")
    for attempts in range(1, PLANT_ATTEMPTS + 1):
        if graph is not None:
            graph.close()
        cycles = max(1, int(delay_ms * sleep_cycles_per_ms()))

        def delayed(m, input_ids, attention_mask=None, cycles=cycles):
            out = model_forward(m, input_ids, attention_mask)
            torch.cuda._sleep(cycles)
            return out

        graph = GraphedForward(model, seq_len, warmup_iters=warmup_iters, forward=delayed)
        delayed_ms = back_to_back_ms(lambda: graph(ids)).median_ms
        measured_pct = 100.0 * (delayed_ms - base_ms) / base_ms
        if abs(measured_pct - pct) <= PLANT_TOLERANCE_POINTS:
            break
        delay_ms = max(0.0, delay_ms + target_ms - (delayed_ms - base_ms))
    return graph, {"planted_fault": f"delay:{pct:g}", "planted_pct": pct, "planted_delay_ms": delay_ms,
                   "planted_base_ms": base_ms, "planted_measured_pct": measured_pct, "planted_attempts": attempts,
                   "planted_on_target": abs(measured_pct - pct) <= PLANT_TOLERANCE_POINTS}


class _Faulty:
    """A built variant or decoder with a fault in its call; every other attribute is the built one's."""

    def __init__(self, built):
        self._built = built

    def __getattr__(self, name):
        return getattr(self._built, name)


class StaleInputGraph(_Faulty):
    """Replays without copying the new input into the static buffer."""

    def __call__(self, input_ids):
        graph = self._built._graph                 # the GraphedForward the variant replays
        graph.graph.replay()
        return graph.static_output


class StaleMaskGraphs(_Faulty):
    """A padded/bucketed variant whose graphs copy the ids every call but the mask only on first replay."""

    def __init__(self, built):
        super().__init__(built)
        self._masked = set()

    def __call__(self, input_ids):
        import torch

        from cudagraph_bench.capture.buckets import pad_prompt

        graphs = self._built._graphs                # the BucketedGraphs the variant replays
        length = input_ids.shape[1]
        bucket = graphs.bucket_for(length)
        ids, mask = pad_prompt(input_ids, bucket, graphs.pad_token_id)
        graph = graphs.graphs[bucket]
        with torch.inference_mode():
            graph.static_input_ids.copy_(ids)
            if bucket not in self._masked:
                graph.static_attention_mask.copy_(mask)
                self._masked.add(bucket)
            graph.graph.replay()
        return graph.static_output[:, :length]


class SkippedGraph(_Faulty):
    """A ``compile+graph`` variant that runs the compiled forward and never replays, as when inductor skips graphs."""

    def __call__(self, input_ids):
        import torch

        graphed = self._built._graph              # the GraphedForward around the compiled forward
        with torch.inference_mode():
            graphed.static_input_ids.copy_(input_ids)
            return graphed._run()                 # not capturing: the compiled forward itself


class PlantedVariant:
    """A planted fault checked and timed like any variant; ``fields`` (and ``capture_ms``) are recorded;
    ``check_range``, ``pad_to``, ``compile_ms`` and ``notes``: the planted object's, where it has them."""

    def __init__(self, name: str, seq_len: int, planted, fields: dict, capture_ms: float | None):
        self.name, self.seq_len, self._planted, self.fields = name, seq_len, planted, fields
        self.capture_ms, self.check_range = capture_ms, getattr(planted, "check_range", None)
        self.notes: list[str] = getattr(planted, "notes", [])
        self.compile_ms, self.pad_to = getattr(planted, "compile_ms", None), getattr(planted, "pad_to", None)

    @property
    def static_output(self):
        return self._planted.static_output

    def __call__(self, input_ids):
        return self._planted(input_ids)

    def check_buffers(self, on: bool) -> None:
        check = getattr(self._planted, "check_buffers", None)
        if check is not None:
            check(on)

    def record(self) -> dict:
        return {**({"capture_ms": self.capture_ms} if self.capture_ms is not None else {}), **self.fields}

    def close(self) -> None:
        self._planted.close()


def plant_forward(fault: Fault, model, spec):
    """The planted variant of a forward case (``spec``: its :class:`~cudagraph_bench.measure.case.CaseSpec`)."""
    if fault.kind == "delay":
        graph, fields = capture_delayed(model, spec.seq_len, fault.pct)
        return PlantedVariant(spec.variant, spec.seq_len, graph, fields, graph.capture_ms)
    if fault.kind == "eager-layer":
        from cudagraph_bench.selftest.eager_layer import EagerLayerGraph

        graph = EagerLayerGraph(model, spec.seq_len)
        return PlantedVariant(spec.variant, spec.seq_len, graph, {"planted_fault": "eager-layer",
                                                                  "eager_layer": graph.layer_name}, graph.capture_ms)
    from cudagraph_bench.measure.forward_variants import build_variant

    built = build_variant(model, spec.variant, spec.seq_len, pad_to=spec.pad_to, dtype=spec.dtype, buckets=spec.buckets,
                          compile_mode=spec.compile_mode)
    faulty = {"stale-mask": StaleMaskGraphs, "skip-inductor-graphs": SkippedGraph}.get(fault.kind, StaleInputGraph)
    return PlantedVariant(spec.variant, spec.seq_len, faulty(built), {**built.record(), "planted_fault": fault.kind},
                          built.capture_ms)


class WrongDecoder(_Faulty):
    """A graphed decoder whose requests give other tokens."""

    fields = {"planted_fault": "wrong-decode"}

    def __init__(self, decoder, vocab_size: int):
        super().__init__(decoder)
        self._vocab = vocab_size

    def generate(self, input_ids, max_new_tokens: int, *, return_logits: bool = False):
        """The decoder's tokens ``[1, n]`` (and logits) with the last token changed to the next id (mod the vocab)."""
        out = self._built.generate(input_ids, max_new_tokens, return_logits=return_logits)
        tokens = (out[0] if return_logits else out).clone()
        tokens[0, -1] = (tokens[0, -1] + 1) % self._vocab
        return (tokens, out[1]) if return_logits else tokens


class StalePositionDecoder(_Faulty):
    """A graphed decoder that never refreshes the static position between requests."""

    fields = {"planted_fault": "stale-position"}

    def generate(self, input_ids, max_new_tokens: int, *, return_logits: bool = False):
        decoder = self._built
        stale = decoder._pos.clone()
        steps = decoder._decode

        def decode(n, kept):
            decoder._pos.copy_(stale)               # undo the request's refresh before the decode steps
            return steps(n, kept)

        decoder._decode = decode
        try:
            return decoder.generate(input_ids, max_new_tokens, return_logits=return_logits)
        finally:
            del decoder._decode


def plant_decode(fault: Fault, model):
    """``plant(decoder) -> decoder`` planting ``wrong-decode`` or ``stale-position`` into a decoder of ``model``."""
    if fault.kind == "stale-position":
        return StalePositionDecoder
    from cudagraph_bench.models.presets import vocab_size

    return lambda decoder: WrongDecoder(decoder, vocab_size(model))
