"""``cudagraph-bench compare OLD NEW``: per-benchmark change of the median between two runs; exit 1 on a
regression beyond ``--max-regression`` percent (no torch).

OLD and NEW are pytest-benchmark JSON paths or saved-run ids under ``.benchmarks/`` (``0001`` or the
file stem, as ``--benchmark-autosave`` names them). Benchmarks are matched by their cudagraph-bench key
(forward: model, dtype, seq_len, variant; decode: + new_tokens; launch: n_launches, variant), other
benchmarks by full test name. The change is ``new median / old median - 1`` with a 95% percentile-bootstrap
interval (:func:`cudagraph_bench.stats.relative_change_ci`). pytest-benchmark's own ``compare`` cannot
fail a build (ionelmc/pytest-benchmark#273); this command can.

Only what the suite guards can fail it: the reference variants (:data:`REFERENCE_VARIANTS`: eager,
HF ``generate``, the static-cache eager loop, the launch loop) are host-bound and move between machines
and runs, so a slower reference is reported (``slower (reference)``) but fails only with
``--gate-references``. A change within ``--max-regression`` is ``ok`` (``within tolerance`` when its
interval lies above zero), one whose interval lies below zero ``faster``.

A benchmark in only one run cannot be compared. The summary counts them, and names every gated benchmark
of OLD (not a reference variant) that NEW lacks, e.g. a lost graph benchmark; that does not change the exit
code (only a regression fails), but it is never silent.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from cudagraph_bench import stats
from cudagraph_bench.options import parse_path, parse_regression_pct
from cudagraph_bench.errors import UsageError
from cudagraph_bench.runfile import (DEFAULT_STORAGE, Measurement, Run, load_run, measurements,
                                     refuse_overwriting_inputs, write_text_atomic)
from cudagraph_bench.table import Column, render_table

DEFAULT_MAX_REGRESSION_PCT = 10.0
#: Variants that are the baselines of comparison rather than what the suite guards.
REFERENCE_VARIANTS = frozenset({"eager", "generate", "static-eager", "loop"})


@dataclass(frozen=True)
class Change:
    """Change of one benchmark's median from OLD to NEW (ms; percent)."""

    suite: str
    label: str
    old_median_ms: float
    new_median_ms: float
    change_pct: float
    ci_pct: tuple[float, float] | None
    max_regression_pct: float
    gated: bool = True

    @property
    def slower_beyond_threshold(self) -> bool:
        """Slower by more than the allowed percent and, when both runs kept per-round data, with the
        bootstrap 95% interval of the change above zero (noise alone is not a regression)."""
        if not self.change_pct > self.max_regression_pct:
            return False
        return self.ci_pct is None or self.ci_pct[0] > 0

    @property
    def regressed(self) -> bool:
        """:attr:`slower_beyond_threshold` for a gated benchmark (not a reference variant): fails the build."""
        return self.gated and self.slower_beyond_threshold

    @property
    def marginal(self) -> bool:
        """Median beyond the threshold, but the interval of the change includes zero."""
        return self.change_pct > self.max_regression_pct and not self.slower_beyond_threshold

    @property
    def status(self) -> str:
        if self.regressed:
            return "REGRESSION"
        if self.slower_beyond_threshold:
            return "slower (reference)"
        if self.marginal:
            return "marginal"
        if self.ci_pct and self.ci_pct[1] < 0:
            return "faster"
        if self.ci_pct and self.ci_pct[0] > 0:
            return "within tolerance"  # slower, but by no more than max_regression_pct
        return "ok"


def is_gated(m: Measurement, gate_references: bool = False) -> bool:
    """Whether a change of ``m`` can fail the comparison: not a reference variant
    (:data:`REFERENCE_VARIANTS`), or ``gate_references``."""
    return gate_references or m.extra_info.get("variant") not in REFERENCE_VARIANTS


