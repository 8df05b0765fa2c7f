"""``cudagraph-bench report RUN [RUN ...] -o docs/ [--readme README.md]``: the markdown results and the
PNG plots of committed run JSONs, so README and docs are regenerated from data, never typed in.

Reads any pytest-benchmark JSON with cudagraph-bench ``extra_info`` (``cudagraph-bench run``'s
``run.json`` or ``pytest --benchmark-json``); several runs (e.g. one per model, measured in separate
calls) are merged, a case measured twice is an error unless ``--newest-wins`` (then each forward
prompt length, all its variants, comes from the newest run that has it). Writes to the output folder:

- ``results.md``: per forward case the eager and graph medians, the latency reduction, the p95s and
  every other variant present (median and reduction), the fastest variant; all measurements
  (mean, median, p95, min, max, compile time, correctness); cases that failed with their reasons;
  the decode suite (ms/token, tokens/s, speedup over ``generate``); the launch suite;
- ``latency_comparison.png`` and ``speedup_vs_length.png`` (:mod:`cudagraph_bench.report.plots`).

With ``--readme``, the text between ``<!-- results:start -->`` and ``<!-- results:end -->`` is
replaced by the summary table and links to the plots and ``results.md`` (atomic write). No torch.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from cudagraph_bench.cases import FORWARD_VARIANTS, Case
from cudagraph_bench.errors import InputFileError, UsageError
from cudagraph_bench.report import launch_data, launch_page, plots
from cudagraph_bench.fsio import save_figure
from cudagraph_bench.results.runfile import Measurement, Run, cuda_versions, load_run, measurements
from cudagraph_bench.results.stats import reduction_pct, spread_pct
from cudagraph_bench.table import Column, render_table

MARKER_START = "<!-- results:start -->"
MARKER_END = "<!-- results:end -->"
RESULTS_MD = "results.md"
LATENCY_PNG = "latency_comparison.png"
SPEEDUP_PNG = "speedup_vs_length.png"


# --------------------------------------------------------------------------------------------------
# loading


def load_runs(refs: list[str], storage: str | None = None) -> list[Run]:
    """Load run files (paths or saved-run ids). Raises InputFileError (one line) for a bad file or
    for the same run given twice (same bytes)."""
    runs = [load_run(ref, storage) for ref in refs]
    seen: dict[str, Run] = {}
    for run in runs:
        if run.sha256 in seen:
            raise InputFileError(f"{seen[run.sha256].path} and {run.path} are the same run (sha256 "
                                 f"{run.sha256[:12]}): give each run once")
        seen[run.sha256] = run
    return runs


def run_time(run: Run):
    """The run's ``datetime`` as an aware UTC datetime (a naive one is taken as UTC, as
    pytest-benchmark writes UTC). Raises InputFileError when it is missing or not ISO 8601."""
    from datetime import datetime, timezone

    raw = run.data.get("datetime")
    try:
        when = datetime.fromisoformat(str(raw))
    except ValueError:
        raise InputFileError(f"{run.path}: 'datetime' is {raw!r}, not an ISO 8601 time: --newest-wins needs "
                             "the time each run was made") from None
    return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)


def merged(runs: list[Run]) -> dict[tuple, Measurement]:
    """All benchmarks of ``runs`` keyed by ``(suite, *key)`` (see :func:`runfile.measurements`).

    Raises InputFileError when two runs hold the same case."""
    out: dict[tuple, Measurement] = {}
    origin: dict[tuple, Path] = {}
    for run in runs:
        for key, m in measurements(run).items():
            if key in out:
                raise InputFileError(f"{m.label!r} is in both {origin[key]} and {run.path}: "
                                     "report each case from one run, or pass --newest-wins to keep the newer one")
            out[key], origin[key] = m, run.path
    return out


def _group_of(entry: dict, *, failure: bool = False) -> tuple:
    """What a newer run replaces: a forward prompt length ``("forward", model, dtype, seq_len)`` as a
    whole (so eager and every variant of a length come from one run), else one benchmark by name."""
    info = entry if failure else (entry.get("extra_info") or {})
    if failure or info.get("suite") == "forward":
        try:
            return ("forward", info.get("model"), info.get("dtype"), int(info.get("seq_len")))
        except (TypeError, ValueError):
            pass
    return (info.get("suite") or "other", entry.get("fullname") or entry.get("name"))


def supersede(runs: list[Run]) -> tuple[list[Run], list[str]]:
    """``--newest-wins``: when several runs hold the same forward prompt length (model, dtype, L) or
    the same decode/launch benchmark, keep it from the newest run (by its ``datetime``) only.

    A length is replaced whole, measured and failed cases alike, so every reduction still compares
    variants measured side by side in one run. Returns ``(runs with the replaced entries removed,
    one line per replaced length/benchmark: "<what>: <older file> -> <newer file>")``; a line also
    names the variants that only the older runs held at that length ("(drops eager, graph: ...)")."""
    import copy

    times = [run_time(run) for run in runs]
    order = sorted(range(len(runs)), key=lambda i: times[i])
    owner: dict[tuple, int] = {}
    lost: dict[tuple, list[int]] = {}
    variants: dict[tuple, set] = {}  # (run index, group) -> forward variants it holds
    for i in order:
        run = runs[i]
        failures = [f for f in (run.data.get("cudagraph_bench") or {}).get("failures") or [] if isinstance(f, dict)]
        for g, v in [(_group_of(b), (b.get("extra_info") or {}).get("variant")) for b in run.benchmarks] + \
                    [(_group_of(f, failure=True), f.get("variant")) for f in failures]:
            variants.setdefault((i, g), set()).add(str(v))
        groups = {g for (j, g) in variants if j == i}
        for g in groups:
            if g in owner:
                if times[owner[g]] == times[i]:
                    raise InputFileError(f"{runs[owner[g]].path} and {run.path} overlap and have the same datetime "
                                         f"{times[i].isoformat()}: cannot tell which is newer; leave one out")
                lost.setdefault(g, []).append(owner[g])
            owner[g] = i
    out = []
    for i, run in enumerate(runs):
        data = copy.copy(run.data)
        data["benchmarks"] = [b for b in run.benchmarks if owner[_group_of(b)] == i]
        section = dict(data.get("cudagraph_bench") or {})
        if section.get("failures"):
            section["failures"] = [f for f in section["failures"]
                                   if not isinstance(f, dict) or owner[_group_of(f, failure=True)] == i]
            data["cudagraph_bench"] = section
        out.append(Run(path=run.path, data=data, sha256=run.sha256))
    lines = []
    def order_key(g: tuple) -> tuple:
        return tuple((0, x, "") if isinstance(x, int) else (1, 0, str(x)) for x in g)

    for g, olds in sorted(lost.items(), key=lambda kv: order_key(kv[0])):
        what = f"{g[1]} {g[2]} L={g[3]}" if g[0] == "forward" else f"{g[0]} {g[1]}"
        line = f"{what}: {', '.join(sorted({runs[j].path.name for j in olds}))} -> {runs[owner[g]].path.name}"
        dropped = set().union(*(variants[(j, g)] for j in olds)) - variants[(owner[g], g)]
        if g[0] == "forward" and dropped:
            line += (f" (drops {', '.join(sorted(dropped, key=lambda v: (_variant_index(v), v)))}: the newer run "
                     "does not hold them at this length; leave it out or rerun the length whole)")
        lines.append(line)
    return out, lines


def not_measured(runs: list[Run]) -> list[dict]:
    """Cases a ``cudagraph-bench run`` could not measure (``["cudagraph_bench"]["failures"]``)."""
    out = []
    for run in runs:
        section = run.data.get("cudagraph_bench") or {}
        for f in section.get("failures") or []:
            if isinstance(f, dict) and {"model", "dtype", "seq_len", "variant"} <= f.keys():
                out.append(dict(f))
    return out


def gpu_name(runs: list[Run]) -> str | None:
    """The GPU of the runs (``machine_info["cuda"]["gpu_name"]``), joined with "/" when they differ."""
    names = list(dict.fromkeys((r.cuda or {}).get("gpu_name") for r in runs if r.cuda))
    return " / ".join(n for n in names if n) or None


def _variant_index(variant: str) -> int:
    return FORWARD_VARIANTS.index(variant) if variant in FORWARD_VARIANTS else len(FORWARD_VARIANTS)


# --------------------------------------------------------------------------------------------------
# forward suite


def _status(info: dict) -> str:
    """``ok`` / ``mismatch`` / ``failed`` / ``skipped`` as recorded; eager is the reference (``ok``);
    any other variant whose run recorded no check is ``unchecked``, never assumed correct."""
    if info.get("status"):
        return str(info["status"])
    if "correct" in info:
        return "ok" if info["correct"] else "mismatch"
    return "ok" if info.get("variant") == "eager" else "unchecked"


def _note(info: dict) -> str | None:
    parts = []
    if info.get("reason"):
        parts.append(str(info["reason"]))
    parts += [str(n) for n in info.get("notes") or []]
    return "; ".join(parts) or None


def forward_rows(runs: list[Run]) -> list[dict]:
    """One row per forward case (measured or not), sorted by model, dtype, prompt length, variant.

    Keys: ``model, dtype, seq_len, variant, status`` (ok / mismatch / failed / skipped),
    ``mean_ms, median_ms, p95_ms, min_ms, max_ms`` (wall, per round), ``event_median_ms``,
    ``reduction_pct`` (``(eager - variant) / eager`` of the medians, percent), ``speedup``
    (eager median / variant median), ``compile_s``, ``capture_ms``, ``max_abs_diff``, ``check``
    (``strict`` / ``fp64-rmse`` / None in runs that predate it), ``fp64_rmse_ratio``, ``note``,
    ``spread_pct`` (:func:`~cudagraph_bench.results.stats.spread_pct` of the rounds; None without per-round data).
    """
    ms = {Case(*k[1:]): m for k, m in merged(runs).items() if k[0] == "forward"}
    eager = {c.without_variant(): m.summary.median_ms for c, m in ms.items() if c.variant == "eager"}
    rows = []
    for case, m in ms.items():
        info, s = m.extra_info, m.summary
        base = eager.get(case.without_variant())
        rows.append({
            "model": case.model, "dtype": case.dtype, "seq_len": case.seq_len, "variant": case.variant,
            "status": _status(info), "mean_ms": s.mean_ms, "median_ms": s.median_ms, "p95_ms": s.p95_ms,
            "min_ms": s.min_ms, "max_ms": s.max_ms, "event_median_ms": info.get("event_median_ms"),
            "reduction_pct": reduction_pct(base, s.median_ms) if base else None,
            "speedup": base / s.median_ms if base and s.median_ms > 0 else None,
            "compile_s": info["compile_ms"] / 1e3 if info.get("compile_ms") is not None else None,
            "capture_ms": info.get("capture_ms"), "max_abs_diff": info.get("max_abs_diff"),
            "check": "reference" if case.variant == "eager" else info.get("check"),
            "fp64_rmse_ratio": info.get("fp64_rmse_ratio"),
            "note": _note(info),
            "spread_pct": _spread(m.samples_ms),
        })
    seen = {(r["model"], r["dtype"], r["seq_len"], r["variant"]) for r in rows}
    for f in not_measured(runs):
        key = (f["model"], f["dtype"], int(f["seq_len"]), f["variant"])
        if key in seen:
            continue
        rows.append({**dict.fromkeys(("mean_ms", "median_ms", "p95_ms", "min_ms", "max_ms", "event_median_ms",
                                      "reduction_pct", "speedup", "capture_ms")),
                     "model": key[0], "dtype": key[1], "seq_len": key[2], "variant": key[3],
                     "status": f.get("status") or "failed",
                     "compile_s": f["compile_ms"] / 1e3 if f.get("compile_ms") is not None else None,
                     "max_abs_diff": f.get("max_abs_diff"), "check": f.get("check"),
                     "fp64_rmse_ratio": f.get("fp64_rmse_ratio"), "note": f.get("reason"), "spread_pct": None})
    rows.sort(key=lambda r: (r["model"], r["dtype"], r["seq_len"], _variant_index(r["variant"]), r["variant"]))
    return rows


def _spread(samples_ms) -> float | None:
    if samples_ms is None:
        return None
    try:
        return spread_pct(samples_ms)
    except ValueError:  # a median of 0 ms: no spread relative to it
        return None


LONG_COLUMNS = [
    Column("model", "model"), Column("dtype", "dtype"), Column("seq_len", "L (tokens)", "d"),
    Column("variant", "variant"), Column("mean_ms", "mean ms", ".3f"), Column("median_ms", "median ms", ".3f"),
    Column("p95_ms", "p95 ms", ".3f"), Column("min_ms", "min ms", ".3f"), Column("max_ms", "max ms", ".3f"),
    Column("reduction_pct", "vs eager %", "+.1f"), Column("compile_s", "compile s", ".1f"),
    Column("status", "correct", lambda s: {"ok": "yes", "mismatch": "NO", "unchecked": "not recorded"}.get(s, s),
           "left"),
    Column("max_abs_diff", "max abs diff", ".1e"),
    Column("check", "check", None, "left"),
    Column("fp64_rmse_ratio", "RMSE vs fp64 / eager's", ".2f"),
]


def render_long_table(rows: list[dict], fmt: str = "text", *, note_width: int | None = None) -> str:
    """All forward measurements (:func:`forward_rows`): mean, median, p95, min, max ms, latency
    reduction vs eager in percent (positive = faster than eager), compile seconds, correctness, the
    max abs difference from eager over the check inputs, and a note (the reason of a failure; cut to ``note_width`` characters in text tables)."""
    width = note_width if note_width is not None else (70 if fmt == "text" else None)

    def cut(text: str) -> str:
        return text if width is None or len(text) <= width else text[: width - 3] + "..."

    return render_table([*LONG_COLUMNS, Column("note", "note", cut, "left")], rows, fmt=fmt)


def summary_rows(rows: list[dict]) -> tuple[list[dict], list[str]]:
    """One row per (model, dtype, seq_len) from :func:`forward_rows`: ``eager_median_ms``,
    ``eager_p95_ms``, ``eager_spread_pct``, and per other variant ``<v>_median_ms``, ``<v>_p95_ms``,
    ``<v>_spread_pct``, ``<v>_reduction_pct``;
    ``fastest``: the variant with the lowest median among those not known to be wrong: status ``ok``
    (passed its recorded check) or ``unchecked`` (its run recorded no check; the name then gets
    " (unchecked)"), so a variant that failed its check is never the fastest.

    Returns ``(rows, variants)`` with the variants present, eager first."""
    variants = sorted({r["variant"] for r in rows}, key=lambda v: (_variant_index(v), v))
    out: dict[tuple, dict] = {}
    for r in rows:
        key = (r["model"], r["dtype"], r["seq_len"])
        row = out.setdefault(key, {"model": key[0], "dtype": key[1], "seq_len": key[2], "_ok": {}})
        v = r["variant"]
        if r.get("median_ms") is None:
            row[f"{v}_median_ms"] = None
            continue
        row[f"{v}_median_ms"] = r["median_ms"]
        row[f"{v}_p95_ms"] = r.get("p95_ms")
        row[f"{v}_spread_pct"] = r.get("spread_pct")
        row[f"{v}_reduction_pct"] = r.get("reduction_pct")
        if r["status"] in ("ok", "unchecked"):
            row["_ok"][v] = (r["median_ms"], r["status"])
    for row in out.values():
        ok = row.pop("_ok")
        best = min(ok, key=lambda v: ok[v][0]) if ok else None
        row["fastest"] = best if best is None or ok[best][1] == "ok" else f"{best} (unchecked)"
    return list(out.values()), variants


def summary_columns(variants: list[str]) -> list[Column]:
    """Columns of the summary table: eager and graph median, graph reduction, their p95s and eager's
    spread (:func:`~cudagraph_bench.results.stats.spread_pct`), then the
    median and reduction of every other variant present, and the fastest variant."""
    cols = [Column("model", "model"), Column("dtype", "dtype"), Column("seq_len", "L (tokens)", "d")]
    if "eager" in variants:
        cols.append(Column("eager_median_ms", "eager median ms", ".3f"))
    if "graph" in variants:
        cols += [Column("graph_median_ms", "graph median ms", ".3f"),
                 Column("graph_reduction_pct", "graph reduction %", "+.1f")]
    if "eager" in variants:
        cols += [Column("eager_p95_ms", "eager p95 ms", ".3f"), Column("eager_spread_pct", "eager spread %", ".0f")]
    if "graph" in variants:
        cols.append(Column("graph_p95_ms", "graph p95 ms", ".3f"))
    for v in variants:
        if v not in ("eager", "graph"):
            cols += [Column(f"{v}_median_ms", f"{v} median ms", ".3f"),
                     Column(f"{v}_reduction_pct", f"{v} reduction %", "+.1f")]
    cols.append(Column("fastest", "fastest", None, "left"))
    return cols


def render_summary_table(rows: list[dict], fmt: str = "markdown") -> str:
    """The per-case summary (see :func:`summary_rows`) of forward rows."""
    wide, variants = summary_rows(rows)
    return render_table(summary_columns(variants), wide, fmt=fmt)


def problem_lines(rows: list[dict]) -> list[str]:
    """``"<case> <variant>: <status>: <reason>"`` for every forward row that failed, was skipped or
    differs from eager, then one line counting the rows whose run recorded no correctness check."""
    lines = [f"{r['model']} {r['dtype']} L={r['seq_len']} {r['variant']}: {r['status']}"
             + (f": {r['note']}" if r.get("note") else "") for r in rows if r["status"] not in ("ok", "unchecked")]
    unchecked = unchecked_line(rows)
    return lines + ([unchecked] if unchecked else [])


def unchecked_line(rows: list[dict]) -> str | None:
    """One line counting the forward rows whose run recorded no correctness check, or None."""
    unchecked = sorted({r["variant"] for r in rows if r["status"] == "unchecked"})
    if not unchecked:
        return None
    n = sum(r["status"] == "unchecked" for r in rows)
    return (f"{n} measured case(s) of {', '.join(unchecked)} carry no correctness check in their run JSON "
            "(benchmark runs recorded before the benchmarks checked against eager; the correctness "
            "tests in perf_tests/ check graph replays separately)")


# --------------------------------------------------------------------------------------------------
# decode and launch suites


def decode_rows(runs: list[Run]) -> list[dict]:
    """One row per decode benchmark: ``model, dtype, seq_len, new_tokens, variant, ms_per_token,
    tokens_per_s``, ``speedup_vs_generate`` (generate ms/token / variant ms/token) and ``rounds``
    (measured requests)."""
    rows = []
    for key, m in merged(runs).items():
        if key[0] != "decode":
            continue
        info = m.extra_info
        new_tokens = int(info["new_tokens"])
        ms_per_token = info.get("ms_per_token")
        if ms_per_token is None:
            ms_per_token = m.summary.median_ms / new_tokens
        tokens_per_s = info.get("tokens_per_s") or (1e3 / ms_per_token if ms_per_token else None)
        rows.append({"model": info["model"], "dtype": info["dtype"], "seq_len": int(info["seq_len"]),
                     "new_tokens": new_tokens, "variant": info["variant"], "ms_per_token": float(ms_per_token),
                     "tokens_per_s": tokens_per_s, "rounds": m.summary.n, "vs_generate": vs_generate(info)})
    generate = {(r["model"], r["dtype"], r["seq_len"], r["new_tokens"]): r["ms_per_token"]
                for r in rows if r["variant"] == "generate"}
    for r in rows:
        base = generate.get((r["model"], r["dtype"], r["seq_len"], r["new_tokens"]))
        r["speedup_vs_generate"] = base / r["ms_per_token"] if base and r["ms_per_token"] else None
    order = {"generate": 0, "static-eager": 1, "graph": 2}
    rows.sort(key=lambda r: (r["model"], r["dtype"], r["seq_len"], r["new_tokens"], order.get(r["variant"], 9)))
    return rows


def vs_generate(info: dict) -> str:
    """The decode table's "tokens vs generate" cell of one benchmark's ``extra_info``: ``reference`` for
    ``generate`` itself; ``identical``, ``tie at token K`` (a rounding tie, logits as close to float64 as
    generate's) or ``FAILS`` from ``generate_check_passed``/``matches_generate``/``generate_check``, with
    the number of distinct tokens generate produced when recorded; ``-`` when the run recorded no check."""
    if info.get("variant") == "generate":
        return "reference"
    if "matches_generate" not in info:
        return "-"
    passed = info.get("generate_check_passed", info["matches_generate"])
    if not passed:
        return "FAILS"
    if info["matches_generate"]:
        text = "identical"
    else:
        match = re.search(r"token (\d+) differs", info.get("generate_check", ""))
        text = f"tie at token {match.group(1)}" if match else "tie"
    distinct = info.get("distinct_reference_tokens")
    return f"{text} ({distinct} distinct)" if distinct is not None else text


DECODE_COLUMNS = [
    Column("model", "model"), Column("dtype", "dtype"), Column("seq_len", "prompt tokens", "d"),
    Column("new_tokens", "new tokens", "d"), Column("variant", "variant"),
    Column("ms_per_token", "ms/token", ".3f"), Column("tokens_per_s", "tokens/s", ".1f"),
    Column("speedup_vs_generate", "speedup vs generate (x)", ".2f"), Column("vs_generate", "tokens vs generate"),
    Column("rounds", "requests", "d"),
]


def launch_markdown(runs: list[Run]) -> str | None:
    """The launch-suite section of every run that has launch benchmarks, rendered by
    :func:`cudagraph_bench.report.launch_page.render_launch_section`; None when no run has any."""
    parts = [launch_page.render_launch_section(run, heading_level=2, forward_runs=runs) for run in runs
             if launch_data.launch_rows(run)]
    return "\n".join(parts) if parts else None


def _launch_plot(runs: list[Run], outdir: Path) -> Path | None:
    series = {run.path.stem: rows for run in runs if (rows := launch_data.launch_rows(run))}
    series = {k: v for k, v in series.items() if any(r.complete for r in v)}
    if not series:
        return None
    if len(series) == 1:
        series = {"torch": next(iter(series.values()))}
    return plots.save_speedup_plot(series, outdir / launch_page.PLOT_NAME)


# --------------------------------------------------------------------------------------------------
# plots and documents


def forward_samples(runs: list[Run]) -> tuple[dict[Case, object], dict[Case, float]]:
    """``(per-round samples in ms, medians in ms)`` of the forward cases of ``runs``."""
    ms = {Case(*k[1:]): m for k, m in merged(runs).items() if k[0] == "forward"}
    samples = {c: m.samples_ms for c, m in ms.items() if m.samples_ms is not None}
    medians = {c: m.summary.median_ms for c, m in ms.items()}
    return samples, medians


def write_plots(runs: list[Run], outdir: str | os.PathLike) -> list[Path]:
    """Write ``latency_comparison.png`` (when per-round data exists), ``speedup_vs_length.png``
    (when eager was measured) and the launch suite's plot (:mod:`cudagraph_bench.report.launch_page`,
    when a run has launch benchmarks) into ``outdir``. Returns the paths written."""
    samples, medians = forward_samples(runs)
    gpu = gpu_name(runs)
    written = []
    if samples:
        written.append(save_figure(plots.latency_comparison(samples, gpu=gpu), Path(outdir) / LATENCY_PNG))
    if any(c.variant == "eager" for c in medians):
        written.append(save_figure(plots.speedup_vs_length(medians, gpu=gpu), Path(outdir) / SPEEDUP_PNG))
    launch_png = _launch_plot(runs, Path(outdir))
    if launch_png is not None:
        written.append(launch_png)
    return written


def _provenance(runs: list[Run]) -> list[str]:
    lines = []
    for run in runs:
        cuda = run.cuda or {}
        commit = (run.data.get("commit_info") or {}).get("id") or "unknown"
        env = ", ".join(cuda_versions(cuda))
        lines.append(f"- `{run.path.name}` (sha256 `{run.sha256[:12]}`): {cuda.get('gpu_name') or 'no CUDA GPU'}"
                     + (f", {env}" if env else "") + _host(run.machine_info)
                     + f"; {run.data.get('datetime', 'unknown date')}; commit `{commit[:12]}`")
    return lines


def _host(machine_info: dict) -> str:
    """", host <cpu brand> (<n> cores)" from pytest-benchmark's ``machine_info["cpu"]``, or "" when absent:
    eager latency is host-bound, so the host is part of what a number means."""
    cpu = machine_info.get("cpu") if isinstance(machine_info.get("cpu"), dict) else {}
    brand, count = cpu.get("brand_raw"), cpu.get("count")
    if not brand and not isinstance(count, int):
        return ""
    return ", host " + " ".join(p for p in (str(brand) if brand else "",
                                           f"({count} cores)" if isinstance(count, int) else "") if p)


REDUCTION_NOTE = ("Latency per forward pass at batch 1: median of the measured rounds (synchronized wall time). "
                  "Reduction % = (eager median - variant median) / eager median; positive means faster than eager. "
                  "\"fastest\" is the variant with the lowest median among those that passed the correctness check "
                  "recorded in the run (strict or fp64-rmse); \"(unchecked)\" marks a winner whose run recorded no "
                  "check. Eager spread % = (p95 - p5) / median of the eager rounds: eager is host-bound, and where its "
                  "spread is wide the reductions against its median move between runs and machines.")
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

#: What the decode table's numbers mean (shown above it in results.md and the README).
DECODE_NOTE = ("Greedy decode at batch 1: each round is one whole request (prefill of the prompt + every decode "
               "step); ms/token = median request time / new tokens, tokens/s = its inverse. `generate` is HF "
               "`generate(do_sample=False)` with its default dynamic cache, `static-eager` a StaticCache loop without "
               "graphs, `graph` the same loop replaying one captured decode step per token. tokens vs generate: `identical`, "
               "or `tie at token K` where the first differing token's step has logits as close to a float64 run "
               "of the same weights as generate's (a rounding tie), with how many distinct tokens generate "
               "produced (random weights can repeat one token; every step's logits are checked then too); "
               "`-`: the run recorded no check.")


def _link(target: Path, base_dir: Path) -> str:
    return Path(os.path.relpath(target, base_dir)).as_posix()


def render_results_markdown(runs: list[Run], outdir: Path, plots_written: list[Path],
                            superseded: list[str] | None = None) -> str:
    """The full ``results.md`` text (links relative to ``outdir``); ``superseded``: the lines of
    :func:`supersede`, listed under the source runs."""
    out = ["# Results", "", "<!-- generated by `cudagraph-bench report`; edit the data, not this file -->", "",
           "Source runs:", "", *_provenance(runs), ""]
    if superseded:
        out += ["Replaced by a newer run (`--newest-wins`; each prompt length comes whole from one run):", "",
                *[f"- {line}" for line in superseded], ""]
    rows = forward_rows(runs)
    if rows:
        out += ["## Forward pass", "", REDUCTION_NOTE, "", render_summary_table(rows, "markdown"), ""]
        out += [f"![{p.stem.replace('_', ' ')}]({_link(p, outdir)})" for p in plots_written
                if p.name in (LATENCY_PNG, SPEEDUP_PNG)] + [""]
        out += ["### All measurements", "", CHECK_NOTE, "", render_long_table(rows, "markdown"), ""]
        problems = problem_lines(rows)
        if problems:
            out += ["### Not measured or not matching eager", "", *[f"- {p}" for p in problems], ""]
    decode = decode_rows(runs)
    if decode:
        out += ["## Decode (greedy, static KV cache)", "", DECODE_NOTE, "",
                render_table(DECODE_COLUMNS, decode, fmt="markdown"), ""]
    launch = launch_markdown(runs)
    if launch:
        out += [launch, ""]
        out += [f"![launch speedup vs N]({_link(p, outdir)})" for p in plots_written
                if p.name not in (LATENCY_PNG, SPEEDUP_PNG)] + [""]
    return "\n".join(out).rstrip() + "\n"


def render_readme_section(runs: list[Run], outdir: Path, readme_dir: Path, plots_written: list[Path]) -> str:
    """The README block between the markers: summary table, plot links, link to ``results.md``."""
    out = [""]
    rows = forward_rows(runs)
    if rows:
        out += [REDUCTION_NOTE, "", render_summary_table(rows, "markdown"), ""]
        unchecked = unchecked_line(rows)
        if unchecked:
            out += [f"(unchecked): {unchecked}.", ""]
        out += [f"![{p.stem.replace('_', ' ')}]({_link(p, readme_dir)})" for p in plots_written
                if p.name in (LATENCY_PNG, SPEEDUP_PNG)] + [""]
    decode = decode_rows(runs)
    if decode:
        out += [DECODE_NOTE, "", render_table(DECODE_COLUMNS, decode, fmt="markdown"), ""]
    gpu = gpu_name(runs)
    out += [f"All measurements{f' ({gpu})' if gpu else ''}, failures and provenance: "
            f"[{_link(outdir / RESULTS_MD, readme_dir)}]({_link(outdir / RESULTS_MD, readme_dir)}).", ""]
    return "\n".join(out)


def replace_between_markers(text: str, content: str, *, where: str = "README") -> str:
    """``text`` with everything between :data:`MARKER_START` and :data:`MARKER_END` replaced by
    ``content`` (the markers stay). Raises :class:`UsageError` when a marker is missing or they are
    out of order."""
    if text.count(MARKER_START) > 1 or text.count(MARKER_END) > 1:
        raise UsageError(f"{where} has more than one '{MARKER_START}' ... '{MARKER_END}' block: keep one")
    start, end = text.find(MARKER_START), text.find(MARKER_END)
    if start < 0 or end < 0 or end < start:
        raise UsageError(f"{where} has no '{MARKER_START}' ... '{MARKER_END}' block: add both marker lines "
                         "where the results should go")
    return text[: start + len(MARKER_START)] + "\n" + content.strip("\n") + "\n" + text[end:]
