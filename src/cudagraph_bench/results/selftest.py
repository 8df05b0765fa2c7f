"""The verdicts of ``cudagraph-bench selftest`` (no torch): does the gate fail on every planted fault and pass on
every unmodified rerun? The runs are :mod:`cudagraph_bench.runner.selftest`'s.

- the baseline is built from the unmodified runs (:func:`cudagraph_bench.results.baseline.build_baseline`), as
  ``cudagraph-bench baseline`` builds it;
- **detection**: each ``delay-<pct>`` run is gated against that baseline with the gate's own rule
  (:func:`cudagraph_bench.results.gate.evaluate`): per gated case, whether the regression check flags it, the
  change the gate saw and the delay measured when it was planted;
- **false alarms of the gate**: each unmodified run gated against a baseline of the other unmodified runs (leave
  one out);
- **false alarms over every pair**: ``compare`` of every ordered pair of unmodified runs, with the baseline's noise
  model (:func:`cudagraph_bench.results.compare.compare_runs`): a regressed gated benchmark is a false alarm;
- **wrong results**: the ``stale-input`` and ``wrong-decode`` runs must fail the gate on their recorded checks
  (:func:`cudagraph_bench.results.checks.failed_checks`, every variant's and suite's check, as the gate reads them).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

from cudagraph_bench.errors import UsageError
from cudagraph_bench.results.baseline import DEFAULT_MAX_GATED_LEN
from cudagraph_bench.results.runfile import Run
from cudagraph_bench.table import Column, render_table
from cudagraph_bench.variants import GATED

_DELAY = re.compile(r"delay-(\d+(?:\.\d+)?)")


@dataclass
class CaseDetection:
    """One gated case: its baseline spread and tolerance, and per planted delay (percent) whether the gate flagged
    it, the change it saw (percent) and the delay measured when planted (percent)."""

    label: str
    spread_pct: float | None
    tolerance_pct: float
    detected: dict[float, bool] = field(default_factory=dict)
    change_pct: dict[float, float] = field(default_factory=dict)
    planted_pct: dict[float, float | None] = field(default_factory=dict)
    gate_alarms: int = 0
    gate_trials: int = 0
    pair_alarms: int = 0
    pair_trials: int = 0


@dataclass
class SelftestResult:
    """All verdicts: ``cases`` (:class:`CaseDetection` per gated case), ``wrong`` (fault name -> (the gate failed
    on it, the failing cases and checks in one line)), the delays planted and the unmodified run count."""

    cases: list[CaseDetection]
    wrong: dict[str, tuple[bool, str]]
    delays: list[float]
    n_unmodified: int

    @property
    def false_alarms(self) -> int:
        return sum(c.gate_alarms + c.pair_alarms for c in self.cases)

    def missed(self, pct: float) -> list[str]:
        return [c.label for c in self.cases if not c.detected.get(pct)]

    @property
    def passed_targets(self) -> bool:
        """No false alarm, +5% (or the smallest delay at least 5%) detected in every gated case, every wrong
        result failing the gate."""
        five = min((p for p in self.delays if p >= 5), default=None)
        return (self.false_alarms == 0 and all(ok for ok, _ in self.wrong.values())
                and (five is None or not self.missed(five)))


def split_runs(runs: dict[str, Run]) -> tuple[list[Run], dict[float, Run], dict[str, Run]]:
    """``(unmodified runs, {delay pct: run}, {wrong-result fault: run})`` by the runs' names (file stems)."""
    unmodified = [r for n, r in sorted(runs.items()) if n.startswith("unmodified-")]
    delays = {float(m.group(1)): r for n, r in runs.items() if (m := _DELAY.fullmatch(n))}
    wrong = {n: r for n, r in runs.items() if n in ("stale-input", "wrong-decode")}
    return unmodified, dict(sorted(delays.items())), wrong


def _baseline(runs: list[Run], min_runs: int):
    from cudagraph_bench.results.baseline import baseline_of, build_baseline

    return baseline_of(build_baseline(runs, min_runs=min_runs), Path("selftest-baseline.json"))


