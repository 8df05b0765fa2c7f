"""How far the gated device-side figure moves between processes, within and across machines, beside the plain loop in
the same jobs (no torch). Target (nvbench's and asv's advice): each gated case spans at most the larger of
:data:`MAX_SPAN_PCT` and :data:`MAX_SPAN_VS_PLAIN` times the plain loop's span."""

from __future__ import annotations

import statistics

from cudagraph_bench.results.baseline import DEFAULT_MAX_GATED_LEN
from cudagraph_bench.results.runfile import Run, forward_cases
from cudagraph_bench.table import Column
from cudagraph_bench.variants import GATED

#: Target spread of the gated figure between processes on one machine (percent; see the module docstring).
MAX_SPAN_PCT, MAX_SPAN_VS_PLAIN = 1.0, 1.5


def span_pct(values) -> float | None:
    """``100 * (max - min) / median`` (ms; None entries left out), None for fewer than 2."""
    values = [v for v in values if v is not None]
    if len(values) < 2:
        return None
    return 100.0 * (max(values) - min(values)) / statistics.median(values)


def host_label(host: str | None) -> str:
    """The first 8 characters of the GPU UUID after ``GPU-``, or ``unrecorded``."""
    return host.removeprefix("GPU-")[:8] if host else "unrecorded"


def _by_case(runs: list[Run]) -> dict:
    """``{(model, dtype, seq_len): {host: [device ms or None, per run]}}`` of gated graph benchmarks."""
    out: dict = {}
    for run in runs:
        for case, m in forward_cases(run).items():
            if case.variant == GATED and case.seq_len <= DEFAULT_MAX_GATED_LEN:
                out.setdefault(case.without_variant(), {}).setdefault(run.environment.host, []).append(m.device_ms)
    return out


def hosts_of(runs: list[Run]) -> list[str | None]:
    """In first-seen order."""
    return list(dict.fromkeys(r.environment.host for r in runs))


def _span_of_medians(per_host: dict) -> float | None:
    return span_pct([statistics.median(xs) for v in per_host.values() if (xs := [x for x in v if x is not None])])


def spread_rows(harness: list[Run], plain: list[Run] = ()) -> list[dict]:
    """Per gated case: ``label``, ``within`` / ``plain_within`` (``{host: span}``), ``across`` / ``plain_across`` (span
    of the machines' medians), ``ok``."""
    harness_cases, plain_cases = _by_case(harness), _by_case(list(plain))
    hosts = hosts_of(harness)
    rows = []
    for key in sorted(harness_cases):
        mine, loop = harness_cases[key], plain_cases.get(key, {})
        within = {h: span_pct(mine.get(h, [])) for h in hosts}
        plain_within = {h: span_pct(loop.get(h, [])) for h in hosts}
        ok = all(within[h] is None or within[h] <= max(MAX_SPAN_PCT, MAX_SPAN_VS_PLAIN * (plain_within[h] or 0.0))
                 for h in hosts)
        rows.append({"label": "{} {} L={}".format(*key), "within": within, "plain_within": plain_within,
                     "across": _span_of_medians(mine), "plain_across": _span_of_medians(loop), "ok": ok})
    return rows


def _cells(spans: dict) -> str:
    return " / ".join("-" if v is None else f"{v:.2f}" for v in spans.values())


def spread_table(rows: list[dict], hosts: list[str | None]) -> tuple[list[Column], list[dict]]:
    """Columns and rows, machines side by side in ``hosts`` order."""
    names = " / ".join(host_label(h) for h in hosts)
    cols = [Column("label", "case"), Column("within", f"harness device span % ({names})", _cells),
            Column("plain_within", f"plain loop device span % ({names})", _cells),
            Column("ok", "within target", lambda ok: "yes" if ok else "NO"),
            Column("across", "harness across machines %", ".2f"),
            Column("plain_across", "plain loop across machines %", ".2f")]
    return cols, rows


def verdict(rows: list[dict]) -> str:
    """One line: whether every case meets the target, else which do not."""
    bad = [r["label"] for r in rows if not r["ok"]]
    rule = f"at most the larger of {MAX_SPAN_PCT:g}% and {MAX_SPAN_VS_PLAIN:g}x the plain loop's span on its machine"
    return (f"every gated device median spans {rule}" if not bad else
            f"{len(bad)} case(s) outside the target ({rule}): {', '.join(bad)}")
