"""``cudagraph-bench compare OLD NEW`` (or ``--old RUN... --new RUN...``; no torch): per-benchmark change of the median
of run medians. Exit 1 (which pytest-benchmark's ``compare`` cannot give) on a regression of a gated benchmark
(references only with ``--gate-references``), a failed check in NEW (peers' known failures excepted), or a gated
benchmark missing in NEW."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from cudagraph_bench import variants
from cudagraph_bench.variants import FORWARD_REFERENCE as REF
from cudagraph_bench.variants import GATED
from cudagraph_bench.results import noise
from cudagraph_bench.results.baseline import Baseline, gated_case
from cudagraph_bench.errors import UsageError
from cudagraph_bench.results.checks import FailedCheck, failed_checks, own_and_peer, peer_notes
from cudagraph_bench.results.record import is_peer
from cudagraph_bench.results.runfile import Measurement, Run, measurements
from cudagraph_bench.table import Column, first_items, plural, verdict_line


@dataclass(frozen=True)
class Change:
    """The regression check of one benchmark's run medians and each side's check status."""

    suite: str
    label: str
    check: noise.RegressionCheck
    gated: bool = True
    old_check: str = "unchecked"
    new_check: str = "unchecked"
    new_check_detail: str | None = None
    peer: bool = False

    @property
    def change_pct(self) -> float:
        return self.check.change_pct

    @property
    def regressed(self) -> bool:
        """Slower beyond the threshold (:attr:`noise.RegressionCheck.regressed`) and gated: fails the build."""
        return self.gated and self.check.regressed

    @property
    def broke(self) -> bool:
        """NEW recorded a failed check where OLD did not."""
        return self.new_check == "fail" and self.old_check != "fail"

    @property
    def wrong(self) -> bool:
        """NEW recorded a failed check and the benchmark is not a peer's."""
        return self.new_check == "fail" and not self.peer

    @property
    def marginal(self) -> bool:
        """Median beyond the tolerance, but not significant by the rank test."""
        return self.check.beyond_tolerance and not self.check.regressed

    @property
    def status(self) -> str:
        fail = self.new_check == "fail"     # each ladder: its first word that holds
        checked = [word for holds, word in ((fail and self.peer, "known peer failure"),
                                            (self.broke, f"WRONG (check {self.old_check} -> fail)"),
                                            (fail, "WRONG (in OLD and NEW)")) if holds][:1]
        speed = [word for holds, word in ((self.regressed, "REGRESSION"), (self.check.regressed, "slower (reference)"),
                                          (self.marginal, "marginal"),
                                          (self.change_pct < -self.check.tolerance_pct, "faster"),
                                          (not checked, "ok")) if holds][:1]
        return ", ".join(checked + speed)


def is_gated(m: Measurement, gate_references: bool = False) -> bool:
    """Whether a change of ``m`` can fail the comparison: not a reference variant or eager static-cache loop
    (host-bound, reported but not gated by default), or ``gate_references``."""
    row = variants.find(m.suite, m.case.variant)
    exact = variants.exact_reference(m.suite)
    reference = row is not None and (row.is_reference or (exact is not None and row == exact and not row.captured))
    return gate_references or not reference


def _baseline_figure_and_spread(baseline: Baseline | None, ms: list[Measurement]
                                ) -> tuple[str, float | None, int | None]:
    """``(figure, spread percent, df)`` of the benchmark of ``ms``: the baseline case's figure for the gated variant,
    else ``"device"`` when all of ``ms`` recorded it, else ``"wall"``; the spread of its case, else None."""
    m = ms[0]
    forward = baseline is not None and m.suite == variants.FORWARD and m.case.variant in (REF, GATED)
    case = baseline.cases.get(m.case.without_variant()) if forward else None
    figure = "wall"
    if m.suite == variants.FORWARD and m.case.variant == GATED:
        figure = (case[GATED].get("figure", "wall") if case is not None else
                  "device" if all(x.device_ms is not None for x in ms) else "wall")
    medians = case[m.case.variant].get("run_medians_ms") or [] if case is not None else []   # checked positive
    spread = case[GATED].get("spread_pct") if case is not None and m.case.variant == GATED else None
    spread = float(spread) if spread is not None else noise.spread_pct(medians) if len(medians) >= 2 else None
    return figure, spread, len(medians) - 1 if spread is not None else None


