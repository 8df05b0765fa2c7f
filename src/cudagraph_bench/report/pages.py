"""``cudagraph-bench report RUN... -o docs/ [--readme README.md]`` (no torch): ``results.md`` and its plots from run
JSONs, and the README block between ``<!-- results:start -->`` and ``<!-- results:end -->``."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from cudagraph_bench import variants
from cudagraph_bench.errors import UsageError
from cudagraph_bench.report import launch_data, launch_page, plots, roofline_tables
from cudagraph_bench.report.decode_tables import (decode_note, decode_rows, render_decode_table,  # noqa: F401
                                                  vs_generate)
from cudagraph_bench.report.forward_tables import (CASE_COLUMNS, attention_note, forward_rows, problem_lines,
                                                   render_long_table, render_summary_table)
from cudagraph_bench.report.runs import gpu_name, merged
from cudagraph_bench.report.suite_timing import render_suite_timing
from cudagraph_bench.fsio import figure_png
from cudagraph_bench.table import Column, render_table
from cudagraph_bench.results.record import Environment
from cudagraph_bench.results.runfile import Run

MARKER_START = "<!-- results:start -->"
MARKER_END = "<!-- results:end -->"
RESULTS_MD = "results.md"
LATENCY_PNG = "latency_comparison.png"
SPEEDUP_PNG = "speedup_vs_length.png"
BUSY_PNG = "busy_time_vs_length.png"
DECODE_BANDWIDTH_PNG = "decode_bandwidth.png"
#: Every plot :func:`render_plots` may draw (the launch plot is :data:`launch_page.PLOT_NAME`).
PLOT_NAMES = (LATENCY_PNG, SPEEDUP_PNG, BUSY_PNG, DECODE_BANDWIDTH_PNG, launch_page.PLOT_NAME)


def plot_makers(runs: list[Run]) -> dict[str, Callable[[], object]]:
    """File name -> a function drawing that plot's matplotlib Figure, in page order (lazy, so ``report --no-plots``
    still knows the links)."""
    ms = {m.case: m for m in merged(runs).values() if m.suite == "forward"}
    samples = {c: m.samples_ms for c, m in ms.items() if m.samples_ms is not None}
    medians = {c: m.summary.median_ms for c, m in ms.items()}
    gpu = gpu_name(runs)
    busy = roofline_tables.forward_busy_rows(runs)
    bandwidth = [r for r in roofline_tables.decode_roofline_rows(runs) if r["achieved_gbps"] is not None]
    series = {run.path.stem: rows for run in runs if (rows := launch_data.launch_rows(run))
              and any(r.complete for r in rows)}   # one per run with a complete row
    if len(series) == 1:
        series = {"torch": next(iter(series.values()))}
    makers = {LATENCY_PNG: (samples, lambda: plots.latency_comparison(samples, gpu=gpu)),
              SPEEDUP_PNG: (any(c.variant == variants.FORWARD_REFERENCE for c in medians),
                            lambda: plots.speedup_vs_length(medians, gpu=gpu)),
              BUSY_PNG: (busy, lambda: plots.busy_vs_length(busy, gpu=gpu)),
              DECODE_BANDWIDTH_PNG: (bandwidth, lambda: plots.decode_bandwidth(bandwidth, gpu=gpu)),
              launch_page.PLOT_NAME: (series, lambda: plots.speedup_figure(series))}
    return {name: draw for name, (wanted, draw) in makers.items() if wanted}


def render_plots(runs: list[Run]) -> dict[str, bytes]:
    """PNG bytes by file name, in page order."""
    return {name: figure_png(draw(), plots.PLOT_DPI) for name, draw in plot_makers(runs).items()}


def stale_plots(outdir: str | os.PathLike, written: list[Path]) -> list[Path]:
    """An earlier report's plots this one did not write (the launch page's plot kept)."""
    kept = {Path(p).name for p in written}
    if (Path(outdir) / launch_page.PAGE_NAME).is_file():
        kept.add(launch_page.PLOT_NAME)
    return [Path(outdir) / name for name in PLOT_NAMES if name not in kept and (Path(outdir) / name).is_file()]


def _provenance(runs: list[Run]) -> list[str]:
    lines = []
    for run in runs:
        env = run.environment
        versions = ", ".join(env.versions())
        when = env.run_datetime if env.run_datetime is not None else "unknown date"
        lines.append(f"- `{run.path.name}` (sha256 `{run.sha256[:12]}`): {env.gpu_name or 'no CUDA GPU'}"
                     + (f", {versions}" if versions else "") + _host(env)
                     + f"; {when}; commit `{(env.commit_id or 'unknown')[:12]}`")
    return lines


def _host(env: Environment) -> str:
    """", host <cpu brand> (<n> cores)" or "" (eager latency is host-bound)."""
    parts = [p for p in (env.cpu_brand, env.cpu_count is not None and f"({env.cpu_count} cores)") if p]
    return ", host " + " ".join(parts) if parts else ""


REDUCTION_NOTE = ("Latency per forward pass at batch 1: median of the measured rounds (synchronized wall time). "
                  "Reduction % = (eager median - variant median) / eager median; positive means faster than eager. "
                  "\"fastest\" is the variant with the lowest median among those that passed the correctness check "
                  "recorded in the run (strict or fp64-rmse); \"(unchecked)\" marks a winner whose run recorded no "
                  "check. Eager spread % = (p95 - p5) / median of the eager rounds: eager is host-bound, and where its "
                  "spread is wide the reductions against its median move between runs and machines.")
SUITE_TIMING_NOTE = ("The default suite (every benchmark and GPU test of `perf_tests`, one pytest session, "
                     "`scripts/device/reproduce-results.sh suite`): seconds per test module (setup + call + "
                     "teardown of its tests, summed over the workers of a sharded run), the seconds in tests and "
                     "the session's wall time. The shards of a merged run (`cudagraph-bench run --gpus`, one pytest "
                     "process per GPU) run side by side, so its wall time is below the seconds in tests.")
#: How the "correct" / "check" columns of the long table were decided.
CHECK_NOTE = ("check: `strict` = every check input within the dtype's `assert_close` tolerance of eager "
              "(float32 atol 1e-5, rtol 1.3e-6); `fp64-rmse` = a variant that runs other kernels (padded, bucketed, "
              "compile, compile+graph) outside that tolerance, judged instead by its RMSE against a float64 run of "
              "the same weights: RMSE <= 2 x eager's own RMSE + atol/10 (3x in bfloat16/float16), the accuracy "
              "check of PyTorch's inductor benchmarks (`torch._dynamo.utils.same` with `fp64_ref`). The last column "
              "is RMSE / eager's RMSE. `reference` = eager itself, what every variant is compared with. `-` with "
              "correct = `yes`: a run recorded before this column existed (strict check only); `-` with correct = "
              "`not recorded`: the run recorded no check for that case. compile s = wall time of the first call, "
              "which compiles (and for compile+graph autotunes) before anything is timed; it depends on the host's "
              "cores and on inductor's on-disk cache (`/tmp/torchinductor_$USER`), so a second run on the same "
              "machine compiles faster.")
#: Above the README's forward and decode headline tables.
HEADLINE_FORWARD_NOTE = ("Forward pass at batch 1, median of the measured rounds (synchronized wall time): eager -> "
                         "graph replay, and the latency reduction. Every graph was checked against eager on fresh "
                         "inputs.")
HEADLINE_DECODE_NOTE = ("Greedy decode at batch 1 (one round = one whole request): ms per token, and the speedup over "
                        "HF `generate`; every decoder's tokens checked against `generate`.")


def _link(target: Path, base_dir: Path) -> str:
    return Path(os.path.relpath(target, base_dir)).as_posix()


def render_results_markdown(runs: list[Run], outdir: Path, plots_written: list[Path],
                            superseded: list[str] | None = None, suite_runs: list[Run] | None = None) -> str:
    """The full ``results.md`` (links relative to ``outdir``); ``superseded``: lines listed under the source runs;
    ``suite_runs``: whole-suite runs whose time per part is shown."""
    out = ["# Results", "", "<!-- generated by `cudagraph-bench report`; edit the data, not this file -->", "",
           "Source runs:", "", *_provenance(runs), ""]
    if superseded:
        out += ["Replaced by a newer run (`--allow overlap`; each prompt length comes whole from one run):", "",
                *[f"- {line}" for line in superseded], ""]

    def images(*names: str, alt: str | None = None) -> list[str]:
        """Links to the written plots among ``names`` (alt text ``alt``, else the file name in words), a blank line."""
        return [f"![{alt or p.stem.replace('_', ' ')}]({_link(p, outdir)})" for p in plots_written
                if p.name in names] + [""]

    rows = forward_rows(runs)
    if rows:
        out += ["## Forward pass", "", REDUCTION_NOTE, "", render_summary_table(rows, "markdown"), ""]
        out += [*_attention_lines(rows), *images(LATENCY_PNG, SPEEDUP_PNG)]
        busy = roofline_tables.render_forward_busy(runs)
        if busy:
            out += ["### GPU busy time and overhead", "", busy, "", *images(BUSY_PNG)]
        out += ["### All measurements", "", CHECK_NOTE, "", render_long_table(rows, "markdown"), ""]
        problems = problem_lines(rows)
        if problems:
            out += ["### Not measured or not matching eager", "", *[f"- {p}" for p in problems], ""]
    decode = decode_rows(runs)
    if decode:
        out += ["## Decode (greedy, static KV cache)", "", decode_note(decode), "", render_decode_table(decode), ""]
        out += _attention_lines(decode)
        roofline = roofline_tables.render_decode_roofline(runs)
        if roofline is not None:
            out += ["### Decode roofline", "", roofline, "", *images(DECODE_BANDWIDTH_PNG)]
    launch = [launch_page.render_launch_section(run, forward_runs=runs) for run in runs if launch_data.launch_rows(run)]
    if launch:
        out += ["\n".join(launch), "", *images(launch_page.PLOT_NAME, alt="launch speedup vs N")]
    if suite_runs:
        out += ["## Suite time per part", "", SUITE_TIMING_NOTE, "", *_provenance(suite_runs), "",
                render_suite_timing(suite_runs), ""]
    return "\n".join(out).rstrip() + "\n"


def _attention_lines(rows: list[dict]) -> list[str]:
    note = attention_note(rows)
    return [note, ""] if note else []


def forward_headline(rows: list[dict]) -> str | None:
    """Per model and dtype and length: ``eager -> graph ms (-reduction%)`` (``WRONG``: failed check), or None."""
    by_case = {(r["model"], r["dtype"], r["seq_len"], r["variant"]): r for r in rows}
    table: dict[tuple, dict] = {}
    for (model, dtype, n, variant), r in by_case.items():
        eager = by_case.get((model, dtype, n, variants.FORWARD_REFERENCE))
        if variant != variants.GATED or eager is None or r.get("median_ms") is None or eager.get("median_ms") is None:
            continue
        mark = "" if r["status"] in ("ok", "unchecked") else " WRONG"
        table.setdefault((model, dtype), {"model": model, "dtype": dtype})[f"L{n}"] = (
            f"{eager['median_ms']:.3g} -> {r['median_ms']:.3g} ms ({-r['reduction_pct']:+.0f}%){mark}")
    return _headline(table, [Column(f"L{n}", f"L={n}", align="right") for n in sorted({r["seq_len"] for r in rows})])


def decode_headline(rows: list[dict]) -> str | None:
    """Per decode request shape: ms/token of each decoder and speedup; None without rows."""
    ref = variants.reference_of(variants.DECODE).name
    by_key: dict[tuple, dict] = {}
    for r in rows:
        if r.get("ms_per_token") is None:
            continue
        key = (r["model"], r["dtype"], r["seq_len"], r["new_tokens"])
        row = by_key.setdefault(key, {"model": key[0], "dtype": key[1], "shape": f"{key[2]} + {key[3]}"})
        speed = r.get("speedup_vs_generate") if r["variant"] != ref else None
        row[r["variant"]] = f"{r['ms_per_token']:.3f}" + (f" ({speed:.1f}x)" if speed else "")
    names = dict.fromkeys([ref, *(r["variant"] for r in rows if r.get("ms_per_token") is not None)])
    return _headline(by_key, [Column("shape", "prompt + new tokens"),
                              *(Column(n, f"{n} ms/token", align="right") for n in names)])


def _headline(table: dict[tuple, dict], columns: list[Column]) -> str | None:
    """``table``'s rows in key order under ``model | dtype`` and ``columns``; None when it is empty."""
    rows = [table[k] for k in sorted(table)]
    return render_table([*CASE_COLUMNS[:2], *columns], rows, fmt="markdown") if rows else None


