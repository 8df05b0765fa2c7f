"""The decode-suite table (no torch): per decode benchmark or failed case, ms/token, tokens/s, speedup over HF
``generate`` and token checks; compile time and note only where runs have compile variants, failures or notes."""

from __future__ import annotations

import re
from dataclasses import asdict

from cudagraph_bench import variants
from cudagraph_bench.report.runs import merged, not_measured
from cudagraph_bench.results.record import Measurement
from cudagraph_bench.results.runfile import Run
from cudagraph_bench.table import Column, render_table

#: The decode reference, HF ``generate``.
_GENERATE = variants.reference_of(variants.DECODE).name


def decode_rows(runs: list[Run]) -> list[dict]:
    """One row per decode benchmark and per unmeasured failed case: ``model, dtype, seq_len, new_tokens, variant,
    ms_per_token, tokens_per_s, speedup_vs_generate, rounds, vs_generate, vs_static_eager, compile_s, status, note,
    attn_implementation``; a failed case's timings are None."""
    measured = {m.case: m for m in merged(runs).values() if m.suite == "decode"}

    def row(case, status: str | None, reason: str | None, details: dict, compile_ms, **numbers) -> dict:
        return {**asdict(case), **numbers, "status": status or "ok",
                "compile_s": compile_ms / 1e3 if isinstance(compile_ms, (int, float)) else None,
                "note": decode_note_cell(status, reason, details),
                "attn_implementation": details.get("attn_implementation")}

    rows = []
    for case, m in measured.items():
        details = m.extra_info
        ms_per_token = details.get("ms_per_token")
        ms_per_token = m.summary.median_ms / case.new_tokens if ms_per_token is None else ms_per_token
        rows.append(row(case, m.check.outcome, m.check.reason, details, details.get("compile_ms"),
                        ms_per_token=float(ms_per_token), rounds=m.summary.n, vs_generate=vs_generate(m),
                        tokens_per_s=details.get("tokens_per_s") or (1e3 / ms_per_token if ms_per_token else None),
                        vs_static_eager=vs_static_eager(m)))
    failed: dict = {}
    for f in not_measured(runs, "decode"):
        if f.case not in measured:
            failed.setdefault(f.case, f)
    rows += [row(f.case, f.status, f.check.reason, f.details, f.compile_ms, ms_per_token=None, tokens_per_s=None,
                 rounds=None, vs_generate="-", vs_static_eager="-") for f in failed.values()]
    generate = {_request(r): r["ms_per_token"] for r in rows if r["variant"] == _GENERATE}
    for r in rows:
        base = generate.get(_request(r))
        r["speedup_vs_generate"] = base / r["ms_per_token"] if base and r["ms_per_token"] else None
    rows.sort(key=lambda r: (*_request(r), variants.table_rank(variants.DECODE, r["variant"]), r["variant"]))
    return rows


def _request(row: dict) -> tuple:
    return row["model"], row["dtype"], row["seq_len"], row["new_tokens"]


def _tie_or_identical(identical: bool, passed: bool, summary: str) -> str:
    if not passed:
        return "FAILS"
    if identical:
        return "identical"
    match = re.search(r"token (\d+) differs", summary or "")
    return f"tie at token {match.group(1)}" if match else "tie"


def vs_generate(m: Measurement) -> str:
    """``reference``, ``identical``, ``tie at token K`` (with generate's distinct tokens when recorded), ``FAILS``, or
    ``-`` when not recorded."""
    check = m.check
    if m.case.variant == _GENERATE:
        return "reference"
    if not check.generate_recorded:
        return "-"
    passed = check.generate_check_passed if check.generate_check_passed is not None else check.matches_generate
    text = _tie_or_identical(bool(check.matches_generate), bool(passed), check.generate_check or "")
    distinct = m.extra_info.get("distinct_reference_tokens")
    return text if text == "FAILS" or distinct is None else f"{text} ({distinct} distinct)"


def vs_static_eager(m: Measurement) -> str:
    """``reference``, ``identical``, ``DIFFERS`` (graph), ``tie at token K``, ``FAILS`` (compile+graph), or ``-``."""
    exact = variants.exact_reference(variants.DECODE)
    if exact is not None and m.case.variant == exact.name:
        return "reference"
    details = m.extra_info
    if "matches_static_eager" in details:
        return _tie_or_identical(details["matches_static_eager"],
                                 details.get("static_eager_check_passed", details["matches_static_eager"]),
                                 details.get("static_eager_check", ""))
    if m.check.method == "tokens == static-eager" and m.check.status in ("pass", "fail"):
        return "identical" if m.check.status == "pass" else "DIFFERS"
    return "-"


