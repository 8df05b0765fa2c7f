"""``cudagraph-bench ab`` in the self-test (no torch): its false alarms of ``ab-base-<i>`` against ``ab-head-<i>`` (A/A)
and detection of ``ab-delay-<pct>-<i>`` runs (a delay on every gated graph), over the gated cases."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from cudagraph_bench.results.compare import Change, compare_runs
from cudagraph_bench.results.runfile import Run
from cudagraph_bench.table import Column, render_table
from cudagraph_bench.variants import FORWARD, GATED

#: ``ab-base-<i>``, ``ab-head-<i>``, ``ab-delay-<pct>-<i>``: group and delay percent (None: unmodified).
_AB = re.compile(r"ab-(base|head|delay-(\d+(?:\.\d+)?))-\d+")


@dataclass
class ABCase:
    """``aa``: A/A change or None; per delay: the change, median delay, runs off target."""

    label: str
    aa: Change | None = None
    delayed: dict[float, Change] = field(default_factory=dict)
    planted_pct: dict[float, float | None] = field(default_factory=dict)
    off_target: dict[float, int] = field(default_factory=dict)


@dataclass
class ABResult:
    """``cases`` (one per gated case) and runs per group (``n_base``, ``n_head``, ``n_delay[pct]``)."""

    cases: list[ABCase]
    n_base: int
    n_head: int
    n_delay: dict[float, int]

    @property
    def delays(self) -> list[float]:
        return sorted(self.n_delay)

    @property
    def aa_alarms(self) -> int:
        """False alarms."""
        return sum(c.aa is not None and c.aa.regressed for c in self.cases)


def split_ab_runs(runs: dict[str, Run]) -> tuple[list[Run], list[Run], dict[float, list[Run]]]:
    """``(ab-base, ab-head, {delay pct: ab-delay})`` runs by file stem, each group in name order."""
    base, head, delay = [], [], {}
    for name, run in sorted(runs.items()):
        m = _AB.fullmatch(name)
        if m is None:
            continue
        if m.group(2) is not None:
            delay.setdefault(float(m.group(2)), []).append(run)
        else:
            (base if m.group(1) == "base" else head).append(run)
    return base, head, dict(sorted(delay.items()))


def _gated(changes: list[Change]) -> dict[str, Change]:
    """``{case label: change}`` of gated changes."""
    return {(c.label.removesuffix(f" {GATED}") if c.suite == FORWARD else f"{c.suite} {c.label}"): c
            for c in changes if c.gated}


def _measured(runs: list[Run]) -> dict[str, tuple[float | None, int]]:
    """``{case label: (median measured delay percent, runs off target)}``."""
    seen: dict[str, list[dict]] = {}
    for run in runs:
        for m in run.measurements.values():
            if m.suite == FORWARD and m.case.variant == GATED and "planted_fault" in m.extra_info:
                seen.setdefault(m.label.removesuffix(f" {GATED}"), []).append(m.extra_info)
    out = {}
    for label, infos in seen.items():
        values = [i["planted_measured_pct"] for i in infos if i.get("planted_measured_pct") is not None]
        out[label] = (float(np.median(values)) if values else None,
                      sum(i.get("planted_on_target") is False for i in infos))
    return out


def evaluate_ab(runs: dict[str, Run], baseline=None) -> ABResult | None:
    """The comparisons on the ab runs of ``runs`` (``{file stem: Run}``); None without ab runs. ``baseline`` None: the
    runs' own spread. UsageError when two groups share no benchmark."""
    base, head, delays = split_ab_runs(runs)
    if not (base or head or delays):
        return None
    cases: dict[str, ABCase] = {}
    if base and head:
        for label, ch in _gated(compare_runs(base, head, baseline=baseline)[0]).items():
            cases.setdefault(label, ABCase(label)).aa = ch
    for pct, delayed in delays.items() if base else ():
        measured = _measured(delayed)
        for label, ch in _gated(compare_runs(base, delayed, baseline=baseline)[0]).items():
            c = cases.setdefault(label, ABCase(label))
            c.delayed[pct] = ch
            c.planted_pct[pct], c.off_target[pct] = measured.get(label, (None, 0))
    return ABResult(list(cases.values()), len(base), len(head), {p: len(r) for p, r in delays.items()})


def _verdict(ch: Change | None) -> str:
    return "-" if ch is None else f"{'FAIL' if ch.regressed else 'pass'} ({ch.change_pct:+.1f}%)"


def table(result: ABResult, fmt: str) -> str:
    """Per gated case: A/A, and per planted delay the median delay measured (``(N off target)`` when some missed) and
    ab's verdict, each ``FAIL``/``pass`` with the change (percent)."""
    cols = [Column("label", "case"), Column("aa", "A/A ab")]
    for p in result.delays:
        cols += [Column(f"planted_{p:g}", f"+{p:g}% planted (measured)"), Column(f"seen_{p:g}", f"+{p:g}% ab")]
    out = []
    for c in result.cases:
        row = {"label": c.label, "aa": _verdict(c.aa)}
        for p in result.delays:
            measured, off = c.planted_pct.get(p), c.off_target.get(p, 0)
            row[f"planted_{p:g}"] = ("-" if measured is None else f"{measured:+.1f}%"
                                     + (f" ({off} off target)" if off else ""))
            row[f"seen_{p:g}"] = _verdict(c.delayed.get(p))
        out.append(row)
    return render_table(cols, out, fmt=fmt)


def summary_part(result: ABResult) -> str:
    """``ab: A/A false alarms a/N; +3% detected d/N`` (the parts that ran)."""
    def flagged(changes: list[Change]) -> str:
        return f"{sum(ch.regressed for ch in changes)}/{len(changes)}"

    n_aa = sum(c.aa is not None for c in result.cases)
    parts = [f"A/A false alarms {result.aa_alarms}/{n_aa}"] if result.n_base and result.n_head else []
    parts += [f"+{p:g}% detected {flagged([c.delayed[p] for c in result.cases if p in c.delayed])}"
              for p in result.delays if result.n_base]
    return "ab: " + ("; ".join(parts) if parts else "no ab-base runs, nothing compared")


def markdown_section(result: ABResult, baseline_text: str) -> list[str]:
    """The page section "Pull-request mode (`ab`)"; ``baseline_text``: the noise model in markdown."""
    groups = [f"{result.n_base} `ab-base-<i>`", f"{result.n_head} `ab-head-<i>`"]
    groups += [f"{n} `ab-delay-{p:g}-<i>`" for p, n in result.n_delay.items()]
    delays = ", ".join(f"+{p:g}%" for p in result.delays) or "none"
    return ["## Pull-request mode (`ab`)", "",
            f"Runs of the same job, each a pytest process of the gated matrix: {', '.join(groups)}, interleaved as "
            "`ab` interleaves its sides (base, head, delay, delay, head, base, ...). Base and head are both the "
            f"unmodified checkout; the delay runs plant a GPU delay on head ({delays}, `--plant-fault`). Each "
            "comparison is `ab`'s own (`compare --old` the base runs `--new` the others: the change of the median of "
            "run medians beyond its tolerance, and the one-sided rank test agreeing), with the noise model of "
            f"{baseline_text}.", "",
            "- A/A: ab-base against ab-head; a FAIL is a false alarm, and fails the self-test;",
            "- planted: ab-base against the delay runs; reported, with no target; planted (measured): the median "
            "over the delay runs of the delay each measured right after its capture.", "",
            *([table(result, "markdown"), ""] if result.cases else []),
            f"**{summary_part(result)}**", ""]