def render_readme_section(runs: list[Run], outdir: Path, readme_dir: Path, plots_written: list[Path],
                          suite_runs: list[Run] | None = None) -> str:
    """The README block: the two headline tables and the link to ``results.md``, after a line saying so when figures
    come from a CPU run (its page says so only among the source runs)."""
    link, gpu, cpu = _link(outdir / RESULTS_MD, readme_dir), gpu_name(runs), [run.on_cpu for run in runs]
    out = [""]
    if any(cpu):
        out += [f"{'These' if all(cpu) else 'Some of these'} figures come from a CPU run, which measures eager only: "
                "graph replay needs a CUDA GPU.", ""]
    forward = forward_headline(forward_rows(runs))
    if forward:
        out += [HEADLINE_FORWARD_NOTE, "", forward, ""]
    decode = decode_headline(decode_rows(runs))
    if decode:
        out += [HEADLINE_DECODE_NOTE, "", decode, ""]
    out += [f"Every measurement{f' ({gpu})' if gpu else ''}, the padded and bucketed graphs, the roofline, failures "
            f"and provenance: [{link}]({link}).", ""]
    return "\n".join(out)


def replace_between_markers(text: str, content: str, *, where: str = "README") -> str:
    """Replace what is between the markers; UsageError when one is missing or out of order."""
    if text.count(MARKER_START) > 1 or text.count(MARKER_END) > 1:
        raise UsageError(f"{where} has more than one '{MARKER_START}' ... '{MARKER_END}' block: keep one")
    start, end = text.find(MARKER_START), text.find(MARKER_END)
    if start < 0 or end < 0 or end < start:
        raise UsageError(f"{where} has no '{MARKER_START}' ... '{MARKER_END}' block: add both marker lines "
                         "where the results should go")
    return text[: start + len(MARKER_START)] + "\n" + content.strip("\n") + "\n" + text[end:]
