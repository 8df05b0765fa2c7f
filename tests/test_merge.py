"""``cudagraph-bench merge -o OUT RUN...``: the runs of a suite's shards as one pytest-benchmark JSON. The
committed H200 run is split into the shards ``--shard 1/2`` and ``2/2`` would give (whole models and
dtypes, by its recorded seconds), merged back, and every reader of runs must give the merged file the
verdict and page it gives the original."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cudagraph_bench.errors import UsageError
from cudagraph_bench.results.merge import merge_runs
from cudagraph_bench.results.shards import DURATIONS_KEY, assign_shards, group_of

from h200_fixture import copy_doc, committed_doc, committed_run, plain_copy, read_json, run_cli, write, write_runs

pytestmark = pytest.mark.transformers_free

ORIGINAL = committed_run("forward-checked")
DOC = read_json(ORIGINAL)
BASELINE = Path(__file__).resolve().parents[1] / "baselines" / "nvidia-h200.json"


def case_group(case_id: str) -> str:
    """The group of a memory-ledger case id such as ``gpt2-float32-L16-graph``."""
    return case_id.split("-L")[0]


def split(doc, n=2):
    """``doc`` as the runs of ``n`` shards: its benchmarks, memory-ledger cases and recorded seconds
    (their rounds' total) divided by whole (model, dtype) groups as ``--shard K/N`` divides tests."""
    groups, seconds = {}, {}
    for b in doc["benchmarks"]:
        groups.setdefault(group_of(b["extra_info"], b["fullname"]), []).append(b["fullname"])
        seconds[b["fullname"]] = b["stats"]["total"]
    shards = assign_shards(groups, n, seconds)
    out = []
    for k, keep in enumerate(shards, start=1):
        part = copy_doc(doc)
        part["benchmarks"] = [b for b in doc["benchmarks"] if group_of(b["extra_info"], b["fullname"]) in keep]
        section = part["cudagraph_bench"]
        section["cases"] = [c for c in section["cases"] if case_group(c["case"]) in keep]
        section["graph_cases"] = len(section["cases"])
        section[DURATIONS_KEY] = {b["fullname"]: seconds[b["fullname"]] for b in part["benchmarks"]}
        section["shard"] = {"index": k, "count": n, "groups": sorted(keep)}
        out.append(part)
    return out


@pytest.fixture
def shard_files(tmp_path):
    return [write(part, tmp_path / f"shard-{k}.json") for k, part in enumerate(split(DOC), start=1)]


@pytest.fixture
def merged(tmp_path, capsys, shard_files):
    out = tmp_path / "merged.json"
    rc, stdout, err = run_cli(capsys, "merge", "-o", out, *shard_files)
    assert rc == 0, err
    assert stdout.strip() == f"merged {len(DOC['benchmarks'])} benchmarks of 2 runs (NVIDIA H200) into {out}"
    return out


def test_the_split_is_two_nonempty_shards_of_whole_models():
    a, b = split(DOC)
    assert a["benchmarks"] and b["benchmarks"]
    assert not {group_of(x["extra_info"], "") for x in a["benchmarks"]} & {group_of(x["extra_info"], "")
                                                                         for x in b["benchmarks"]}


def test_the_merged_run_holds_every_benchmark_and_ledger_case_once(merged, shard_files):
    doc = json.loads(merged.read_text())
    assert sorted(b["fullname"] for b in doc["benchmarks"]) == sorted(b["fullname"] for b in DOC["benchmarks"])
    by_name = {b["fullname"]: b for b in DOC["benchmarks"]}
    assert all(b == by_name[b["fullname"]] for b in doc["benchmarks"])
    section = doc["cudagraph_bench"]
    assert sorted(c["case"] for c in section["cases"]) == sorted(c["case"] for c in DOC["cudagraph_bench"]["cases"])
    assert section["graph_cases"] == DOC["cudagraph_bench"]["graph_cases"]
    assert section[DURATIONS_KEY] == {b["fullname"]: b["stats"]["total"] for b in DOC["benchmarks"]}
    assert "shard" not in section and [p["shard"]["index"] for p in section["parts"]] == [1, 2]
    shards = doc["machine_info"]["shards"]
    assert [s["source"] for s in shards] == [str(p) for p in shard_files]
    assert [s["shard"] for s in shards] == ["1/2", "2/2"]
    assert [s["benchmarks"] for s in shards] == [len(p["benchmarks"]) for p in split(DOC)]
    assert {s["gpu"] for s in shards} == {"NVIDIA H200"}
    assert doc["machine_info"]["cuda"] == DOC["machine_info"]["cuda"]
    assert doc["commit_info"] == DOC["commit_info"]


def without_paths(text, *paths):
    """``text`` with the run's paths and the sha256 of its bytes (which differ between the two files) left out."""
    for p in paths:
        text = text.replace(str(p), "RUN")
    return re.sub(r"sha256 `[0-9a-f]+`", "sha256", text)


@pytest.fixture
def original(tmp_path):
    """The original run as the merged run's memory ledger is read: each shard's first graph case, which a session of
    its own pays the warmup stream's workspace for, is not read there (``results/capture_cost.py``), so the copy
    leaves those cases out of its ledger beside the session's own first."""
    doc = copy_doc(DOC)
    firsts = {part["cudagraph_bench"]["cases"][0]["case"] for part in split(DOC)}
    cases = doc["cudagraph_bench"]["cases"]
    doc["cudagraph_bench"]["cases"] = cases[:1] + [c for c in cases[1:] if c["case"] not in firsts]
    return write(doc, tmp_path / ORIGINAL.name.removesuffix(".gz"))


def test_gate_gives_the_merged_run_the_verdict_of_the_original(capsys, merged, tmp_path, original):
    # a baseline of the original's kind (synchronized wall medians: the committed one compares the device-side
    # figure, which this older run did not record), from five copies of it scaled as separate runs would differ
    runs = write_runs(tmp_path / "runs", (1.0, 1.01, 0.99, 1.02, 0.98), doc=DOC)
    baseline = tmp_path / "wall-baseline.json"
    assert run_cli(capsys, "baseline", *runs, "-o", baseline)[0] == 0
    rc_o, out_o, _ = run_cli(capsys, "gate", original, "--baseline", baseline)
    rc_m, out_m, _ = run_cli(capsys, "gate", merged, "--baseline", baseline)
    assert rc_m == rc_o == 0
    assert without_paths(out_m, merged) == without_paths(out_o, original)


def test_report_renders_the_merged_run_as_the_original(tmp_path, capsys, merged, original):
    assert run_cli(capsys, "report", original, "-o", tmp_path / "a")[0] == 0
    assert run_cli(capsys, "report", merged, "-o", tmp_path / "b")[0] == 0
    page_a, page_b = ((tmp_path / d / "results.md").read_text() for d in "ab")
    assert without_paths(page_b, merged, merged.name) == without_paths(page_a, original, original.name)


def test_compare_finds_no_change_between_the_merged_run_and_the_original(capsys, merged):
    rc, out, _ = run_cli(capsys, "compare", ORIGINAL, merged, "--baseline", BASELINE)
    assert rc == 0
    assert f"compare PASS: {len(DOC['benchmarks'])} benchmarks in both" in out
    assert "0 only in" not in out and "only in NEW" not in out and "only in OLD" not in out


def pytest_benchmark_compare(path):
    proc = subprocess.run([sys.executable, "-m", "pytest_benchmark", "compare", str(path), "--columns=median"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_pytest_benchmarks_own_compare_reads_the_merged_run(merged, tmp_path):
    out = pytest_benchmark_compare(merged)
    assert sum(int(n) for n in re.findall(r"benchmark '[^']*': (\d+) tests", out)) == len(DOC["benchmarks"])
    assert out == pytest_benchmark_compare(plain_copy(ORIGINAL, tmp_path))   # gunzip -k of the committed run


def other_gpu(doc, name):
    doc = copy_doc(doc)
    doc["machine_info"]["gpu"] = name
    doc["machine_info"]["cuda"]["gpu_name"] = name
    return doc


@pytest.mark.parametrize("make_second, message", [
    (lambda a, b: other_gpu(b, "NVIDIA H100 80GB HBM3"),
     "ran on NVIDIA H200 and {b} on NVIDIA H100 80GB HBM3: merge the shards of one GPU model only"),
    (lambda a, b: {**b, "benchmarks": b["benchmarks"] + a["benchmarks"][:1]},
     "benchmark {name} is in {a} and in {b}: merge runs of disjoint shards"),
])
def test_shards_of_two_gpus_or_overlapping_shards_are_refused(tmp_path, capsys, make_second, message):
    first, second = split(DOC)
    a = write(first, tmp_path / "a.json")
    b = write(make_second(first, second), tmp_path / "b.json")
    out = tmp_path / "merged.json"
    rc, _, err = run_cli(capsys, "merge", "-o", out, a, b)
    assert rc == 2
    assert message.format(a=a, b=b, name=first["benchmarks"][0]["fullname"]) in err
    assert not out.exists()


def test_a_test_recorded_by_two_shards_is_refused():
    first, second = split(DOC)
    second["cudagraph_bench"][DURATIONS_KEY]["perf_tests/x.py::test_plain"] = 1.0
    first["cudagraph_bench"][DURATIONS_KEY]["perf_tests/x.py::test_plain"] = 2.0
    with pytest.raises(UsageError, match="perf_tests/x.py::test_plain ran in a and in b: merge runs of disjoint"):
        merge_runs([("a", first), ("b", second)])


def test_merge_never_overwrites_an_input(tmp_path, capsys, shard_files):
    before = shard_files[0].read_bytes()
    rc, _, err = run_cli(capsys, "merge", "-o", shard_files[0], *shard_files)
    assert rc == 2 and "is the input file" in err
    assert shard_files[0].read_bytes() == before


def test_merge_replaces_its_own_earlier_run_and_never_another_file(tmp_path, capsys, merged, shard_files):
    rc, out, _ = run_cli(capsys, "merge", "-o", merged, *shard_files)
    assert rc == 0 and out.rstrip().endswith("(replaced the file that was there)")
    page = tmp_path / "gate.md"
    page.write_text("## cudagraph-bench gate: PASS\n")
    rc, out, err = run_cli(capsys, "merge", "-o", page, *shard_files)
    assert rc == 2 and not out and err.count("\n") == 1
    assert f"-o {page} is not a merged run that cudagraph-bench merge wrote" in err and "remove that file" in err
    assert page.read_text() == "## cudagraph-bench gate: PASS\n"
    measured = shard_files[0].read_bytes()                  # a measured run (no machine_info.shards): kept
    measured_copy = tmp_path / "measured.json"
    measured_copy.write_bytes(measured)
    rc, out, err = run_cli(capsys, "merge", "-o", measured_copy, *shard_files)
    assert rc == 2 and not out and err.count("\n") == 1 and measured_copy.read_bytes() == measured
    assert f"-o {measured_copy} is not a merged run that cudagraph-bench merge wrote" in err


def test_the_same_run_twice_is_refused(tmp_path, capsys, shard_files):
    rc, _, err = run_cli(capsys, "merge", "-o", tmp_path / "m.json", shard_files[0], shard_files[0])
    assert rc == 2 and "are the same run" in err


def test_runs_of_two_commits_are_merged_with_a_warning(tmp_path, capsys):
    first, second = split(DOC)
    second["commit_info"] = {**second["commit_info"], "id": "0" * 40}
    a, b = write(first, tmp_path / "a.json"), write(second, tmp_path / "b.json")
    rc, _, err = run_cli(capsys, "merge", "-o", tmp_path / "m.json", a, b)
    assert rc == 0
    assert f"the runs measured 2 commits ({first['commit_info']['id'][:12]}, {'0' * 12})" in err


def test_per_process_memory_figures_keep_their_largest_value_and_each_part():
    first, second = split(DOC)
    first["cudagraph_bench"]["memory_reserved_end_mib"] = 100.0
    second["cudagraph_bench"]["memory_reserved_end_mib"] = 250.0
    second["cudagraph_bench"]["memory_reserved_start_mib"] = None   # a run without a GPU reading
    section = merge_runs([("a", first), ("b", second)])["cudagraph_bench"]
    assert section["memory_reserved_end_mib"] == 250.0
    assert section["memory_reserved_start_mib"] == first["cudagraph_bench"]["memory_reserved_start_mib"]
    assert [p["memory_reserved_end_mib"] for p in section["parts"]] == [100.0, 250.0]


def test_a_kernel_count_profiled_in_another_part_reaches_its_eager_benchmark():
    """The forward profiles run in one process (one xdist group) while the eager benchmarks spread over the
    others: the merge writes each case's kernel count into its eager benchmark, as one process would."""
    doc = committed_doc("forward")
    counts = doc["cudagraph_bench"]["kernel_counts"]
    assert counts, "the committed forward run records kernel counts"
    benches, profiles = copy_doc(doc), copy_doc(doc)
    for bench in benches["benchmarks"]:
        for field in ("n_kernels", "gpu_busy_ms"):
            bench["extra_info"].pop(field, None)
    benches["cudagraph_bench"]["kernel_counts"] = []
    profiles["benchmarks"] = []
    profiles["cudagraph_bench"] = {"kernel_counts": counts}
    merged = merge_runs([("benchmarks", benches), ("profiles", profiles)])
    fields = ("n_kernels", "gpu_busy_ms")
    assert [{f: b["extra_info"].get(f) for f in fields} for b in merged["benchmarks"]] == \
        [{f: b["extra_info"].get(f) for f in fields} for b in doc["benchmarks"]]
    assert sum("n_kernels" in b["extra_info"] for b in merged["benchmarks"]) == len(counts)


def test_a_case_profiled_in_two_parts_is_refused():
    """The committed suite run's profiles given twice, once in a run that holds its benchmarks and once in a
    run of the profiling tests alone without their durations: the parts overlap, and only one of two counts
    of a case could reach its eager benchmark."""
    doc = committed_doc("forward")
    counts = doc["cudagraph_bench"]["kernel_counts"]
    assert counts, "the committed forward run records kernel counts"
    profiles = {**copy_doc(doc), "benchmarks": [], "cudagraph_bench": {"kernel_counts": copy_doc(counts)}}
    first = counts[0]
    with pytest.raises(UsageError, match=f"kernel count of {first['model']} {first['dtype']} L{first['seq_len']} "
                                         "is in run and in profiles: merge runs of disjoint shards"):
        merge_runs([("run", doc), ("profiles", profiles)])
    profiles["cudagraph_bench"]["kernel_counts"] = [c for c in counts if c is not first]
    doc["cudagraph_bench"]["kernel_counts"] = [first]
    assert len(merge_runs([("run", doc), ("profiles", profiles)])["cudagraph_bench"]["kernel_counts"]) == len(counts)


def test_a_missing_shard_is_named_in_a_warning(tmp_path, capsys):
    """Shards 1/3 and 2/3 without 3/3 (a failed CI job, or a shard that ran no benchmark and recorded nothing)
    merge, but the command says which shard the merged run lacks."""
    first, second = split(DOC)
    for part, k in ((first, 1), (second, 2)):
        part["cudagraph_bench"]["shard"] = {**part["cudagraph_bench"]["shard"], "index": k, "count": 3}
    a, b = write(first, tmp_path / "a.json"), write(second, tmp_path / "b.json")
    rc, _, err = run_cli(capsys, "merge", "-o", tmp_path / "m.json", a, b)
    assert rc == 0
    assert "warning: shard 3/3 is missing: the merged run lacks their tests" in err


def test_complete_shards_merge_without_a_warning(tmp_path, capsys, shard_files):
    rc, _, err = run_cli(capsys, "merge", "-o", tmp_path / "m.json", *shard_files)
    assert rc == 0 and "missing" not in err


@pytest.mark.parametrize("second_shard, message", [
    ({"index": 2, "count": 3}, "{a} is shard 1/2 and {b} is shard 2/3: merge the shards of one --shard K/N split"),
    ({"index": 1, "count": 2}, "{a} and {b} both ran shard 1/2: give each shard's run once"),
])
def test_shards_of_two_splits_or_one_shard_twice_are_refused(tmp_path, capsys, second_shard, message):
    first, second = split(DOC)
    second["cudagraph_bench"]["shard"] = {**second["cudagraph_bench"]["shard"], **second_shard}
    a, b = write(first, tmp_path / "a.json"), write(second, tmp_path / "b.json")
    out = tmp_path / "m.json"
    rc, _, err = run_cli(capsys, "merge", "-o", out, a, b)
    assert rc == 2 and message.format(a=a, b=b) in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_the_shard_of_a_gpu_workers_session_is_read_from_its_workers():
    """A ``--shard K/N --gpu-workers`` session keeps the shard per worker (``cudagraph_bench.parts``)."""
    from cudagraph_bench.results.merge import recorded_shard

    first, _ = split(DOC)
    shard = first["cudagraph_bench"].pop("shard")
    first["cudagraph_bench"]["parts"] = [{"source": "worker gw0", "shard": shard},
                                         {"source": "worker gw1", "shard": shard}]
    assert recorded_shard(first) == (shard["index"], shard["count"]) == (1, 2)


def test_merging_onto_an_earlier_merged_file_says_it_replaced_it(tmp_path, capsys, merged, shard_files):
    before = json.loads(merged.read_text())
    rc, stdout, err = run_cli(capsys, "merge", "-o", merged, *shard_files)
    assert rc == 0, err
    assert stdout.strip().endswith(f"into {merged} (replaced the file that was there)")
    assert json.loads(merged.read_text())["benchmarks"] == before["benchmarks"]


def test_a_merged_run_named_json_gz_is_written_gzip_compressed(tmp_path, capsys, shard_files):
    """``-o FILE.json.gz`` writes the form results/ keeps runs in: every command reads it, and it holds what
    ``-o FILE.json`` holds."""
    import gzip

    assert run_cli(capsys, "merge", "-o", tmp_path / "m.json", *shard_files)[0] == 0
    assert run_cli(capsys, "merge", "-o", tmp_path / "m.json.gz", *shard_files)[0] == 0
    assert gzip.decompress((tmp_path / "m.json.gz").read_bytes()) == (tmp_path / "m.json").read_bytes()
    rc, out, err = run_cli(capsys, "gate", tmp_path / "m.json.gz", "--baseline", "none")
    assert rc in (0, 1) and "not a valid gzip" not in err, err
