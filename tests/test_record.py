"""The typed record of a run (:mod:`cudagraph_bench.results.record`): every committed H200 run under
``results/nvidia-h200`` decodes into measurements whose case, check and environment say what the
raw JSON says; the decode happens once per run; and no reader outside the decoder reads the raw
``extra_info`` / run keys of a case, a check or the environment (read from the source with ``ast``)."""

import ast
import json
import re
from dataclasses import asdict
from pathlib import Path

import pytest

from cudagraph_bench.cases import SUITE_KEYS, Case, DecodeCase, LaunchCase, OtherCase
from cudagraph_bench.errors import InputFileError
from cudagraph_bench.results.record import CHECK_STATUSES, FAILED_OUTCOMES, decode_environment
from cudagraph_bench.results.runfile import forward_cases, load_run, measurements

from h200_fixture import copy_doc, committed_run, read_json

pytestmark = pytest.mark.transformers_free

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "results" / "nvidia-h200"
#: Every committed pytest-benchmark run of a measured suite: the ``.json.gz`` files (the graphs.cu and
#: compute-sanitizer JSON, other formats, are plain) but the architecture zoo's, whose entries the page's reader
#: decodes (tests/test_zoo_page.py).
RUNS = sorted(p for p in H200.rglob("*.json.gz") if p.parent.name != "zoo")
PKG = ROOT / "src" / "cudagraph_bench"


def run_id(path: Path) -> str:
    return str(path.relative_to(H200))


def write(doc, path):
    path.write_text(json.dumps(doc))
    return path


def test_the_committed_runs_cover_every_suite_and_both_params_styles():
    suites = {b["extra_info"].get("suite") for p in RUNS for b in read_json(p)["benchmarks"]}
    assert suites == {"forward", "decode", "launch"}
    assert any(p.parent.name == "padding" for p in RUNS)
    styles = {isinstance(v, str) and v.startswith("UNSERIALIZABLE[")
              for p in RUNS for b in read_json(p)["benchmarks"] for v in (b.get("params") or {}).values()}
    assert styles == {True, False}


def expected_status(info: dict, variant: str, suite: str = "forward") -> str:
    """The check status the recorded fields give: a failed check, a mismatching case or a decoder whose check
    against generate failed fails, and so does a recorded replay proof whose profiled call launched other than the
    expected graph launches or more kernels outside a graph than allowed; a recorded pass (or, without ``correct``, a
    passed check against generate) passes; otherwise a suite's reference (the registry's: eager, generate, the launch
    loop) is the reference and any other variant is unchecked."""
    from cudagraph_bench import variants

    replay = info.get("replay") or {}
    calls = replay.get("calls") or 1
    allowed = replay.get("kernels_outside_allowed", 0)
    not_replayed = bool(replay) and (
        replay["graph_launches"] != replay.get("expected_graph_launches", 1) * calls
        or (allowed is not None and replay["kernels_outside_graph"] > allowed * calls))
    if (info.get("correct") is False or info.get("status") in FAILED_OUTCOMES
            or info.get("generate_check_passed") is False or not_replayed):
        return "fail"
    if info.get("correct") is True or ("correct" not in info and info.get("generate_check_passed") is True):
        return "pass"
    row = variants.find(suite, variant)
    return "reference" if row is not None and row.is_reference else "unchecked"


def params_say(case, params: dict, param: str) -> bool:
    """Whether the benchmark's pytest ``params`` (plain values, or the older object-valued forms) name ``case``."""
    if set(params) <= set(SUITE_KEYS[case.suite]) and params:
        return all(getattr(case, k) == v for k, v in params.items())
    (value,) = params.values()
    if isinstance(case, Case):
        return value in (f"UNSERIALIZABLE[{case!r}]", case.test_id) and param == case.test_id
    if isinstance(case, DecodeCase):   # [model, dtype, new_tokens, variant], from before the prompt length was a param
        return value in ([case.model, case.dtype, case.new_tokens, case.variant],
                         [case.model, case.dtype, case.seq_len, case.new_tokens, case.variant])
    return False


