"""A trial of bad inputs to every command that reads a run or a baseline, to the options of ``run`` and of the
commands, and to the pytest plugin's options: each must be clean, that is exit code 2, nothing on stdout, one line
on stderr that says what is wrong (the expected words are the ones the command prints for it), no traceback, no
file made, and no input file changed. The runs are a small cut of a committed H200 run (two cases), corrupted one
way each; every command runs in this process. The plugin's options: tests/test_bad_plugin_options.py."""

import gzip
import hashlib
import json
import os
from pathlib import Path

import pytest

from h200_fixture import copy_doc, committed_doc, run_bad_input

from cudagraph_bench.fsio import MAX_JSON_BYTES

pytestmark = pytest.mark.transformers_free

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "baselines" / "nvidia-h200.json"


def _small_run() -> dict:
    """The committed checked forward run cut to bert-tiny at 16 tokens (eager and graph, two dtypes)."""
    doc = committed_doc("forward-checked")
    keep = [b for b in doc["benchmarks"] if b["extra_info"]["model"] == "bert-tiny" and b["extra_info"]["seq_len"] == 16]
    return {**doc, "benchmarks": keep}


RUN = _small_run()
LAUNCH = committed_doc("launch")


def _set(path: str, value):
    """A corruption that sets the field at ``path`` (``"benchmarks.0.stats.median"``) of a copy of the run."""
    def corrupt(doc):
        *parents, last = path.split(".")
        node = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[int(last) if isinstance(node, list) else last] = value
        return doc
    return corrupt


def _del(path: str):
    """A corruption that deletes the field at ``path`` of a copy of the document."""
    def corrupt(doc):
        *parents, last = path.split(".")
        node = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        del node[last]
        return doc
    return corrupt


def _raw(path: str, literal: str):
    """A corruption that writes ``literal`` as the JSON text of the field at ``path`` (a number no float holds)."""
    marker = 7_777_777.125
    setter = _set(path, marker)
    return lambda doc: json.dumps(setter(doc)).replace(json.dumps(marker), literal, 1)


