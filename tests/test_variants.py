"""Variants on CPU: the interface, the correctness check (NaN poisoning), the measurement of a case,
and the isolation of risky variants in worker subprocesses (fake workers that crash or hang)."""

import json
import os
import sys
import textwrap
import time

import pytest
import torch

from cudagraph_bench.capture import compiling
from cudagraph_bench.measure import case as C
from cudagraph_bench.measure import isolation as I
from cudagraph_bench.measure import variants as V
from cudagraph_bench.measure.correctness import fp64_reference_model
from cudagraph_bench.errors import CudaUnavailableError, UsageError
from cudagraph_bench.models.presets import load_model, model_forward

TINY = {"n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 128, "bos_token_id": 0, "eos_token_id": 0}


@pytest.fixture(scope="module")
def tiny():
    return load_model("gpt2", "float32", "cpu", overrides=TINY)


def spec(**kw):
    """A CPU case of exactly ``rounds`` rounds: precision_pct=0, or a noisy pilot on a busy machine plans more
    rounds for the 1% default target (53 instead of 5 were seen under make test)."""
    base = dict(model="gpt2", dtype="float32", seq_len=8, variant="eager", rounds=4, warmup_rounds=1,
                check_inputs=2, device="cpu", overrides=TINY, precision_pct=0.0)
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
    with pytest.raises(UsageError, match="unknown variant 'graphs'"):
        V.build_variant(tiny, "graphs", 8)
    for name in ("graph", "padded", "bucketed", "compile", "compile+graph"):
        with pytest.raises(CudaUnavailableError, match="needs the model on a CUDA GPU"):
            V.build_variant(tiny, name, 8)


def test_case_spec_round_trips_through_json():
    s = spec(variant="compile+graph", seq_len=50, buckets=(16, 64), overrides={"n_layer": 2})
    back = C.CaseSpec.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back == s
    assert back.model_key == s.model_key
    assert spec(dtype="bfloat16").model_key != s.model_key


def test_is_fatal_cuda_error_recognises_sticky_errors():
    assert I.is_fatal_cuda_error("RuntimeError: CUDA error: device-side assert triggered")
    assert I.is_fatal_cuda_error("AcceleratorError: an illegal memory access was encountered")
    assert not I.is_fatal_cuda_error("AssertionError: Tensor-likes are not close!")
    assert not I.is_fatal_cuda_error(None)


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


# ---------------------------------------------------------------------------- measure_case


def test_measure_eager_on_cpu_times_every_round(tiny):
    r = C.measure_case(spec(rounds=5, warmup_rounds=2), tiny)
    assert r.status == "ok" and r.reason is None
    assert len(r.wall_ms) == 5 and all(t > 0 for t in r.wall_ms)
    assert r.event_ms == []  # no CUDA events on CPU
    assert r.device == "cpu" and r.max_abs_diff == 0.0


def test_measure_reports_build_failure_instead_of_raising(tiny):
    r = C.measure_case(spec(variant="graph"), tiny)
    assert r.status == "failed" and r.phase == "build"
    assert "CudaUnavailableError" in r.reason and r.wall_ms == []


def test_measure_mismatch_is_measured_but_flagged(tiny, monkeypatch):
    fake = StaticFake(tiny, 8, offset=1e-2)
    monkeypatch.setattr(C, "build_variant", lambda *a, **k: fake)
    r = C.measure_case(spec(variant="graph", rounds=3), tiny)
    assert r.status == "mismatch" and r.phase == "check"
    assert r.reason.startswith("outputs differ from eager")
    assert r.max_abs_diff == pytest.approx(1e-2, rel=1e-3)   # the fake adds 1e-2 to every logit
    assert len(r.wall_ms) == 3
    assert fake.closed


def test_measure_records_how_correctness_was_decided(tiny, monkeypatch, exact_float32):
    monkeypatch.setattr(C, "build_variant", lambda *a, **k: Float64Fake(tiny, 8))
    r = C.measure_case(spec(variant="padded", rounds=3), tiny)
    assert r.status == "ok" and r.check == "fp64-rmse" and r.fp64_rmse_ratio < 1.0
    back = C.CaseResult.from_dict(json.loads(json.dumps(r.to_dict())))   # crosses the worker pipe
    assert (back.check, back.fp64_rmse_ratio) == (r.check, r.fp64_rmse_ratio)
    r = C.measure_case(spec(rounds=3), tiny)
    assert r.status == "ok" and r.check == "reference" and r.fp64_rmse_ratio is None   # eager: the reference


def test_measure_exception_while_called_is_a_failed_result(tiny, monkeypatch):
    class Broken(StaticFake):
        def __call__(self, input_ids):
            raise RuntimeError("accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run")

    fake = Broken(tiny, 8)
    monkeypatch.setattr(C, "build_variant", lambda *a, **k: fake)
    r = C.measure_case(spec(variant="compile"), tiny)
    assert r.status == "failed" and r.phase == "check"
    assert "overwritten by a subsequent run" in r.reason
    assert fake.closed


def test_measure_with_cache_reports_load_failure():
    r = C.measure_with_cache(spec(model="no-such-model"), C.ModelCache())
    assert r.status == "failed" and r.phase == "load" and "no-such-model" in r.reason


# ---------------------------------------------------------------------------- isolation

FAKE_WORKER = textwrap.dedent("""
    import json, os, sys, time
    job = json.load(sys.stdin)
    if os.environ.get("FAKE_WORKER_NO_START"):
        sys.stderr.write("ImportError: simulated broken install\\n"); sys.exit(1)
    print(json.dumps({"cgb": "ready"}), flush=True)
    print("stray library output that is not protocol", flush=True)
    for i, spec in enumerate(job["cases"]):
        print(json.dumps({"cgb": "start", "index": i}), flush=True)
        with open(os.path.join(spec["piddir"], f"pid-{spec['seq_len']}"), "w") as fh:
            fh.write(str(os.getpid()))
        act = spec.get("act")
        if act == "abort":
            sys.stderr.write("simulated device-side assert\\n"); sys.stderr.flush(); os.abort()
        if act == "exit3":
            sys.stderr.write("RuntimeError: CUDA error: device-side assert triggered\\n"); sys.stderr.flush()
            sys.exit(3)
        if act == "hang":
            time.sleep(600)
        result = {"model": spec["model"], "dtype": spec["dtype"], "seq_len": spec["seq_len"],
                  "variant": spec["variant"], "status": "ok", "wall_ms": [1.0, 2.0], "event_ms": [],
                  "notes": [f"pid {os.getpid()}"]}
        print(json.dumps({"cgb": "result", "index": i, "result": result}), flush=True)
        if act == "exit_after":
            sys.exit(70)
""")


@pytest.fixture
def fake_worker(tmp_path):
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    return [sys.executable, str(script)]


def specs_with(tmp_path, acts):
    return [{"model": "m", "dtype": "float32", "seq_len": 10 * (i + 1), "variant": "compile",
             "piddir": str(tmp_path), **({"act": a} if a else {})} for i, a in enumerate(acts)]


def worker_pid(tmp_path, seq_len):
    return int((tmp_path / f"pid-{seq_len}").read_text())


def assert_dead(pid):
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail(f"worker {pid} is still alive")


def test_crashing_worker_fails_only_the_in_flight_case(tmp_path, fake_worker):
    stats = I.IsolationStats()
    seen = []
    results = I.run_isolated(specs_with(tmp_path, [None, "abort", None, None]), worker_cmd=fake_worker,
                             timeout_s=30, stats=stats, on_result=lambda i, r: seen.append(i))
    assert [r["status"] for r in results] == ["ok", "failed", "ok", "ok"]
    assert "SIGABRT" in results[1]["reason"] and "simulated device-side assert" in results[1]["reason"]
    assert results[1]["phase"] == "worker" and results[1]["seq_len"] == 20
    assert stats.workers == 2 and stats.died == 1 and stats.timed_out == 0
    # the cases after the crash ran in a new worker process
    assert worker_pid(tmp_path, 10) == worker_pid(tmp_path, 20) != worker_pid(tmp_path, 30)
    assert worker_pid(tmp_path, 30) == worker_pid(tmp_path, 40)
    assert sorted(seen) == [0, 1, 2, 3]
    assert all(r["isolated"] for r in results)


def test_worker_exit_code_and_stderr_are_the_reason(tmp_path, fake_worker):
    results = I.run_isolated(specs_with(tmp_path, ["exit3", None]), worker_cmd=fake_worker, timeout_s=30)
    assert results[0]["status"] == "failed"
    assert "exited with code 3" in results[0]["reason"]
    assert "device-side assert triggered" in results[0]["reason"]
    assert results[1]["status"] == "ok"


def test_hanging_worker_is_killed_after_the_case_timeout(tmp_path, fake_worker):
    stats = I.IsolationStats()
    t0 = time.monotonic()
    results = I.run_isolated(specs_with(tmp_path, [None, "hang", None]), worker_cmd=fake_worker,
                             timeout_s=1.5, stats=stats)
    elapsed = time.monotonic() - t0
    assert [r["status"] for r in results] == ["ok", "failed", "ok"]
    assert results[1]["phase"] == "timeout" and "timed out after 1.5 s" in results[1]["reason"]
    assert stats.timed_out == 1 and stats.workers == 2
    assert 1.5 <= elapsed < 20
    assert_dead(worker_pid(tmp_path, 20))


def test_worker_exiting_between_cases_is_restarted_without_blaming_a_case(tmp_path, fake_worker):
    stats = I.IsolationStats()
    results = I.run_isolated(specs_with(tmp_path, ["exit_after", None, None]), worker_cmd=fake_worker,
                             timeout_s=30, stats=stats)
    assert [r["status"] for r in results] == ["ok", "ok", "ok"]
    assert stats.workers == 2
    assert worker_pid(tmp_path, 10) != worker_pid(tmp_path, 20)


def test_worker_that_never_starts_fails_every_case_once(tmp_path, fake_worker, monkeypatch):
    monkeypatch.setenv("FAKE_WORKER_NO_START", "1")
    stats = I.IsolationStats()
    results = I.run_isolated(specs_with(tmp_path, [None, None, None]), worker_cmd=fake_worker, timeout_s=30,
                             stats=stats)
    assert [r["status"] for r in results] == ["failed"] * 3
    assert all("before the first case" in r["reason"] and "simulated broken install" in r["reason"]
               for r in results)
    assert stats.workers == 1


def test_deadline_stops_the_worker_and_skips_the_rest(tmp_path, fake_worker):
    results = I.run_isolated(specs_with(tmp_path, [None, "hang", None]), worker_cmd=fake_worker,
                             timeout_s=60, deadline=time.monotonic() + 1.5)
    assert [r["status"] for r in results] == ["ok", "skipped", "skipped"]
    assert all(r["reason"].startswith("time budget exhausted") for r in results[1:])
    assert_dead(worker_pid(tmp_path, 20))


def test_worker_log_collects_stderr(tmp_path, fake_worker):
    log = tmp_path / "workers.log"
    I.run_isolated(specs_with(tmp_path, ["exit3"]), worker_cmd=fake_worker, timeout_s=30, log_path=str(log))
    text = log.read_text()
    assert "=== worker 1" in text and "device-side assert triggered" in text


def test_real_worker_measures_eager_cases_on_cpu():
    specs = [spec(seq_len=n, rounds=3).to_dict() for n in (8, 16)]
    results = I.run_isolated(specs, timeout_s=120)
    assert [r["status"] for r in results] == ["ok", "ok"], results
    assert [r["seq_len"] for r in results] == [8, 16]
    assert all(len(r["wall_ms"]) == 3 and r["isolated"] for r in results)


def test_inductor_cudagraph_skip_reasons_are_collected():
    from torch._inductor.cudagraph_utils import log_cudagraph_skip_and_bump_counter

    before = V.compile_counters()["cudagraph_skips"]
    with V._SkipReasons() as reasons:
        log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to mutated inputs (1 instances)")
        log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to mutated inputs (1 instances)")
    log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to something after the block")
    assert reasons.text() == "skipping cudagraphs due to mutated inputs (1 instances)"
    assert V.compile_counters()["cudagraph_skips"] == before + 3
    assert V._SkipReasons().text() == "reason not logged"


# ---------------------------------------------------------------------------- padded / bucketed graphs reused


def test_padding_cases_of_one_model_replay_the_graphs_its_first_case_captured(monkeypatch, tiny):
    """The session captures the padded / bucketed graphs of a model and dtype once: the case of another
    prompt length replays them (recorded as ``graphs_reused``), a case's variant never closes them, the
    padded and the bucketed variant each have their own, and the first case of another model closes them."""
    import argparse

    from cudagraph_bench.capture.buckets import BucketCapture
    from cudagraph_bench.session import Session

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
    monkeypatch.setattr(V, "CUDA_VARIANTS", ())           # a CPU model: build_variant's CUDA check is tested above
    session = Session(argparse.Namespace(getoption=lambda name: None))
    released = []
    monkeypatch.setattr(session, "release", lambda **kw: released.append(len(closed)))   # no gc.freeze in a test
    buckets = (8, 16, 64)
    with pytest.raises(C.CaseFailed, match="build"):      # a prompt above every bucket: the case fails, uncaptured
        session._padding_variant(spec(variant="bucketed", seq_len=65, buckets=buckets), tiny)
    assert captured == [] and session._padding == {}
    first = session._padding_variant(spec(variant="bucketed", seq_len=8, buckets=buckets), tiny)
    second = session._padding_variant(spec(variant="bucketed", seq_len=12, buckets=buckets), tiny)
    assert captured == [("bucketed", buckets)] and first._graphs is second._graphs
    assert (first.pad_to, second.pad_to) == (8, 16) and (first.capture_ms, second.capture_ms) == (8.0, 16.0)
    assert "graphs_reused" not in first.record() and second.record()["graphs_reused"] is True
    first.close()
    second.close()
    assert closed == []                                   # the session owns them, not a case's variant
    padded = session._padding_variant(spec(variant="padded", seq_len=12, pad_to=64), tiny)
    assert captured[-1] == ("padded", (64,)) and padded.pad_to == 64 and len(captured) == 2
    with pytest.raises(C.CaseFailed, match="build"):      # a prompt above every bucket: no capture, the case fails
        session._padding_variant(spec(variant="bucketed", seq_len=65, buckets=buckets), tiny)
    assert session._padding_variant(spec(variant="eager"), tiny) is None and closed == []
    assert session._padding_variant(spec(model="distilgpt2", variant="eager"), tiny) is None
    assert len(closed) == 2 and session._padding == {}    # another model: both sets closed
    session._padding_variant(spec(variant="padded", seq_len=12, pad_to=64), tiny)
    session.drop_padding_graphs()
    assert len(closed) == 3 and session._padding == {}
    assert released == [2, 3]                             # each drop frees the pools after closing the graphs
    session.drop_padding_graphs()
    assert released == [2, 3]                             # nothing held: nothing to free