def change(old: Measurement, new: Measurement, max_regression_pct: float, gate_references: bool = False) -> Change:
    """:class:`Change` of ``new`` vs ``old``; the interval is None when either kept no per-round data
    or fewer than :data:`~cudagraph_bench.stats.MIN_BOOTSTRAP_ROUNDS` rounds.
    A reference variant (:data:`REFERENCE_VARIANTS`) is not gated unless ``gate_references``."""
    ci = None
    if old.can_bootstrap and new.can_bootstrap:
        low, high = stats.relative_change_ci(old.samples_ms, new.samples_ms)
        ci = (100.0 * low, 100.0 * high)
    return Change(suite=new.suite, label=new.label, old_median_ms=old.summary.median_ms,
                  new_median_ms=new.summary.median_ms,
                  change_pct=100.0 * stats.relative_change(old.summary.median_ms, new.summary.median_ms),
                  ci_pct=ci, max_regression_pct=max_regression_pct,
                  gated=is_gated(new, gate_references))


def _sorted_keys(keys: set) -> list:
    try:
        return sorted(keys)
    except TypeError:
        return sorted(keys, key=repr)


def compare_runs(old: Run, new: Run, max_regression_pct: float = DEFAULT_MAX_REGRESSION_PCT,
                 gate_references: bool = False) -> tuple[list[Change], list[str], list[str]]:
    """``(changes of benchmarks in both runs, labels only in OLD, labels only in NEW)``.

    Raises UsageError when the runs share no benchmark.
    """
    a, b = measurements(old), measurements(new)
    common = _sorted_keys(set(a) & set(b))
    if not common:
        raise UsageError(f"{old.path} and {new.path} share no benchmark: compare runs of the same suite "
                         "and cases")
    changes = [change(a[k], b[k], max_regression_pct, gate_references) for k in common]
    only_old = [a[k].label for k in _sorted_keys(set(a) - set(b))]
    only_new = [b[k].label for k in _sorted_keys(set(b) - set(a))]
    return changes, only_old, only_new


def gated_missing_in_new(old: Run, new: Run, gate_references: bool = False) -> list[str]:
    """Labels of OLD's gated benchmarks (:func:`is_gated`) that NEW lacks: they were guarded and are now
    not compared at all (e.g. NEW lost its graph benchmark)."""
    a, b = measurements(old), measurements(new)
    return [a[k].label for k in _sorted_keys(set(a) - set(b)) if is_gated(a[k], gate_references)]


COLUMNS = [
    Column("suite", "suite"), Column("label", "benchmark"),
    Column("old_median_ms", "old ms", ".3f"), Column("new_median_ms", "new ms", ".3f"),
    Column("change_pct", "change %", "+z.1f"), Column("ci", "95% CI", align="right"), Column("status", "status"),
]


def rows(changes: list[Change]) -> list[dict]:
    """Table rows for :data:`COLUMNS`."""
    return [{"suite": c.suite, "label": c.label, "old_median_ms": c.old_median_ms,
             "new_median_ms": c.new_median_ms, "change_pct": c.change_pct,
             "ci": f"[{c.ci_pct[0]:+z.1f}, {c.ci_pct[1]:+z.1f}]" if c.ci_pct else None, "status": c.status}
            for c in changes]


