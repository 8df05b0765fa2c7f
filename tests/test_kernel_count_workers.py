"""Kernel counting and GPU busy time in worker processes, on CPU: the parsing of a worker's results, a
crashing worker failing only the case in flight, the real worker's entry point, the checks on the
profiled counts and busy times, and the plugin writing the recorded fields into the benchmark JSON."""

import json
import os
import statistics
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from cudagraph_bench.measure import kernel_counts as K
from cudagraph_bench.measure import roofline
from cudagraph_bench.plugin import pytest_benchmark_update_json
from cudagraph_bench.session import MemoryLedger
from cudagraph_bench.measure.case import CaseSpec, ModelCache

from fake_kernel_count_worker import fake_worker_conftest

TINY = {"n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 128, "bos_token_id": 0, "eos_token_id": 0}

# A fake worker that speaks the protocol; its "count" of a case is a function of the case, so the tests
# compute the expected value instead of pasting it. ``act`` in a spec (an extra key the real
# CaseSpec ignores) picks a misbehaviour.
FAKE_WORKER = textwrap.dedent("""
    import json, os, sys
    job = json.load(sys.stdin)
    print(json.dumps({"cgb": "ready"}), flush=True)
    print("library output on stdout that is not protocol", flush=True)
    for i, spec in enumerate(job["cases"]):
        print(json.dumps({"cgb": "start", "index": i}), flush=True)
        act = spec.get("act")
        if act == "abort":
            sys.stderr.write("simulated crash inside the profiler\\n"); sys.stderr.flush(); os.abort()
        result = {"model": spec["model"], "dtype": spec["dtype"], "seq_len": spec["seq_len"],
                  "variant": spec["variant"], "device": spec["device"], "status": "ok",
                  "n_kernels": 3 * spec["seq_len"] + 1, "gpu_busy_ms": spec["seq_len"] / 8}
        if act == "no_count":
            del result["n_kernels"]
        if act == "fail":
            result.update(status="failed", phase="count", reason="RuntimeError: simulated profiler error")
            del result["n_kernels"]
        print(json.dumps({"cgb": "result", "index": i, "result": result}), flush=True)
""")


def fake_count(seq_len: int) -> int:
    return 3 * seq_len + 1


def fake_busy_ms(seq_len: int) -> float:
    return seq_len / 8


@pytest.fixture
def fake_worker(tmp_path):
    script = tmp_path / "fake_count_worker.py"
    script.write_text(FAKE_WORKER)
    return [sys.executable, str(script)]


def specs_with(acts):
    return [{**K.count_spec("gpt2", "float32", 10 * (i + 1)), **({"act": a} if a else {})}
            for i, a in enumerate(acts)]


# ---------------------------------------------------------------------------- the parent side


def test_counts_of_a_fake_worker_are_parsed_per_case(fake_worker):
    specs = specs_with([None, None, None])
    counts = K.count_in_workers(specs, worker_cmd=fake_worker, timeout_s=30)
    assert list(counts) == [("gpt2", "float32", s["seq_len"]) for s in specs]
    for s in specs:
        got = counts[("gpt2", "float32", s["seq_len"])]
        assert (got.status, got.n_kernels, got.reason) == ("ok", fake_count(s["seq_len"]), None)
        assert got.gpu_busy_ms == fake_busy_ms(s["seq_len"])
        assert got.eager_fields() == {"n_kernels": fake_count(s["seq_len"]), "gpu_busy_ms": fake_busy_ms(s["seq_len"])}
        assert got.isolated and got.variant == "eager"


def test_crashing_worker_fails_its_case_with_the_reason_and_the_rest_go_on(fake_worker, tmp_path):
    specs = specs_with([None, "abort", None, "no_count", "fail"])
    log = tmp_path / "workers.log"
    counts = K.count_in_workers(specs, worker_cmd=fake_worker, timeout_s=30, log_path=str(log))
    by_len = {key[2]: c for key, c in counts.items()}
    lengths = [s["seq_len"] for s in specs]
    assert [by_len[n].status for n in lengths] == ["ok", "failed", "ok", "failed", "failed"]
    crashed = by_len[lengths[1]]
    assert crashed.phase == "worker" and crashed.n_kernels is None
    assert "SIGABRT" in crashed.reason and "simulated crash inside the profiler" in crashed.reason
    assert by_len[lengths[2]].n_kernels == fake_count(lengths[2])   # counted by a fresh worker
    assert by_len[lengths[3]].phase == "protocol" and "without a positive kernel count" in by_len[lengths[3]].reason
    assert by_len[lengths[4]].phase == "count" and by_len[lengths[4]].reason == "RuntimeError: simulated profiler error"
    assert "simulated crash inside the profiler" in log.read_text()


def test_no_cases_start_no_worker():
    assert K.count_in_workers([], worker_cmd=["/nonexistent/worker"]) == {}


@pytest.mark.parametrize("n_kernels", [None, 0, -4, 2.0, True, "12"])
def test_ok_without_a_usable_count_is_a_failure(n_kernels):
    got = K.KernelCount.from_result({"model": "gpt2", "dtype": "float32", "seq_len": 16, "status": "ok",
                                     "n_kernels": n_kernels})
    assert got.status == "failed" and got.phase == "protocol" and got.n_kernels is None
    assert repr(n_kernels) in got.reason


@pytest.mark.parametrize("busy", [0, -1.5, float("nan"), float("inf"), True, "0.2"])
def test_ok_with_an_unusable_busy_time_is_a_failure(busy):
    got = K.KernelCount.from_result({"model": "gpt2", "dtype": "float32", "seq_len": 16, "status": "ok",
                                     "n_kernels": 12, "gpu_busy_ms": busy})
    assert got.status == "failed" and got.phase == "protocol" and got.gpu_busy_ms is None
    assert repr(busy) in got.reason


def test_a_count_without_a_busy_time_records_the_count_only():
    got = K.KernelCount.from_result({"model": "gpt2", "dtype": "float32", "seq_len": 16, "status": "ok",
                                     "n_kernels": 12})
    assert (got.status, got.n_kernels, got.gpu_busy_ms) == ("ok", 12, None)
    assert got.eager_fields() == {"n_kernels": 12}


def test_a_failure_keeps_its_reason_and_one_without_gets_one():
    base = {"model": "gpt2", "dtype": "bfloat16", "seq_len": "50"}
    got = K.KernelCount.from_result({**base, "status": "skipped", "reason": "time budget exhausted", "phase": "budget"})
    assert (got.key, got.status, got.reason, got.phase) == (("gpt2", "bfloat16", 50), "skipped",
                                                            "time budget exhausted", "budget")
    assert K.KernelCount.from_result({**base, "status": "failed"}).reason == "failed without a reason"
    with pytest.raises(KeyError):
        K.KernelCount.from_result({"model": "gpt2", "dtype": "float32", "status": "ok", "n_kernels": 3})


def test_count_spec_is_an_eager_case_spec():
    d = K.count_spec("tinyllama-1.1b", "bfloat16", 128, overrides={"num_hidden_layers": 1})
    spec = CaseSpec.from_dict(d)
    assert (spec.model, spec.dtype, spec.seq_len, spec.variant, spec.device) == (
        "tinyllama-1.1b", "bfloat16", 128, "eager", "cuda")
    assert spec.overrides == {"num_hidden_layers": 1}
    assert K.worker_command()[-3:] == ["-m", "cudagraph_bench.measure.kernel_counts", "--worker"]


# ---------------------------------------------------------------------------- the worker side


def test_real_worker_reports_load_and_cuda_failures_per_case_on_cpu():
    """The real ``python -m cudagraph_bench.measure.kernel_counts --worker``: a model that does not exist fails
    at load, a CPU case fails at count (the profiler count needs CUDA), and both are reported."""
    specs = [K.count_spec("no-such-model", "float32", 8, device="cpu"),
             K.count_spec("gpt2", "float32", 8, device="cpu", overrides=TINY)]
    counts = K.count_in_workers(specs, timeout_s=120)
    missing, cpu = counts[("no-such-model", "float32", 8)], counts[("gpt2", "float32", 8)]
    assert missing.status == "failed" and missing.phase == "load" and "no-such-model" in missing.reason
    assert cpu.status == "failed" and cpu.phase == "count" and "CUDA" in cpu.reason
    assert missing.isolated and cpu.isolated
    assert cpu.reason == K.device_problem("cpu")


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


def cpu_spec():
    return CaseSpec(model="gpt2", dtype="float32", seq_len=8, variant="eager", device="cpu", overrides=TINY)


def test_count_case_records_equal_counts_and_the_median_busy_time(monkeypatch):
    profiled = [(41, 0.31), (41, 0.12), (41, 0.27)]
    profiling(monkeypatch, profiled)
    got = K.count_case(cpu_spec(), ModelCache(), repeats=len(profiled))
    assert (got.status, got.n_kernels, got.key) == ("ok", profiled[0][0], ("gpt2", "float32", 8))
    assert got.gpu_busy_ms == statistics.median(ms for _, ms in profiled)


def test_count_case_profiles_the_default_number_of_forwards(monkeypatch):
    profiled = [(7, 0.05)] * roofline.DEFAULT_BUSY_REPEATS
    profiling(monkeypatch, profiled)
    assert K.count_case(cpu_spec(), ModelCache()).gpu_busy_ms == profiled[0][1]


@pytest.mark.parametrize("profiled, words", [
    ([(0, 0.0), (0, 0.0)], "saw no kernels"),
    ([(41, 0.1), (42, 0.1), (41, 0.1)], "launched 41, then 42, then 41 kernels"),
    ([(41, 0.0), (41, 0.0), (41, 0.0)], "no device time"),
])
def test_count_case_refuses_no_kernels_unstable_counts_and_no_busy_time(monkeypatch, profiled, words):
    profiling(monkeypatch, profiled)
    got = K.count_case(cpu_spec(), ModelCache(), repeats=len(profiled))
    assert got.status == "failed" and got.phase == "count" and words in got.reason and got.n_kernels is None


def test_worker_entry_needs_the_worker_flag(capsys):
    with pytest.raises(SystemExit) as exc:
        K._main([])
    assert exc.value.code == 2 and "--worker" in capsys.readouterr().err


# ---------------------------------------------------------------------------- into the benchmark JSON


def test_plugin_writes_recorded_counts_and_busy_times_into_eager_forward_benchmarks():
    ledger = MemoryLedger()
    ledger.kernel_counts[("gpt2", "float32", 50)] = {"n_kernels": 7, "gpu_busy_ms": 0.25}
    ledger.kernel_counts[("gpt2", "float32", 16)] = {"n_kernels": 5}

    def bench(variant, seq_len, suite="forward"):
        return {"extra_info": {"suite": suite, "variant": variant, "model": "gpt2", "dtype": "float32",
                               "seq_len": seq_len}}

    benchmarks = [bench("eager", 50), bench("graph", 50), bench("eager", 128), bench("eager", 16, suite="padding")]
    out = {"benchmarks": benchmarks}
    pytest_benchmark_update_json(SimpleNamespace(_cgb_ledger=ledger), [], out)
    infos = [b["extra_info"] for b in out["benchmarks"]]
    recorded = ledger.kernel_counts[("gpt2", "float32", 50)]
    assert {k: infos[0][k] for k in recorded} == recorded
    assert all("n_kernels" not in i and "gpu_busy_ms" not in i for i in infos[1:])
    assert out["cudagraph_bench"]["kernel_counts"] == [
        {"model": m, "dtype": d, "seq_len": n, **fields} for (m, d, n), fields in sorted(ledger.kernel_counts.items())]


def test_worker_counts_on_the_h200_equal_the_in_process_counts():
    """The committed H200 run whose kernel counts came from worker processes has, for every case it shares
    with the first forward run (counted in the test process), the same number of kernels."""
    import json

    from h200_fixture import committed_doc

    def counts(name):
        doc = committed_doc(name)
        return {(i["model"], i["dtype"], i["seq_len"]): i["n_kernels"] for i in (b["extra_info"] for b in doc["benchmarks"])
                if i.get("suite") == "forward" and i.get("variant") == "eager" and i.get("n_kernels")}

    workers, in_process = counts("kernel-counts"), counts("forward")
    shared = set(workers) & set(in_process)
    assert shared == set(workers), "every worker-counted case is in the in-process run"
    assert {k: workers[k] for k in shared} == {k: in_process[k] for k in shared}


PROFILED_CONFTEST = '''
import json, os
import pytest
import cudagraph_bench.measure.kernel_counts as kernel_counts

@pytest.fixture(autouse=True)
def record_batches(monkeypatch):
    def count_in_workers(specs, held=None):
        assert held is None, "no untimed test ran first: no worker is held"
        keys = [(s["model"], s["dtype"], s["seq_len"]) for s in specs]
        with open(os.environ["BATCHES"], "a") as f:
            f.write(json.dumps(keys) + "\\n")
        return {k: "profile of " + "-".join(map(str, k)) for k in keys}
    monkeypatch.setattr(kernel_counts, "count_in_workers", count_in_workers)
'''

PROFILED_MODULE = '''
import pytest
from cudagraph_bench.session import ProfiledCases

@pytest.fixture(scope="module")
def profiled(request, cgb):
    return ProfiledCases(request, cgb, keep=KEEP)

@pytest.mark.parametrize("model, dtype, seq_len", [("gpt2", "float32", 16), ("gpt2", "float32", 50),
                                                   ("gpt2", "bfloat16", 512)])
def test_profile(profiled, model, dtype, seq_len):
    assert profiled.get((model, dtype, seq_len)) == f"profile of {model}-{dtype}-{seq_len}"
'''


def test_a_case_is_profiled_once_per_session_whatever_module_asks(pytester, tmp_path, monkeypatch):
    """The kernel-count and busy-time modules read the same profile: the first module's batch profiles its
    cases, the second profiles only what the first did not (nothing when its cases are a subset)."""
    batches = tmp_path / "batches.jsonl"
    monkeypatch.setenv("BATCHES", str(batches))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).resolve().parents[1] / "src"),
                                                      os.environ.get("PYTHONPATH", "")]))
    pytester.makeconftest(PROFILED_CONFTEST)
    pytester.makepyfile(test_a_every_case=PROFILED_MODULE.replace("KEEP", "None"),
                        test_b_short_cases=PROFILED_MODULE.replace("KEEP", "lambda key: key[2] <= 128"),
                        test_c_long_cases=PROFILED_MODULE.replace("KEEP", "lambda key: key[2] > 128"))
    result = pytester.runpytest_subprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider",
                                           "test_a_every_case.py", "test_b_short_cases.py")
    result.assert_outcomes(passed=6)
    (batch,) = [json.loads(line) for line in batches.read_text().splitlines()]   # one batch for both modules
    assert sorted(map(tuple, batch)) == sorted([("gpt2", "float32", 16), ("gpt2", "float32", 50),
                                                ("gpt2", "bfloat16", 512)])
    batches.unlink()
    result = pytester.runpytest_subprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider",
                                           "test_b_short_cases.py", "test_c_long_cases.py")
    result.assert_outcomes(passed=6)
    first, second = [[tuple(k) for k in json.loads(line)] for line in batches.read_text().splitlines()]
    assert sorted(first) == [("gpt2", "float32", 16), ("gpt2", "float32", 50)]   # b keeps L <= 128 only
    assert second == [("gpt2", "bfloat16", 512)]                                # c: what b left


