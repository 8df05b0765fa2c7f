"""Shared by the CLI tests: the committed H200 runs (``results/nvidia-h200/``) and small helpers around
``cli.main``."""

import gzip
import json
import pickle
import shutil
from pathlib import Path

from cudagraph_bench import cli

#: The committed raw H200 runs that tests read, by what they are: pytest-benchmark JSON, gzip-compressed
#: (``gunzip -k`` gives the file itself); ``results/nvidia-h200/README.md`` lists every file.
H200_RESULTS = Path(__file__).resolve().parents[1] / "results" / "nvidia-h200"
COMMITTED_RUNS = {
    "forward": "forward/forward.json.gz",                 # the default forward matrix, with kernel counts
    "forward-2": "forward/forward-2.json.gz",             # separate runs of the same code (no check recorded)
    "forward-3": "forward/forward-3.json.gz",
    "forward-checked": "forward/forward-checked.json.gz",  # the same matrix with each graph's check recorded
    "gpu-gate": "ci/gpu-gate.json.gz",                     # `make gpu-gate`'s run (the whole suite, checks recorded)
    # one of the baseline's runs: the gated matrix with the device-side figure and checks recorded
    "forward-repeat": "forward-repeats/forward-1.json.gz",
    "launch": "launch/launch.json.gz",
    # the default forward matrix through the one pipeline, rounds planned from a pilot, no time cap; its
    # benchmarks have plain-value params (model, dtype, seq_len, variant)
    "forward-one-pipeline": "forward/forward-one-pipeline.json.gz",
    "kernel-counts": "kernel-counts/kernel-counts.json.gz",   # eager kernel counts taken in worker processes
    "decode-checked": "decode/decode-checked.json.gz",       # the decode suite, each decoder checked against generate
    # the fused decode of two 1B Llamas, compile+graph with coordinate-descent tuning and a prefill graph
    "decode-fused-tuned-tinyllama": "decode/decode-fused-tuned-tinyllama-1.1b.json.gz",
    "decode-fused-tuned-llama": "decode/decode-fused-tuned-llama-3.2-1b.json.gz",
    # the whole default suite in one session on one GPU (time per part, kernel counts and busy times)
    "suite-one-gpu": "suite/default-suite-one-gpu.json.gz",
    # a `cudagraph-bench run` of the compile sweep with failed cases recorded
    "compile-sweep-with-failures": "compile-sweep/run-gpt2-L512-1024.json.gz",
    # tinyllama-1.1b float32 at 16, 50 and 128 tokens with the compile and compile+graph variants, each checked
    "compile-sweep": "compile-sweep/run-tinyllama-1.1b-L16-50-128.json.gz",
}
#: Other committed H200 files (not pytest-benchmark runs): graphs.cu's stdout and compute-sanitizer logs.
GRAPHS_CU = H200_RESULTS / "launch" / "graphs_cu.json"


def committed_run(name: str) -> Path:
    """Path of a committed H200 run by its name in :data:`COMMITTED_RUNS`."""
    return H200_RESULTS / COMMITTED_RUNS[name]


def read_json(path) -> dict:
    """The JSON document in ``path``, plain or gzip-compressed (``*.gz``); read here with the standard library,
    not with the loader under test."""
    raw = Path(path).read_bytes()
    return json.loads(gzip.decompress(raw) if str(path).endswith(".gz") else raw)


def committed_doc(name: str) -> dict:
    """The parsed JSON of a committed H200 run by its name in :data:`COMMITTED_RUNS`."""
    return read_json(committed_run(name))


def plain_copy(path, folder) -> Path:
    """``path`` decompressed into ``folder`` (what ``gunzip -k`` gives: the file pytest-benchmark wrote, which
    its own ``compare`` reads); returns the copy's path."""
    out = Path(folder) / Path(path).name.removesuffix(".gz")
    out.write_bytes(gzip.decompress(Path(path).read_bytes()))
    return out


#: The real H200 run of the default forward matrix: tests derive every expectation from it.
FIXTURE = committed_run("forward")
DOC = read_json(FIXTURE)
TIME_FIELDS = ("min", "max", "mean", "stddev", "median", "iqr", "q1", "q3", "ld15iqr", "hd15iqr", "total")