def evaluate_selftest(runs: dict[str, Run]) -> SelftestResult:
    """The verdicts of the module docstring. Raises UsageError for fewer than 5 unmodified runs."""
    from cudagraph_bench.results import gate
    from cudagraph_bench.results.compare import compare_runs

    unmodified, delays, wrong = split_runs(runs)
    if len(unmodified) < 5:
        raise UsageError(f"the self-test needs at least 5 unmodified runs (the baseline), got {len(unmodified)}")
    baseline = _baseline(unmodified, 5)
    cases: dict[str, CaseDetection] = {}
    for verdict in gate.evaluate(unmodified[0], baseline):   # the tolerance of one new run, as a CI job gates
        if verdict.variant == GATED and verdict.gated and verdict.regression is not None:
            reg = verdict.regression
            cases[verdict.label] = CaseDetection(verdict.label, reg.spread_pct, reg.tolerance_pct)
    for pct, run in delays.items():
        planted = {(m.case.model, m.case.dtype, m.case.seq_len): m.extra_info.get("planted_measured_pct")
                   for m in run.measurements.values() if m.suite == "forward"}
        for verdict in gate.evaluate(run, baseline):
            c = cases.get(verdict.label)
            if c is None or verdict.variant != GATED or verdict.regression is None:
                continue
            c.detected[pct] = verdict.regression.regressed
            c.change_pct[pct] = verdict.regression.change_pct
            c.planted_pct[pct] = planted.get((verdict.model, verdict.dtype, verdict.seq_len))
    for i, held in enumerate(unmodified):
        others = unmodified[:i] + unmodified[i + 1:]
        for verdict in gate.evaluate(held, _baseline(others, len(others))):
            c = cases.get(verdict.label)
            if c is not None and verdict.variant == GATED and verdict.regression is not None:
                c.gate_trials += 1
                c.gate_alarms += verdict.regression.regressed
    for old, new in itertools.permutations(unmodified, 2):
        changes, _, _ = compare_runs(old, new, baseline=baseline)
        for ch in changes:
            c = cases.get(ch.label.rsplit(" ", 1)[0]) if ch.label.endswith(f" {GATED}") else None
            if c is not None:
                c.pair_trials += 1
                c.pair_alarms += ch.check.regressed
    from cudagraph_bench.results.checks import failed_checks, own_and_peer

    verdicts = {}
    for name, run in wrong.items():
        own, _ = own_and_peer(failed_checks([run]))     # what the gate fails on, whatever the suite
        verdicts[name] = (bool(own), "; ".join(f.text for f in own[:3]) or "the gate passed")
    return SelftestResult(list(cases.values()), verdicts, list(delays), len(unmodified))


def span_pct(values) -> float | None:
    """``100 * (max - min) / median`` of ``values`` (ms), None for fewer than 2."""
    import statistics

    values = [v for v in values if v is not None]
    if len(values) < 2:
        return None
    return 100.0 * (max(values) - min(values)) / statistics.median(values)


#: The harness's figures whose spread between processes :func:`noise_floor_rows` shows: the synchronized wall
#: median, the CUDA-event median of the same per-call rounds, and the device-side figure (events around blocks of
#: back-to-back calls, the gated one).
FIGURES = (("wall", lambda m: m.summary.median_ms), ("event", lambda m: m.extra_info.get("event_median_ms")),
           ("device", lambda m: m.device_ms))
#: Targets of the gated figure's spread between processes: at most this many percent, and at most this many times
#: the plain loop's.
MAX_SPAN_PCT, MAX_SPAN_VS_PLAIN = 3.0, 1.5


def noise_floor_rows(unmodified: list[Run], plain: list[Run]) -> list[dict]:
    """Per gated case, the spread between processes (:func:`span_pct` of the run medians) of each harness figure
    (:data:`FIGURES`) over the ``unmodified`` runs, and of the plain capture/replay loop's synchronized and
    device-side medians over its ``plain`` runs (``scripts/device/plain_loop``); ``ok`` says whether the gated
    figure meets :data:`MAX_SPAN_PCT` and :data:`MAX_SPAN_VS_PLAIN`."""
    from cudagraph_bench.results.runfile import forward_cases

    def by_case(runs):
        out: dict = {}
        for run in runs:
            for case, m in forward_cases(run).items():
                if case.variant == GATED:
                    out.setdefault(case.without_variant(), []).append(m)
        return out

    harness, loop = by_case(unmodified), by_case(plain)
    rows = []
    for key in sorted(harness):
        if key[2] > DEFAULT_MAX_GATED_LEN:
            continue
        row = {"label": "{} {} L={}".format(*key), **{f"{name}_span": span_pct([get(m) for m in harness[key]])
                                                        for name, get in FIGURES}}
        ms = loop.get(key, [])
        row.update(plain_wall_span=span_pct([m.summary.median_ms for m in ms]),
                   plain_device_span=span_pct([m.device_ms for m in ms]))
        dev, ref = row["device_span"], row["plain_device_span"]
        row["ok"] = (dev is not None and dev <= MAX_SPAN_PCT
                     and (ref is None or dev <= MAX_SPAN_VS_PLAIN * max(ref, 1e-9)))
        rows.append(row)
    return rows


NOISE_COLUMNS = [Column("label", "case"), Column("wall_span", "harness wall %", ".2f"),
                 Column("event_span", "harness events per call %", ".2f"),
                 Column("device_span", "harness device (gated) %", ".2f"),
                 Column("plain_wall_span", "plain loop wall %", ".2f"),
                 Column("plain_device_span", "plain loop device %", ".2f"), Column("ok", "within target")]


def columns(delays: list[float]) -> list[Column]:
    cols = [Column("label", "case"), Column("spread_pct", "spread %", ".2f"),
            Column("tolerance_pct", "tolerance %", ".2f")]
    for p in delays:
        cols += [Column(f"planted_{p:g}", f"+{p:g}% planted (measured)"), Column(f"seen_{p:g}", f"+{p:g}% gate")]
    return cols + [Column("gate_fa", "gate false alarms"), Column("pair_fa", "pair false alarms")]


