"""A pytest session that ran no benchmark but recorded kernel counts or failed cases (a ``--shard K/N`` that
held only the profiling tests) still writes its ``--benchmark-json``, in pytest-benchmark's format with an
empty ``benchmarks`` list; a session that recorded nothing writes nothing, as pytest-benchmark does. The
profiling shard's file merges with the other shards' runs (its kernel counts reach their eager benchmarks)
and is refused with one line by the commands that need benchmarks.

The sessions run through pytester in this process; their kernel counts are the committed whole-suite H200
run's, recorded by a stand-in for the profiling tests (the real ones need a GPU:
perf_tests/test_kernel_counts.py)."""

import json
import warnings

import pytest
import pytest_benchmark

from cudagraph_bench.results.shards import DURATIONS_KEY

from h200_fixture import copy_doc, committed_run, read_json, run_cli, write

SUITE_RUN = committed_run("suite-one-gpu")
SUITE = read_json(SUITE_RUN)
COUNTS = SUITE["cudagraph_bench"]["kernel_counts"]
PROFILE_FIELDS = ("n_kernels", "gpu_busy_ms")

#: Stands for perf_tests/test_kernel_counts.py: one test per case records the case's committed profile in
#: the session's records (as the real test records what it profiled), marked ``profiles``, and takes the
#: ``benchmark`` fixture without timing anything, as the real one does.
PROFILES_TEST = f"""
import pytest

pytestmark = [pytest.mark.profiles, pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")]
COUNTS = {COUNTS!r}

@pytest.mark.parametrize("entry", COUNTS, ids=lambda e: f"{{e['model']}}-{{e['dtype']}}-L{{e['seq_len']}}")
def test_profile(benchmark, cgb, entry):
    key = (entry["model"], entry["dtype"], entry["seq_len"])
    cgb.records.kernel_counts[key] = {{f: v for f, v in entry.items() if f not in ("model", "dtype", "seq_len")}}
"""
#: A module of another group that records nothing.
OTHER_TEST = "def test_other():\n    pass\n"
#: The profiling session ran on the committed run's GPU: the merge joins runs of one GPU model only.
SAME_GPU_CONFTEST = f"""
import pytest

@pytest.hookimpl(trylast=True)
def pytest_benchmark_update_machine_info(config, machine_info):
    machine_info["gpu"] = {SUITE["machine_info"]["gpu"]!r}
"""


def run(pytester, *args):
    """The session in this process; the warnings it gives outside its tests (pytest-benchmark's at the session's
    end) are kept as ``result.late_warnings`` (their messages)."""
    with warnings.catch_warnings(record=True) as late:
        warnings.simplefilter("always")
        result = pytester.runpytest_inprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider", *args)
    result.late_warnings = [str(w.message) for w in late]
    return result


def output(result) -> str:
    return result.stdout.str() + result.stderr.str() + "\n".join(result.late_warnings)


@pytest.fixture
def profiles(pytester):
    pytester.makepyfile(test_stand_in_profiles=PROFILES_TEST, test_other=OTHER_TEST)
    return pytester


def test_the_suite_run_records_kernel_counts_of_its_eager_benchmarks():
    """The source of every expectation here: counts, and eager forward benchmarks that carry them."""
    eager = [b for b in SUITE["benchmarks"]
             if b["extra_info"].get("suite") == "forward" and b["extra_info"].get("variant") == "eager"]
    assert COUNTS and len([b for b in eager if "n_kernels" in b["extra_info"]]) == len(COUNTS)


