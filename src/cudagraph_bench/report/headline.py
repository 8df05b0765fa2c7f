"""The README's headline (no torch): one compact table of the forward matrix and one of the decode speedups."""

from __future__ import annotations

from cudagraph_bench.report.decode_tables import decode_rows
from cudagraph_bench.report.forward_tables import forward_rows
from cudagraph_bench.table import Column, render_table
from cudagraph_bench.variants import DECODE, FORWARD_REFERENCE, GATED, reference_of

FORWARD_NOTE = ("Forward pass at batch 1, median of the measured rounds (synchronized wall time): eager -> graph "
                "replay, and the latency reduction. Every graph was checked against eager on fresh inputs.")
DECODE_NOTE = ("Greedy decode at batch 1 (one round = one whole request): ms per token, and the speedup over HF "
               "`generate`; every decoder's tokens checked against `generate`.")


def forward_headline(rows: list[dict]) -> str | None:
    """Per model and dtype and length: ``eager -> graph ms (-reduction%)`` (``WRONG``: failed check), or None."""
    by_case = {(r["model"], r["dtype"], r["seq_len"], r["variant"]): r for r in rows}
    table: dict[tuple, dict] = {}
    for (model, dtype, n, variant), r in by_case.items():
        eager = by_case.get((model, dtype, n, FORWARD_REFERENCE))
        if variant != GATED or eager is None or r.get("median_ms") is None or eager.get("median_ms") is None:
            continue
        mark = "" if r["status"] in ("ok", "unchecked") else " WRONG"
        table.setdefault((model, dtype), {"model": model, "dtype": dtype})[f"L{n}"] = (
            f"{eager['median_ms']:.3g} -> {r['median_ms']:.3g} ms ({-r['reduction_pct']:+.0f}%){mark}")
    if not table:
        return None
    cols = [Column("model", "model"), Column("dtype", "dtype"),
            *(Column(f"L{n}", f"L={n}", align="right") for n in sorted({r["seq_len"] for r in rows}))]
    return render_table(cols, [table[k] for k in sorted(table)], fmt="markdown")


def decode_headline(rows: list[dict]) -> str | None:
    """Per decode request shape: ms/token of each decoder and speedup; None without rows."""
    ref = reference_of(DECODE).name
    by_key: dict[tuple, dict] = {}
    for r in rows:
        if r.get("ms_per_token") is None:
            continue
        key = (r["model"], r["dtype"], r["seq_len"], r["new_tokens"])
        row = by_key.setdefault(key, {"model": key[0], "dtype": key[1], "shape": f"{key[2]} + {key[3]}"})
        speed = r.get("speedup_vs_generate") if r["variant"] != ref else None
        row[r["variant"]] = f"{r['ms_per_token']:.3f}" + (f" ({speed:.1f}x)" if speed else "")
    if not by_key:
        return None
    names = dict.fromkeys([ref, *(r["variant"] for r in rows if r.get("ms_per_token") is not None)])
    cols = [Column("model", "model"), Column("dtype", "dtype"), Column("shape", "prompt + new tokens"),
            *(Column(n, f"{n} ms/token", align="right") for n in names)]
    return render_table(cols, [by_key[k] for k in sorted(by_key)], fmt="markdown")


def render_headline(runs, results_link: str, gpu: str | None) -> str:
    """The README block: the two headline tables and the link to the full results page."""
    out = [""]
    forward = forward_headline(forward_rows(runs))
    if forward:
        out += [FORWARD_NOTE, "", forward, ""]
    decode = decode_headline(decode_rows(runs))
    if decode:
        out += [DECODE_NOTE, "", decode, ""]
    out += [f"Every measurement{f' ({gpu})' if gpu else ''}, the padded and bucketed graphs, the roofline, failures "
            f"and provenance: [{results_link}]({results_link}).", ""]
    return "\n".join(out)
