"""The proof of replay without a GPU: the count over synthetic profiler records, the rule over the recorded field,
and how gate, compare and the run file's validation read ``extra_info.replay`` (present and passing, absent,
failing, malformed) on the real H200 run."""


import pytest

from h200_fixture import (copy_doc, DOC, bench, checked, no_default_baseline_fixture, run_bad_input, run_cli, write,
                          write_runs)

from cudagraph_bench.results.record import decode_check
from cudagraph_bench.results.replay import (ReplayCount, api_name, count_replay, replay_field, replay_format_problem,
                                            replay_problem)

pytestmark = pytest.mark.transformers_free

CHECKED = checked(DOC)
KEY = ("gpt2", "float32", 16)
LABEL = "gpt2 float32 L=16"


def graph_call():
    """The records of one graph call as kineto lists them: the input copy, the launch, the synchronize (host API
    calls on the CPU) and the replayed kernels (device records, no launch call of their own)."""
    return [("aten::copy_", "cpu_op"), ("cudaMemcpyAsync", "cuda_runtime"), ("cudaGraphLaunch", "cuda_runtime"),
            ("cudaDeviceSynchronize", "cuda_runtime"), ("Memcpy DtoD (Device -> Device)", "gpu_memcpy"),
            *[("ampere_sgemm_128x64_tn", "kernel")] * 40]


def eager_call(n=212):
    return [("aten::linear", "cpu_op"), *[("cudaLaunchKernel", "cuda_runtime"), ("void gemv2T_kernel", "kernel")] * n]


def field(graph_launches=1, kernels=0, **extra):
    return {"calls": 1, "graph_launches": graph_launches, "kernels_outside_graph": kernels, "copies_outside_graph": 1,
            "expected_graph_launches": 1, "kernels_outside_allowed": 0, **extra}


# --- the count --------------------------------------------------------------------------------------------

def test_a_graph_call_is_one_launch_no_kernel_outside_and_its_input_copy():
    assert count_replay(graph_call()) == ReplayCount(1, 0, 1)


def test_an_eager_call_is_no_launch_and_every_kernel_outside():
    assert count_replay(eager_call(212)) == ReplayCount(0, 212, 0)


def test_driver_api_and_versioned_names_count_and_device_records_never_do():
    records = [("cuLaunchKernel", "cuda_driver"), ("cudaLaunchKernelExC_v11060", "cpu"),
               ("cudaLaunchKernel_ptsz", "cpu"), ("cuGraphLaunch", "cuda_driver"), ("cudaMemsetAsync", "cpu"),
               ("cudaLaunchKernel", "kernel"), ("cudaGraphLaunch", "cuda"), ("triton_poi_fused_0", "kernel")]
    assert count_replay(records) == ReplayCount(1, 3, 1)
    assert api_name("cudaLaunchKernel_v7000") == "cudaLaunchKernel"
    assert count_replay([]) == ReplayCount(0, 0, 0)


# --- the rule ---------------------------------------------------------------------------------------------

def test_one_launch_and_no_kernel_passes():
    assert replay_problem(field()) is None


def test_an_eager_call_fails_with_one_line_naming_the_counts():
    assert replay_problem(field(0, 212)) == ("replay: 0 graph launches and 212 kernels outside a graph per call "
                                             "(expected 1 and at most 0 per call): the timed call ran eagerly")


def test_extra_kernels_or_launches_fail():
    assert replay_problem(field(1, 3)).endswith("part of the call ran outside its graph")
    assert "not the 1 graph launch(es) per call" in replay_problem(field(2, 0))
    assert replay_problem(field(1, 4, kernels_outside_allowed=4)) is None       # padded: the prompt's padding
    assert replay_problem(field(1, 5, kernels_outside_allowed=4)) is not None


def test_a_decode_request_is_judged_on_its_launches_only():
    request = field(8, 350, expected_graph_launches=8, kernels_outside_allowed=None)
    assert replay_problem(request) is None
    assert replay_problem({**request, "graph_launches": 0}).endswith("the timed call ran eagerly")
    assert replay_problem({**request, "graph_launches": 7}) is not None


def test_several_calls_are_judged_per_call():
    assert replay_problem(field(3, 0, calls=3)) is None
    assert "in 3 calls" in replay_problem(field(2, 0, calls=3))


def test_replay_field_writes_every_count():
    assert replay_field(ReplayCount(1, 0, 2), calls=1, expected_graph_launches=1, kernels_outside_allowed=0) == {
        "calls": 1, "graph_launches": 1, "kernels_outside_graph": 0, "copies_outside_graph": 2,
        "expected_graph_launches": 1, "kernels_outside_allowed": 0}


@pytest.mark.parametrize("value, phrase", [
    ([1, 0], "extra_info.replay of type array, not an object"),
    ({"kernels_outside_graph": 0}, "extra_info.replay without graph_launches"),
    ({"graph_launches": "1", "kernels_outside_graph": 0}, "extra_info.replay.graph_launches = '1'"),
    ({"graph_launches": 1, "kernels_outside_graph": -1}, "extra_info.replay.kernels_outside_graph = -1"),
    ({"graph_launches": True, "kernels_outside_graph": 0}, "extra_info.replay.graph_launches = True"),
    ({"graph_launches": 1, "kernels_outside_graph": 0, "calls": 0}, "extra_info.replay.calls = 0, not a whole number >= 1"),
    ({"graph_launches": 1.5, "kernels_outside_graph": 0}, "extra_info.replay.graph_launches = 1.5"),
])
def test_malformed_fields_are_named(value, phrase):
    assert phrase in replay_format_problem(value)