#: name -> (corruption of a copy of the run: a new document, or the file's text or bytes, what the error says)
RUN_CORRUPTIONS = {
    "median 10**400": (_raw("benchmarks.0.stats.median", "1" + "0" * 400), "benchmarks[0].stats.median is 1000"),
    "median of 5000 digits": (_raw("benchmarks.0.stats.median", "9" * 5000), "(5000 characters), a number outside"),
    "mean 1e999": (_raw("benchmarks.1.stats.mean", "1e999"), "benchmarks[1].stats.mean is a literal read as infinity"),
    "min -1e400": (_raw("benchmarks.0.stats.min", "-1e400"), "benchmarks[0].stats.min is a literal read as infinity"),
    "seq_len 10**400": (_raw("benchmarks.0.extra_info.seq_len", "1" + "0" * 400), "extra_info.seq_len is 1000"),
    "a data round 1e999": (_raw("benchmarks.0.stats.data.0", "1e999"), "benchmarks[0].stats.data[0] is a literal read as infinity"),
    "negative median": (_set("benchmarks.0.stats.median", -0.001), "stats that are negative, zero or not finite"),
    "zero median": (_set("benchmarks.0.stats.median", 0), "stats that are negative, zero or not finite"),
    "NaN median": (_set("benchmarks.0.stats.median", float("nan")), "stats that are negative, zero or not finite"),
    "infinite max": (_set("benchmarks.1.stats.max", float("inf")), "stats that are negative, zero or not finite"),
    "NaN stddev": (_set("benchmarks.0.stats.stddev", float("nan")), "stats.stddev = nan, not a finite spread"),
    "negative stddev": (_set("benchmarks.0.stats.stddev", -1.0), "stats.stddev = -1.0, not a finite spread"),
    "infinite round": (_set("benchmarks.0.stats.data.3", float("inf")), "stats.data that is not a list of positive"),
    "negative round": (_set("benchmarks.0.stats.data.0", -0.5), "stats.data that is not a list of positive"),
    "rounds as text": (_set("benchmarks.0.stats.rounds", "10"), "has no numeric stats"),
    "median true": (_set("benchmarks.0.stats.median", True), "has no numeric stats"),
    "stats a list": (_set("benchmarks.0.stats", [1, 2]), "has no numeric stats"),
    "round of two hours": (_set("benchmarks.0.stats.median", 7200.0), "has a round time above 3600 s"),
    "suite a list": (_set("benchmarks.0.extra_info.suite", ["forward"]), "extra_info.suite of type array"),
    "suite an object": (_set("benchmarks.0.extra_info.suite", {"name": "forward"}), "extra_info.suite of type object"),
    "suite a number": (_set("benchmarks.0.extra_info.suite", 1), "extra_info.suite of type number"),
    "model an object": (_set("benchmarks.0.extra_info.model", {"name": "gpt2"}), "extra_info.model of type object"),
    "model a list": (_set("benchmarks.1.extra_info.model", ["gpt2"]), "extra_info.model of type array"),
    "dtype a number": (_set("benchmarks.0.extra_info.dtype", 16), "extra_info.dtype of type number"),
    "variant null": (_set("benchmarks.0.extra_info.variant", None), "extra_info.variant of type null"),
    "seq_len 10**300": (_set("benchmarks.0.extra_info.seq_len", 10**300), "extra_info.seq_len = 1000"),
    "seq_len 1.5": (_set("benchmarks.0.extra_info.seq_len", 1.5), "extra_info.seq_len = 1.5, not a whole number"),
    "seq_len as text": (_set("benchmarks.0.extra_info.seq_len", "16"), "extra_info.seq_len = '16', not a whole"),
    "seq_len 0": (_set("benchmarks.0.extra_info.seq_len", 0), "extra_info.seq_len = 0, not a whole number"),
    "seq_len true": (_set("benchmarks.0.extra_info.seq_len", True), "extra_info.seq_len = True, not a whole"),
    "unknown variant": (_set("benchmarks.0.extra_info.variant", "grph"), "has forward variant 'grph', not one of"),
    "graph without extra_info": (_del("benchmarks.1.extra_info"), "benchmarks[1] (perf_tests/test_forward_bench.py::"
                                                                  "test_forward[bert-tiny-float32-L16-graph]) has no "
                                                                  "extra_info"),
    "graph with extra_info null": (_set("benchmarks.3.extra_info", None), "benchmarks[3] (perf_tests/test_forward_bench"
                                                                          ".py::test_forward[bert-tiny-bfloat16-L16-graph])"
                                                                          " has no extra_info"),
    "graph with an empty extra_info": (_set("benchmarks.1.extra_info", {}),
                                       "test_forward[bert-tiny-float32-L16-graph]) lacks extra_info suite, model, dtype, "
                                       "seq_len, variant, which the other benchmarks of its test record (suite 'forward')"),
    "graph without its suite": (_del("benchmarks.1.extra_info.suite"), "test_forward[bert-tiny-float32-L16-graph]) lacks "
                                                                       "extra_info suite, which the other benchmarks"),
    "unknown dtype": (_set("benchmarks.0.extra_info.dtype", "fp8"), "has dtype 'fp8', not one of"),
    "negative device time": (_set("benchmarks.1.extra_info.device_median_ms", -1.0),
                             "extra_info.device_median_ms = -1.0, not a finite time >= 0"),
    "NaN device time": (_set("benchmarks.1.extra_info.device_median_ms", float("nan")),
                        "extra_info.device_median_ms = nan, not a finite time"),
    "device time 1e300": (_set("benchmarks.1.extra_info.device_median_ms", 1e300),
                          "extra_info.device_median_ms = 1e+300 ms, 7.25e+300 times its synchronized wall median (0.137964 ms)"),
    "device time 1e-300": (_set("benchmarks.1.extra_info.device_median_ms", 1e-300),
                           "extra_info.device_median_ms = 1e-300 ms, 7.25e-300 times its synchronized wall median"),
    "device time 0": (_set("benchmarks.1.extra_info.device_median_ms", 0),
                      "extra_info.device_median_ms = 0, not a time > 0 ms (the device-side median of one call)"),
    "device time a list": (_set("benchmarks.1.extra_info.device_median_ms", [0.1, 0.2]),
                           "extra_info.device_median_ms of type array, not a number of ms"),
    "GPU UUID a list": (_set("machine_info.cuda.gpu_uuid", ["GPU-a", "GPU-b"]),
                        "machine_info.cuda.gpu_uuid is ['GPU-a', 'GPU-b'] (of type array), not text"),
    "GPU UUID a number": (_set("machine_info.cuda.gpu_uuid", 7), "machine_info.cuda.gpu_uuid is 7 (of type number)"),
    "GPU UUID an object": (_set("machine_info.cuda.gpu_uuid", {"uuid": "GPU-a"}),
                           "machine_info.cuda.gpu_uuid is {'uuid': 'GPU-a'} (of type object)"),
    "GPU slug a list": (_set("machine_info.cuda.gpu_slug", ["nvidia-h200"]), "machine_info.cuda.gpu_slug is"),
    "commit id a number": (_set("commit_info.id", 12345), "commit_info.id is 12345 (of type number), not text"),
    "infinite CUDA-event round": (_set("benchmarks.1.extra_info.cuda_event_ms", [0.1, float("inf")]),
                                  "extra_info.cuda_event_ms[1] = inf, not a finite time"),
    "capture time as text": (_set("benchmarks.1.extra_info.capture_ms", "fast"),
                             "extra_info.capture_ms of type string, not a number"),
    "correct as text": (_set("benchmarks.1.extra_info.correct", "yes"), "extra_info.correct = 'yes', not true/false"),
    "extra_info a list": (_set("benchmarks.0.extra_info", []), "has extra_info of type list, not an object"),
    "commit_info as text": (_set("commit_info", "abc"), "'commit_info' must be an object"),
    "cudagraph_bench a list": (_set("cudagraph_bench", []), "'cudagraph_bench' must be an object"),
    **{f"kernel_counts {what}": (_set("cudagraph_bench.kernel_counts", value),
                                 f"cudagraph_bench.kernel_counts must be a list of objects (one per case), got {shown}")
       for what, value, shown in (("a string", "x", '"x"'), ("an object", {"a": 1}, '{"a": 1}'), ("a number", 3, "3"),
                                  ("a list of numbers", [1], "[1]"), ("null", None, "null"))},
    **{f"test_durations_s {what}": (_set("cudagraph_bench.test_durations_s", value),
                                    f"cudagraph_bench.test_durations_s is of type {what}, not an object of seconds")
       for what, value in (("null", None), ("string", "x"), ("number", 3), ("array", [1]))},
    "a test duration as text": (_set("cudagraph_bench.test_durations_s", {"t.py::a": "1"}),
                                "cudagraph_bench.test_durations_s['t.py::a'] = '1' is not seconds >= 0"),
    "a kernel count as text": (_set("cudagraph_bench.kernel_counts", [{"model": "bert-tiny", "n_kernels": "many"}]),
                               "cudagraph_bench.kernel_counts[0].n_kernels = 'many', not a whole number of kernels"),
    "benchmarks an object": (_set("benchmarks", {}), "is not pytest-benchmark output"),
    "no machine_info": (lambda doc: {k: v for k, v in doc.items() if k != "machine_info"},
                        "is not pytest-benchmark output"),
    "a list, not a run": (lambda doc: [doc], "is not pytest-benchmark output"),
    "no benchmarks": (_set("benchmarks", []), "holds no benchmarks"),
    "interrupted": (_set("cudagraph_bench.interrupted", "Ctrl-C after 3 benchmarks"),
                    "is the run of an interrupted session (Ctrl-C after 3 benchmarks)"),
    "truncated": (lambda doc: json.dumps(doc)[:5000], "is not valid JSON (line 1, column"),
    "empty": (lambda doc: "  \n", "is empty: rerun the benchmarks"),
    "not UTF-8": (lambda doc: b"\xff\xff" + json.dumps(doc).encode(), "is not valid JSON"),
    "nested 100 deep": (lambda doc: '{"benchmarks": ' + "[" * 100 + "]" * 100 + ', "machine_info": {}}',
                        "nests JSON deeper than 64 levels"),
    "corrupt gzip": (lambda doc: gzip.compress(json.dumps(doc).encode())[:300], "is not a valid gzip file"),
}

