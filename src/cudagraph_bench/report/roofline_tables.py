"""Roofline tables (no torch): decode bandwidth vs peak, overhead above busy time."""

from __future__ import annotations

from dataclasses import asdict, replace

from cudagraph_bench import variants
from cudagraph_bench.report.decode_tables import DECODE_COLUMNS
from cudagraph_bench.report.forward_tables import CASE_COLUMNS
from cudagraph_bench.report.runs import merged
from cudagraph_bench.results.roofline_arithmetic import (achieved_gbps, bandwidth_floor_ms, overhead, pct_of_peak,
                                                         run_peak)
from cudagraph_bench.results.runfile import Run, measurements
from cudagraph_bench.table import Column, render_table


def decode_roofline_rows(runs: list[Run]) -> list[dict]:
    """Per decode benchmark with ``bytes_per_token``: ``model, dtype, seq_len, new_tokens, variant, weight_mb,
    kv_mb_per_token`` (MB = 1e6 bytes), ``ms_per_token, achieved_gbps, peak_gbps, peak_source, pct_of_peak,
    floor_ms_per_token``."""
    rows = []
    for run in runs:
        peak = run_peak({"cuda": run.environment.cuda_fingerprint}) or {}
        for key, m in measurements(run).items():
            info, case = m.extra_info, m.case
            if key[0] != "decode" or info.get("bytes_per_token") is None:
                continue
            ms_per_token = info.get("ms_per_token") or m.summary.median_ms / case.new_tokens
            nbytes = float(info["bytes_per_token"])
            gbps = achieved_gbps(nbytes, ms_per_token)
            rows.append({**asdict(case), "weight_mb": _mb(info.get("weight_bytes")),
                         "kv_mb_per_token": _mb(info.get("kv_bytes_per_token")),
                         "ms_per_token": float(ms_per_token), "achieved_gbps": gbps, "peak_gbps": peak.get("gbps"),
                         "peak_source": peak.get("source"), "pct_of_peak": pct_of_peak(gbps, peak.get("gbps")),
                         "floor_ms_per_token": bandwidth_floor_ms(nbytes, peak.get("gbps"))})
    rows.sort(key=lambda r: (r["model"], r["dtype"], r["seq_len"], r["new_tokens"],
                             variants.display_rank(variants.DECODE, r["variant"]), r["variant"]))
    return rows


def _mb(nbytes) -> float | None:
    return None if nbytes is None else float(nbytes) / 1e6


DECODE_ROOFLINE_COLUMNS = [
    *DECODE_COLUMNS[:5],    # the request and the variant, as the decode table names them
    Column("weight_mb", "weights MB/token", ".1f"), Column("kv_mb_per_token", "KV cache MB/token", ".2f"),
    Column("ms_per_token", "ms/token", ".3f"), Column("achieved_gbps", "achieved GB/s", ".1f"),
    Column("pct_of_peak", "% of peak", ".1f"), Column("floor_ms_per_token", "ms/token at peak", ".3f"),
]

#: What the decode roofline table's numbers mean (shown above it).
DECODE_ROOFLINE_NOTE = (
    "At batch 1 every generated token reads the weights once and the KV cache of its context, "
    "so decode is bound by memory bandwidth. weights MB/token = every parameter once (tied embeddings once; "
    "a mixture of experts: only top_k / num_experts of the expert weights); KV cache MB/token = K and V of "
    "every layer for the tokens the step attends to (min(context, window) on sliding-window layers), averaged "
    "over the request's steps (prompt + k tokens at step k). These are the useful bytes, as gpt-fast counts "
    "them; the static-cache decoders also read their masked, unused cache slots, which is not counted. "
    "achieved GB/s = (weights + KV bytes per token) / (ms/token), with ms/token from the decode table (the "
    "prefill included, as in gpt-fast's tokens/s); % of peak = achieved / the GPU's peak memory bandwidth; "
    "ms/token at peak = the bytes per token at that peak: the least time a token can take.")


