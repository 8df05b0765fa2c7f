"""``docs/architectures.md`` (no torch): every zoo model type in one table, ``model type | forward | decode | reason``,
with GPU figures and transformers releases; a GPU run's entry wins over a CPU run's."""

from __future__ import annotations

from dataclasses import dataclass

from cudagraph_bench.table import Column, render_table
from cudagraph_bench.zoo_keys import (AWAITS_GPU, DECODE, FORWARD, MEASURED, NEW_TOKENS, PARTS, PROMPT_TOKENS,
                                      STATUSES, ZooEntry, read_entry)

#: The cell of a CPU run's part that nothing refused: the GPU run decides.
AWAITS_CELL = "awaits GPU run"


@dataclass(frozen=True)
class Entry(ZooEntry):
    """One part of one type in one run: its release known, ``gpu`` the run's (None on a CPU)."""

    gpu: str | None = None


def run_entries(run) -> list[Entry]:
    """Benchmarks then failures, in file order; release and GPU from the entry, else the run."""
    env = run.environment
    read = [read_entry(m.extra_info, measured=True) for m in run.measurements.values()]
    section = run.data.get("cudagraph_bench") or {}
    read += [read_entry(e, measured=False) for e in (section.get("failures") or [])]
    entries = [e for e in read if e is not None]
    release = next((e.transformers for e in entries if e.transformers), None) or env.transformers or "?"
    return [Entry(e.model_type, e.part, e.status, e.reason, e.transformers or release, e.torch or env.torch,
                  dict(e.figures), env.gpu_name) for e in entries]


def merge_entries(entries: list[Entry]) -> dict[tuple[str, str, str], Entry]:
    """A GPU run's entry wins over a CPU run's, a later entry over an earlier one of the same kind."""
    out: dict[tuple[str, str, str], Entry] = {}
    for entry in entries:
        key = (entry.transformers, entry.model_type, entry.part)
        if key in out and out[key].gpu is not None and entry.gpu is None:
            continue
        out[key] = entry
    return out


def _cell(entry: Entry | None) -> str:
    return "-" if entry is None else AWAITS_CELL if entry.status == AWAITS_GPU else entry.status


def _reason(forward: Entry | None, decode: Entry | None) -> str:
    """Once when both parts agree, else each prefixed with its part (whitespace runs as one space)."""
    reasons = [(part, " ".join(e.reason.split())) for part, e in ((FORWARD, forward), (DECODE, decode))
               if e is not None and e.reason]
    if len(reasons) == 2 and reasons[0][1] == reasons[1][1]:
        return reasons[0][1]
    return "; ".join(f"{part}: {text}" for part, text in reasons)


def _figures(entry: Entry | None, key: str) -> dict | None:
    """The figures of a measured entry that holds ``key``, else None."""
    return entry.figures if entry is not None and entry.status == MEASURED and key in entry.figures else None


def _version_key(version: str):
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def table_rows(merged: dict[tuple[str, str, str], Entry]) -> list[list[str]]:
    """``[model type, forward, decode, reason, forward reduction, decode speedup, transformers]`` per type and group of
    releases, newest release first."""
    versions = sorted({v for v, _, _ in merged}, key=_version_key, reverse=True)
    types = sorted({t for _, t, _ in merged})
    rows = []
    for model_type in types:
        groups: dict[tuple, list[str]] = {}
        for version in versions:
            forward, decode = merged.get((version, model_type, FORWARD)), merged.get((version, model_type, DECODE))
            if forward is None and decode is None:
                continue
            f, d = _figures(forward, "reduction_pct"), _figures(decode, "speedup")
            reduction = f"{f['eager_ms']:.3g} -> {f['graph_ms']:.3g} ms ({-f['reduction_pct']:+.0f}%)" if f else "-"
            speedup = (f"{d['generate_ms_per_token']:.3g} -> {d['graph_ms_per_token']:.3g} ms/token "
                       f"({d['speedup']:.1f}x)" if d else "-")
            cells = (_cell(forward), _cell(decode), _reason(forward, decode), reduction, speedup)
            groups.setdefault(cells, []).append(version)
        for cells, releases in groups.items():
            rows.append([f"`{model_type}`", *cells, ", ".join(releases)])
    return rows