#: Corruptions of the committed baseline -> what the error says.
BASELINE_CORRUPTIONS = {
    "graph median 10**400": (_raw("cases.0.graph.median_ms", "1" + "0" * 400), "cases[0].graph.median_ms is 1000"),
    "spread 1e999": (_raw("cases.0.graph.spread_pct", "1e999"), "cases[0].graph.spread_pct is a literal read as infinity"),
    "infinite spread": (_set("cases.0.graph.spread_pct", float("inf")), "graph.spread_pct must be a finite percent"),
    "NaN spread": (_set("cases.0.graph.spread_pct", float("nan")), "graph.spread_pct must be a finite percent"),
    "negative spread": (_set("cases.0.graph.spread_pct", -2.0), "graph.spread_pct must be a finite percent"),
    "infinite run medians": (_set("cases.0.graph.run_medians_ms", [float("inf")] * 5),
                             "graph.run_medians_ms must be a list of positive finite ms"),
    "negative eager median": (_set("cases.0.eager.median_ms", -1.0), "cases[0].eager.median_ms is -1.0, not a finite"),
    "NaN graph p95": (_set("cases.0.graph.p95_ms", float("nan")), "cases[0].graph.p95_ms is nan, not a finite time"),
    "model an object": (_set("cases.0.model", {"name": "gpt2"}), 'cases[0].model is {"name": "gpt2"}, not a string'),
    "dtype a list": (_set("cases.0.dtype", ["float32"]), 'cases[0].dtype is ["float32"], not a string'),
    "seq_len 10**300": (_set("cases.0.seq_len", 10**300), "cases[0] has seq_len 1000"),
    "gated as text": (_set("cases.0.gated", "yes"), 'gated is "yes", not true or false'),
    "threshold NaN": (_set("thresholds.regression_floor_pct", float("nan")), "thresholds.regression_floor_pct"),
    "no cases": (_set("cases", []), "it holds no cases"),
    "schema 9": (_set("schema_version", 9), "has unknown schema_version 9"),
    "schema as text": (_set("schema_version", "3"), "schema_version is the string '3', not a number"),
    "another kind": (_set("kind", "pytest-benchmark"), 'has kind "pytest-benchmark", not \'cudagraph-bench-baseline\''),
    "no kind": (_del("kind"), "has no kind, not 'cudagraph-bench-baseline'"),
    "schema 2 with machine fields": (_set("schema_version", 2),
                                     "cases[0].graph.run_hosts is a schema-3 machine field, but the file says schema_version 2"),
    "figure bogus": (_set("cases.0.graph.figure", "bogus"), "cases[0] (bert-tiny bfloat16 L=16): graph.figure is \"bogus\", "
                                                             "not one of 'wall', 'device'"),
    "device figure without wall medians": (_del("cases.0.graph.wall_run_medians_ms"),
                                           "graph.wall_run_medians_ms must list one positive wall median"),
    "spread above 100%": (_set("cases.0.graph.spread_pct", 250.0),
                          "graph.spread_pct: a between-run spread is a percent in [0, 100], got 250 (above 100 percent)"),
    "within-machine spread 1e6%": (_set("cases.0.graph.within_host_spread_pct", 1e6),
                                   "graph.within_host_spread_pct: a between-run spread is a percent in [0, 100]"),
    "cross-machine spread 101%": (_set("cases.0.graph.cross_host_spread_pct", 101),
                                  "graph.cross_host_spread_pct: a between-run spread is a percent in [0, 100], got 101"),
    "pooled spread 500%": (_set("thresholds.cross_host_spread_pct", 500.0),
                           "thresholds.cross_host_spread_pct: a between-run spread is a percent in [0, 100], got 500"),
    "negative pooled spread": (_set("thresholds.cross_host_spread_pct", -1.0),
                               "thresholds.cross_host_spread_pct: a between-run spread is a percent in [0, 100], got -1"),
    "negative noise multiplier": (_set("thresholds.noise_multiplier", -3),
                                  "thresholds.noise_multiplier: expected a multiplier of the spread >= 0, got -3"),
    "cross_host_df of a million": (_set("thresholds.cross_host_df", 10**6),
                                   "thresholds.cross_host_df is 1000000, more than the file's 24 cases x 2 machines (48)"),
    "pooled spread without its df": (_set("thresholds.cross_host_df", None), "thresholds.cross_host_df and "
                                                                             "thresholds.cross_host_spread_pct go together"),
    "two machines, no pooled spread": (lambda d: _set("thresholds.cross_host_df", None)(
        _set("thresholds.cross_host_spread_pct", None)(d)), "thresholds.cross_host_spread_pct is missing, but hosts "
                                                            "lists 2 machines"),
    "within_host_df above the runs": (_set("cases.0.graph.within_host_df", 50),
                                      "graph.within_host_df is 50, more than its 9 run medians give"),
    "host medians of 3 machines from 2": (_set("cases.0.graph.host_medians_ms", [0.095, 0.095, 0.095]),
                                          "graph.host_medians_ms holds 3 medians, but graph.run_hosts names 2 machines"),
    "no graph run_hosts": (_del("cases.0.graph.run_hosts"), "cases[0] (bert-tiny bfloat16 L=16): graph.run_hosts is "
                                                            "missing"),
    "eager run_hosts of another length": (_set("cases.0.eager.run_hosts", ["GPU-8265e87e-95f8-2238-161a-22c2ab522eda"]),
                                          "eager.run_hosts must list one host (text or null) per run median"),
    "run_hosts naming no machine of hosts": (_set("cases.0.graph.run_hosts.0", "GPU-other"),
                                             "graph.run_hosts names machine GPU-other, which hosts does not list"),
    "hosts an object": (_set("hosts", {}), "hosts is {}, not a list of"),
    "hosts of text": (_set("hosts", ["GPU-a"]), 'hosts[0] is "GPU-a", not an object'),
    "a machine of no runs": (_set("hosts.0.runs", 0), "hosts[0].runs is 0, not a whole number of runs >= 1"),
    "a machine named by a number": (_set("hosts.1.host", 7), "hosts[1].host is 7, not the machine's GPU UUID"),
    "negative n_runs": (_set("cases.0.n_runs", -3), "cases[0] (bert-tiny bfloat16 L=16): n_runs is -3, not a whole "
                                                    "number of runs >= 1"),
    "n_runs as text": (_set("cases.0.n_runs", "9"), 'cases[0] (bert-tiny bfloat16 L=16): n_runs is "9", not a whole'),
    "n_runs other than the run medians": (_set("cases.0.n_runs", 5),
                                          "n_runs is 5, but graph.run_medians_ms holds 9 run medians"),
    "a null case": (_set("cases.0", None), "cases[0] is null, not a case object"),
    "a case without graph": (_del("cases.0.graph"), "cases[0] (bert-tiny bfloat16 L=16) has no graph"),
    "a case without eager": (_del("cases.1.eager"), "cases[1] (bert-tiny bfloat16 L=50) has no eager"),
    "a case without model": (_del("cases.0.model"), "cases[0] has no model"),
    "graph a number": (_set("cases.0.graph", 3), "cases[0] (bert-tiny bfloat16 L=16): graph is 3, not an object"),
    "graph without its median": (_del("cases.0.graph.median_ms"), "cases[0] (bert-tiny bfloat16 L=16): graph has no "
                                                                  "median_ms"),
    "gpu_slug a number": (_set("gpu_slug", 5), "gpu_slug is 5, not the GPU's key as text"),
    "no gpu_slug": (_del("gpu_slug"), "gpu_slug is missing, not the GPU's key as text"),
    "sources a number": (_set("sources", 5), "sources is 5, not a list of one object per run"),
    "sources of text": (_set("sources", ["a.json"]), 'sources is ["a.json"], not a list of one object per run'),
}


