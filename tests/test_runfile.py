"""Reading pytest-benchmark runs: validation errors, saved-run ids, per-round data in ms, gzip-compressed
runs."""

import gzip
import json

import numpy as np
import pytest

from cudagraph_bench.cases import Case
from cudagraph_bench.errors import InputFileError
from cudagraph_bench.results.runfile import forward_cases, forward_groups, load_run, measurements, resolve_run_path

from h200_fixture import committed_run, copy_doc, DOC, FIXTURE, read_json

pytestmark = pytest.mark.transformers_free


def first_forward(doc):
    return next(b for b in doc["benchmarks"] if b["extra_info"].get("suite") == "forward")


def write(doc, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def test_fixture_loads_with_gpu_slug_and_every_forward_benchmark():
    run = load_run(str(FIXTURE))
    assert run.environment.gpu_slug == DOC["machine_info"]["cuda"]["gpu_slug"]
    cases = forward_cases(run)
    expected = {Case.from_extra_info(b["extra_info"]) for b in DOC["benchmarks"]
                if b["extra_info"].get("suite") == "forward"}
    assert set(cases) == expected
    b = first_forward(DOC)
    m = cases[Case.from_extra_info(b["extra_info"])]
    np.testing.assert_allclose(m.samples_ms, np.asarray(b["stats"]["data"]) * 1000.0)
    assert m.summary.n == len(b["stats"]["data"])
    assert m.summary.median_ms == pytest.approx(b["stats"]["median"] * 1000.0)
    assert m.summary.min_ms == pytest.approx(b["stats"]["min"] * 1000.0)


def test_run_without_per_round_data_falls_back_to_stats(tmp_path):
    doc = copy_doc(DOC)
    for b in doc["benchmarks"]:
        del b["stats"]["data"]
    cases = forward_cases(load_run(str(write(doc, tmp_path / "run.json"))))
    b = first_forward(doc)
    m = cases[Case.from_extra_info(b["extra_info"])]
    assert m.samples_ms is None and m.summary.p95_ms is None
    assert m.summary.median_ms == pytest.approx(b["stats"]["median"] * 1000.0)
    assert m.summary.n == b["stats"]["rounds"]


def test_saved_run_ids_resolve_by_number_and_stem(tmp_path):
    storage = tmp_path / ".benchmarks"
    first = write(DOC, storage / "Linux-CPython-3.12-64bit" / "0001_abc123_20260101_000000.json")
    second = write(DOC, storage / "Linux-CPython-3.12-64bit" / "0002_def456_20260102_000000.json")
    assert resolve_run_path("0001", storage) == first
    assert resolve_run_path("0002_def456_20260102_000000", storage) == second
    assert load_run("0002", storage).path == second
    with pytest.raises(InputFileError, match=r"unknown saved-run id '0007'.*0001, 0002"):
        resolve_run_path("0007", storage)
    # the machine folder that holds the files works as the storage folder too
    assert resolve_run_path("0002", storage / "Linux-CPython-3.12-64bit") == second


def test_ambiguous_id_and_empty_storage(tmp_path):
    storage = tmp_path / ".benchmarks"
    write(DOC, storage / "Linux-CPython-3.11-64bit" / "0001_a_20260101_000000.json")
    write(DOC, storage / "Linux-CPython-3.12-64bit" / "0001_b_20260101_000000.json")
    with pytest.raises(InputFileError, match="ambiguous"):
        resolve_run_path("0001", storage)
    with pytest.raises(InputFileError, match="holds no saved runs"):
        resolve_run_path("0001", tmp_path / "nowhere")


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("", "is empty"),
    ("\n  \n", "is empty"),
    ('{"machine_info": {}, "benchmarks": [{"name": "x", ', "not valid JSON"),
    ('{"hello": "world"}', "not pytest-benchmark output"),
    ('[1, 2, 3]', "not pytest-benchmark output"),
    ('{"machine_info": {}, "benchmarks": []}', "holds no benchmarks"),
    ('{"machine_info": {}, "benchmarks": [{"name": "x", "stats": {"median": "fast"}}]}', "no numeric stats"),
])
def test_bad_run_files_give_one_line_errors(tmp_path, content, message):
    path = tmp_path / "run.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InputFileError, match=message) as info:
        load_run(str(path))
    assert "\n" not in str(info.value)
    assert str(path) in str(info.value)


def test_a_gzipped_run_loads_as_the_plain_run(tmp_path):
    """The committed runs are ``.json.gz``: the compressed file gives the same data, hash and records as the
    JSON it holds, whether named ``.gz`` or found by gzip's magic bytes."""
    plain = write(DOC, tmp_path / "run.json")
    packed = tmp_path / "run.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    unnamed = tmp_path / "run-gzip.json"
    unnamed.write_bytes(packed.read_bytes())
    a = load_run(str(plain))
    for other in (load_run(str(packed)), load_run(str(unnamed))):
        assert other.data == a.data and other.sha256 == a.sha256
        assert other.environment == a.environment
        assert list(measurements(other)) == list(measurements(a))
        for key, m in measurements(a).items():
            np.testing.assert_array_equal(measurements(other)[key].samples_ms, m.samples_ms)
            assert measurements(other)[key].check == m.check
    assert resolve_run_path(str(packed)) == packed