def decode_note_cell(status: str | None, reason: str | None, details: dict) -> str | None:
    """``failed: <reason>`` (or ``skipped: ...``) for an unmeasured case, else compile mode, bucket, steps per graph and
    a mismatch's reason, or None."""
    if status in ("failed", "skipped"):
        return f"{status}: {reason or 'no reason recorded'}"
    parts = []
    if details.get("compile_mode"):
        tuning = details.get("compile_tuning")
        parts.append(str(details["compile_mode"]) + (f", {tuning} tuning" if tuning and tuning != "none" else ""))
    if isinstance(details.get("prefill_bucket"), int):
        parts.append(f"prefill graph of {details['prefill_bucket']} tokens")
    if isinstance(details.get("steps_per_graph"), int):
        parts.append(f"{details['steps_per_graph']} steps per graph")
    if status == "mismatch" and reason:
        parts.append(str(reason))
    return "; ".join(parts) or None


#: The decode table of runs without compile variants, failures or notes.
DECODE_COLUMNS = [
    Column("model", "model"), Column("dtype", "dtype"), Column("seq_len", "prompt tokens", "d"),
    Column("new_tokens", "new tokens", "d"), Column("variant", "variant"),
    Column("ms_per_token", "ms/token", ".3f"), Column("tokens_per_s", "tokens/s", ".1f"),
    Column("speedup_vs_generate", "speedup vs generate (x)", ".2f"), Column("vs_generate", "tokens vs generate"),
    Column("rounds", "requests", "d"),
]
#: The decode table with compile variants, failures or notes: also vs static-eager, compile time and note.
DECODE_COLUMNS_WITH_COMPILE = [
    *DECODE_COLUMNS[:-1], Column("vs_static_eager", "tokens vs static-eager"),
    Column("compile_s", "compile s", ".1f"), DECODE_COLUMNS[-1], Column("note", "note", None, "left"),
]

#: What the decode table's numbers mean (shown above it in results.md and the README).
DECODE_NOTE = ("Greedy decode at batch 1: each round is one whole request (prefill of the prompt + every decode "
               "step); ms/token = median request time / new tokens, tokens/s = its inverse. `generate` is HF "
               "`generate(do_sample=False)` with its default dynamic cache, `static-eager` a StaticCache loop without "
               "graphs, `graph` the same loop replaying one captured decode step per token. tokens vs generate: "
               "`identical`, or `tie at token K` where the first differing token's step has logits as close to a "
               "float64 run of the same weights as generate's (a rounding tie), with how many distinct tokens "
               "generate produced (random weights can repeat one token; every step's logits are checked then too); "
               "`-`: the run recorded no check.")
#: Added to :data:`DECODE_NOTE` above the table of :data:`DECODE_COLUMNS_WITH_COMPILE`.
COMPILE_DECODE_NOTE = ("`graph` replays its captured steps back to back: each step writes its token into the next "
                       "step's input and into the output on the GPU, so no host work runs between replays; `N steps "
                       "per graph` (note) are captured in one graph, the remainder one step per graph. "
                       "`compile+graph` is the same loop with the decode step compiled by inductor without inductor's "
                       "own CUDA graphs (its mode and inductor tuning in the note: `coordinate-descent` is gpt-fast's "
                       "setting, which turns the step's matrix-vector products into tuned Triton reductions fused "
                       "with their neighbours), captured and replayed like `graph`; its prefill is a graph of the "
                       "prompt right-padded to the bucket in the note (`prefill graph of N tokens`), else eager. "
                       "`graph` and `static-eager` prefill eagerly. `generate-static-compile` is HF `generate` with "
                       "`cache_implementation=\"static\"` and `model.forward = torch.compile(model.forward, "
                       "mode=\"reduce-overhead\", fullgraph=True)`, as transformers' guide \"LLM inference "
                       "optimization\" sets it up. compile s = what the warm-up calls took beyond steady state "
                       "(compilation, autotuning, CUDA graph recording). tokens vs static-eager: `graph` must be "
                       "`identical` (same kernels); `compile+graph` runs other kernels and is judged by the rule of "
                       "the generate check (`tie at token K` = a rounding tie). A row with no timing failed: its note "
                       "gives the reason recorded in the run.")


def with_compile(rows: list[dict]) -> bool:
    """True when a row has a compile variant, a status other than ``ok`` or a note."""
    compiled = {v.name for v in variants.of_suite(variants.DECODE) if v.compiled}
    return any(r["variant"] in compiled or r["note"] or r["status"] != "ok" for r in rows)


def decode_note(rows: list[dict]) -> str:
    """The text above the decode table of ``rows``."""
    return f"{DECODE_NOTE} {COMPILE_DECODE_NOTE}" if with_compile(rows) else DECODE_NOTE


def render_decode_table(rows: list[dict], fmt: str = "markdown") -> str:
    """The decode table of :func:`decode_rows` (its columns chosen by :func:`with_compile`)."""
    return render_table(DECODE_COLUMNS_WITH_COMPILE if with_compile(rows) else DECODE_COLUMNS, rows, fmt=fmt)