def _write(folder: Path, name: str, content) -> Path:
    path = folder / name
    if isinstance(content, (dict, list)):
        content = json.dumps(content)
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


def _bad_run(folder: Path, corruption, base=RUN) -> Path:
    return _write(folder, "bad-run.json", corruption(copy_doc(base)))


def _good_run(folder: Path, i: int = 0) -> Path:
    return _write(folder, f"good-{i}.json", {**RUN, "datetime": f"2030-01-0{i + 1}T00:00:00"})


def _bad_baseline(folder: Path, corruption) -> Path:
    return _write(folder, "bad-baseline.json", corruption(json.loads(BASELINE.read_text())))


#: command -> argv for a bad run in folder ``t`` (the good runs it needs beside it are written too)
RUN_COMMANDS = {
    "gate": lambda t, bad: ["gate", bad, "--baseline", "none"],
    "compare": lambda t, bad: ["compare", _good_run(t), bad],
    "report": lambda t, bad: ["report", bad, "-o", t / "report"],
    "merge": lambda t, bad: ["merge", "-o", t / "merged.json", _good_run(t), bad],
    "baseline": lambda t, bad: ["baseline", bad, *[_good_run(t, i) for i in range(4)], "-o", t / "b.json"],
}

CASES = {}
for _name, (_corrupt, _says) in RUN_CORRUPTIONS.items():
    for _command, _argv in RUN_COMMANDS.items():
        if _command == "merge" and _name == "no benchmarks":   # a shard that recorded kernel counts only: merged
            continue
        CASES[f"{_command}: run with {_name}"] = (
            lambda t, c=_corrupt, a=_argv: a(t, _bad_run(t, c)), _says)
