"""pytest-benchmark-native results: plain-value ``params`` (so ``--group-by=param:model`` and
``--histogram`` of pytest-benchmark work on the suite's JSON) and the GPU in ``machine_info``."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cudagraph_bench import variants
from cudagraph_bench.plugin import output
from cudagraph_bench.plugin import params as plugin
from cudagraph_bench.results.merge import machine_gpu
from h200_fixture import committed_doc, committed_run, plain_copy
from h200_fixture import COMMITTED_RUNS, H200_RESULTS
from in_process import collect_perf_tests, run_session


#: The module-scoped sessions are made once: all tests of this module in one pytest-xdist worker
#: (make test runs --dist loadgroup).
pytestmark = pytest.mark.xdist_group("collected-perf-tests")
ROOT = Path(__file__).resolve().parents[1]
PLAIN = (str, int, float, bool, type(None))
#: Parameter names of each case fixture, as pytest-benchmark stores them.
ARGNAMES = {"fwd_case": plugin.CASE_ARGNAMES, "pad_case": plugin.CASE_ARGNAMES,
            "corr_case": plugin.CASE_ARGNAMES[:3], "count_case": plugin.CASE_ARGNAMES[:3],
            "decode_case": plugin.DECODE_ARGNAMES}
MATRIX = ("--models", "gpt2,bert-tiny", "--prompt-lengths", "16,50", "--dtypes", "fp32,bf16")

BENCH_MODULE = '''
def test_forward(benchmark, fwd_case):
    benchmark.group = fwd_case.group
    benchmark.extra_info.update(fwd_case.extra_info())
    benchmark(lambda: None)
'''


@pytest.fixture(scope="module")
def collected():
    """Every perf test collected with :data:`MATRIX`: ``[{"nodeid", "fixturenames", "params", ...}]``."""
    return collect_perf_tests(*MATRIX)


def test_every_perf_test_parameter_is_a_plain_value(collected):
    assert collected
    for item in collected:
        for name, value in item["params"].items():
            assert isinstance(value, PLAIN), f"{item['nodeid']}: param {name}={value!r} is not plain"


@pytest.mark.parametrize("fixture", sorted(ARGNAMES))
def test_case_fixtures_get_their_argnames_and_readable_ids(collected, fixture):
    items = [i for i in collected if fixture in i["fixturenames"]]
    assert items, f"no perf test asks for {fixture}"
    for item in items:
        params = item["params"]
        assert tuple(params) == ARGNAMES[fixture], item["nodeid"]
        p = dict(params, variant=params.get("variant") or {"corr_case": "graph", "count_case": "eager"}[fixture])
        new = f"-new{p['new_tokens']}" if "new_tokens" in p else ""
        assert item["nodeid"].endswith(f"[{p['model']}-{p['dtype']}-L{p['seq_len']}{new}-{p['variant']}]")


def test_forward_matrix_is_the_options_product(collected):
    got = {tuple(i["params"].values()) for i in collected if "fwd_case" in i["fixturenames"]}
    want = {(m, d, n, v) for m in ("gpt2", "bert-tiny") for d in ("float32", "bfloat16") for n in (16, 50)
            for v in ("eager", "graph")}
    assert got == want
    decode = {i["params"]["model"] for i in collected if "decode_case" in i["fixturenames"]}
    assert decode == {"gpt2"}     # bert-tiny is no causal model
    # the compile variants only with --with-compile (tests/test_plugin.py)
    assert ({i["params"]["variant"] for i in collected if "decode_case" in i["fixturenames"]}
            == set(variants.names(variants.DECODE, compiled=False)))


# --------------------------------------------------------------- pytest-benchmark's own compare CLI


def _compare_cli(json_path: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_benchmark", "compare", str(json_path),
                           "--group-by=param:model", *args], capture_output=True, text=True, timeout=300,
                          cwd=json_path.parent)


def _has_histogram_deps() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("pygal", "pygaljs"))


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """A JSON written by a real pytest-benchmark session on CPU with the cudagraph-bench plugin, parametrized
    like the forward benchmarks (2 models x 1 dtype x 1 length x eager, graph; times a no-op)."""
    tmp = tmp_path_factory.mktemp("cpu_run")
    (tmp / "test_tiny_bench.py").write_text(BENCH_MODULE)
    out = tmp / "run.json"
    rc = run_session([str(tmp / "test_tiny_bench.py"), "-p", "cudagraph_bench.plugin", "-q", "--models",
                      "gpt2,bert-tiny", "--prompt-lengths", "16", "--dtypes", "fp32", "--benchmark-max-time=0.001",
                      "--benchmark-min-rounds=3", f"--benchmark-json={out}"])
    assert rc == 0
    return out


@pytest.fixture(scope="module")
def committed_plain_run(tmp_path_factory) -> Path:
    """The committed H200 forward run with plain-value params, decompressed (``gunzip -k``): the file
    pytest-benchmark wrote, which its own ``compare`` reads."""
    return plain_copy(committed_run("forward-one-pipeline"), tmp_path_factory.mktemp("committed"))


@pytest.fixture(params=["cpu-session", "committed-h200"])
def plain_run(request) -> Path:
    return request.getfixturevalue("cpu_run" if request.param == "cpu-session" else "committed_plain_run")


def _models(path: Path) -> set[str]:
    return {b["params"]["model"] for b in json.loads(path.read_text())["benchmarks"]}


def test_run_json_params_and_extra_info_are_plain_and_agree(plain_run):
    doc = json.loads(plain_run.read_text())
    for bench in doc["benchmarks"]:
        params, info = bench["params"], bench["extra_info"]
        assert all(isinstance(v, PLAIN) for v in params.values()), params
        assert {k: info[k] for k in params} == params   # the key in extra_info is the key in params


def test_pytest_benchmark_compare_groups_by_model(plain_run):
    proc = _compare_cli(plain_run)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for model in _models(plain_run):
        assert f"model={model}" in proc.stdout


def test_pytest_benchmark_histogram_is_named_by_model(plain_run, tmp_path):
    if not _has_histogram_deps():
        pytest.skip("pytest-benchmark --histogram needs pygal and pygaljs: pip install 'pytest-benchmark[histogram]'")
    proc = _compare_cli(plain_run, f"--histogram={tmp_path / 'h'}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {p.name for p in tmp_path.glob("h-*.svg")} == {f"h-model={m}.svg" for m in _models(plain_run)}


def test_pytest_benchmark_compare_from_the_checkout_groups_a_whole_suite_run_with_launch_benchmarks(tmp_path):
    # the launch benchmarks have no `model`: pytest-benchmark's standalone compare takes the grouping hook
    # from ./conftest.py, which in the checkout is the plugin's (model=None for them, no KeyError)
    run = plain_copy(committed_run("suite-one-gpu"), tmp_path)
    models = {(b.get("params") or {}).get("model") for b in json.loads(run.read_text())["benchmarks"]}
    assert None in models and len(models) > 2           # launch benchmarks beside the models' own
    proc = subprocess.run([sys.executable, "-m", "pytest_benchmark", "compare", str(run), "--group-by=param:model"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for model in models:
        assert f"benchmark 'model={model}'" in proc.stdout


def test_group_by_param_model_in_a_session_with_benchmarks_without_model(pytester):
    """The launch benchmarks have no ``model`` parameter: they group under ``model=None``, no KeyError."""
    pytester.makepyfile(BENCH_MODULE + '''
import pytest

@pytest.mark.parametrize("n_launches", [8])
def test_launch(benchmark, n_launches):
    benchmark(lambda: None)
''')
    result = pytester.runpytest_inprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider", "--models",
                                          "gpt2", "--prompt-lengths", "16", "--dtypes", "fp32",
                                          "--benchmark-max-time=0.001", "--benchmark-group-by=param:model")
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    assert "benchmark 'model=gpt2': 2 tests" in out and "benchmark 'model=None': 1 tests" in out


# ------------------------------------------------------------------------------ GPU in machine_info


def test_machine_info_carries_the_gpu_at_top_level(monkeypatch):
    import cudagraph_bench.envinfo as envinfo
    import cudagraph_bench.measure.gpustate as gpustate

    monkeypatch.setattr(envinfo, "cuda_fingerprint", lambda: {"gpu_name": "NVIDIA H200", "gpu_slug": "nvidia-h200"})
    monkeypatch.setattr(gpustate, "read_gpu_state", lambda index=0: None)
    info = {"node": "host"}
    output.pytest_benchmark_update_machine_info(None, info)
    assert info["gpu"] == info["cuda"]["gpu_name"]
    monkeypatch.setattr(envinfo, "cuda_fingerprint", lambda: None)
    output.pytest_benchmark_update_machine_info(None, info)
    assert info["gpu"] is None


def test_a_cpu_session_on_a_gpu_machine_records_no_gpu(monkeypatch):
    """A ``--device cpu`` session measured no GPU: ``machine_info["cuda"]`` is None even where CUDA is available,
    so its run is never compared or gated as that GPU's."""
    from types import SimpleNamespace

    import cudagraph_bench.envinfo as envinfo

    monkeypatch.setattr(envinfo, "cuda_fingerprint", lambda: pytest.fail("a CPU session read the GPU fingerprint"))
    info = {}
    output.pytest_benchmark_update_machine_info(SimpleNamespace(getoption=lambda name, default=None: "cpu"), info)
    assert info["cuda"] is None and info["gpu"] is None and "cpu_affinity" in info