def test_an_xdist_worker_profiles_only_the_asked_cases_model_and_dtype(pytester, tmp_path, monkeypatch):
    """A pytest-xdist worker collects every test but runs a share: its batch holds only the cases of the
    asked case's model and dtype (one --gpu-workers group), so two workers never profile the same case."""
    batches = tmp_path / "batches.jsonl"
    monkeypatch.setenv("BATCHES", str(batches))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).resolve().parents[1] / "src"),
                                                      os.environ.get("PYTHONPATH", "")]))
    pytester.makeconftest(PROFILED_CONFTEST)
    pytester.makepyfile(test_a_every_case=PROFILED_MODULE.replace("KEEP", "None"))
    result = pytester.runpytest_subprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider", "-n", "1")
    result.assert_outcomes(passed=3)
    batches_seen = [[tuple(k) for k in json.loads(line)] for line in batches.read_text().splitlines()]
    assert sorted(map(sorted, batches_seen)) == [[("gpt2", "bfloat16", 512)],
                                                 [("gpt2", "float32", 16), ("gpt2", "float32", 50)]]
    # the module's tests in one xdist group (as the suite's profiling tests are): one batch again
    batches.unlink()
    pytester.makepyfile(test_a_every_case="import pytest\npytestmark = pytest.mark.xdist_group('profiles')\n"
                        + PROFILED_MODULE.replace("KEEP", "None"))
    result = pytester.runpytest_subprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider", "-n", "1")
    result.assert_outcomes(passed=3)
    (batch,) = [json.loads(line) for line in batches.read_text().splitlines()]
    assert len(batch) == 3