for _name, (_corrupt, _says) in BASELINE_CORRUPTIONS.items():
    CASES[f"gate: baseline with {_name}"] = (
        lambda t, c=_corrupt: ["gate", _good_run(t), "--baseline", _bad_baseline(t, c)], _says)
    CASES[f"compare: baseline with {_name}"] = (
        lambda t, c=_corrupt: ["compare", _good_run(t, 0), _good_run(t, 1), "--baseline", _bad_baseline(t, c)], _says)
for _name, (_corrupt, _says) in {
        "n_launches 1e999": (_raw("benchmarks.0.extra_info.n_launches", "1e999"), "extra_info.n_launches is a literal read as infinity"),
        "n_launches 0": (_set("benchmarks.0.extra_info.n_launches", 0), "extra_info.n_launches = 0, not a whole"),
        "n_launches as text": (_set("benchmarks.0.extra_info.n_launches", "8"), "extra_info.n_launches = '8'"),
        "negative time per launch": (_set("benchmarks.0.extra_info.us_per_launch", -3.0),
                                     "extra_info.us_per_launch = -3.0, not a finite time"),
}.items():
    CASES[f"launch-report: run with {_name}"] = (
        lambda t, c=_corrupt: ["launch-report", _bad_run(t, c, LAUNCH), "-o", t / "launch"], _says)
    CASES[f"merge: launch run with {_name}"] = (
        lambda t, c=_corrupt: ["merge", "-o", t / "merged.json", _bad_run(t, c, LAUNCH)], _says)