def test_machine_gpu_reads_older_runs_from_cuda():
    run = committed_doc("forward")
    assert "gpu" not in run["machine_info"]     # saved before the field existed
    assert machine_gpu(run["machine_info"]) == run["machine_info"]["cuda"]["gpu_name"]
    assert machine_gpu({"cuda": None}) is None and machine_gpu(None) is None


@pytest.mark.filterwarnings("ignore:Benchmark machine_info is different")   # pytest-benchmark's own, at the end
def test_benchmark_compare_refuses_a_saved_run_of_another_gpu(pytester, no_gpu):
    pytester.makepyfile("def test_b(benchmark):\n    benchmark(lambda: None)\n")
    args = ("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider", "--benchmark-max-time=0.001",
            f"--benchmark-storage={pytester.path / 'store'}")
    assert pytester.runpytest_inprocess(*args, "--benchmark-autosave").ret == 0
    (saved,) = (pytester.path / "store").glob("*/0001_*.json")
    doc = json.loads(saved.read_text())
    assert doc["machine_info"]["gpu"] is None              # this session has no GPU
    # the same GPU (none) compares; a run of another GPU is refused with the fix
    assert pytester.runpytest_inprocess(*args, "--benchmark-compare=0001").ret == 0
    other = "NVIDIA H200"
    doc["machine_info"]["gpu"] = other
    saved.write_text(json.dumps(doc))
    result = pytester.runpytest_inprocess(*args, "--benchmark-compare=0001")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (f"--benchmark-compare: the saved run was on GPU {other}, this session runs on none: compare against "
            "a run of this GPU") in result.stderr.str()
