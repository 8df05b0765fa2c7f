"""Forward variants on CPU: the interface, the correctness check (NaN poisoning, the fp64 rule), a case
prepared for timing by the pipeline (:func:`~cudagraph_bench.measure.case.prepare_case`), and the padded /
bucketed graphs a session shares between prompt lengths (:class:`~cudagraph_bench.plugin.models.PaddingGraphs`)."""

import dataclasses

import pytest
import torch

from cudagraph_bench import variants as registry
from cudagraph_bench.capture import compiling
from cudagraph_bench.measure import case as C
from cudagraph_bench.measure import forward_variants as V
from cudagraph_bench.measure.correctness import fp64_reference_model
from cudagraph_bench.errors import CudaUnavailableError, UnknownModelError, UsageError
from cudagraph_bench.models.presets import load_model, model_forward

TINY = {"n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 128, "bos_token_id": 0, "eos_token_id": 0}


@pytest.fixture(scope="module")
def tiny():
    return load_model("gpt2", "float32", "cpu", overrides=TINY)


def spec(**kw):
    """A CPU case checked on two inputs."""
    base = dict(model="gpt2", dtype="float32", seq_len=8, variant="eager", rounds=4, warmup_rounds=1,
                check_inputs=2, device="cpu", precision_pct=0.0)
    return C.CaseSpec(**{**base, **kw})


# ---------------------------------------------------------------------------- interface


def test_build_eager_matches_model_forward_with_shape(tiny):
    ids = torch.randint(0, 128, (1, 8))
    with V.build_variant(tiny, "eager", 8, dtype="float32") as v:
        out = v(ids)
        assert out.shape == (1, 8, 128)
        assert v.compile_ms is None and v.capture_ms is None and v.static_output is None
        assert v.dtype == "float32"
        with torch.inference_mode():
            torch.testing.assert_close(out, model_forward(tiny, ids), rtol=0, atol=0)


def test_build_rejects_unknown_variant_and_cpu_graph_variants(tiny):
    with pytest.raises(UsageError, match="unknown forward variant 'graphs'"):
        V.build_variant(tiny, "graphs", 8)
    for name in ("graph", "padded", "bucketed", "compile", "compile+graph"):
        with pytest.raises(CudaUnavailableError, match="needs the model on a CUDA GPU"):
            V.build_variant(tiny, name, 8)


def test_describe_exception_keeps_type_and_first_line():
    exc = RuntimeError("first line\nsecond line")
    assert C.describe_exception(exc) == "RuntimeError: first line"
    assert C.describe_exception(ValueError("x" * 500), limit=50).endswith("...")
    assert len(C.describe_exception(ValueError("x" * 500), limit=50)) == 50


class FakeClock:
    """perf_counter that advances by the next scripted duration (ms) on every call() of the test."""

    def __init__(self, durations_ms):
        self.now = 0.0
        self.durations = list(durations_ms)
        self.calls = 0

    def perf_counter(self):
        return self.now

    def call(self):
        self.now += self.durations[self.calls] / 1e3
        self.calls += 1


def test_warm_until_stable_stops_when_two_calls_agree(monkeypatch):
    clock = FakeClock([1000.0, 50.0, 1.4, 1.4, 1.4])
    monkeypatch.setattr(compiling, "time", clock)
    excess, times = V.warm_until_stable(clock.call, lambda: None, min_calls=3)
    assert times == pytest.approx([1000.0, 50.0, 1.4, 1.4])
    assert excess == pytest.approx(1000.0 + 50.0 + 1.4 + 1.4 - 4 * 1.4)


def test_warm_until_stable_honours_min_and_max_calls(monkeypatch):
    clock = FakeClock([5.0] * 10)
    monkeypatch.setattr(compiling, "time", clock)
    _, times = V.warm_until_stable(clock.call, lambda: None, min_calls=3)
    assert len(times) == 3
    clock = FakeClock([10.0, 1.0] * 10)
    monkeypatch.setattr(compiling, "time", clock)
    excess, times = V.warm_until_stable(clock.call, lambda: None, min_calls=2, max_calls=6)
    assert len(times) == 6
    assert excess == pytest.approx(33.0 - 6 * 1.0)


# ---------------------------------------------------------------------------- correctness check


class StaticFake(V.ForwardVariant):
    """A CPU stand-in for a graph: a static output buffer that __call__ may or may not write."""

    name = "graph"

    def __init__(self, model, seq_len, *, write=True, offset=0.0):
        super().__init__(seq_len)
        self.model, self.write, self.offset = model, write, offset
        with torch.inference_mode():
            self._out = model_forward(model, torch.zeros(1, seq_len, dtype=torch.int64)).clone()
        self.closed = False

    @property
    def static_output(self):
        return self._out

    def __call__(self, input_ids):
        if self.write:
            with torch.inference_mode():
                self._out.copy_(model_forward(self.model, input_ids) + self.offset)
        return self._out

    def close(self):
        self.closed = True


def test_check_passes_when_the_call_writes_the_static_output(tiny):
    out = C.check_against_eager(StaticFake(tiny, 8), tiny, spec(variant="graph"), torch.Generator().manual_seed(1))
    assert out == C.CheckOutcome(max_abs_diff=0.0, method="strict", passed=True)


def test_check_fails_when_the_static_output_is_not_written(tiny):
    out = C.check_against_eager(StaticFake(tiny, 8, write=False), tiny, spec(variant="graph"),
                                torch.Generator().manual_seed(1))
    assert not out.passed and "NaN-poisoned" in out.reason and out.max_abs_diff is None
    # a cross-kernel variant gets no fp64 second chance for NaN either
    out = C.check_against_eager(StaticFake(tiny, 8, write=False), tiny, spec(variant="compile"),
                                torch.Generator().manual_seed(1))
    assert not out.passed and "NaN-poisoned" in out.reason


def test_check_fails_beyond_the_float32_tolerance(tiny):
    out = C.check_against_eager(StaticFake(tiny, 8, offset=1e-3), tiny, spec(variant="graph"),
                                torch.Generator().manual_seed(1))
    assert not out.passed and out.method == "strict"
    assert out.reason.startswith("outputs differ from eager: AssertionError")
    assert out.max_abs_diff == pytest.approx(1e-3, rel=1e-3)
    # within atol 1e-5 it passes and reports the difference
    out = C.check_against_eager(StaticFake(tiny, 8, offset=2e-6), tiny, spec(variant="graph"),
                                torch.Generator().manual_seed(1))
    assert out.passed and 1e-6 < out.max_abs_diff < 1e-5


class Float64Fake(StaticFake):
    """A "variant that runs other kernels": returns the float64 forward rounded to float32, which is at
    least as close to float64 as eager but not bit-identical to eager."""

    def __init__(self, model, seq_len, *, offset=0.0):
        super().__init__(model, seq_len)
        self.model64, self.offset = fp64_reference_model(model), offset

    def __call__(self, input_ids):
        with torch.inference_mode():
            self._out.copy_(model_forward(self.model64, input_ids).float() + self.offset)
        return self._out


@pytest.fixture()
def exact_float32(monkeypatch):
    """Strict check with zero tolerance, so any difference in rounding fails it."""
    from cudagraph_bench.measure import correctness

    monkeypatch.setitem(correctness.TOLERANCES, "float32", {"atol": 0.0, "rtol": 0.0})


def test_cross_kernel_variant_outside_strict_tolerance_passes_the_fp64_check(tiny, exact_float32):
    out = C.check_against_eager(Float64Fake(tiny, 8), tiny, spec(variant="compile+graph"),
                                torch.Generator().manual_seed(1))
    assert out.passed and out.method == "fp64-rmse" and out.reason is None
    assert 0 < out.max_abs_diff < 1e-5        # rounding differences only
    assert out.fp64_rmse_ratio < 1.0          # float64 rounded to float32 is closer to float64 than eager


def test_graph_variant_gets_no_fp64_second_chance(tiny, exact_float32):
    out = C.check_against_eager(Float64Fake(tiny, 8), tiny, spec(variant="graph"), torch.Generator().manual_seed(1))
    assert not out.passed and out.method == "strict" and out.fp64_rmse_ratio is None


def test_cross_kernel_variant_farther_from_float64_than_eager_fails(tiny, exact_float32):
    out = C.check_against_eager(Float64Fake(tiny, 8, offset=1e-4), tiny, spec(variant="padded"),
                                torch.Generator().manual_seed(1))
    assert not out.passed and out.method == "fp64-rmse"
    assert out.fp64_rmse_ratio > 2.0
    assert "from float64 more than eager does" in out.reason and "RMSE" in out.reason


# ---------------------------------------------------------------------------- prepare_case


def test_prepared_eager_case_is_the_reference_and_cycles_its_timing_inputs(tiny):
    prepared = C.prepare_case(spec(), tiny)
    try:
        assert prepared.status == "ok" and prepared.check is None and prepared.failed_check is None
        assert prepared.info["check"] == "reference"
        outputs = [prepared.call().clone() for _ in range(2 * C.INPUT_POOL)]
        assert all(o.shape == (1, 8, 128) for o in outputs)
        assert all(torch.equal(outputs[i], outputs[i + C.INPUT_POOL]) for i in range(C.INPUT_POOL))  # a pool, cycled
        assert not torch.equal(outputs[0], outputs[1])                                              # of fresh inputs
        assert prepared.finish() == []
    finally:
        prepared.close()
    prepared.close()                                        # idempotent


def test_prepare_reports_a_build_failure_with_its_phase(tiny):
    with pytest.raises(C.CaseFailed) as failed:
        C.prepare_case(spec(variant="graph"), tiny)
    assert failed.value.phase == "build" and "CudaUnavailableError" in failed.value.reason
    assert isinstance(failed.value.cause, CudaUnavailableError)


def test_a_mismatch_is_prepared_for_timing_but_flagged(tiny):
    fake = StaticFake(tiny, 8, offset=1e-2)
    prepared = C.prepare_case(spec(variant="graph"), tiny, variant=fake)
    assert prepared.status == "mismatch" and prepared.info["correct"] is False
    assert prepared.info["status"] == "mismatch" and prepared.failed_check == prepared.info["reason"]
    assert prepared.info["reason"].startswith("outputs differ from eager")
    assert prepared.info["max_abs_diff"] == pytest.approx(1e-2, rel=1e-3)   # the fake adds 1e-2 to every logit
    prepared.call()
    prepared.close()
    assert fake.closed


class BufferCheckedGraph:
    """A CPU stand-in for a :class:`~cudagraph_bench.capture.graphed.GraphedForward`: records, at each replay,
    whether its static buffers' ``data_ptr()`` check was on."""

    check_data_ptrs = False

    def __init__(self, fake):
        self.fake, self.checked = fake, []
        self.static_output = fake.static_output

    def __call__(self, input_ids):
        self.checked.append(self.check_data_ptrs)
        return self.fake(input_ids)

    def close(self):
        self.fake.close()


@pytest.mark.parametrize("planted", [False, True])
def test_static_buffers_are_checked_on_every_checked_replay_and_not_while_timing(tiny, planted):
    """Also through a self-test fault wrapped around the graph (:class:`~cudagraph_bench.selftest.faults.PlantedVariant`)."""
    from cudagraph_bench.selftest.faults import PlantedVariant

    graph_backed = V.GraphVariant.__new__(V.GraphVariant)
    V.ForwardVariant.__init__(graph_backed, 8)
    graph_backed._graph = graph = BufferCheckedGraph(StaticFake(tiny, 8))
    variant = PlantedVariant("graph", 8, graph_backed, {"planted_fault": "delay:5"}, None) if planted else graph_backed
    prepared = C.prepare_case(spec(variant="graph"), tiny, variant=variant)
    assert prepared.status == "ok" and graph.checked == [True] * 2             # both check inputs: checked
    prepared.call()
    assert graph.checked[-1] is False                                         # timed calls: no per-replay check
    prepared.close()


def test_prepare_records_how_correctness_was_decided(tiny, exact_float32):
    prepared = C.prepare_case(spec(variant="padded"), tiny, variant=Float64Fake(tiny, 8))
    assert prepared.status == "ok" and prepared.info["check"] == "fp64-rmse"
    assert prepared.info["correct"] is True and prepared.info["fp64_rmse_ratio"] < 1.0
    prepared.close()


def test_an_exception_while_checked_is_a_check_failure_and_closes_the_variant(tiny):
    class Broken(StaticFake):
        def __call__(self, input_ids):
            raise RuntimeError("accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run")

    fake = Broken(tiny, 8)
    with pytest.raises(C.CaseFailed) as failed:
        C.prepare_case(spec(variant="compile"), tiny, variant=fake)
    assert failed.value.phase == "check" and "overwritten by a subsequent run" in failed.value.reason
    assert fake.closed


def test_the_model_cache_refuses_an_unknown_model_by_name():
    from cudagraph_bench.plugin.models import ModelCache

    with pytest.raises(UnknownModelError, match="no-such-model"):
        ModelCache("cpu").get("no-such-model", "float32")


def test_inductor_cudagraph_skip_reasons_are_collected():
    from torch._inductor.cudagraph_utils import log_cudagraph_skip_and_bump_counter

    before = V.compile_counters()["cudagraph_skips"]
    with compiling.SkipReasons() as reasons:
        log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to mutated inputs (1 instances)")
        log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to mutated inputs (1 instances)")
    log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to something after the block")
    assert reasons.text() == "skipping cudagraphs due to mutated inputs (1 instances)"
    assert V.compile_counters()["cudagraph_skips"] == before + 3
    assert compiling.SkipReasons().text() == "reason not logged"


# ---------------------------------------------------------------------------- padded / bucketed graphs reused


def test_padding_cases_of_one_model_replay_the_graphs_its_first_case_captured(monkeypatch, tiny):
    """The session captures the padded / bucketed graphs of a model and dtype once
    (:class:`~cudagraph_bench.plugin.models.PaddingGraphs`): the case of another prompt length replays them
    (recorded as ``graphs_reused``), a case's variant never closes them, the padded and the bucketed variant each
    have their own, and the first case of another model closes them."""
    from cudagraph_bench.capture.buckets import BucketCapture
    from cudagraph_bench.plugin.models import PaddingGraphs

    captured, closed = [], []

    class FakeGraphs:          # what PaddedVariant reads of BucketedGraphs, without CUDA
        def __init__(self, model, lengths, name, seq_len):
            self.buckets = V.PaddedVariant.graph_lengths(model, lengths, name, seq_len)
            self.captures = [BucketCapture(b, float(b), 0.0) for b in sorted(self.buckets, reverse=True)]
            self.served, self.graphs = 0, {}
            captured.append((name, self.buckets))

        def close(self):
            closed.append(self)

    monkeypatch.setattr(V.PaddedVariant, "graphs_for",
                        classmethod(lambda cls, model, lengths, name, seq_len, **kw: FakeGraphs(model, lengths, name,
                                                                                                 seq_len)))
    row = registry.variant
    monkeypatch.setattr(registry, "variant",       # a CPU model: build_variant's CUDA check is tested above
                        lambda suite, name: dataclasses.replace(row(suite, name), needs_cuda=False))
    released = []
    padding = PaddingGraphs(lambda **kw: released.append(len(closed)))
    buckets = (8, 16, 64)
    with pytest.raises(C.CaseFailed, match="build"):      # a prompt above every bucket: the case fails, uncaptured
        padding.variant_for(spec(variant="bucketed", seq_len=65, buckets=buckets), tiny)
    assert captured == [] and not padding.holds("gpt2", "float32")
    first = padding.variant_for(spec(variant="bucketed", seq_len=8, buckets=buckets), tiny)
    second = padding.variant_for(spec(variant="bucketed", seq_len=12, buckets=buckets), tiny)
    assert captured == [("bucketed", buckets)] and first._graphs is second._graphs
    assert (first.pad_to, second.pad_to) == (8, 16) and (first.capture_ms, second.capture_ms) == (8.0, 16.0)
    assert "graphs_reused" not in first.record() and second.record()["graphs_reused"] is True
    first.close()
    second.close()
    assert closed == [] and padding.holds("gpt2", "float32")   # the session owns them, not a case's variant
    padded = padding.variant_for(spec(variant="padded", seq_len=12, pad_to=64), tiny)
    assert captured[-1] == ("padded", (64,)) and padded.pad_to == 64 and len(captured) == 2
    with pytest.raises(C.CaseFailed, match="build"):      # a prompt above every bucket: no capture, the case fails
        padding.variant_for(spec(variant="bucketed", seq_len=65, buckets=buckets), tiny)
    assert padding.variant_for(spec(variant="eager"), tiny) is None and closed == []
    assert padding.variant_for(spec(model="distilgpt2", variant="eager"), tiny) is None
    assert len(closed) == 2 and not padding.holds("gpt2", "float32")   # another model: both sets closed
    padding.variant_for(spec(variant="padded", seq_len=12, pad_to=64), tiny)
    padding.drop()
    assert len(closed) == 3 and not padding.holds("gpt2", "float32")
    assert released == [2, 3]                             # each drop frees the pools after closing the graphs
    padding.drop()
    assert released == [2, 3]                             # nothing held: nothing to free