#: Options and paths: argv from folder ``t`` -> what the error says.
CASES.update({
    "run --gpus ''": (lambda t: ["run", "--device", "cpu", "--gpus", "", "-o", t / "run"], "--gpus '': give GPU"),
    "run --gpus ' '": (lambda t: ["run", "--device", "cpu", "--gpus", " ", "-o", t / "run"], "give GPU indices"),
    "run --gpus x": (lambda t: ["run", "--device", "cpu", "--gpus", "x", "-o", t / "run"], "give GPU indices"),
    "run --cpus 0-99999999999": (lambda t: ["run", "--cpus", "0-99999999999"], "CPUs are numbered 0 to at most"),
    "run --cpus of 5000 digits": (lambda t: ["run", "--cpus", "9" * 5000], "bad CPU list item"),
    "run --cpus abc": (lambda t: ["run", "--cpus", "abc"], "bad CPU list item 'abc'"),
    "run --cpus 5-1": (lambda t: ["run", "--cpus", "5-1"], "bad CPU range '5-1'"),
    "run --prompt-lengths 0": (lambda t: ["run", "--prompt-lengths", "0"], "prompt lengths must be positive"),
    "run --prompt-lengths 1000000000000": (lambda t: ["run", "--prompt-lengths", "1000000000000", "-o", t / "r"],
                                           "--prompt-lengths: prompt lengths must be at most 131072 tokens"),
    "run -- --benchmark-min-rounds 0": (lambda t: ["run", "--", "--benchmark-min-rounds", "0"],
                                        "expected a number >= 1"),
    "run --dtypes int8": (lambda t: ["run", "--dtypes", "int8"], "unknown dtype 'int8'"),
    "run --variants gaph": (lambda t: ["run", "--variants", "gaph"], "unknown variant 'gaph'"),
    "run --device tpu": (lambda t: ["run", "--device", "tpu"], "unknown device 'tpu'"),
    "run --device cpu --variants graph": (lambda t: ["run", "--device", "cpu", "--variants", "graph", "-o", t / "r"],
                                          "graph variants need a CUDA GPU"),
    "run -o ''": (lambda t: ["run", "-o", ""], "-o/--output-dir: expected a path, got an empty string: name a folder, "
                                               "e.g. out/report"),
    "report -o ''": (lambda t: ["report", _good_run(t), "-o", ""], "got an empty string: name a folder, e.g. "),
    "gate --markdown ''": (lambda t: ["gate", _good_run(t), "--markdown", ""],
                           "--markdown: expected a path, got an empty string: name a markdown file, e.g. out/report.md"),
    "run --config ''": (lambda t: ["run", "--config", ""], "got an empty string: name a TOML file, e.g. "),
    "merge -o ''": (lambda t: ["merge", "-o", "", _good_run(t)], "got an empty string: name a run JSON, e.g. "),
    "baseline -o ''": (lambda t: ["baseline", _good_run(t), "-o", ""], "got an empty string: name a baseline, e.g. "),
    "run -o a file": (lambda t: ["run", "--device", "cpu", "--variants", "eager", "-o", _good_run(t)],
                      "is a file, not a folder"),
    "run -o on a read-only place": (lambda t: ["run", "--device", "cpu", "--variants", "eager", "-o", "/proc/cgb-run"],
                                    "-o /proc/cgb-run cannot be written: /proc does not take new files"),
    "report -o on a read-only place": (lambda t: ["report", _good_run(t), "-o", "/proc/cgb-report"],
                                       "-o /proc/cgb-report cannot be written"),
    "merge -o on a read-only place": (lambda t: ["merge", "-o", "/proc/cgb.json", _good_run(t)],
                                      "-o /proc/cgb.json cannot be written"),
    "gate --markdown on a read-only place": (lambda t: ["gate", _good_run(t), "--baseline", "none", "--markdown",
                                                        "/proc/cgb.md"], "--markdown /proc/cgb.md cannot be written"),
    "merge -o /dev/full": (lambda t: ["merge", "-o", "/dev/full", _good_run(t)], "/dev/full"),
    "gate --confirm 99": (lambda t: ["gate", _good_run(t), "--confirm", "99"], "expected at most 20 reruns"),
    "gate --min-reduction 100": (lambda t: ["gate", _good_run(t), "--min-reduction", "100"], "a percent in [0, 100)"),
    "gate --max-regression nan": (lambda t: ["gate", _good_run(t), "--max-regression", "nan"], "a finite number"),
    "gate a folder": (lambda t: ["gate", t, "--baseline", "none"], "is a folder, not a run JSON"),
    "gate /dev/zero": (lambda t: ["gate", "/dev/zero", "--baseline", "none"], "is not a regular file (a character device"),
    "gate a missing file": (lambda t: ["gate", t / "nope.json", "--baseline", "none"], "no such file"),
    "compare one run": (lambda t: ["compare", _good_run(t)], "expected OLD NEW (two runs), got 1"),
    "compare a run with itself": (lambda t: ["compare", _good_run(t), _good_run(t)], "are the same run"),
    "gate --baseline a folder": (lambda t: ["gate", _good_run(t), "--baseline", t], "is a folder"),
    "gate --baseline a run": (lambda t: ["gate", _good_run(t), "--baseline", _good_run(t, 1)],
                              "baseline {t}/good-1.json is a pytest-benchmark run, not a baseline (no schema_version): "
                              "build a baseline from runs with cudagraph-bench baseline RUN1 ... RUN5 -o FILE and give "
                              "--baseline FILE, or give --baseline the baseline file"),
    "merge -o an input": (lambda t: ["merge", "-o", _good_run(t), _good_run(t)], "is the input file"),
})