def change(old: list[Measurement], new: list[Measurement], *, floor_pct: float | None = None,
           gate_references: bool = False, baseline: Baseline | None = None) -> Change:
    """One benchmark's change, ``new`` against ``old`` (one Measurement per run); ``floor_pct`` None: the baseline's
    floor, else the figure's."""
    figure, spread, df = _baseline_figure_and_spread(baseline, [*old, *new])
    th = baseline.thresholds if baseline else {}
    if any(m.figure_ms(figure) is None for m in [*old, *new]):
        figure = "wall"
    check = noise.check_regression([m.figure_ms(figure) for m in old], [m.figure_ms(figure) for m in new],
                                   spread=spread, floor_pct=noise.floor_of(th, figure, floor_pct),
                                   multiplier=th.get("noise_multiplier", noise.DEFAULT_MULTIPLIER),
                                   alpha=float(th.get("alpha", noise.DEFAULT_ALPHA)), df=df)
    worst_new = next((m for m in new if m.check.status == "fail"), new[0])
    old_status = "fail" if any(m.check.status == "fail" for m in old) else old[0].check.status
    return Change(suite=new[0].suite, label=new[0].label, check=check, gated=is_gated(new[0], gate_references),
                  old_check=old_status, new_check=worst_new.check.status, new_check_detail=worst_new.check.detail,
                  peer=is_peer(new[0].suite, new[0].case.variant))


def _listed(runs: Run | list[Run]) -> list[Run]:
    return [runs] if isinstance(runs, Run) else runs


def _merged(runs: Run | list[Run]) -> dict[tuple, list[Measurement]]:
    out: dict[tuple, list[Measurement]] = {}
    for run in _listed(runs):
        for key, m in measurements(run).items():
            out.setdefault(key, []).append(m)
    return out


def compare_runs(old: Run | list[Run], new: Run | list[Run], floor_pct: float | None = None,
                 gate_references: bool = False, baseline: Baseline | None = None
                 ) -> tuple[list[Change], list[str], list[str]]:
    """``(changes, labels only in OLD, only in NEW)``; UsageError when the sides share none."""
    a, b = _merged(old), _merged(new)
    common = sorted(set(a) & set(b))     # keys of one suite hold the same types (Case.from_extra_info)
    if not common:
        raise UsageError(f"{_listed(old)[0].path} and {_listed(new)[0].path} share no benchmark: compare runs of the "
                         "same suite and cases")
    changes = [change(a[k], b[k], floor_pct=floor_pct, gate_references=gate_references, baseline=baseline)
               for k in common]
    only_old = [a[k][0].label for k in sorted(set(a) - set(b))]
    only_new = [b[k][0].label for k in sorted(set(b) - set(a))]
    return changes, only_old, only_new


def gated_missing_in_new(old: Run | list[Run], new: Run | list[Run], baseline: Baseline | None = None,
                         gate_references: bool = False) -> list[str]:
    """Labels of OLD's graph benchmarks (with ``gate_references`` also eager) that NEW lacks, of the forward cases
    ``gate`` gates by ``baseline``'s rule (:func:`~cudagraph_bench.results.baseline.gated_case`), so that a case
    called gated is one the gate gates."""
    a, b = _merged(old), _merged(new)
    shown = (GATED, REF) if gate_references else (GATED,)
    return [a[k][0].label for k in sorted(set(a) - set(b))
            if a[k][0].suite == variants.FORWARD and a[k][0].case.variant in shown
            and gated_case(a[k][0].case.without_variant(), baseline)]


