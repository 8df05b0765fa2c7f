"""The results of ``cudagraph-bench run`` as a pytest-benchmark run document: the same format
``pytest --benchmark-json`` writes and ``gate``/``compare``/``report`` read (per-round data in
``stats.data``, seconds); cases that failed or were skipped are listed under
``["cudagraph_bench"]["failures"]`` with their reason. ``settings`` is the command's resolved
settings (``rounds``, ``warmup_rounds`` and ``as_dict()`` are read)."""

from __future__ import annotations

import json
from pathlib import Path

from cudagraph_bench.cases import Case
from cudagraph_bench.fsio import write_text_atomic
from cudagraph_bench.measure.case import CaseResult


def benchmark_entry(result: CaseResult, settings) -> dict:
    """One ``benchmarks[]`` entry, shaped like pytest-benchmark's ``Metadata.as_dict(include_data=True)``:
    stats from ``pytest_benchmark.stats.Stats`` over the per-round wall times (seconds)."""
    from pytest_benchmark.stats import Stats

    case = Case(result.model, result.dtype, result.seq_len, result.variant)
    stats = Stats()
    for ms in result.wall_ms:
        stats.update(ms / 1e3)
    stats_dict = stats.as_dict()
    stats_dict["data"] = list(stats.data)
    stats_dict["iterations"] = 1
    extra = {**case.extra_info(), **result.extra_info}
    extra.update(device=result.device, max_abs_diff=result.max_abs_diff, isolated=result.isolated,
                 rounds=len(result.wall_ms))
    if result.variant != "eager":
        extra["correct"] = result.status == "ok"
    if result.experts_implementation is not None:
        extra["experts_implementation"] = result.experts_implementation
    if result.event_ms:
        import numpy as np

        extra["cuda_event_ms"] = [round(x, 6) for x in result.event_ms]
        extra["event_median_ms"] = float(np.median(result.event_ms))
    for key in ("compile_ms", "capture_ms", "pad_to", "check", "fp64_rmse_ratio"):
        if getattr(result, key) is not None:
            extra[key] = getattr(result, key)
    if result.status != "ok":
        extra["status"], extra["reason"] = result.status, result.reason
    if result.notes:
        extra["notes"] = list(result.notes)
    return {
        "group": case.group,
        "name": f"run_forward[{case.test_id}]",
        "fullname": f"cudagraph-bench run::run_forward[{case.test_id}]",
        "params": {"model": case.model, "dtype": case.dtype, "seq_len": case.seq_len, "variant": case.variant},
        "param": case.test_id,
        "extra_info": extra,
        "options": {"disable_gc": True, "timer": "perf_counter", "min_rounds": settings.rounds,
                    "max_time": None, "min_time": None,
                    "warmup": extra.get("warmup_rounds", 0) > 0 or bool(extra.get("pilot_ms"))},
        "stats": stats_dict,
    }


def failure_entry(result: CaseResult) -> dict:
    """A case with no measurement (failed or skipped), as listed under ``cudagraph_bench.failures``."""
    return {k: getattr(result, k) for k in ("model", "dtype", "seq_len", "variant", "status", "reason", "phase",
                                            "isolated", "max_abs_diff", "check", "fp64_rmse_ratio",
                                            "compile_ms")}


def machine_and_commit_info(device: str = "cuda") -> tuple[dict, dict]:
    """pytest-benchmark's ``machine_info`` plus ``["cuda"]`` (:func:`envinfo.cuda_fingerprint`; None for a
    ``--device cpu`` run, even on a GPU machine: it measured no GPU, so it is never gated as a GPU run),
    ``["gpu"]`` (the GPU's name, :func:`envinfo.machine_gpu`) and ``["cpu_affinity"]`` (the CPUs the run
    may use), and its ``commit_info`` (git; ``id: "unknown"`` outside a repository)."""
    from pytest_benchmark.plugin import pytest_benchmark_generate_machine_info
    from pytest_benchmark.utils import get_commit_info

    from cudagraph_bench.envinfo import cpu_affinity, cuda_fingerprint, machine_gpu

    machine_info = pytest_benchmark_generate_machine_info()
    machine_info["cuda"] = cuda_fingerprint() if device == "cuda" else None
    machine_info["gpu"] = machine_gpu({"cuda": machine_info["cuda"]})
    machine_info["cpu_affinity"] = cpu_affinity()
    try:
        commit_info = get_commit_info("cudagraph-bench")
    except Exception as exc:  # git missing or broken: the run is still valid
        commit_info = {"id": "unknown", "error": f"{type(exc).__name__}: {exc}", "project": "cudagraph-bench"}
    return machine_info, commit_info


def build_run_json(results: list[CaseResult], settings, *, machine_info: dict, commit_info: dict,
                   started: str, extra: dict | None = None) -> dict:
    """The run as pytest-benchmark JSON (see the module docstring). Measured cases (``ok`` and
    ``mismatch``; the latter with ``extra_info.correct = false``) are benchmarks; the others are
    listed with their reasons under ``["cudagraph_bench"]["failures"]``."""
    import pytest_benchmark

    measured = [r for r in results if r.status in ("ok", "mismatch") and r.wall_ms]
    failures = [r for r in results if not (r.status in ("ok", "mismatch") and r.wall_ms)]
    return {
        "machine_info": machine_info,
        "commit_info": commit_info,
        "benchmarks": [benchmark_entry(r, settings) for r in measured],
        "datetime": started,
        "version": pytest_benchmark.__version__,
        "cudagraph_bench": {"tool": "cudagraph-bench run", "settings": settings.as_dict(),
                            "failures": [failure_entry(r) for r in failures], **(extra or {})},
    }


def write_json_atomic(path: Path, doc: dict) -> None:
    """Write the run document ``doc`` as JSON to ``path`` atomically (:func:`cudagraph_bench.fsio.write_text_atomic`)."""
    write_text_atomic(path, json.dumps(doc, indent=1) + "\n")