def _zoo_run(folder: Path) -> Path:
    """A copy of a committed zoo run (the CPU classification of one transformers release)."""
    return _write(folder, "zoo.json.gz", (ROOT / "results" / "cpu" / "zoo" / "cpu-transformers-5.17.0.json.gz").read_bytes())


def _selftest_folder(folder: Path, names=("unmodified-1.json", "unmodified-2.json")) -> Path:
    """A self-test folder holding the small run under ``names``."""
    (folder / "st").mkdir()
    for name in names:
        _write(folder / "st", name, RUN)
    return folder / "st"


def _plain_loop_run(folder: Path) -> Path:
    """A copy of a committed run of the plain capture/replay loop (scripts/device/plain_loop)."""
    return _write(folder, "plain-1.json.gz", (ROOT / "results" / "nvidia-h200" / "forward-repeats" / "plain-1.json.gz")
                  .read_bytes())


CASES.update({
    "calibrate a plain-loop run as RUN": (lambda t: ["calibrate", _good_run(t), _plain_loop_run(t)],
                                          "RUN {t}/plain-1.json.gz is a run of the plain capture/replay loop "
                                          "(scripts/device/plain_loop"),
    "calibrate --plain a run of the suite": (lambda t: ["calibrate", _good_run(t), "--plain", _good_run(t, 1)],
                                             "--plain {t}/good-1.json is not a run of the plain capture/replay loop "
                                             "(it is a run of the suite's forward benchmarks)"),
    "calibrate --plain a zoo run": (lambda t: ["calibrate", _good_run(t), "--plain", _zoo_run(t)],
                                    "(it is a run of the architecture zoo)"),
    "calibrate --plain one of the RUNs": (lambda t: ["calibrate", _good_run(t), "--plain", _good_run(t)],
                                          "are the same run"),
    "baseline of a plain-loop run": (lambda t: ["baseline", _plain_loop_run(t), *[_good_run(t, i) for i in range(4)],
                                                "-o", t / "b.json"], "plain-1.json.gz is a run of the plain capture/replay loop"),
    "gate a plain-loop run": (lambda t: ["gate", _plain_loop_run(t)], "or pass it to calibrate with --plain"),
    "gate runs of two commits": (lambda t: ["gate", _good_run(t), _write(t, "other.json", {
        **RUN, "commit_info": {**RUN["commit_info"], "id": "f" * 40}}), "--baseline", "none"],
        "the runs are of 2 commits ({commit} in {t}/good-0.json, ffffffffffff in {t}/other.json): gate one commit's "
        "runs at a time; compare OLD NEW compares two"),
    "zoo --from X --markdown X": (lambda t: ["zoo", "--from", _zoo_run(t), "--markdown", t / "zoo.json.gz"],
                                  "--markdown {t}/zoo.json.gz is the input file"),
    "zoo --from X Y --markdown Y": (lambda t: ["zoo", "--from", _zoo_run(t), _good_run(t), "--markdown", _good_run(t)],
                                    "is the input file {t}/good-0.json"),
    "selftest --from DIR --markdown DIR/unmodified-1.json": (
        lambda t: ["selftest", "--from", _selftest_folder(t), "--markdown", t / "st" / "unmodified-1.json"],
        "--markdown {t}/st/unmodified-1.json is the input file"),
    "selftest --from DIR --markdown the --baseline": (
        lambda t: ["selftest", "--from", _selftest_folder(t), "--baseline", _write(t, "b.json", BASELINE.read_bytes()),
                   "--markdown", t / "b.json"], "--markdown {t}/b.json is the input file"),
    "selftest -o DIR --markdown a run it writes": (
        lambda t: ["selftest", "-o", t / "new", "--markdown", t / "new" / "delay-5.json"],
        "--markdown {t}/new/delay-5.json is the input file"),
    "selftest --from DIR --runs 7": (lambda t: ["selftest", "--from", _selftest_folder(t), "--runs", "7"],
                                     "--runs 7 sets the unmodified runs of a new self-test, but --from evaluates"),
    "selftest --from a folder without unmodified runs": (
        lambda t: ["selftest", "--from", _selftest_folder(t, ("run-1.json", "delay-5.json"))],
        "--from {t}/st holds no unmodified runs (unmodified-1.json[.gz], unmodified-2.json[.gz], ...,"),
    "selftest --ab 2": (lambda t: ["selftest", "-o", t / "new", "--ab", "2"],
                        "--ab 2: expected 4 to 20 runs per group"),
    "selftest --from DIR --ab 4": (lambda t: ["selftest", "--from", _selftest_folder(t), "--ab", "4"],
                                   "--ab 4 sets the ab runs of a new self-test, but --from evaluates"),
    "selftest -- with a bad prompt length": (
        lambda t: ["selftest", "-o", t / "new", "--", "--prompt-lengths", "16,x"],
        "selftest --: --prompt-lengths 16,x: prompt lengths must be whole numbers"),
})