@pytest.mark.parametrize("path", RUNS, ids=run_id)
def test_every_committed_run_decodes_into_the_records_its_json_holds(path):
    raw = read_json(path)
    run = load_run(str(path))
    ms = list(measurements(run).values())
    assert len(ms) == len(raw["benchmarks"])
    for bench, m in zip(raw["benchmarks"], ms):
        info = bench["extra_info"]
        # case: the key fields of extra_info, and what the pytest params say
        assert m.suite == info["suite"] and type(m.case).suite == m.suite
        assert asdict(m.case) == {k: info[k] for k in SUITE_KEYS[m.suite]}
        assert m.key == tuple(info[k] for k in SUITE_KEYS[m.suite]) and m.label == m.case.label
        assert params_say(m.case, bench["params"], bench["param"]), (bench["params"], m.case)
        # check: follows the recorded fields
        check = m.check
        assert check.status == expected_status(info, info["variant"], info["suite"])
        assert (check.method, check.max_abs_diff, check.fp64_rmse_ratio) == (
            info.get("check"), info.get("max_abs_diff"), info.get("fp64_rmse_ratio"))
        assert check.reason == info.get("reason") and check.outcome == info.get("status")
        assert (check.generate_check_passed, check.matches_generate, check.generate_check) == (
            info.get("generate_check_passed"), info.get("matches_generate"), info.get("generate_check"))
        # environment: one object per run
        assert m.environment is run.environment
    machine, cuda, commit = raw["machine_info"], raw["machine_info"]["cuda"], raw["commit_info"]
    env = run.environment
    assert (env.gpu_name, env.gpu_slug, env.driver, env.cuda_runtime, env.torch, env.transformers) == (
        cuda["gpu_name"], cuda["gpu_slug"], cuda["driver"], cuda["cuda_runtime"], cuda["torch"], cuda["transformers"])
    assert (env.pytest_benchmark, env.run_datetime) == (raw["version"], raw["datetime"])
    assert (env.commit_id, env.commit_dirty) == (commit["id"], commit["dirty"])
    assert env.node == machine["node"]
    assert (env.cpu_brand, env.cpu_count) == (machine["cpu"].get("brand_raw"), machine["cpu"].get("count"))
    assert env.cuda_fingerprint == cuda and env.commit_info == commit and env.on_gpu


def test_the_committed_checks_take_every_status():
    """The statuses above are not all one value: the committed runs hold a reference, passes, failures
    (the padded cases recorded as mismatches before the fp64 rule) and unchecked variants."""
    seen = {m.check.status for p in RUNS for m in measurements(load_run(str(p))).values()}
    assert seen == set(CHECK_STATUSES)


def test_a_run_is_decoded_once():
    run = load_run(str(RUNS[0]))
    first = measurements(run)
    assert measurements(run) is first and run.measurements is first
    assert all(a is b for a, b in zip(first.values(), measurements(run).values()))
    assert run.environment is run.environment
    with pytest.raises(TypeError):
        first[("forward", "x")] = None   # the cached decode is read-only


def test_object_valued_params_are_never_read(tmp_path):
    """A run whose params are the older object-valued form decodes to the same records as with plain params."""
    plain = committed_run("forward-one-pipeline")
    doc = read_json(plain)
    old = copy_doc(doc)
    for bench in old["benchmarks"]:
        case = Case.from_extra_info(bench["extra_info"])
        bench["params"] = {"fwd_case": f"UNSERIALIZABLE[{case!r}]"}
    a, b = load_run(str(plain)), load_run(str(write(old, tmp_path / "old.json")))
    assert list(forward_cases(a)) == list(forward_cases(b))
    assert [m.check for m in forward_cases(a).values()] == [m.check for m in forward_cases(b).values()]


def test_failed_cases_of_a_run_are_decoded_with_their_check():
    path = committed_run("compile-sweep-with-failures")
    raw = read_json(path)["cudagraph_bench"]["failures"]
    failures = load_run(str(path)).failures
    assert len(failures) == len(raw) >= 1
    for f, entry in zip(failures, raw):
        assert f.case == Case.from_extra_info(entry) and f.status == entry["status"] and f.phase == entry["phase"]
        assert (f.check.reason, f.check.method, f.check.max_abs_diff, f.compile_ms) == (
            entry["reason"], entry.get("check"), entry.get("max_abs_diff"), entry.get("compile_ms"))


def test_a_cpu_run_has_no_gpu_environment_and_a_plain_benchmark_is_keyed_by_name(tmp_path):
    doc = read_json(RUNS[0])
    doc["machine_info"]["cuda"] = None
    doc["benchmarks"] = doc["benchmarks"][:1]
    doc["benchmarks"][0]["extra_info"] = {}
    run = load_run(str(write(doc, tmp_path / "cpu.json")))
    env = run.environment
    assert (env.gpu_name, env.gpu_slug, env.torch, env.on_gpu) == (None, None, None, False)
    assert env.versions() == [] and env.node == doc["machine_info"]["node"]
    (m,) = measurements(run).values()
    name = doc["benchmarks"][0]["fullname"]
    assert m.suite == "other" and m.case == OtherCase(name) and m.case.variant is None and m.key == (name,)
    assert m.check.status == "unchecked" and m.check.detail == "check not recorded"
    assert decode_environment({}) == type(env)()


