"""The forward suite's tables (no torch): rows per case and variant, the long table, the per-case summary, and lines on
failed and unchecked cases."""

from __future__ import annotations

from dataclasses import asdict

from cudagraph_bench.report.runs import merged, not_measured, variant_order
from cudagraph_bench.variants import FORWARD_REFERENCE as REF
from cudagraph_bench.variants import GATED
from cudagraph_bench.results.capture_cost import ledger_id, memory_left
from cudagraph_bench.results.runfile import Run
from cudagraph_bench.results.stats import middle90_pct, reduction_pct
from cudagraph_bench.table import Column, render_table

#: The table's status of a recorded check that names no case status of its own (eager ``ok``).
_TABLE_STATUS = {"pass": "ok", "fail": "mismatch", "reference": "ok", "unchecked": "unchecked"}


def forward_rows(runs: list[Run]) -> list[dict]:
    """One row per forward case (measured or not), sorted by model, dtype, prompt length, variant. Keys: ``model,
    dtype, seq_len, variant, status, mean_ms, median_ms, p95_ms, min_ms, max_ms`` (wall, per round),
    ``event_median_ms, reduction_pct, speedup, compile_s, capture_ms, pool_left_mib`` (MiB left reserved after
    release), ``max_abs_diff, check, fp64_rmse_ratio, note, spread_pct, attn_implementation``; None where absent."""
    ms = {m.case: m for m in merged(runs).values() if m.suite == "forward"}
    eager = {c.without_variant(): m.summary.median_ms for c, m in ms.items() if c.variant == REF}
    left = {k: v for run in runs for k, v in memory_left(run).items()}
    rows = []
    for case, m in ms.items():
        info, s, check = m.extra_info, m.summary, m.check
        base = eager.get(case.without_variant())
        rows.append({
            **asdict(case), "status": check.outcome or _TABLE_STATUS[check.status], "mean_ms": s.mean_ms,
            "median_ms": s.median_ms, "p95_ms": s.p95_ms, "min_ms": s.min_ms, "max_ms": s.max_ms,
            "event_median_ms": info.get("event_median_ms"),
            "reduction_pct": reduction_pct(base, s.median_ms) if base else None,
            "speedup": base / s.median_ms if base and s.median_ms > 0 else None,
            "compile_s": info["compile_ms"] / 1e3 if info.get("compile_ms") is not None else None,
            "capture_ms": capture if type(capture := info.get("capture_ms")) in (int, float) else None,  # no bool
            "max_abs_diff": check.max_abs_diff,
            "pool_left_mib": left.get(ledger_id(case.without_variant())) if case.variant == GATED else None,
            "check": "reference" if case.variant == REF else check.method, "fp64_rmse_ratio": check.fp64_rmse_ratio,
            "note": "; ".join([*filter(None, [check.reason]), *map(str, info.get("notes") or [])]) or None,
            "spread_pct": _spread(m.samples_ms), "attn_implementation": info.get("attn_implementation"),
        })
    for f in not_measured(runs):
        if f.case in ms:
            continue
        rows.append({**dict.fromkeys(("mean_ms", "median_ms", "p95_ms", "min_ms", "max_ms", "event_median_ms",
                                      "reduction_pct", "speedup", "capture_ms", "pool_left_mib")),
                     **asdict(f.case), "status": f.status,
                     "compile_s": f.compile_ms / 1e3 if f.compile_ms is not None else None,
                     "max_abs_diff": f.check.max_abs_diff, "check": f.check.method,
                     "fp64_rmse_ratio": f.check.fp64_rmse_ratio, "note": f.check.reason, "spread_pct": None,
                     "attn_implementation": f.details.get("attn_implementation")})
    rows.sort(key=lambda r: (r["model"], r["dtype"], r["seq_len"], *variant_order(r["variant"])))
    return rows


def _spread(samples_ms) -> float | None:
    if samples_ms is None:
        return None
    try:
        return middle90_pct(samples_ms)
    except ValueError:  # a median of 0 ms: no spread relative to it
        return None


#: The columns naming a forward case (its prompt length as ``L``), first in every forward table.
CASE_COLUMNS = [Column("model", "model"), Column("dtype", "dtype"), Column("seq_len", "L (tokens)", "d")]
LONG_COLUMNS = [
    *CASE_COLUMNS, Column("variant", "variant"), Column("mean_ms", "mean ms", ".3f"),
    Column("median_ms", "median ms", ".3f"), Column("p95_ms", "p95 ms", ".3f"), Column("min_ms", "min ms", ".3f"),
    Column("max_ms", "max ms", ".3f"),
    Column("reduction_pct", "vs eager %", "+.1f"), Column("compile_s", "compile s", ".1f"),
    Column("capture_ms", "capture ms", ".1f"), Column("pool_left_mib", "graph MiB left", "g"),
    Column("status", "correct", lambda s: {"ok": "yes", "mismatch": "NO", "unchecked": "not recorded"}.get(s, s),
           "left"),
    Column("max_abs_diff", "max abs diff", ".1e"),
    Column("check", "check", None, "left"),
    Column("fp64_rmse_ratio", "RMSE vs fp64 / eager's", ".2f"),
]