def _gzip_bomb(folder: Path) -> Path:
    """A small gzip file that inflates to one byte more than a run's JSON may hold."""
    return _write(folder, "bomb.json.gz", gzip.compress(b" " * (MAX_JSON_BYTES + 1), compresslevel=1))


CASES["gate: gzip that inflates beyond the bound"] = (lambda t: ["gate", _gzip_bomb(t), "--baseline", "none"],
                                                      f"inflates to more than {MAX_JSON_BYTES:,} bytes")


def _digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_clean(tmp_path, capsys, case):
    build, says = CASES[case]
    argv = [str(a) for a in build(tmp_path)]
    before = _digests(tmp_path)
    committed = hashlib.sha256(BASELINE.read_bytes()).hexdigest()
    err = run_bad_input(capsys, argv)
    says = says.replace("{t}", str(tmp_path)).replace("{commit}", str(RUN["commit_info"].get("id"))[:12])
    assert "Traceback" not in err and says in err, err
    assert _digests(tmp_path) == before                      # nothing made, nothing changed
    assert hashlib.sha256(BASELINE.read_bytes()).hexdigest() == committed


def test_the_trial_is_large():
    from test_bad_plugin_options import PYTEST_OPTIONS

    assert len(CASES) + len(PYTEST_OPTIONS) >= 150