# ---------------------------------------------------------------------------- the held worker

#: A worker script that runs the real protocol (:func:`~cudagraph_bench.measure.isolation.worker_main`) with a
#: fake measurement: its result for a case is computed from the case, and its prepare step writes a line to
#: stderr (the test reads the order of events from the log).
HOLDING_WORKER = textwrap.dedent("""
    import sys
    from types import SimpleNamespace
    from cudagraph_bench.measure.isolation import worker_main

    def prepare(spec, models):
        print(f"prepared for {spec.model} L={spec.seq_len}", file=sys.stderr, flush=True)
        if spec.seq_len == 999:
            raise SystemExit(5)              # a worker that dies while preparing

    def measure(spec, models):
        print(f"measured L={spec.seq_len}", file=sys.stderr, flush=True)
        fields = dict(model=spec.model, dtype=spec.dtype, seq_len=spec.seq_len, variant=spec.variant,
                      device=spec.device, status="ok", n_kernels=3 * spec.seq_len + 1, gpu_busy_ms=spec.seq_len / 8)
        return SimpleNamespace(status="ok", reason=None, isolated=False, to_dict=lambda: fields)

    sys.exit(worker_main(measure=measure, prepare=prepare))
""")


@pytest.fixture
def holding_worker(tmp_path, monkeypatch):
    script = tmp_path / "holding_worker.py"
    script.write_text(HOLDING_WORKER)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).resolve().parents[1] / "src"),
                                                      os.environ.get("PYTHONPATH", "")]))
    return [sys.executable, str(script)]