@pytest.mark.parametrize("content, message", [
    (b"plain text, not gzip", "is not a valid gzip file"),
    (gzip.compress(b'{"machine_info": {}, "benchmarks": []}', mtime=0)[:-12], "is not a valid gzip file"),
    (gzip.compress(b"", mtime=0), "is empty"),
    (gzip.compress(b'{"machine_info": {}, "benchmarks": [{"name": "x", ', mtime=0), "not valid JSON"),
    (gzip.compress(b'{"hello": "world"}', mtime=0), "not pytest-benchmark output"),
])
def test_bad_gzipped_runs_give_one_line_errors(tmp_path, content, message):
    path = tmp_path / "run.json.gz"
    path.write_bytes(content)
    with pytest.raises(InputFileError, match=message) as info:
        load_run(str(path))
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_truncated_copy_of_the_real_run_is_invalid_json(tmp_path):
    path = tmp_path / "run.json"
    plain = gzip.decompress(FIXTURE.read_bytes())
    path.write_bytes(plain[: len(plain) // 2])
    with pytest.raises(InputFileError, match="not valid JSON"):
        load_run(str(path))


def test_eager_without_graph_and_duplicates_are_errors(tmp_path):
    doc = copy_doc(DOC)
    graph = next(b for b in doc["benchmarks"]
                 if b["extra_info"].get("suite") == "forward" and b["extra_info"]["variant"] == "graph")
    doc["benchmarks"].remove(graph)
    run = load_run(str(write(doc, tmp_path / "a.json")))
    info = graph["extra_info"]
    with pytest.raises(InputFileError, match=f"{info['model']} {info['dtype']} L={info['seq_len']} has eager but no graph"
                       " benchmark: rerun without filtering out the graph variant"):
        forward_groups(run)
    doc["machine_info"]["cuda"] = None      # a CPU run cannot measure the graph variant by any filter
    with pytest.raises(InputFileError, match="has eager but no graph benchmark: the graph variant needs a CUDA GPU and "
                                             "this is a CPU run: rerun on a GPU machine"):
        forward_groups(load_run(str(write(doc, tmp_path / "cpu.json"))))
    doc = copy_doc(DOC)
    doc["benchmarks"].append(copy_doc(doc["benchmarks"][0]))
    with pytest.raises(InputFileError, match="appears twice"):
        measurements(load_run(str(write(doc, tmp_path / "b.json"))))


def test_run_without_forward_suite_has_no_groups(tmp_path):
    doc = copy_doc(DOC)
    for b in doc["benchmarks"]:
        b["extra_info"] = {}
    run = load_run(str(write(doc, tmp_path / "plain.json")))
    assert {m.suite for m in measurements(run).values()} == {"other"}
    with pytest.raises(InputFileError, match="no forward-suite benchmarks"):
        forward_groups(run)


def test_a_benchmark_of_another_test_without_extra_info_fields_is_read_by_name_beside_the_suite(tmp_path):
    doc = copy_doc(DOC)
    plain = copy_doc(doc["benchmarks"][0])
    plain["extra_info"], plain["fullname"] = {}, "perf_tests/test_misc.py::test_something[a]"
    doc["benchmarks"].append(plain)
    run = load_run(str(write(doc, tmp_path / "mixed.json")))
    assert [m.suite for m in measurements(run).values()].count("other") == 1
    assert forward_groups(run)


def test_a_stripped_suite_benchmark_is_refused_naming_it_and_the_missing_field(tmp_path):
    doc = copy_doc(DOC)
    index, graph = next((i, b) for i, b in enumerate(doc["benchmarks"])
                        if b["extra_info"].get("suite") == "forward" and b["extra_info"]["variant"] == "graph")
    del graph["extra_info"]
    with pytest.raises(InputFileError) as exc:
        load_run(str(write(doc, tmp_path / "stripped.json")))
    assert f"benchmarks[{index}] ({graph['fullname']}) has no extra_info" in str(exc.value)
    assert "\n" not in str(exc.value) and "no graph" not in str(exc.value)


def _corrupt(doc, how):
    doc = copy_doc(doc)
    bench = doc["benchmarks"][0]
    if how == "extra_info":
        bench["extra_info"] = "oops"
    elif how == "correct":
        bench["extra_info"]["correct"] = "no"
    elif how == "nan":
        bench["stats"]["data"][0] = float("nan")
    elif how == "negative":
        bench["stats"]["data"] = [-x for x in bench["stats"]["data"]]
        bench["stats"]["median"] = -bench["stats"]["median"]
    elif how == "nested":
        bench["stats"]["data"] = [[1, 2]]
    elif how == "cudagraph_bench":
        doc["cudagraph_bench"] = "oops"
    elif how == "commit_info":
        doc["commit_info"] = "oops"
    elif how == "empty-data":
        bench["stats"]["data"] = []
    elif how == "seq_len":
        bench["extra_info"]["seq_len"] = -5
    elif how == "seq_len-str":
        bench["extra_info"]["seq_len"] = "16"
    elif how == "huge-round":
        bench["stats"]["data"][0] = 1e300
    elif how == "huge-median":
        bench["stats"]["median"] = 7200.0
    elif how == "variant":
        bench["extra_info"]["variant"] = "grph"
    elif how == "dtype":
        bench["extra_info"]["dtype"] = "fp8"
    return doc


@pytest.mark.parametrize("how, message", [
    ("extra_info", "extra_info of type str"), ("correct", "extra_info.correct = 'no'"),
    ("nan", "stats.data that is not a list of positive finite seconds"),
    ("negative", "negative, zero or not finite"),
    ("nested", "stats.data that is not a list of positive finite seconds"),
    ("cudagraph_bench", "'cudagraph_bench' must be an object"), ("commit_info", "'commit_info' must be an object"),
    ("empty-data", "has an empty stats.data (no rounds)"),
    ("seq_len", "extra_info.seq_len = -5, not a whole number of tokens >= 1"),
    ("seq_len-str", "extra_info.seq_len = '16', not a whole number of tokens >= 1"),
    ("huge-round", "has a round of 1e+300 s in stats.data, above 3600 s"),
    ("huge-median", "has a round time above 3600 s"),
    ("variant", "has forward variant 'grph', not one of eager, graph"),
    ("dtype", "has dtype 'fp8', not one of float32, bfloat16, float16"),
])
def test_corrupted_values_are_one_line_errors(tmp_path, how, message):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(_corrupt(DOC, how)))
    with pytest.raises(InputFileError) as exc:
        load_run(str(path))
    assert message in str(exc.value) and len(str(exc.value).splitlines()) == 1


def test_a_folder_is_not_a_run_and_the_message_names_the_file(tmp_path):
    with pytest.raises(InputFileError, match="is a folder, not a run JSON: give a run file, e.g. a file written"):
        load_run(str(tmp_path))
    write(DOC, tmp_path / "run.json")
    with pytest.raises(InputFileError, match=r"give a run file, e\.g\. .*run\.json\?"):
        load_run(str(tmp_path))


def test_storage_that_is_empty_or_a_file_is_named(tmp_path):
    with pytest.raises(InputFileError, match="the saved-run folder is empty"):
        load_run("0001", storage="")
    f = tmp_path / "f.json"
    f.write_text("{}")
    with pytest.raises(InputFileError, match=r"is a file: set \$CUDAGRAPH_BENCH_STORAGE to the folder"):
        load_run("0001", storage=str(f))


@pytest.mark.parametrize("how, message", [
    ("text", "benchmarks[0] has params of type string, not an object"),
    ("seq_len-str", "benchmarks[0] has params.seq_len = '16', not a whole number of tokens >= 1"),
    ("model-number", "benchmarks[0] has params.model of type number, not a string"),
    ("no-model", "benchmarks[0] (perf_tests/test_forward_bench.py::test_forward[gpt2-float32-L16-eager]) lacks "
                 "params.model, which other benchmarks of its test record"),
])
def test_malformed_params_are_refused_like_malformed_extra_info(tmp_path, capsys, how, message):
    """A benchmark's params hold its case's key as pytest-benchmark groups it: params that are no object, a key field
    of the wrong type, or a lack of a key the other benchmarks of its test have is the one-line refusal that malformed
    extra_info gets, before the gate reads the run (exit 2); the run as written passes the gate."""
    from cudagraph_bench.cli import main as cli_main

    doc = copy_doc(read_json(committed_run("forward-repeat")))
    params = doc["benchmarks"][0]["params"]
    assert params == {"model": "gpt2", "dtype": "float32", "seq_len": 16, "variant": "eager"}
    if how == "text":
        assert cli_main(["gate", str(write(doc, tmp_path / "as-written.json"))]) == 0
        doc["benchmarks"][0]["params"] = "gpt2-float32-L16-eager"
    elif how == "no-model":
        del params["model"]
    else:
        params.update({"seq_len-str": {"seq_len": "16"}, "model-number": {"model": 2}}[how])
    path = write(doc, tmp_path / "run.json")
    with pytest.raises(InputFileError) as exc:
        load_run(str(path))
    assert message in str(exc.value) and len(str(exc.value).splitlines()) == 1
    capsys.readouterr()
    assert cli_main(["gate", str(path)]) == 2
    assert message in capsys.readouterr().err