def test_a_well_formed_field_has_no_format_problem():
    assert replay_format_problem(field()) is None
    assert replay_format_problem(field(kernels_outside_allowed=None)) is None


# --- one verdict: the recorded check ----------------------------------------------------------------------

def test_the_recorded_check_fails_on_a_failing_replay_whatever_the_outputs():
    info = {"correct": True, "check": "strict", "max_abs_diff": 0.0}
    assert decode_check({**info, "replay": field()}, "graph").status == "pass"
    failed = decode_check({**info, "replay": field(0, 212)}, "graph")
    assert failed.status == "fail" and "the timed call ran eagerly" in failed.detail
    assert decode_check(info, "graph").status == "pass"                      # not recorded: not a failure


@pytest.fixture(autouse=True)
def no_default_baseline(tmp_path, monkeypatch):
    return no_default_baseline_fixture(tmp_path, monkeypatch)


def with_replay(tmp_path, value, name="run.json", variant="graph"):
    doc = copy_doc(CHECKED)
    bench(doc, *KEY, variant)["extra_info"]["replay"] = value
    return write(doc, tmp_path / name)


def test_gate_passes_a_replayed_graph_and_notes_the_ones_without_a_proof(tmp_path, capsys):
    rc, out, err = run_cli(capsys, "gate", with_replay(tmp_path, field()), "--baseline", "none")
    assert rc == 0, out + err
    assert "note: replay not recorded for" in err and "--replay-proof" in err


def test_gate_fails_a_graph_that_ran_eagerly_and_names_it(tmp_path, capsys):
    rc, out, _ = run_cli(capsys, "gate", with_replay(tmp_path, field(0, 212)), "--baseline", "none")
    assert rc == 1
    summary = out.splitlines()[-1]
    assert summary.startswith("gate FAIL: ") and LABEL in summary
    assert "replay: 0 graph launches and 212 kernels outside a graph per call" in summary


def test_gate_fails_kernels_beyond_what_the_variant_allows(tmp_path, capsys):
    rc, out, _ = run_cli(capsys, "gate", with_replay(tmp_path, field(1, 9, kernels_outside_allowed=4)), "--baseline", "none")
    assert rc == 1 and "part of the call ran outside its graph" in out.splitlines()[-1]


def test_compare_reads_the_same_verdict(tmp_path, capsys):
    old = write(CHECKED, tmp_path / "old.json")
    rc, out, _ = run_cli(capsys, "compare", old, with_replay(tmp_path, field(0, 212), "new.json"))
    assert rc == 1 and "the timed call ran eagerly" in out


def test_baseline_refuses_a_run_whose_graph_ran_eagerly(tmp_path, capsys):
    runs = write_runs(tmp_path / "runs", (0.98, 0.99, 1.0, 1.01, 1.02), doc=CHECKED)
    doc = copy_doc(CHECKED)
    bench(doc, *KEY, "graph")["extra_info"]["replay"] = field(0, 212)
    write(doc, runs[2])                                  # the run of factor 1.0, with the failing proof
    rc, out, err = run_cli(capsys, "baseline", *runs, "-o", tmp_path / "b.json")
    assert rc == 1 and out == "" and f"{LABEL} graph" in err and "the timed call ran eagerly" in err
    assert not (tmp_path / "b.json").exists()


@pytest.mark.parametrize("value, phrase", [
    ("1 launch", "has extra_info.replay of type string, not an object of launch counts"),
    ({"graph_launches": 1}, "has extra_info.replay without kernels_outside_graph"),
    ({"graph_launches": -1, "kernels_outside_graph": 0}, "has extra_info.replay.graph_launches = -1"),
    (None, "has extra_info.replay of type null, not an object of launch counts"),     # null is no proof
])
def test_a_malformed_replay_field_is_bad_input(tmp_path, capsys, value, phrase):
    err = run_bad_input(capsys, ["gate", with_replay(tmp_path, value), "--baseline", "none"])
    assert "benchmarks[" in err and phrase in err and "rerun the benchmarks" in err


# --- the committed whole-suite run ----------------------------------------------------------------------------

def test_the_committed_gpu_gate_run_proves_every_graph_case_a_replay():
    """``make gpu-gate PYTEST_ARGS=--replay-proof`` on the H200: every timed forward and decode case of a captured
    variant carries its proof, and it passes; a forward graph launched one graph and no kernel outside it (the
    launch microbenchmark's graph of tiny kernels is not a model's and records none)."""
    from h200_fixture import committed_doc

    from cudagraph_bench.variants import find

    proven = {}
    for b in committed_doc("gpu-gate")["benchmarks"]:
        info = b["extra_info"]
        kind = find(info["suite"], info["variant"])
        if kind is None or not kind.captured or info["suite"] not in ("forward", "decode"):
            assert "replay" not in info, b["name"]
            continue
        value = info.get("replay")
        assert value is not None, f"{b['name']}: no replay proof"
        assert replay_format_problem(value) is None and replay_problem(value) is None, (b["name"], value)
        assert value["graph_launches"] == value["expected_graph_launches"] * value["calls"] >= 1
        if info["suite"] == "forward" and kind.lengths is None:
            assert (value["graph_launches"], value["kernels_outside_graph"]) == (1, 0), b["name"]
        proven[info["suite"], info["variant"]] = proven.get((info["suite"], info["variant"]), 0) + 1
    assert set(proven) == {("forward", "graph"), ("forward", "padded"), ("forward", "bucketed"),
                           ("decode", "graph")}, proven