def status_counts(merged: dict[tuple[str, str, str], Entry]) -> dict[tuple[str, str], dict[str, int]]:
    """``(transformers, part) -> {status: types}`` over :data:`~cudagraph_bench.zoo_keys.STATUSES`."""
    out: dict[tuple[str, str], dict[str, int]] = {}
    for (version, _, part), entry in merged.items():
        counts = out.setdefault((version, part), dict.fromkeys(STATUSES, 0))
        counts[entry.status] = counts.get(entry.status, 0) + 1
    return out


#: The model-types table: :func:`table_rows`' cells in order, left-aligned but the two figures.
TYPE_COLUMNS = [Column("type", "model type"), Column("forward", "forward"), Column("decode", "decode"),
                Column("reason", "reason"), Column("reduction", "forward reduction", align="right"),
                Column("speedup", "decode speedup", align="right"), Column("releases", "transformers")]


def _sources(runs) -> str:
    rows = []
    for run in runs:
        env, entries = run.environment, run_entries(run)
        rows.append({"run": f"`{run.path.name}`", "device": env.gpu_name or "CPU",
                     "transformers": ", ".join(sorted({e.transformers for e in entries}, key=_version_key) or ["?"]),
                     "torch": next((e.torch for e in entries if e.torch), None) or "-",
                     "commit": f"`{(env.commit_id or '?')[:12]}`", "date": (env.run_datetime or "?")[:10]})
    return render_table(["run", "device", "transformers", "torch", "commit", "date"], rows, fmt="markdown")


def render_markdown(runs, *, command: str | None = None) -> str:
    """Any mix of GPU and CPU zoo runs and releases."""
    merged = merge_entries([e for run in runs for e in run_entries(run)])
    versions = sorted({v for v, _, _ in merged}, key=_version_key, reverse=True)
    lines = ["# Architectures", "",
             "Every causal-LM model type of transformers' auto mapping (`MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`), built "
             "as a tiny random `save_pretrained` checkpoint from transformers' own default config "
             "(`src/cudagraph_bench/models/zoo_types.py`) and loaded like any `--models` folder: the forward pass of "
             f"a {PROMPT_TOKENS}-token prompt replayed from a CUDA graph against eager on fresh inputs, and greedy "
             f"decode of {NEW_TOKENS} tokens with graphed steps against HF `generate`, with an unpadded and a "
             "bucketed prefill. Generated by `cudagraph-bench zoo --from` from the runs below "
             "(`scripts/regenerate_docs.sh`); never edited by hand.", "",
             "A status cell is `measured` (checked against its reference, then timed), `not graphable` (the suite "
             "refuses the capture up front: the reason names the layer, op or config field), `refused` (the suite "
             "does not measure the type: its checkpoint is refused, or it cannot be built or run) or `failed` (a "
             "check failed: a result the suite would get wrong)."]
    if any(e.status == AWAITS_GPU for e in merged.values()) or not any(e.gpu for e in merged.values()):
        lines += ["", f"**Awaiting a GPU run.** `{AWAITS_CELL}`: a CPU run (`cudagraph-bench zoo --device cpu`) found "
                  "no reason to refuse the part: the eager forward runs, the pre-capture watch finds no host work "
                  "on a `meta` copy, and the same decode steps run eagerly on a static KV cache give `generate`'s "
                  "tokens with both prefills. Whether the graph replay matches eager, and the forward reduction and "
                  "decode speedup columns, are for a GPU run to fill (`cudagraph-bench zoo` on a GPU; its run "
                  "replaces these cells)."]
    counts = status_counts(merged)
    count_rows = [{"transformers": v, "part": part, **dict.fromkeys(STATUSES, 0), **c, "types": sum(c.values())}
                  for v in versions for part in PARTS for c in [counts.get((v, part), {})]]
    count_columns = ["transformers", "part", *(Column(k, k, "d") for k in (*STATUSES, "types"))]
    lines += ["", "## Counts", "", render_table(count_columns, count_rows, fmt="markdown"), "", "## Model types", "",
              render_table(TYPE_COLUMNS, [dict(zip((c.key for c in TYPE_COLUMNS), row)) for row in table_rows(merged)],
                           fmt="markdown")]
    lines += ["", "Forward reduction: eager -> graph replay, median ms of CUDA-event-timed calls at batch 1, "
              f"{PROMPT_TOKENS} tokens, bfloat16. Decode speedup: HF `generate` -> graphed decode, ms per token of "
              f"whole {NEW_TOKENS}-token requests (unpadded prefill). `-`: not measured.", "", "## Runs", "",
              _sources(runs)]
    if command:
        lines += ["", f"Made with: `{command}`"]
    return "\n".join(lines) + "\n"