def test_a_held_worker_prepares_waits_for_go_and_counts_its_batch(holding_worker, tmp_path):
    from cudagraph_bench.measure.isolation import HeldWorker

    specs = specs_with([None, None])
    log = tmp_path / "held.log"
    held = HeldWorker.start(specs, holding_worker, log_path=str(log))
    assert held.wait_prepared(30) and held.proc.poll() is None        # prepared, held, alive
    assert "measured" not in log.read_text()                           # nothing measured before go
    # a fresh worker would be "false", which exits at once: every case would fail before its start
    counts = K.count_in_workers(specs, worker_cmd=["false"], timeout_s=30, held=held)
    assert {k: c.n_kernels for k, c in counts.items()} == {("gpt2", "float32", s["seq_len"]): fake_count(s["seq_len"])
                                                          for s in specs}
    lines = [ln for ln in log.read_text().splitlines() if ln.startswith(("prepared", "measured"))]
    assert lines == [f"prepared for gpt2 L={specs[0]['seq_len']}"] + [f"measured L={s['seq_len']}" for s in specs]
    assert held.proc.poll() is not None                                # run, then ended


def test_a_held_worker_of_other_cases_or_that_died_is_replaced_by_a_fresh_one(holding_worker, fake_worker):
    from cudagraph_bench.measure.isolation import HeldWorker

    specs = specs_with([None, None])
    for held_specs in (specs[:1], [{**specs[0], "seq_len": 999}, specs[1]]):   # another batch; dies preparing
        held = HeldWorker.start(held_specs, holding_worker)
        counts = K.count_in_workers(specs, worker_cmd=fake_worker, timeout_s=30, held=held)
        assert [c.n_kernels for c in counts.values()] == [fake_count(s["seq_len"]) for s in specs]
        assert held.proc.poll() is not None                            # killed or dead, never left running
    dead = HeldWorker.start([{**specs[0], "seq_len": 999}], holding_worker)
    assert dead.wait_prepared(30) is False