def peak_lines(runs: list[Run]) -> list[str]:
    """Per distinct peak: the GPU, GB/s and its source."""
    lines = []
    for run in runs:
        if not decode_roofline_rows([run]):
            continue
        peak = run_peak({"cuda": run.environment.cuda_fingerprint})
        gpu = run.environment.gpu_name
        if gpu is None:
            lines.append("Peak memory bandwidth: none (a CPU run: no GPU peak to hold the bytes per token against).")
        elif peak is None:
            lines.append(f"Peak memory bandwidth of {gpu}: unknown (NVML gave none and the GPU is not in the "
                         "datasheet table).")
        elif peak["source"] == "nvml":
            lines.append(f"Peak memory bandwidth of {gpu}: {peak['gbps']:.0f} GB/s from NVML (maximum memory clock "
                         f"{peak['nvml_max_mem_clock_mhz']} MHz x {peak['nvml_bus_width_bits']}-bit bus x 2 / 8)"
                         + (f"; datasheet {peak['table_gbps']:.0f} GB/s." if peak.get("table_gbps") else "."))
        else:
            lines.append(f"Peak memory bandwidth of {gpu}: {peak['gbps']:.0f} GB/s from the vendor datasheet table"
                         + (f" (NVML's readings gave {peak['nvml_gbps']:.0f} GB/s, more than 10% away)."
                            if peak.get("nvml_gbps") else "."))
    return list(dict.fromkeys(lines))


def _noted_table(note: list[str], columns: list[Column], rows: list[dict], fmt: str) -> str | None:
    """The ``note`` paragraphs, then the table of ``rows``; None without rows."""
    return "\n\n".join([*note, render_table(columns, rows, fmt=fmt)]) if rows else None


def render_decode_roofline(runs: list[Run], fmt: str = "markdown") -> str | None:
    """Note, peak lines and table, or None without rows."""
    rows = decode_roofline_rows(runs)
    return _noted_table([DECODE_ROOFLINE_NOTE, " ".join(peak_lines(runs))], DECODE_ROOFLINE_COLUMNS, rows, fmt)


# ------------------------------ forward: GPU busy time and overhead


def forward_busy_rows(runs: list[Run]) -> list[dict]:
    """Per forward case with ``gpu_busy_ms``: ``n_kernels``, ``busy_ms``, eager/graph ``<v>_median_ms``,
    ``<v>_overhead_ms``, ``<v>_us_per_kernel`` (µs), ``busy_pct_of_graph``."""
    ms = {m.case: m for m in merged(runs).values() if m.suite == "forward"}
    rows = []
    for case, m in ms.items():
        info = m.extra_info
        if case.variant != variants.FORWARD_REFERENCE or info.get("gpu_busy_ms") is None:
            continue
        busy, n = float(info["gpu_busy_ms"]), info.get("n_kernels")
        graph = ms.get(replace(case, variant=variants.GATED))
        row = {"model": case.model, "dtype": case.dtype, "seq_len": case.seq_len, "n_kernels": n, "busy_ms": busy}
        for variant, measured in ((variants.FORWARD_REFERENCE, m), (variants.GATED, graph)):
            median = measured.summary.median_ms if measured is not None else None
            over, per_kernel = overhead(median, busy, n)
            row.update({f"{variant}_median_ms": median, f"{variant}_overhead_ms": over,
                        f"{variant}_us_per_kernel": per_kernel})
        row["busy_pct_of_graph"] = 100.0 * busy / row["graph_median_ms"] if row["graph_median_ms"] else None
        rows.append(row)
    rows.sort(key=lambda r: (r["model"], r["dtype"], r["seq_len"]))
    return rows


FORWARD_BUSY_COLUMNS = [
    *CASE_COLUMNS, Column("n_kernels", "kernels", "d"), Column("busy_ms", "GPU busy ms", ".3f"),
    Column("eager_median_ms", "eager median ms", ".3f"), Column("eager_overhead_ms", "eager overhead ms", ".3f"),
    Column("eager_us_per_kernel", "eager overhead µs/kernel", ".2f"),
    Column("graph_median_ms", "graph median ms", ".3f"), Column("graph_overhead_ms", "graph overhead ms", ".3f"),
    Column("graph_us_per_kernel", "graph overhead µs/node", ".2f"),
    Column("busy_pct_of_graph", "busy % of graph", ".1f"),
]

#: What the forward busy-time table's numbers mean (shown above it).
FORWARD_BUSY_NOTE = (
    "GPU busy ms = the sum of the kernel durations of one eager forward "
    "(torch.profiler, after every timed test of the session; median of the profiled forwards): the least time "
    "the forward can take on this GPU. overhead = median - busy: the time the GPU waits for kernel launches "
    "(eager) or between graph nodes (graph replay); per kernel = overhead x 1000 / kernels (the graph replays "
    "the same kernels as its nodes). busy % of graph = how close the replay comes to the busy time.")


def render_forward_busy(runs: list[Run], fmt: str = "markdown") -> str | None:
    """Note and table, or None without rows."""
    return _noted_table([FORWARD_BUSY_NOTE], FORWARD_BUSY_COLUMNS, forward_busy_rows(runs), fmt)