@pytest.mark.parametrize("suite, field, value, message", [
    ("decode", "new_tokens", "many", "extra_info.new_tokens = 'many', not a whole number of tokens"),
    ("launch", "n_launches", None, "extra_info.n_launches = None, not a whole number of launches"),
    ("forward", "seq_len", [16], "extra_info.seq_len = [16], not a whole number of tokens"),
    ("forward", "model", {"name": "gpt2"}, "extra_info.model of type object, not a string")])
def test_a_malformed_key_is_a_one_line_error_naming_the_file(tmp_path, suite, field, value, message):
    path = next(p for p in RUNS if any(b["extra_info"]["suite"] == suite for b in read_json(p)["benchmarks"]))
    doc = read_json(path)
    bench = next(b for b in doc["benchmarks"] if b["extra_info"]["suite"] == suite)
    bench["extra_info"][field] = value
    with pytest.raises(InputFileError, match=re.escape(message)) as exc:     # refused as the file is read
        load_run(str(write(doc, tmp_path / "bad.json")))
    assert str(tmp_path / "bad.json") in str(exc.value) and "\n" not in str(exc.value)


def test_the_case_classes_label_their_keys():
    assert DecodeCase("gpt2", "bfloat16", 50, 64, "graph").label == "gpt2 bfloat16 L=50 +64 graph"
    assert LaunchCase(512, "loop").label == "launch n=512 loop"
    assert Case("gpt2", "float32", 16, "graph").label == "gpt2 float32 L=16 graph"
    assert DecodeCase.from_extra_info({"model": "m", "dtype": "float32", "seq_len": 5, "new_tokens": 8,
                                       "variant": "graph"}).without_variant() == ("m", "float32", 5, 8)


# ------------------------------------------------------------------ no raw reads outside the decoder

#: extra_info keys of a case or a check: read through ``m.case`` and ``m.check``.
RECORD_KEYS = {"suite", "model", "dtype", "seq_len", "new_tokens", "n_launches", "variant", "correct", "status",
               "check", "max_abs_diff", "fp64_rmse_ratio", "reason", "generate_check_passed", "matches_generate",
               "generate_check"}
#: run-document keys of the environment: read through ``run.environment``.
ENVIRONMENT_KEYS = {"datetime", "commit_info", "machine_info", "version", "cuda"}
#: The modules that decode (and validate) the raw JSON.
DECODERS = {"results/record.py", "results/runfile.py", "results/benchmark_values.py"}   # they read the raw file
READERS = sorted(p for layer in ("results", "report", "commands") for p in (PKG / layer).glob("*.py")
                 if str(p.relative_to(PKG)) not in DECODERS)


def raw_reads(source: str) -> list[str]:
    """``line: expression`` of every read of a case/check key from an ``extra_info`` dict (an attribute
    or name ``extra_info``/``info``, or a name assigned from ``X.extra_info``) and of an environment key
    from a run document (``X.data``, ``X.machine_info``) or of ``"extra_info"`` from a benchmark dict."""
    tree = ast.parse(source)
    aliases = {"info", "extra_info"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            pairs = [(t, node.value) for t in node.targets]
            pairs += [(t, v) for t in node.targets if isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple)
                      for t, v in zip(t.elts, node.value.elts)]
            for target, value in pairs:
                if isinstance(target, ast.Name) and "extra_info" in ast.unparse(value):
                    aliases.add(target.id)

    def holder(expr) -> str | None:
        if isinstance(expr, ast.Attribute) and expr.attr in ("extra_info", "data", "machine_info"):
            return expr.attr
        if isinstance(expr, ast.Name) and expr.id in aliases:
            return "extra_info"
        return None

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
            obj, key = node.func.value, node.args[0]
        elif isinstance(node, ast.Subscript):
            obj, key = node.value, node.slice
        else:
            continue
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            continue
        kind = holder(obj)
        if (key.value == "extra_info" or (kind == "extra_info" and key.value in RECORD_KEYS)
                or (kind in ("data", "machine_info") and key.value in ENVIRONMENT_KEYS)):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_check_finds_raw_reads():
    source = ("def f(m, run, bench):\n    info = m.extra_info\n    a = info.get('correct')\n"
              "    b = m.extra_info['model']\n    c = run.data.get('commit_info')\n    d = bench.get('extra_info')\n"
              "    e = m.extra_info.get('ms_per_token')\n")
    assert [r.split(":")[0] for r in raw_reads(source)] == ["3", "4", "5", "6"]


@pytest.mark.parametrize("path", READERS, ids=lambda p: str(p.relative_to(PKG)))
def test_readers_use_the_typed_record_not_raw_keys(path):
    found = raw_reads(path.read_text(encoding="utf-8"))
    assert not found, f"{path.relative_to(PKG)} reads raw case/check/environment keys: {found}"
