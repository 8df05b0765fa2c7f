"""Shared by the CLI tests: the committed H200 runs (``results/nvidia-h200/``) and small helpers around
``cli.main``."""

import json
from pathlib import Path

from cudagraph_bench import cli

#: The committed raw H200 runs (pytest-benchmark JSON) that tests read, by what they are.
H200_RESULTS = Path(__file__).resolve().parents[1] / "results" / "nvidia-h200"
COMMITTED_RUNS = {
    "forward": "forward/forward.json",                 # the default forward matrix, with kernel counts
    "forward-2": "forward/forward-2.json",             # separate runs of the same code (no check recorded)
    "forward-3": "forward/forward-3.json",
    "forward-checked": "forward/forward-checked.json",  # the same matrix with each graph's check recorded
    "gpu-gate": "gpu-gate-end-to-end/gpu-gate.json",    # `make gpu-gate`'s run
    "forward-short": "tree-check/forward-short.json",   # gpt2, 16 and 50 tokens, 20 rounds
    "launch": "launch/launch.json",
    "graphs_cu": "launch/graphs_cu.json",
    # forward benchmarks with plain-value params (model, dtype, seq_len, variant); not recorded yet:
    # the tests that read it skip until it is committed
    "forward-params": "forward/forward-plain-params.json",
    "kernel-counts": "kernel-counts/kernel-counts.json",   # eager kernel counts taken in worker processes
    "decode-checked": "decode/decode-checked.json",       # the decode suite, each decoder checked against generate
    # the fused decode of two 1B Llamas, compile+graph with coordinate-descent tuning and a prefill graph
    "decode-fused-tuned-tinyllama": "decode/decode-fused-tuned-tinyllama-1.1b.json",
    "decode-fused-tuned-llama": "decode/decode-fused-tuned-llama-3.2-1b.json",
    # the default suite on one GPU, forward profiles per call of a scheduled profiler, then in one window
    "suite-one-gpu": "suite/default-suite-one-gpu.json",
    "suite-one-gpu-one-window": "suite/default-suite-one-gpu-one-window-profiles.json",
    # tinyllama-1.1b float32 at 16, 50 and 128 tokens with the compile and compile+graph variants, each checked
    "compile-sweep": "compile-sweep/run-tinyllama-1.1b-L16-50-128.json",
}


def committed_run(name: str) -> Path:
    """Path of a committed H200 run by its name in :data:`COMMITTED_RUNS`."""
    return H200_RESULTS / COMMITTED_RUNS[name]


#: The real H200 run of the default forward matrix: tests derive every expectation from it.
FIXTURE = committed_run("forward")
DOC = json.loads(FIXTURE.read_text())
TIME_FIELDS = ("min", "max", "mean", "stddev", "median", "iqr", "q1", "q3", "ld15iqr", "hd15iqr", "total")


def run_cli(capsys, *argv):
    """``cli.main(argv)`` -> (exit code, stdout, stderr)."""
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


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


def checked(doc):
    """Copy of ``doc`` whose graph benchmarks record a passed strict correctness check."""
    import copy

    doc = copy.deepcopy(doc)
    for b in forward_benches(doc, "graph"):
        b["extra_info"].update(correct=True, check="strict", max_abs_diff=0.0)
    return doc


def scaled(doc, factor, variants=None):
    """Copy of ``doc`` with every time of the forward benchmarks (of ``variants``, default all) scaled."""
    import copy

    doc = copy.deepcopy(doc)
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
