"""``--gpu-workers`` (pytest-xdist, one worker per GPU) and ``--shard K/N``, driven through pytester in
subprocesses. Without a GPU, ``CUDA_VISIBLE_DEVICES=0,1`` stands for a host with two: each worker must
get one entry of it, its own contiguous share of the CPUs, benchmarks that run, and the controller the
merged JSON."""

import json
import os
import re

import pytest

from cudagraph_bench.envinfo import format_cpus
from cudagraph_bench.gpu_workers import cpu_shares, visible_gpus
from cudagraph_bench.results.shards import DURATIONS_KEY, assign_shards

from fake_kernel_count_worker import COUNT_S, fake_worker_conftest
from h200_fixture import DOC, write

pytest.importorskip("xdist")

MODELS = ("m1", "m2", "m3")
#: Benchmarks of three models (a group each) and a plain test (its module's group). Each benchmark
#: records the GPU, CPUs and worker it saw; each test appends its group to $ORDER_LOG.
SUITE = f"""
import os
import re
import pytest

def log(group):
    if os.environ.get("ORDER_LOG"):
        with open(os.environ["ORDER_LOG"], "a") as fh:
            fh.write(group + "\\n")

@pytest.mark.parametrize("model", {list(MODELS)!r})
@pytest.mark.parametrize("dtype", ["float32"])
@pytest.mark.parametrize("n", [1, 2])
def test_bench(benchmark, model, dtype, n):
    log(f"{{model}}-{{dtype}}")
    benchmark.extra_info.update(gpu=os.environ.get("CUDA_VISIBLE_DEVICES"), cpus=sorted(os.sched_getaffinity(0)),
                                worker=os.environ.get("PYTEST_XDIST_WORKER"))
    benchmark.pedantic(sum, args=(range(100),), rounds=3)

def test_plain():
    log("test_suite.py")
"""
N_BENCH, N_TESTS = 2 * len(MODELS), 2 * len(MODELS) + 1
two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs: one per worker")


def _real_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


#: The merged run needs every worker on the same GPU model: ``CUDA_VISIBLE_DEVICES=0,1`` stands for two GPUs
#: only where there is none (each worker then runs on no GPU) or where both exist.
simulated_gpus = pytest.mark.skipif(0 < _real_gpus() < 2, reason="simulates 2 GPUs with CUDA_VISIBLE_DEVICES=0,1: "
                                    "on a host with 1 real GPU, worker gw1 would run on none (perf_tests/"
                                    "test_gpu_worker_isolation.py checks real GPUs)")