def committed_selftest_runs(folder, names) -> None:
    """Copy the committed self-test's runs ``names`` (file stems, e.g. ``eager-layer``) into ``folder``: the real H200
    runs of those planted faults, for a self-test folder whose verdict needs every fault it always plants."""
    for name in names:
        shutil.copy(H200_RESULTS / "selftest" / f"{name}.json.gz", Path(folder) / f"{name}.json.gz")


def run_cli(capsys, *argv):
    """``cli.main(argv)`` -> (exit code, stdout, stderr)."""
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def run_bad_input(capsys, argv) -> str:
    """``cli.main(argv)`` on bad input: asserts exit 2 (argparse's own errors included), nothing on stdout and one
    ``cudagraph-bench ...`` line on stderr; returns that line."""
    try:
        rc = cli.main([str(a) for a in argv])
    except SystemExit as exc:          # argparse's own errors (a bad option value)
        rc = exc.code
    out, err = capsys.readouterr()
    assert rc == 2 and out == "", (rc, out, err)
    assert len(err.splitlines()) == 1 and err.startswith("cudagraph-bench "), err
    return err


def write(doc, path):
    """Write ``doc`` as JSON to ``path`` (parents created); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def bench(doc, model, dtype, seq_len, variant):
    """The forward benchmark ``(model, dtype, seq_len, variant)`` of a run document."""
    for b in doc["benchmarks"]:
        i = b["extra_info"]
        if (i.get("suite"), i.get("model"), i.get("dtype"), i.get("seq_len"), i.get("variant")) == (
                "forward", model, dtype, seq_len, variant):
            return b
    raise KeyError((model, dtype, seq_len, variant))


def scale(b, factor):
    """Scale every time of one benchmark (rounds, stats, CUDA-event ms) by ``factor``."""
    s = b["stats"]
    if "data" in s:
        s["data"] = [x * factor for x in s["data"]]
    for f in TIME_FIELDS:
        if isinstance(s.get(f), (int, float)):
            s[f] *= factor
    if s.get("ops"):
        s["ops"] = s["ops"] / factor
    if "cuda_event_ms" in (b.get("extra_info") or {}):
        b["extra_info"]["cuda_event_ms"] = [x * factor for x in b["extra_info"]["cuda_event_ms"]]


def forward_benches(doc, variant=None):
    return [b for b in doc["benchmarks"] if b["extra_info"].get("suite") == "forward"
            and (variant is None or b["extra_info"]["variant"] == variant)]


def case_key(b):
    i = b["extra_info"]
    return i["model"], i["dtype"], i["seq_len"]


def median_ms(b):
    """Median of the raw rounds of one benchmark, in ms."""
    import numpy as np

    return float(np.median(b["stats"]["data"])) * 1000.0


def copy_doc(doc):
    """A deep copy of a JSON document (a pickle round trip: several times faster than ``copy.deepcopy`` on a run
    of thousands of rounds)."""
    return pickle.loads(pickle.dumps(doc, pickle.HIGHEST_PROTOCOL))


def checked(doc):
    """Copy of ``doc`` whose graph benchmarks record a passed strict correctness check."""
    doc = copy_doc(doc)
    for b in forward_benches(doc, "graph"):
        b["extra_info"].update(correct=True, check="strict", max_abs_diff=0.0)
    return doc


def scaled(doc, factor, variants=None):
    """Copy of ``doc`` with every time of the forward benchmarks (of ``variants``, default all) scaled."""
    doc = copy_doc(doc)
    for b in forward_benches(doc):
        if variants is None or b["extra_info"]["variant"] in variants:
            scale(b, factor)
    return doc


def write_runs(folder, factors, doc=None, prefix="run", variants=None):
    """One run file per factor: ``doc`` (default: the fixture with recorded checks) scaled by it."""
    doc = checked(DOC) if doc is None else doc
    return [write(scaled(doc, f, variants), folder / f"{prefix}-{i + 1}.json") for i, f in enumerate(factors)]


def no_default_baseline_fixture(tmp_path, monkeypatch):
    """Point every default baseline lookup at an empty folder: no test picks a committed baseline."""
    from cudagraph_bench import paths

    empty = tmp_path / "no-baselines"
    empty.mkdir()
    monkeypatch.setenv(paths.BASELINES_ENV, str(empty))
    monkeypatch.setattr(paths, "checkout_root", lambda: None)
    return empty
