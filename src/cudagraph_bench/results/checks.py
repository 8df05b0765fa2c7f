"""The failed correctness checks a run recorded, of every suite and of unmeasured cases, for ``gate``, ``compare`` and
``baseline`` (no torch). A peer's failure is reported like an xfail; every other one fails the verdict."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cudagraph_bench import variants
from cudagraph_bench.results.record import CheckRecord, is_peer
from cudagraph_bench.results.runfile import Run
from cudagraph_bench.table import first_items, plural


@dataclass(frozen=True)
class FailedCheck:
    """One failed check a run recorded; ``variant`` None for no suite; ``measured`` False for a failure entry."""

    path: Path
    suite: str
    variant: str | None
    label: str
    check: CheckRecord
    measured: bool

    @property
    def peer(self) -> bool:
        """A known failure of a peer's code, not the suite's."""
        return is_peer(self.suite, self.variant)

    @property
    def case(self) -> str:
        """E.g. ``"decode gpt2 bfloat16 L=50 +64 graph"`` (forward cases bare)."""
        return self.label if self.suite == "forward" else f"{self.suite} {self.label}"

    @property
    def text(self) -> str:
        """The failure in words."""
        if self.peer:
            return f"{self.case}: {self.check.reason or self.check.detail}"
        if self.measured:
            return f"{self.case} failed its correctness check ({self.check.detail})"
        check = self.check
        what = check.reason if check.reason and check.method is None and check.max_abs_diff is None else check.detail
        return f"{self.case} recorded as {check.outcome or 'failed'}, not measured ({what})"


def failed_checks(runs: list[Run]) -> list[FailedCheck]:
    """Benchmarks first, then unmeasured cases, in run and file order; a case failing in several runs once."""
    recorded = [(run, m, True) for run in runs for m in run.measurements.values()]
    recorded += [(run, f, False) for run in runs for f in run.failures]
    out: dict[tuple, FailedCheck] = {}
    for run, r, measured in recorded:
        if r.check.status == "fail":
            out.setdefault((r.case.suite, r.case.label, measured),
                           FailedCheck(run.path, r.case.suite, r.case.variant, r.case.label, r.check, measured))
    return list(out.values())


def own_and_peer(fails: list[FailedCheck]) -> tuple[list[FailedCheck], list[FailedCheck]]:
    """``(the suite's failures, known peer failures)`` of ``fails``."""
    return [f for f in fails if not f.peer], [f for f in fails if f.peer]


def peer_notes(texts: list[str], where: str = "") -> list[str]:
    """The note on known peer failures (``texts``: each with its reason) found ``where``, or none."""
    return [f"{plural(len(texts), 'known peer failure')}{where} (not the suite's, like an xfail): "
            + first_items(texts)] if texts else []


def replay_note(runs: list[Run]) -> str | None:
    """The note on graph benchmarks without a replay proof, or None (a failing proof is a failed check)."""
    rows = [(variants.find(m.suite, m.case.variant), m) for run in runs for m in run.measurements.values()]
    missing = sum(row is not None and row.captured and row.suite != variants.LAUNCH and "replay" not in m.extra_info
                  for row, m in rows)
    if not missing:
        return None
    return (f"replay not recorded for {plural(missing, 'graph benchmark')} (run with --replay-proof on a GPU to "
            "prove they replayed): not checked for it")