def run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider", *args)


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_the_plugin_imports_no_torch_before_a_worker_has_taken_its_gpu():
    """Loading the plugin (and its parts) imports no torch, so nothing it imports can start CUDA before
    pytest_configure sets the worker's CUDA_VISIBLE_DEVICES."""
    import subprocess
    import sys

    code = ("import sys, cudagraph_bench.plugin, cudagraph_bench.gpu_workers, cudagraph_bench.sharding; "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_cpu_shares_are_contiguous_and_even():
    assert cpu_shares(range(8), 2) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert cpu_shares([5, 1, 2, 3, 4], 2) == [[1, 2, 3], [4, 5]]
    with pytest.raises(ValueError, match="1 CPU"):
        cpu_shares([0], 2)


def test_visible_gpus_are_the_entries_of_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, GPU-8f0e1c2a,")
    assert visible_gpus() == ["2", "GPU-8f0e1c2a"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus() == []


@two_cpus
@simulated_gpus
@pytest.mark.parametrize("workers", [("-n", "2"), ("--tx", "2*popen")])   # xdist's two spellings of 2 workers
def test_each_worker_benchmarks_on_its_own_gpu_and_cpus_and_the_controller_merges(suite, tmp_path, workers):
    out = tmp_path / "run.json"
    result = run(suite, *workers, "--dist", "loadgroup", "--gpu-workers", f"--benchmark-json={out}")
    result.assert_outcomes(passed=N_TESTS)
    doc = json.loads(out.read_text())
    workers = {w["worker"]: w for w in doc["machine_info"]["workers"]}
    shares = cpu_shares(os.sched_getaffinity(0), 2)
    assert sorted(workers) == ["gw0", "gw1"]
    for w in workers.values():
        assert w["gpu"] == ["0", "1"][w["slot"]] and w["cpu_affinity"] == format_cpus(shares[w["slot"]])
        assert w["wall_s"] > 0 and "error" not in w
    assert sum(w["tests"] for w in workers.values()) == N_TESTS
    assert sum(w["benchmarks"] for w in workers.values()) == len(doc["benchmarks"]) == N_BENCH
    section = doc["cudagraph_bench"]   # the controller's session holds the workers' start-up and sessions
    assert section["wall_s"] >= section["slowest_worker_wall_s"] >= max(w["wall_s"] for w in workers.values())
    wall = re.search(r"session wall time ([0-9.]+) s", result.stdout.str())
    assert wall and float(wall.group(1)) >= round(section["wall_s"], 1) - 0.05   # printed to 0.1 s, later
    for b in doc["benchmarks"]:
        info, w = b["extra_info"], workers[b["extra_info"]["worker"]]
        assert (info["gpu"], format_cpus(info["cpus"])) == (w["gpu"], w["cpu_affinity"])
        assert "@" not in b["fullname"] and b["stats"]["rounds"] == 3
    for model in MODELS:   # one model, one worker
        assert len({b["extra_info"]["worker"] for b in doc["benchmarks"] if b["params"]["model"] == model}) == 1
    assert len(doc["cudagraph_bench"][DURATIONS_KEY]) == N_TESTS
    assert doc["machine_info"]["cpu_affinity"] == format_cpus(os.sched_getaffinity(0))   # the controller's
    assert f"benchmark: {N_BENCH} tests" in result.stdout.str()   # pytest-benchmark's table of all workers
    assert "automatically disabled" not in result.stdout.str() + result.stderr.str()


@two_cpus
@simulated_gpus
def test_auto_starts_one_worker_per_gpu_and_benchmark_only_and_autosave_work(suite, tmp_path, monkeypatch):
    """-n auto: one worker per GPU, even where xdist's own answer (the CPU count, or this variable) is another."""
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "5")
    out, storage = tmp_path / "run.json", tmp_path / "storage"
    result = run(suite, "-n", "auto", "--dist", "loadgroup", "--gpu-workers", "--benchmark-only",
                 f"--benchmark-json={out}", "--benchmark-autosave", f"--benchmark-storage=file://{storage}")
    result.assert_outcomes(passed=N_BENCH, skipped=1)
    assert len(json.loads(out.read_text())["machine_info"]["workers"]) == 2
    (saved,) = storage.glob("*/0001_*.json")   # one saved run: the merged one, without the rounds' data
    doc = json.loads(saved.read_text())
    assert len(doc["benchmarks"]) == N_BENCH and not any("data" in b["stats"] for b in doc["benchmarks"])


@pytest.mark.parametrize("gpus, args, message", [
    ("0,1", ("-n", "2"), "--gpu-workers needs --dist loadgroup (it keeps each model and dtype on one worker), "
                         "got --dist load"),
    ("0", ("-n", "2", "--dist", "loadgroup"), "--gpu-workers: 2 workers but 1 GPU(s) visible "
                                              "(CUDA_VISIBLE_DEVICES='0'): give -n 1 or fewer"),
    ("", ("-n", "1", "--dist", "loadgroup"), "--gpu-workers: no GPU visible (CUDA_VISIBLE_DEVICES='')"),
    ("0,1,0", ("-n", "2", "--dist", "loadgroup"), "--gpu-workers: CUDA_VISIBLE_DEVICES='0,1,0' names GPU '0' more "
                                                  "than once, so two workers would time on one GPU: name each GPU once"),
    ("0,1", (), "--gpu-workers needs pytest-xdist workers: add -n N --dist loadgroup"),
    ("0,1", ("-n", "2", "--dist", "loadgroup", "--benchmark-compare=0001"),
     "--benchmark-compare is not applied to a --gpu-workers run"),
])
def test_bad_worker_set_ups_are_usage_errors(suite, monkeypatch, gpus, args, message):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", gpus)
    result = run(suite, "--gpu-workers", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_benchmark_only_under_xdist_without_gpu_workers_names_the_fix(suite):
    """``-n 2 --benchmark-only`` (pytest-benchmark turns timing off under xdist): one usage error that says to
    drop -n or add --gpu-workers, instead of pytest-benchmark's "--benchmark-disable" message."""
    result = run(suite, "-n", "2", "--benchmark-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and "drop -n" in errors[0] and "--gpu-workers" in errors[0]
    assert "--benchmark-disable" not in result.stderr.str()


def durations_run(tmp_path, seconds_by_group):
    """A run JSON whose recorded durations give each group of SUITE the seconds asked for."""
    durations = {"test_suite.py::test_plain": seconds_by_group["test_suite.py"]}
    for model in MODELS:
        for n in (1, 2):
            durations[f"test_suite.py::test_bench[{n}-float32-{model}]"] = seconds_by_group[f"{model}-float32"] / 2
    return write({**DOC, "cudagraph_bench": {DURATIONS_KEY: durations}}, tmp_path / "durations.json")


def test_a_free_worker_takes_the_longest_recorded_group(suite, tmp_path, monkeypatch):
    seconds = {"m1-float32": 1.0, "m2-float32": 30.0, "m3-float32": 7.0, "test_suite.py": 12.0}
    order = tmp_path / "order.log"
    monkeypatch.setenv("ORDER_LOG", str(order))
    result = run(suite, "-n", "1", "--dist", "loadgroup", "--gpu-workers", "--benchmark-disable",
                 f"--shard-durations={durations_run(tmp_path, seconds)}")
    result.assert_outcomes(passed=N_TESTS)
    ran = list(dict.fromkeys(order.read_text().split()))
    assert ran == sorted(seconds, key=seconds.get, reverse=True)


def test_shards_split_the_suite_into_whole_groups(suite, tmp_path):
    seconds = {"m1-float32": 1.0, "m2-float32": 30.0, "m3-float32": 7.0, "test_suite.py": 12.0}
    durations = durations_run(tmp_path, seconds)
    expected = assign_shards({g: [g] for g in seconds}, 2, seconds)
    got = []
    for k in (1, 2):
        out = tmp_path / f"shard-{k}.json"
        result = run(suite, f"--shard={k}/2", f"--shard-durations={durations}", f"--benchmark-json={out}")
        n = sum(2 if g != "test_suite.py" else 1 for g in expected[k - 1])
        result.assert_outcomes(passed=n)
        assert f"{N_TESTS - n} deselected" in result.stdout.str()
        section = json.loads(out.read_text())["cudagraph_bench"]
        assert section["shard"] == {"index": k, "count": 2, "groups": sorted(expected[k - 1]), "tests": n,
                                    "durations_from": str(durations)}
        got.append(set(section[DURATIONS_KEY]))
    assert not got[0] & got[1] and len(got[0] | got[1]) == N_TESTS


def test_a_shard_is_taken_after_k_deselects(suite):
    result = run(suite, "--shard=1/2", "-k", "m1 or m2", "--collect-only", "-q")
    # four tests of two groups remain; shard 1 of 2 keeps one group (two tests)
    assert "2/7 tests collected (5 deselected)" in result.stdout.str()


@pytest.mark.parametrize("value", ["3/2", "0/2", "1", "a/b"])
def test_a_bad_shard_is_a_usage_error(suite, value):
    result = run(suite, f"--shard={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"bad shard {value!r}: give K/N" in result.stderr.str()


def test_shard_durations_without_durations_is_a_usage_error(suite, tmp_path):
    result = run(suite, "--shard=1/2", f"--shard-durations={write(DOC, tmp_path / 'old.json')}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "records no test durations (cudagraph_bench.test_durations_s)" in result.stderr.str()


@pytest.mark.parametrize("workers", [(), ("-n", "1", "--dist", "loadgroup", "--gpu-workers")])
def test_shard_durations_of_other_tests_are_a_warning(suite, tmp_path, workers):
    """Durations recorded under other node ids (another suite, another rootdir) would balance nothing."""
    other = write({**DOC, "cudagraph_bench": {DURATIONS_KEY: {"suites/other/test_x.py::test_y": 3.0}}},
                  tmp_path / "other.json")
    result = run(suite, "--shard=1/1", f"--shard-durations={other}", "--benchmark-disable", *workers)
    result.assert_outcomes(passed=N_TESTS)
    assert re.search(rf"--shard-durations {re.escape(str(other))} records none of the {N_TESTS} tests collected "
                     r"here \(e\.g\. test_suite\.py::", result.stdout.str())
    durations = durations_run(tmp_path, {"m1-float32": 1.0, "m2-float32": 2.0, "m3-float32": 3.0,
                                         "test_suite.py": 1.0})
    result = run(suite, "--shard=1/1", f"--shard-durations={durations}", "--benchmark-disable", *workers)
    assert "records none of the" not in result.stdout.str()


#: Forward profiles (the suite's profiling group: the slot-0 worker) and the eager benchmarks of the same cases,
#: one group per model: the slot-0 worker takes one of them before the profiles, the other worker the other
#: one. A case's stand-in kernel count is a function of the case.
PROFILES_AND_EAGER = """
import pytest
from cudagraph_bench.session import FORWARD_PROFILES_GROUP

CASES = [("m1", "float32", 16), ("m1", "float32", 50), ("m2", "float32", 16), ("m2", "float32", 50)]

@pytest.mark.xdist_group(FORWARD_PROFILES_GROUP)
@pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")
@pytest.mark.parametrize("case", CASES, ids=str)
def test_profile(benchmark, cgb, case):
    cgb.ledger.kernel_counts[case] = {"n_kernels": 3 * case[2] + (case[0] == "m2") + 1}

@pytest.mark.parametrize("case", [pytest.param(case, marks=pytest.mark.xdist_group(case[0])) for case in CASES], ids=str)
def test_eager(benchmark, case):
    model, dtype, seq_len = case
    benchmark.extra_info.update(suite="forward", model=model, dtype=dtype, seq_len=seq_len, variant="eager")
    benchmark.pedantic(sum, args=(range(100),), rounds=3)
"""
PROFILED_CASES = [("m1", 16), ("m1", 50), ("m2", 16), ("m2", 50)]


def stand_in_count(model: str, seq_len: int) -> int:
    return 3 * seq_len + (model == "m2") + 1


@pytest.fixture
def profiles_and_eager(pytester, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    pytester.makepyfile(test_profiles_and_eager=PROFILES_AND_EAGER)
    return pytester


@two_cpus
@simulated_gpus
def test_counts_profiled_in_one_worker_reach_the_eager_benchmarks_of_the_other(profiles_and_eager, tmp_path):
    """Each worker sends its document, benchmarks or none; the controller's merge writes the profiling
    worker's kernel counts into the eager benchmarks that the other worker measured."""
    out = tmp_path / "run.json"
    result = run(profiles_and_eager, "-n", "2", "--dist", "loadgroup", "--gpu-workers", f"--benchmark-json={out}")
    n = len(PROFILED_CASES)
    result.assert_outcomes(passed=2 * n)
    doc = json.loads(out.read_text())
    # the slot-0 worker: one model's eager benchmarks and every profile; the other: the other model's
    assert sorted((w["slot"], w["benchmarks"], w["tests"]) for w in doc["machine_info"]["workers"]) == \
        [(0, n // 2, n // 2 + n), (1, n // 2, n // 2)]
    assert {(b["extra_info"]["model"], b["extra_info"]["seq_len"]): b["extra_info"]["n_kernels"]
            for b in doc["benchmarks"]} == {case: stand_in_count(*case) for case in PROFILED_CASES}


@two_cpus
@simulated_gpus
def test_workers_that_only_profiled_still_write_the_json_with_their_shard(profiles_and_eager, tmp_path):
    from cudagraph_bench.results.merge import recorded_shard

    out = tmp_path / "run.json"
    result = run(profiles_and_eager, "-n", "2", "--dist", "loadgroup", "--gpu-workers", "-k", "not test_eager",
                 "--shard=1/1", f"--benchmark-json={out}")
    result.assert_outcomes(passed=len(PROFILED_CASES))
    doc = json.loads(out.read_text())
    assert doc["benchmarks"] == [] and len(doc["machine_info"]["workers"]) == 2
    assert [(k["model"], k["seq_len"], k["n_kernels"]) for k in doc["cudagraph_bench"]["kernel_counts"]] == \
        [(*case, stand_in_count(*case)) for case in PROFILED_CASES]
    assert recorded_shard(doc) == (1, 1)
    assert "Not saving anything" not in result.stdout.str() + result.stderr.str()


#: The kernel-count worker faked in each process, each event logged with the GPU of the process (the worker's
#: CUDA_VISIBLE_DEVICES entry: its slot).
HELD_PROFILES_CONFTEST = fake_worker_conftest(event_prefix='os.environ.get("CUDA_VISIBLE_DEVICES"),')


#: Two groups (gpt2 in two dtypes), each an untimed test then a timed one, and the forward-profiles group.
HELD_PROFILES_SUITE = {
    "test_a_untimed": """
import pytest
pytestmark = pytest.mark.untimed

@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("model", ["gpt2"])
def test_check(cgb, model, dtype):
    pass
""",
    "test_b_timed": """
import pytest

@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("model", ["gpt2"])
def test_timed(model, dtype):
    pass
""",
    "test_c_profiled": """
import pytest
from cudagraph_bench.session import FORWARD_PROFILES_GROUP, ProfiledCases

pytestmark = pytest.mark.xdist_group(FORWARD_PROFILES_GROUP)

@pytest.fixture(scope="module")
def profiled(request, cgb):
    return ProfiledCases(request, cgb)

@pytest.mark.parametrize("model, dtype, seq_len", [("gpt2", "float32", 16), ("gpt2", "float32", 50)])
def test_profile(profiled, model, dtype, seq_len):
    assert profiled.get((model, dtype, seq_len)) == seq_len
""",
}


@two_cpus
@simulated_gpus
def test_the_profiles_worker_holds_the_kernel_count_worker_through_its_untimed_tests(pytester, tmp_path,
                                                                                    monkeypatch):
    """The forward-profiles group is pinned to the worker of slot 0 (GPU "0" here), which starts the
    kernel-count worker at its first untimed test and lets it count its batch before its first timed test,
    as a session without workers does; the other worker never holds or counts anything. The counting
    seconds, spent between two tests, are the first profiling test's in the controller's time per part too."""
    events = tmp_path / "events.jsonl"
    monkeypatch.setenv("EVENTS", str(events))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    pytester.makeconftest(HELD_PROFILES_CONFTEST)
    pytester.makepyfile(**HELD_PROFILES_SUITE)
    result = run(pytester, "-n", "2", "--dist", "loadgroup", "--gpu-workers")
    result.assert_outcomes(passed=6)
    got = [json.loads(line) for line in events.read_text().splitlines()]
    lengths = [16, 50]            # test_c_profiled's cases
    assert [e for e in got if e[1] in ("hold", "count")] == [["0", "hold", lengths], ["0", "count", lengths, True]]
    count_s = COUNT_S
    part = re.search(r"([0-9.]+) s +2 tests +test_c_profiled.py", result.stdout.str())
    assert part and float(part.group(1)) >= count_s


class StandInNode:
    """What xdist's scheduler uses of a worker: its id, the test indices it was sent, shutdown."""

    def __init__(self, worker):
        from types import SimpleNamespace

        self.workerinput, self.shutting_down, self.sent = {"workerid": worker}, False, []
        self.gateway = SimpleNamespace(id=worker)

    def send_runtest_some(self, indices):
        self.sent.append(indices)

    def shutdown(self):
        self.shutting_down = True


#: Groups by test count (no recorded durations): big (3 tests) > mid (2) > the profiles group (1).
SCHEDULED_TESTS = {"big::a": "big", "big::b": "big", "big::c": "big", "mid::a": "mid", "mid::b": "mid",
                   "prof::a": "forward-profiles"}


def scheduler_of(monkeypatch, nodes, untimed=()):
    """``--gpu-workers``' scheduler (xdist's LoadGroupScheduling underneath) over stand-in nodes, added to it in
    list order, each having collected :data:`SCHEDULED_TESTS` (``untimed``: the untimed ones); the worker
    ``gwI`` holds slot I; scheduled."""
    from types import SimpleNamespace

    import cudagraph_bench.gpu_workers as gw

    plan = gw.GpuPlan([str(i) for i in range(len(nodes))], [[i] for i in range(len(nodes))], False)
    plan.slot_of = {node.workerinput["workerid"]: int(node.workerinput["workerid"][2:]) for node in nodes}
    config = SimpleNamespace(stash={gw.PLAN: plan}, option=SimpleNamespace(loadscopereorder=True),
                             getvalue=lambda name: ["popen"] * len(nodes) if name == "tx" else None)
    monkeypatch.setattr(gw, "read_groups", lambda folder: (SCHEDULED_TESTS, set(untimed)))
    noop = lambda *args: None  # noqa: E731
    scheduler = gw.pytest_xdist_make_scheduler(config, log=SimpleNamespace(loadscopesched=noop, loadgroupsched=noop))
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, list(SCHEDULED_TESTS))
    scheduler.schedule()
    return scheduler


def sent_groups(node) -> list[str]:
    """The group of each batch of tests ``node`` was sent, in order."""
    tests = list(SCHEDULED_TESTS)
    return ["+".join(sorted({SCHEDULED_TESTS[tests[i]] for i in batch})) for batch in node.sent]


def test_the_profiles_group_goes_to_slot_0_as_its_second_group(monkeypatch):
    """The slot-0 worker takes the heaviest other group first and the profiles group once its first is nearly
    done (xdist's rule: at most 2 tests left); the other worker, out of other groups, is shut down instead of
    taking the profiles group."""
    owner, other = StandInNode("gw0"), StandInNode("gw1")
    scheduler = scheduler_of(monkeypatch, [owner, other])
    assert sent_groups(owner) == ["big"] and sent_groups(other) == ["mid"]
    tests = list(SCHEDULED_TESTS)
    scheduler.mark_test_complete(other, tests.index("mid::a"))   # 1 test left: it asks for more
    assert sent_groups(other) == ["mid"] and other.shutting_down
    scheduler.mark_test_complete(owner, tests.index("big::a"))   # 2 tests left: it asks for more
    assert sent_groups(owner) == ["big", "forward-profiles"] and not scheduler.workqueue


def test_the_profiles_worker_first_takes_the_heaviest_group_that_starts_untimed(monkeypatch):
    """Its kernel-count worker prepares during the untimed tests (Session.hold_profiling_worker)."""
    owner, other = StandInNode("gw0"), StandInNode("gw1")
    scheduler_of(monkeypatch, [owner, other], untimed=["mid::a"])
    assert sent_groups(owner) == ["mid", "forward-profiles"] and sent_groups(other) == ["big"]
    owner, other = StandInNode("gw0"), StandInNode("gw1")
    scheduler_of(monkeypatch, [owner, other], untimed=["mid::b"])     # mid starts with a timed test
    assert sent_groups(owner) == ["big"] and sent_groups(other) == ["mid"]


def test_the_profiles_group_is_taken_first_when_alone_and_its_worker_is_never_an_extra_node(monkeypatch):
    for name in ("big::a", "big::b", "big::c", "mid::a", "mid::b"):
        monkeypatch.delitem(SCHEDULED_TESTS, name)
    owner = StandInNode("gw0")
    scheduler_of(monkeypatch, [owner])
    assert sent_groups(owner) == ["forward-profiles"]
    # one group, two workers: xdist shuts down the nodes it added last, but never slot 0's
    owner, other = StandInNode("gw0"), StandInNode("gw1")
    scheduler_of(monkeypatch, [other, owner])
    assert other.shutting_down and sent_groups(other) == []
    assert sent_groups(owner) == ["forward-profiles"]


def batches(node) -> list[list[str]]:
    """The tests of each batch ``node`` was sent (sorted), in order."""
    tests = list(SCHEDULED_TESTS)
    return [sorted(tests[i] for i in batch) for batch in node.sent]


def test_a_crashed_profiles_workers_tests_go_to_the_next_worker_but_not_the_one_it_crashed_in(monkeypatch):
    """The worker that replaces it (another slot here: the profiles worker is gone) gets the rest of the
    crashed worker's groups, profiles included; the test it crashed in is xdist's reported failure."""
    owner, other = StandInNode("gw0"), StandInNode("gw1")
    scheduler = scheduler_of(monkeypatch, [owner, other])
    tests = list(SCHEDULED_TESTS)
    big = [tests[i] for i in owner.sent[0]]                             # in the order the worker runs them
    scheduler.mark_test_complete(other, tests.index("mid::a"))          # only the profiles left: shut down
    scheduler.mark_test_complete(owner, tests.index(big[0]))            # 2 left: the profiles group comes
    assert batches(owner) == [["big::a", "big::b", "big::c"], ["prof::a"]] and other.shutting_down
    assert scheduler.remove_node(owner) == big[1]                       # it crashed in its second test
    new = StandInNode("gw2")
    scheduler.add_node(new)
    scheduler.add_node_collection(new, tests)
    scheduler.schedule()
    # one test left of big: the profiles come at once (an xdist worker runs a test once it knows the next)
    assert batches(new) == [[big[2]], ["prof::a"]]


def test_a_crashed_workers_finished_groups_are_not_handed_out_again(monkeypatch):
    """xdist puts a crashed worker's finished groups back too; sent again they would be empty work, after
    which the worker is never given more (the session hangs)."""
    monkeypatch.setitem(SCHEDULED_TESTS, "prof::b", "forward-profiles")
    owner, other = StandInNode("gw0"), StandInNode("gw1")
    scheduler = scheduler_of(monkeypatch, [owner, other])
    tests = list(SCHEDULED_TESTS)
    for name in ("big::a", "big::b", "big::c"):
        scheduler.mark_test_complete(owner, tests.index(name))
    assert batches(owner)[-1] == ["prof::a", "prof::b"]
    first, second = [tests[i] for i in owner.sent[-1]]                  # in the order the worker runs them
    assert scheduler.remove_node(owner) == first                        # big finished, then a crash in first
    new = StandInNode("gw2")
    scheduler.add_node(new)
    scheduler.add_node_collection(new, tests)
    scheduler.schedule()
    assert batches(new) == [[second]] and new.shutting_down        # its shutdown is what runs that test


@two_cpus
@simulated_gpus
def test_the_controller_imports_no_torch_and_records_the_workers_gpu(suite, tmp_path, monkeypatch):
    """The controller's merged run takes its ``machine_info["cuda"]`` from the workers' documents, so it never
    imports torch (seconds after the last worker ended, on the run's wall time)."""
    seen = tmp_path / "controller-modules.json"
    monkeypatch.setenv("SEEN", str(seen))
    suite.makeconftest("""
import json, os, sys
def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):
        with open(os.environ["SEEN"], "w") as f:
            json.dump(sorted(m for m in ("torch", "transformers") if m in sys.modules), f)
""")
    out = tmp_path / "run.json"
    result = run(suite, "-n", "2", "--dist", "loadgroup", "--gpu-workers", f"--benchmark-json={out}")
    result.assert_outcomes(passed=N_TESTS)
    assert json.loads(seen.read_text()) == []
    worker_cuda = json.loads(out.read_text())["machine_info"]["cuda"]
    assert worker_cuda is None or worker_cuda["gpu_name"]    # no GPU here: the workers recorded none


def test_the_merged_run_takes_the_slot_0_workers_cuda_fingerprint_with_the_controllers_gpu_count(monkeypatch):
    import cudagraph_bench.gpu_workers as gw

    def part(worker, slot, name):
        cuda = {"gpu_name": name, "device_count": 1, "driver": "580"}
        return {"info": {"worker": worker, "slot": slot}, "doc": {"machine_info": {"cuda": cuda}}}

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    plan = gw.GpuPlan(["0", "1", "2"], [[0], [1], [2]], False)
    plan.parts = [part("gw0", 1, "second"), part("gw1", 0, "slot 0"), {"info": {"worker": "gw2"}, "doc": None}]
    assert gw._workers_cuda(plan) == {"cuda": {"gpu_name": "slot 0", "device_count": 3, "driver": "580"}}
    plan.parts = [{"info": {"worker": "gw0", "slot": 0}, "doc": {"machine_info": {"cuda": None}}}]
    assert gw._workers_cuda(plan) == {"cuda": None}


@two_cpus
@simulated_gpus
def test_a_worker_whose_results_cannot_be_sent_fails_the_session_and_the_rest_are_merged(suite, tmp_path):
    suite.makeconftest("""
import os
import cudagraph_bench.plugin

def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER") == "gw1":
        def broken(*args, **kwargs):
            raise OSError("disk full")
        cudagraph_bench.plugin.benchmark_document = broken
""")
    out = tmp_path / "run.json"
    result = run(suite, "-n", "2", "--dist", "loadgroup", "--gpu-workers", f"--benchmark-json={out}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = result.stdout.str() + result.stderr.str()
    assert re.search(r"worker gw1 \(GPU [01]\): its results could not be sent: OSError: disk full; its \d+ "
                     r"benchmark\(s\) are not in the merged run", text)
    assert "Wrote benchmark data of 1 of 2 --gpu-workers workers (the others sent no results)" in text
    doc = json.loads(out.read_text())
    workers = {w["worker"]: w for w in doc["machine_info"]["workers"]}
    assert "disk full" in workers["gw1"]["error"] and "error" not in workers["gw0"]
    assert len(doc["benchmarks"]) == workers["gw0"]["benchmarks"] == N_BENCH - workers["gw1"]["benchmarks"]


@two_cpus
@simulated_gpus
def test_a_worker_that_crashes_in_the_profiles_group_ends_the_session_with_that_test_failed(suite):
    """xdist restarts the crashed worker; its other tests run once on the next worker, the one it crashed in
    is the session's failure (not run again), and the session ends (xdist's loadgroup alone hangs when it hands
    a crashed worker's finished group out again)."""
    suite.makepyfile(test_profiles="""
import os
import pytest
from cudagraph_bench.session import FORWARD_PROFILES_GROUP

pytestmark = pytest.mark.xdist_group(FORWARD_PROFILES_GROUP)

@pytest.mark.parametrize("case", ["first", "crashes", "last"])
def test_profile(case):
    if case == "crashes":
        os._exit(1)
""")
    result = suite.runpytest_subprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider", "-n", "2",
                                        "--dist", "loadgroup", "--gpu-workers", "--benchmark-disable", timeout=120)
    result.assert_outcomes(passed=N_TESTS + 2, failed=1)
    assert "crashed while running 'test_profiles.py::test_profile[crashes]'" in result.stdout.str()