def render_long_table(rows: list[dict], fmt: str = "text") -> str:
    """Every row of :func:`forward_rows`; a text table cuts the note to 70 characters."""
    cut = (lambda text: text if len(text) <= 70 else text[:67] + "...") if fmt == "text" else None
    return render_table([*LONG_COLUMNS, Column("note", "note", cut, "left")], rows, fmt=fmt)


def summary_rows(rows: list[dict]) -> tuple[list[dict], list[str]]:
    """``(rows, variants present, eager first)``: per (model, dtype, seq_len) each variant's median, p95, spread and
    reduction; ``fastest``: the lowest median of status ``ok`` or ``unchecked`` (then ``"<v> (unchecked)"``)."""
    variants = sorted({r["variant"] for r in rows}, key=variant_order)
    out: dict[tuple, dict] = {}
    for r in rows:
        key = (r["model"], r["dtype"], r["seq_len"])
        row = out.setdefault(key, {"model": key[0], "dtype": key[1], "seq_len": key[2], "_ok": {}})
        v = r["variant"]
        row[f"{v}_median_ms"] = r.get("median_ms")
        if r.get("median_ms") is None:
            continue
        row.update({f"{v}_{field}": r.get(field) for field in ("p95_ms", "spread_pct", "reduction_pct")})
        if r["status"] in ("ok", "unchecked"):
            row["_ok"][v] = (r["median_ms"], r["status"])
    for row in out.values():
        ok = row.pop("_ok")
        best = min(ok, key=lambda v: ok[v][0]) if ok else None
        row["fastest"] = best if best is None or ok[best][1] == "ok" else f"{best} (unchecked)"
    return list(out.values()), variants


#: Per-variant columns of the summary: field -> (title after the variant's name, format).
_SUMMARY_FIELDS = {"median_ms": ("median ms", ".3f"), "reduction_pct": ("reduction %", "+.1f"),
                   "p95_ms": ("p95 ms", ".3f"), "spread_pct": ("spread %", ".0f")}


def render_summary_table(rows: list[dict], fmt: str = "markdown") -> str:
    """The per-case summary (see :func:`summary_rows`) of forward rows: eager and graph median, graph reduction, their
    p95s and eager's spread, then the median and reduction of every other variant present, and the fastest variant."""
    wide, variants = summary_rows(rows)
    shown = [(REF, "median_ms"), (GATED, "median_ms"), (GATED, "reduction_pct"), (REF, "p95_ms"),
             (REF, "spread_pct"), (GATED, "p95_ms")]
    shown += [(v, f) for v in variants if v not in (REF, GATED) for f in ("median_ms", "reduction_pct")]
    cols = [Column(f"{v}_{f}", f"{v} {_SUMMARY_FIELDS[f][0]}", _SUMMARY_FIELDS[f][1])
            for v, f in shown if v in variants]
    return render_table([*CASE_COLUMNS, *cols, Column("fastest", "fastest", None, "left")], wide, fmt=fmt)


def problem_lines(rows: list[dict]) -> list[str]:
    """``"<case> <variant>: <status>: <reason>"`` per failed, skipped or mismatching row, then the unchecked count."""
    lines = [f"{r['model']} {r['dtype']} L={r['seq_len']} {r['variant']}: {r['status']}"
             + (f": {r['note']}" if r.get("note") else "") for r in rows if r["status"] not in ("ok", "unchecked")]
    unchecked = sorted({r["variant"] for r in rows if r["status"] == "unchecked"})
    if unchecked:
        lines.append(f"{sum(r['status'] == 'unchecked' for r in rows)} measured case(s) of {', '.join(unchecked)} "
                     "carry no correctness check in their run JSON (benchmark runs recorded before the benchmarks "
                     "checked against eager; the correctness tests in perf_tests/ check graph replays separately)")
    return lines


def attention_note(rows: list[dict]) -> str | None:
    """The attention each model ran when the rows do not all share one, else None."""
    by_attention: dict[str, set[str]] = {}
    for r in rows:
        if r.get("attn_implementation"):
            by_attention.setdefault(r["attn_implementation"], set()).add(r["model"])
    if len(by_attention) < 2:
        return None
    parts = [f"{name}: {', '.join(sorted(models))}" for name, models in sorted(by_attention.items())]
    return ("Attention is not the same for every model (each runs its own, SDPA where transformers has it, "
            f"unless `--attn-implementation` chose another): {'; '.join(parts)}.")