def rows(result: SelftestResult) -> list[dict]:
    out = []
    for c in result.cases:
        row = {"label": c.label, "spread_pct": c.spread_pct, "tolerance_pct": c.tolerance_pct,
               "gate_fa": f"{c.gate_alarms}/{c.gate_trials}", "pair_fa": f"{c.pair_alarms}/{c.pair_trials}"}
        for p in result.delays:
            measured = c.planted_pct.get(p)
            row[f"planted_{p:g}"] = f"{measured:+.1f}%" if measured is not None else "-"
            seen = c.change_pct.get(p)
            row[f"seen_{p:g}"] = ("-" if seen is None else
                                  f"{'FAIL' if c.detected.get(p) else 'pass'} ({seen:+.1f}%)")
        out.append(row)
    return out


def summary(result: SelftestResult) -> str:
    """One line: false alarms, detection per delay, wrong-result faults."""
    n = len(result.cases)
    trials = sum(c.gate_trials + c.pair_trials for c in result.cases)
    parts = [f"{n} gated cases, {result.n_unmodified} unmodified runs: {result.false_alarms} false alarms in "
             f"{trials} trials"]
    parts += [f"+{p:g}% detected in {n - len(result.missed(p))}/{n}" for p in result.delays]
    parts += [f"{name} {'fails the gate' if ok else 'PASSES the gate'}" for name, (ok, _) in result.wrong.items()]
    return ("selftest PASS: " if result.passed_targets else "selftest FAIL: ") + "; ".join(parts)


def render_markdown(runs: dict[str, Run], result: SelftestResult, line: str, plain: list[Run] = ()) -> str:
    """The self-test page (``docs/gate-selftest.md``); ``plain``: the plain loop's runs, for the noise table."""
    env = next(iter(runs.values())).environment
    wrong = "\n".join(f"- `{name}`: {'the gate fails' if ok else 'the gate PASSES'}: {why}"
                      for name, (ok, why) in result.wrong.items()) or "- none run"
    sources = "\n".join(f"- `{r.path.name}` ({r.environment.run_datetime}, host `{r.environment.node}`)"
                        for _, r in sorted(runs.items()))
    return "\n".join([
        "# The gate's self-test: planted faults and unmodified reruns", "",
        f"Generated by `cudagraph-bench selftest` from the runs below, all on one "
        f"{env.gpu_name or env.gpu_slug} (torch {env.torch}, transformers {env.transformers}); never edited by "
        "hand. Faults are planted into the real pipeline (`--plant-fault`), not into JSON: the gated graph "
        "captured again with a GPU delay kernel of a share of that case's own device time, a graph that replays "
        "without refreshing its static input, a graphed decode that gives other tokens.", "",
        f"- baseline: the {result.n_unmodified} unmodified runs (`cudagraph-bench baseline`); each delay run is "
        "gated against it with the gate's rule on the device-side graph figure (CUDA events over back-to-back "
        "replays);",
        f"- gate false alarms: each unmodified run gated against a baseline of the other {result.n_unmodified - 1};",
        f"- pair false alarms: `compare` of every ordered pair of unmodified runs "
        f"({result.n_unmodified * (result.n_unmodified - 1)} pairs) with the baseline's noise model;",
        "- planted (measured): the delay the capture added, measured right after it, in the same process.", "",
        render_table(columns(result.delays), rows(result), fmt="markdown"), "",
        "Wrong results:", "", wrong, "", f"**{line}**", "", *_noise_section(runs, plain), "Source runs:", "", sources,
        ""])


def _noise_section(runs: dict[str, Run], plain: list[Run]) -> list[str]:
    """The spread between processes of the harness's figures and of the plain loop (:func:`noise_floor_rows`)."""
    unmodified, _, _ = split_runs(runs)
    rows = noise_floor_rows(unmodified, list(plain))
    if not rows:
        return []
    bad = [r["label"] for r in rows if not r["ok"]]
    verdict = (f"every gated device-side median spans at most {MAX_SPAN_PCT:g}% and at most {MAX_SPAN_VS_PLAIN:g}x "
               "the plain loop's" if not bad else f"{len(bad)} case(s) outside the target: {', '.join(bad)}")
    return ["## Spread between processes", "",
            f"Span = (max - min) / median of the run medians over the {len(unmodified)} unmodified runs (separate "
            f"processes, one job); the plain capture/replay loop (`scripts/device/plain_loop`: torch and "
            f"pytest-benchmark only) over {len(plain)} processes of the same job. wall: synchronized replays; "
            "events per call: CUDA events around each synchronized replay; device: CUDA events around blocks of "
            "back-to-back replays (the figure the gate guards).", "",
            render_table(NOISE_COLUMNS, [{**r, "ok": "yes" if r["ok"] else "NO"} for r in rows], fmt="markdown"), "",
            f"**{verdict}.**", ""]
