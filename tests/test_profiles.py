"""Kernel counts and GPU busy times of eager forwards, on CPU: :func:`~cudagraph_bench.measure.kernel_counts.count_case`
(its checks on the profiled counts and busy times, its failures per phase), the session's profiles (each case
profiled once, :class:`~cudagraph_bench.plugin.profiles.Profiles`), the tests marked ``profiles`` run after every
other test, and the counts written into the eager benchmarks of the run JSON."""

import json
import statistics
from dataclasses import asdict
from types import SimpleNamespace

import pytest

from cudagraph_bench.measure import kernel_counts as K
from cudagraph_bench.measure import roofline
from cudagraph_bench.models.presets import load_model
from cudagraph_bench.plugin import output
from cudagraph_bench.plugin.memory import MemoryLedger
from cudagraph_bench.plugin.profiles import Profiles
from cudagraph_bench.plugin.session import SESSION, SessionRecords

TINY = {"n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 128, "bos_token_id": 0, "eos_token_id": 0}


@pytest.fixture(scope="module")
def tiny_model():
    """``get_model(name, dtype)`` of count_case giving a one-layer gpt2 on the CPU."""
    model = load_model("gpt2", "float32", "cpu", overrides=TINY)
    return lambda name, dtype: model


def profiling(monkeypatch, profiled):
    """Make ``profile_forward`` call the forward once per profiled call and return ``profiled``
    (``[(kernels, busy ms)]``), checking it was asked for that many calls."""
    def fake(fn, *, repeats, warmup=1):
        assert repeats == len(profiled)
        for _ in profiled:
            fn()
        return list(profiled)

    monkeypatch.setattr(roofline, "profile_forward", fake)
    monkeypatch.setattr(K, "device_problem", lambda device: None)     # the fake counts on the CPU too


def test_count_case_records_equal_counts_and_the_median_busy_time(monkeypatch, tiny_model):
    profiled = [(41, 0.31), (41, 0.12), (41, 0.27)]
    profiling(monkeypatch, profiled)
    got = K.count_case("gpt2", "float32", 8, tiny_model, repeats=len(profiled))
    assert (got.status, got.n_kernels, got.key) == ("ok", profiled[0][0], ("gpt2", "float32", 8))
    assert got.gpu_busy_ms == statistics.median(ms for _, ms in profiled)
    assert got.eager_fields() == {"n_kernels": profiled[0][0], "gpu_busy_ms": got.gpu_busy_ms}


def test_count_case_profiles_the_default_number_of_forwards(monkeypatch, tiny_model):
    profiled = [(7, 0.05)] * roofline.DEFAULT_BUSY_REPEATS
    profiling(monkeypatch, profiled)
    assert K.count_case("gpt2", "float32", 8, tiny_model).gpu_busy_ms == profiled[0][1]


@pytest.mark.parametrize("profiled, words", [
    ([(0, 0.0), (0, 0.0)], "saw no kernels"),
    ([(41, 0.1), (42, 0.1), (41, 0.1)], "launched 41, then 42, then 41 kernels"),
    ([(41, 0.0), (41, 0.0), (41, 0.0)], "no device time"),
])
def test_count_case_refuses_no_kernels_unstable_counts_and_no_busy_time(monkeypatch, tiny_model, profiled, words):
    profiling(monkeypatch, profiled)
    got = K.count_case("gpt2", "float32", 8, tiny_model, repeats=len(profiled))
    assert got.status == "failed" and got.phase == "count" and words in got.reason and got.n_kernels is None


def test_count_case_fails_per_phase_instead_of_raising(tiny_model):
    """A model that cannot be built fails at ``load``; a model on the CPU at ``count`` (the profiler counts CUDA
    kernels)."""
    def no_model(name, dtype):
        raise FileNotFoundError(f"no weights for {name}")

    missing = K.count_case("gpt2", "float32", 8, no_model)
    assert (missing.status, missing.phase) == ("failed", "load") and "no weights for gpt2" in missing.reason
    cpu = K.count_case("gpt2", "float32", 8, tiny_model)
    assert (cpu.status, cpu.phase, cpu.reason) == ("failed", "count", K.device_problem("cpu"))
    assert "CUDA" in cpu.reason and K.device_problem("cuda:0") is None


def test_a_count_without_a_busy_time_writes_the_count_only():
    got = K.KernelCount("gpt2", "float32", 16, "ok", n_kernels=12)
    assert got.eager_fields() == {"n_kernels": 12}
    assert asdict(got)["status"] == "ok" and asdict(got)["gpu_busy_ms"] is None


def test_a_case_is_profiled_once_per_session_whatever_test_asks(monkeypatch):
    calls = []

    def count_case(name, dtype, seq_len, get_model):
        calls.append((name, dtype, seq_len))
        return K.KernelCount(name, dtype, seq_len, "ok", n_kernels=3 * seq_len + 1, gpu_busy_ms=seq_len / 8)

    monkeypatch.setattr(K, "count_case", count_case)
    profiles = Profiles(lambda name, dtype: pytest.fail("the stand-in count builds no model"))
    first = profiles.get(("gpt2", "float32", 16))
    assert profiles.get(("gpt2", "float32", 16)) is first and first.n_kernels == 3 * 16 + 1
    profiles.get(("gpt2", "float32", 50))
    assert calls == [("gpt2", "float32", 16), ("gpt2", "float32", 50)]


def test_the_plugin_writes_recorded_counts_and_busy_times_into_the_eager_forward_benchmarks():
    records = SessionRecords()
    records.kernel_counts[("gpt2", "float32", 50)] = {"n_kernels": 7, "gpu_busy_ms": 0.25}
    records.kernel_counts[("gpt2", "float32", 16)] = {"n_kernels": 5}
    config = SimpleNamespace(stash={SESSION: SimpleNamespace(ledger=MemoryLedger(), records=records)},
                             getoption=lambda name, default=None: default)

    def bench(variant, seq_len, suite="forward"):
        return {"extra_info": {"suite": suite, "variant": variant, "model": "gpt2", "dtype": "float32",
                               "seq_len": seq_len}}

    benchmarks = [bench("eager", 50), bench("graph", 50), bench("eager", 128), bench("eager", 16, suite="padding")]
    out = {"benchmarks": benchmarks}
    output.pytest_benchmark_update_json(config, [], out)
    infos = [b["extra_info"] for b in out["benchmarks"]]
    recorded = records.kernel_counts[("gpt2", "float32", 50)]
    assert {k: infos[0][k] for k in recorded} == recorded
    assert all("n_kernels" not in i and "gpu_busy_ms" not in i for i in infos[1:])
    assert out["cudagraph_bench"]["kernel_counts"] == [
        {"model": m, "dtype": d, "seq_len": n, **fields} for (m, d, n), fields in sorted(records.kernel_counts.items())]


def test_worker_counts_on_the_h200_equal_the_in_process_counts():
    """The committed H200 run whose kernel counts came from worker processes has, for every case it shares
    with the first forward run (counted in the test process), the same number of kernels."""
    from h200_fixture import committed_doc

    def counts(name):
        doc = committed_doc(name)
        return {(i["model"], i["dtype"], i["seq_len"]): i["n_kernels"] for i in (b["extra_info"] for b in doc["benchmarks"])
                if i.get("suite") == "forward" and i.get("variant") == "eager" and i.get("n_kernels")}

    workers, in_process = counts("kernel-counts"), counts("forward")
    shared = set(workers) & set(in_process)
    assert shared == set(workers), "every worker-counted case is in the in-process run"
    assert {k: workers[k] for k in shared} == {k: in_process[k] for k in shared}


#: A profiling module collected first, then timed tests; a class whose tests are marked through the class.
ORDERED = {
    "test_a_profiled": """
import pytest

@pytest.mark.profiles
@pytest.mark.parametrize("n", [1, 2])
def test_profile(n):
    pass

def test_not_profiled_in_the_same_module():
    pass
""",
    "test_b_timed": """
import pytest

def test_timed_first():
    pass

@pytest.mark.profiles
class TestProfiledClass:
    def test_one(self):
        pass

def test_timed_last():
    pass
""",
}


def test_the_profiling_tests_run_after_every_other_test_in_their_collected_order(pytester):
    pytester.makepyfile(**ORDERED)
    rec = pytester.inline_run("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider")
    ran = [r.nodeid for r in rec.getreports("pytest_runtest_logreport") if r.when == "call"]
    assert ran == ["test_a_profiled.py::test_not_profiled_in_the_same_module", "test_b_timed.py::test_timed_first",
                   "test_b_timed.py::test_timed_last", "test_a_profiled.py::test_profile[1]",
                   "test_a_profiled.py::test_profile[2]", "test_b_timed.py::TestProfiledClass::test_one"]
    # after -k too: the partition is of what is selected
    rec = pytester.inline_run("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider", "-k", "profile or first")
    ran = [r.nodeid for r in rec.getreports("pytest_runtest_logreport") if r.when == "call"]
    assert ran == ["test_a_profiled.py::test_not_profiled_in_the_same_module", "test_b_timed.py::test_timed_first",
                   "test_a_profiled.py::test_profile[1]", "test_a_profiled.py::test_profile[2]",
                   "test_b_timed.py::TestProfiledClass::test_one"]