def test_a_session_that_only_profiled_writes_its_kernel_counts_as_pytest_benchmark_would(profiles, tmp_path):
    out, reference = tmp_path / "profiles.json", tmp_path / "with-benchmark.json"
    result = run(profiles, f"--benchmark-json={out}")
    result.assert_outcomes(passed=len(COUNTS) + 1)
    doc = json.loads(out.read_text())
    assert doc["benchmarks"] == []
    section = doc["cudagraph_bench"]
    expected = sorted(COUNTS, key=lambda e: (e["model"], e["dtype"], e["seq_len"]))
    assert section["kernel_counts"] == expected and section["failures"] == []
    assert len(section[DURATIONS_KEY]) == len(COUNTS) + 1 and section["wall_s"] > 0
    assert "Not saving anything" not in output(result)
    assert f"No benchmark ran; wrote the session's failed cases and kernel counts in: {out}" in output(result)
    # the envelope pytest-benchmark itself writes for a session with a benchmark, field by field
    profiles.makepyfile(test_timed="def test_timed(benchmark):\n    benchmark(sum, range(10))\n")
    assert run(profiles, "test_timed.py", f"--benchmark-json={reference}", "--benchmark-max-time=0.001").ret == 0
    ref = json.loads(reference.read_text())
    assert doc.keys() == ref.keys()
    assert doc["machine_info"].keys() == ref["machine_info"].keys()
    assert doc["commit_info"].keys() == ref["commit_info"].keys()
    assert doc["version"] == ref["version"] == pytest_benchmark.__version__
    assert doc["datetime"] <= ref["datetime"]


def test_a_session_that_only_recorded_a_failure_writes_it(pytester, tmp_path):
    pytester.makepyfile("""
        def test_decode_case(request, cgb):
            cgb.records.fail(request.node.nodeid, {"suite": "decode", "model": "gpt2", "dtype": "bfloat16",
                                                   "seq_len": 50, "new_tokens": 64, "variant": "compile+graph"},
                             "RuntimeError: compile failed")
    """)
    out = tmp_path / "run.json"
    result = run(pytester, f"--benchmark-json={out}")
    result.assert_outcomes(passed=1)
    assert "Not saving anything" not in output(result)
    doc = json.loads(out.read_text())
    (failure,) = doc["cudagraph_bench"]["failures"]
    assert doc["benchmarks"] == [] and failure["reason"] == "RuntimeError: compile failed"
    assert failure["fullname"] == "test_a_session_that_only_recorded_a_failure_writes_it.py::test_decode_case"


@pytest.mark.parametrize("args", [
    ("--benchmark-skip",),                                       # the profiling tests skip with the benchmarks
    ("-k", "test_other"),                                        # no profiling test selected
    ("--benchmark-only", "-W", "ignore:Not saving anything"),    # as `make bench` runs, where no GPU skips them
])
def test_a_session_that_recorded_nothing_writes_nothing(profiles, tmp_path, no_gpu, args):
    """No benchmark ran and the records hold no kernel count or failure: no file, as pytest-benchmark does
    (`make bench` then says that nothing was measured)."""
    if "--benchmark-only" in args:
        profiles.makeini("[pytest]\nmarkers =\n    gpu: needs a CUDA GPU\n")
        profiles.makepyfile(test_stand_in_profiles=PROFILES_TEST + "\npytestmark.append(pytest.mark.gpu)\n")
    out = tmp_path / "run.json"
    result = run(profiles, f"--benchmark-json={out}", *args)
    assert result.ret == 0
    assert not written(out)


def written(path) -> bool:
    """Whether a session wrote its run to ``path``: pytest-benchmark before 5.3 creates the ``--benchmark-json``
    file when it parses the option and leaves it empty when it saves nothing (``make bench`` tests ``-s``)."""
    return path.exists() and path.stat().st_size > 0


@pytest.fixture
def profiling_shard(profiles, tmp_path):
    """``(K, path)``: the one shard of ``--shard K/2`` that wrote its run: the profiling group's; the other
    shard's session (test_other.py only) recorded nothing and wrote none."""
    profiles.makeconftest(SAME_GPU_CONFTEST)
    shards = []
    for k in (1, 2):
        out = tmp_path / f"shard-{k}.json"
        assert run(profiles, f"--shard={k}/2", f"--benchmark-json={out}").ret == 0
        if written(out):
            shards.append((k, out))
    (shard,) = shards
    return shard