def test_a_held_worker_that_is_never_told_to_go_measures_nothing(holding_worker, tmp_path):
    from cudagraph_bench.measure.isolation import HeldWorker

    log = tmp_path / "held.log"
    held = HeldWorker.start(specs_with([None]), holding_worker, log_path=str(log))
    assert held.wait_prepared(30)
    held.proc.stdin.close()                                            # end of input instead of go
    assert held.proc.wait(timeout=30) == 0 and "measured" not in log.read_text()


#: Cases are "profile of MODEL-DTYPE-SEQ_LEN", as PROFILED_MODULE asserts.
HELD_CONFTEST = fake_worker_conftest(result='"profile of " + "-".join(map(str, (s["model"], s["dtype"], s["seq_len"])))')

UNTIMED_MODULE = """
import json, os
import pytest
pytestmark = pytest.mark.untimed

def test_correctness_first(cgb):
    with open(os.environ["EVENTS"], "a") as f:
        f.write(json.dumps(["untimed test"]) + "\\n")
"""


@pytest.mark.parametrize("skip_benchmarks", [False, True])
def test_the_first_untimed_test_holds_the_profile_worker_and_timed_tests_wait_for_it(pytester, tmp_path,
                                                                                    monkeypatch, skip_benchmarks):
    """An ``untimed`` first test starts the held worker on the batch the profiling module then asks for;
    the worker counts that batch before the next test (not ``untimed``, here one that profiles nothing)
    starts, and the counting time is recorded under the first profiling test, not the test it ran before.
    With benchmarks skipped (the counting tests do not run) nothing is held."""
    events = tmp_path / "events.jsonl"
    monkeypatch.setenv("EVENTS", str(events))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).resolve().parents[1] / "src"),
                                                      os.environ.get("PYTHONPATH", "")]))
    # on a GPU host the plugin's real per-test CUDA work (first context, memory ledger) under `-n 8` took
    # over 0.5 s in a test that profiles nothing: the count takes longer than that overhead here
    count_s = 3.0
    monkeypatch.setenv("FAKE_COUNT_S", str(count_s))
    pytester.makeconftest(HELD_CONFTEST)
    profiled = "import pytest\npytestmark = pytest.mark.xdist_group('forward-profiles')\n" + \
        PROFILED_MODULE.replace("KEEP", "None")
    pytester.makepyfile(test_a_untimed=UNTIMED_MODULE, test_b_timed="def test_timed():\n    pass\n",
                        test_c_profiled=profiled)
    args = ["-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider"]
    args += ["--benchmark-skip"] if skip_benchmarks else []
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=5)
    *got, (_, seconds) = [json.loads(line) for line in events.read_text().splitlines()]
    lengths = [16, 50, 512]          # PROFILED_MODULE's cases, in collection order
    if skip_benchmarks:
        assert got == [["untimed test"], ["count", lengths, False]]     # counted by the module's first test
    else:
        assert got == [["hold", lengths], ["untimed test"], ["count", lengths, True]]
    first, *others = [k for k in seconds if k.startswith("test_c_profiled.py")]
    assert seconds[first] >= count_s and all(seconds[k] < count_s for k in others), seconds
    assert seconds["test_b_timed.py::test_timed"] < count_s, seconds  # counted before it started, not during it
