"""Kernel counting in worker processes, on CPU: the parsing of a worker's results, a crashing worker
failing only the case in flight, the real worker's entry point, the checks on the two counts, and the
plugin writing recorded counts into the benchmark JSON."""

import sys
import textwrap
from types import SimpleNamespace

import pytest

from cudagraph_bench.measure import kernel_counts as K
from cudagraph_bench.measure import launch
from cudagraph_bench.plugin import MemoryLedger, pytest_benchmark_update_json
from cudagraph_bench.measure.case import CaseSpec, ModelCache

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
                  "n_kernels": 3 * spec["seq_len"] + 1}
        if act == "no_count":
            del result["n_kernels"]
        if act == "fail":
            result.update(status="failed", phase="count", reason="RuntimeError: simulated profiler error")
            del result["n_kernels"]
        print(json.dumps({"cgb": "result", "index": i, "result": result}), flush=True)
""")


def fake_count(seq_len: int) -> int:
    return 3 * seq_len + 1


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


def counting(monkeypatch, values):
    """Make ``count_kernel_launches`` call the forward once and return the next of ``values``."""
    it = iter(values)

    def fake(fn, *, warmup=1):
        fn()
        return next(it)

    monkeypatch.setattr(launch, "count_kernel_launches", fake)
    monkeypatch.setattr(K, "device_problem", lambda device: None)     # the fake counts on the CPU too


def cpu_spec():
    return CaseSpec(model="gpt2", dtype="float32", seq_len=8, variant="eager", device="cpu", overrides=TINY)


def test_count_case_records_two_equal_counts(monkeypatch):
    counting(monkeypatch, [41, 41])
    got = K.count_case(cpu_spec(), ModelCache())
    assert (got.status, got.n_kernels, got.key) == ("ok", 41, ("gpt2", "float32", 8))


@pytest.mark.parametrize("values, words", [([0, 0], "saw no kernels"), ([41, 42], "41 kernels, then 42")])
def test_count_case_refuses_no_kernels_and_unstable_counts(monkeypatch, values, words):
    counting(monkeypatch, values)
    got = K.count_case(cpu_spec(), ModelCache())
    assert got.status == "failed" and got.phase == "count" and words in got.reason and got.n_kernels is None


def test_worker_entry_needs_the_worker_flag(capsys):
    with pytest.raises(SystemExit) as exc:
        K._main([])
    assert exc.value.code == 2 and "--worker" in capsys.readouterr().err


# ---------------------------------------------------------------------------- into the benchmark JSON


def test_plugin_writes_recorded_counts_into_eager_forward_benchmarks():
    ledger = MemoryLedger()
    ledger.kernel_counts[("gpt2", "float32", 50)] = 7
    ledger.kernel_counts[("gpt2", "float32", 16)] = 5

    def bench(variant, seq_len, suite="forward"):
        return {"extra_info": {"suite": suite, "variant": variant, "model": "gpt2", "dtype": "float32",
                               "seq_len": seq_len}}

    benchmarks = [bench("eager", 50), bench("graph", 50), bench("eager", 128), bench("eager", 16, suite="padding")]
    out = {"benchmarks": benchmarks}
    pytest_benchmark_update_json(SimpleNamespace(_cgb_ledger=ledger), [], out)
    infos = [b["extra_info"] for b in out["benchmarks"]]
    assert infos[0]["n_kernels"] == ledger.kernel_counts[("gpt2", "float32", 50)]
    assert all("n_kernels" not in i for i in infos[1:])
    assert out["cudagraph_bench"]["kernel_counts"] == [
        {"model": m, "dtype": d, "seq_len": n, "n_kernels": k} for (m, d, n), k in sorted(ledger.kernel_counts.items())]


def test_worker_counts_on_the_h200_equal_the_in_process_counts():
    """The committed H200 run whose kernel counts came from worker processes has, for every case it shares
    with the first forward run (counted in the test process), the same number of kernels."""
    import json

    from h200_fixture import committed_run

    def counts(name):
        doc = json.loads(committed_run(name).read_text())
        return {(i["model"], i["dtype"], i["seq_len"]): i["n_kernels"] for i in (b["extra_info"] for b in doc["benchmarks"])
                if i.get("suite") == "forward" and i.get("variant") == "eager" and i.get("n_kernels")}

    workers, in_process = counts("kernel-counts"), counts("forward")
    shared = set(workers) & set(in_process)
    assert shared == set(workers), "every worker-counted case is in the in-process run"
    assert {k: workers[k] for k in shared} == {k: in_process[k] for k in shared}