def benchmarks_shard(tmp_path, k: int):
    """The committed suite run as shard ``k`` of 2 that profiled nothing: its benchmarks without their kernel
    counts, its section without them."""
    doc = copy_doc(SUITE)
    for bench in doc["benchmarks"]:
        for field in PROFILE_FIELDS:
            bench["extra_info"].pop(field, None)
    doc["cudagraph_bench"]["kernel_counts"] = []
    doc["cudagraph_bench"]["shard"] = {"index": k, "count": 2, "groups": [], "tests": len(doc["benchmarks"])}
    return write(doc, tmp_path / f"benchmarks-{k}.json")


def test_merge_takes_the_profiling_shard_and_puts_its_counts_into_the_eager_benchmarks(profiling_shard, tmp_path,
                                                                                      capsys):
    k, profiles_json = profiling_shard
    other = benchmarks_shard(tmp_path, 3 - k)
    out = tmp_path / "merged.json"
    rc, stdout, err = run_cli(capsys, "merge", "-o", out, other, profiles_json)
    assert rc == 0, err
    assert "missing" not in err and stdout.strip() == (f"merged {len(SUITE['benchmarks'])} benchmarks of 2 runs "
                                                       f"({SUITE['machine_info']['gpu']}) into {out}")
    merged = json.loads(out.read_text())
    assert [{f: b["extra_info"].get(f) for f in PROFILE_FIELDS} for b in merged["benchmarks"]] == \
        [{f: b["extra_info"].get(f) for f in PROFILE_FIELDS} for b in SUITE["benchmarks"]]
    shards = {s["shard"]: s for s in merged["machine_info"]["shards"]}
    assert sorted(shards) == ["1/2", "2/2"]
    assert shards[f"{k}/2"]["benchmarks"] == 0 and shards[f"{k}/2"]["tests"] == len(COUNTS)
    assert shards[f"{3 - k}/2"]["benchmarks"] == len(SUITE["benchmarks"])
    # the merged run is gated like the committed one it was split from
    rc_merged, _, _ = run_cli(capsys, "gate", out)
    assert rc_merged == run_cli(capsys, "gate", SUITE_RUN)[0]


def test_a_missing_benchmark_shard_is_still_named(profiling_shard, tmp_path, capsys):
    k, profiles_json = profiling_shard
    rc, _, err = run_cli(capsys, "merge", "-o", tmp_path / "merged.json", profiles_json)
    assert rc == 0 and f"warning: shard {3 - k}/2 is missing" in err


@pytest.mark.parametrize("command", [
    ("gate", "{run}"), ("compare", "{run}", "{run}"), ("report", "{run}", "-o", "{tmp}/page"),
    ("baseline", "{run}", "-o", "{tmp}/baseline.json"), ("launch-report", "{run}"),
])
def test_commands_that_need_benchmarks_refuse_a_profiling_only_run_with_one_line(tmp_path, capsys, command):
    section = {"kernel_counts": COUNTS, "failures": [], "shard": {"index": 2, "count": 3}}
    run_json = write({**{k: SUITE[k] for k in ("machine_info", "commit_info", "datetime", "version")},
                      "benchmarks": [], "cudagraph_bench": section}, tmp_path / "profiles.json")
    rc, stdout, err = run_cli(capsys, *(a.format(run=run_json, tmp=tmp_path) for a in command))
    assert rc == 2 and stdout == "" and len(err.strip().splitlines()) == 1
    assert (f"{run_json} holds no benchmarks, only the kernel counts of {len(COUNTS)} forward case(s)" in err
            and "cudagraph-bench merge" in err)


def test_merge_refuses_a_run_without_benchmarks_that_recorded_nothing(tmp_path, capsys):
    empty = write({**{k: SUITE[k] for k in ("machine_info", "commit_info", "datetime", "version")},
                   "benchmarks": [], "cudagraph_bench": {"kernel_counts": [], "failures": []}}, tmp_path / "e.json")
    out = tmp_path / "merged.json"
    rc, _, err = run_cli(capsys, "merge", "-o", out, benchmarks_shard(tmp_path, 1), empty)
    assert rc == 2 and f"{empty} holds no benchmarks: did every benchmark skip" in err and not out.exists()