COLUMNS = [
    Column("suite", "suite"), Column("label", "benchmark"), Column("runs", "runs"),
    Column("old_median_ms", "old ms", ".3f"), Column("new_median_ms", "new ms", ".3f"),
    Column("change_pct", "change %", "+z.1f"), Column("tolerance_pct", "tolerance %", ".1f"),
    Column("p_value", "rank p", ".3f"), Column("checks", "check old -> new"), Column("status", "status"),
]


def rows(changes: list[Change]) -> list[dict]:
    """Table rows for :data:`COLUMNS`."""
    return [{**asdict(c.check), "suite": c.suite, "label": c.label, "runs": f"{c.check.n_old} -> {c.check.n_new}",
             "checks": f"{c.old_check} -> {c.new_check}", "status": c.status} for c in changes]


def summary(changes: list[Change], only_old: list[str], only_new: list[str], missing_gated: list[str] = (),
            allow_missing: bool = False, unmeasured: list[FailedCheck] = ()) -> tuple[bool, str]:
    """``(passed, one-line summary)`` naming every regression, every failed check of NEW, and (unless ``allow_missing``)
    every gated benchmark missing in NEW; peers' known failures and slower references are named apart and do not
    fail."""
    bad = [c for c in changes if c.regressed]
    broke = [c for c in changes if c.wrong and c.broke]
    still = [c for c in changes if c.wrong and not c.broke]
    own, peer = own_and_peer(list(unmeasured))
    peer_changes = [c for c in changes if c.new_check == "fail" and c.peer]
    n = plural(len(changes), "benchmark")
    parts = [f"{plural(len(group), 'benchmark')} failed a correctness check {how}: "
             + ", ".join(f"{c.label} ({c.new_check_detail})" for c in group)
             for group, how in ((broke, "that passed before"), (still, "in NEW, as in OLD")) if group]
    parts += [f"NEW: {f.text}" for f in own]
    if bad:
        parts.append(f"{len(bad)} of {n} slower beyond their tolerance: "
                     + ", ".join(f"{c.label} ({c.change_pct:+.1f}% > {c.check.tolerance_pct:.1f}%)" for c in bad))
    if missing_gated:
        parts.append(f"{plural(len(missing_gated), 'gated benchmark')} of OLD missing in "
                     f"NEW{', allowed by --allow missing' if allow_missing else ' (--allow missing to accept)'}: "
                     + ", ".join(missing_gated))
    failed = bool(bad or broke or still or own or (missing_gated and not allow_missing))
    if not (bad or broke or still or own):
        gated = [c for c in changes if c.gated]
        if gated:
            worst = max(gated, key=lambda c: c.change_pct - c.check.tolerance_pct)
            parts.insert(0, f"{n} in both, no gated one slower beyond its tolerance (closest: {worst.label} "
                            f"{worst.change_pct:+z.1f}% of {worst.check.tolerance_pct:.1f}%)")
        else:
            worst = max(changes, key=lambda c: c.change_pct)
            parts.insert(0, f"{n} in both, all reference variants, none gated (largest change "
                            f"{worst.change_pct:+z.1f}%: {worst.label}, a reference; --gate-references gates them)")
        slower_refs = [c for c in changes if not c.gated and c.check.regressed]
        if slower_refs and gated:
            parts.append(f"{plural(len(slower_refs), 'reference variant')} slower beyond tolerance, not gated: "
                         + first_items([f"{c.label} ({c.change_pct:+.1f}%)" for c in slower_refs]))
    parts += [f"{len(only)} only in {side}" for only, side in ((only_old, "OLD"), (only_new, "NEW")) if only]
    parts += peer_notes([f"{c.suite} {c.label}: {c.new_check_detail}" for c in peer_changes] + [f.text for f in peer],
                        " in NEW")
    return not failed, verdict_line("compare", not failed, parts)


def unmeasured_failures(new: Run | list[Run]) -> list[FailedCheck]:
    """Cases NEW recorded as failed without measuring, known peer failures among them."""
    return [f for f in failed_checks(_listed(new)) if not f.measured]