def summary(changes: list[Change], only_old: list[str], only_new: list[str], max_regression_pct: float,
            missing_gated: list[str] = ()) -> tuple[bool, str]:
    """``(passed, one-line summary)`` naming every regressed benchmark. On a pass, the largest change is
    that of a gated benchmark, and reference variants slower beyond the threshold are named apart.
    ``missing_gated`` (:func:`gated_missing_in_new`) are named, each one; they do not fail the comparison."""
    bad = [c for c in changes if c.regressed]
    n = f"{len(changes)} benchmark{'' if len(changes) == 1 else 's'}"
    if bad:
        text = (f"compare FAIL: {len(bad)} of {n} slower by more than "
                f"{max_regression_pct:g}%: " + ", ".join(f"{c.label} ({c.change_pct:+.1f}%)" for c in bad))
    else:
        gated = [c for c in changes if c.gated]
        if gated:
            worst = max(gated, key=lambda c: c.change_pct)
            text = (f"compare PASS: {n} in both runs, no gated one slower by more than {max_regression_pct:g}% "
                    f"(largest gated change {worst.change_pct:+z.1f}%: {worst.label})")
        else:
            worst = max(changes, key=lambda c: c.change_pct)
            text = (f"compare PASS: {n} in both runs, all reference variants, none gated "
                    f"(largest change {worst.change_pct:+z.1f}%: {worst.label}, a reference; "
                    "--gate-references gates them)")
        slower_refs = [c for c in changes if not c.gated and c.slower_beyond_threshold]
        if slower_refs and gated:
            text += (f"; {len(slower_refs)} reference variant{'' if len(slower_refs) == 1 else 's'} slower by more "
                     f"than {max_regression_pct:g}%, not gated: "
                     + ", ".join(f"{c.label} ({c.change_pct:+.1f}%)" for c in slower_refs[:3])
                     + (", ..." if len(slower_refs) > 3 else ""))
    if missing_gated:
        text += (f"; {len(missing_gated)} gated benchmark{'' if len(missing_gated) == 1 else 's'} of OLD "
                 f"missing in NEW, not compared: " + ", ".join(missing_gated))
    if only_old:
        text += f"; {len(only_old)} only in OLD"
    if only_new:
        text += f"; {len(only_new)} only in NEW"
    return not bad, text


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``cudagraph-bench compare OLD NEW``."""
    parser.add_argument("old", metavar="OLD", help="reference run: JSON path or saved-run id (e.g. 0001)")
    parser.add_argument("new", metavar="NEW", help="run to check: JSON path or saved-run id")
    parser.add_argument("--max-regression", type=parse_regression_pct, default=DEFAULT_MAX_REGRESSION_PCT, metavar="PCT",
                        help="fail when a median is slower by more than PCT percent (default: %(default)s)")
    parser.add_argument("--storage", default=DEFAULT_STORAGE, metavar="DIR",
                        help="where saved-run ids are looked up (default: %(default)s)")
    parser.add_argument("--markdown", type=parse_path, metavar="FILE", help="also write a markdown report")
    parser.add_argument("--gate-references", action="store_true",
                        help="also fail when a reference variant (eager, generate, static-eager, loop) is slower; "
                             "by default they are reported only")


def main(args: argparse.Namespace) -> int:
    """Run ``cudagraph-bench compare OLD NEW``. Returns the exit code (0 pass, 1 fail); bad input raises
    :class:`~cudagraph_bench.errors.UsageError` (exit 2) before anything is written."""
    old, new = load_run(args.old, args.storage), load_run(args.new, args.storage)
    refuse_overwriting_inputs(args.markdown, "--markdown", [old.path, new.path])
    changes, only_old, only_new = compare_runs(old, new, args.max_regression, args.gate_references)
    passed, line = summary(changes, only_old, only_new, args.max_regression,
                           gated_missing_in_new(old, new, args.gate_references))
    head = f"OLD {old.path} ({old.gpu_slug or 'no GPU'})  NEW {new.path} ({new.gpu_slug or 'no GPU'})"
    if old.gpu_slug != new.gpu_slug:
        head += "  note: the runs are from different GPUs"
    if old.sha256 == new.sha256:
        head += f"  note: OLD and NEW are the same run (sha256 {old.sha256[:12]}), so nothing can change"
    if args.markdown:
        text = "\n".join([f"## cudagraph-bench compare: {'PASS' if passed else 'FAIL'}", "", head, "",
                          render_table(COLUMNS, rows(changes), fmt="markdown"), "", f"**{line}**", ""])
        write_text_atomic(args.markdown, text)
    print(head)
    print(render_table(COLUMNS, rows(changes)))
    print(line)
    return 0 if passed else 1
