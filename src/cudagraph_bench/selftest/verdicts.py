"""The verdicts of ``cudagraph-bench selftest`` (no torch): does the gate fail on every planted fault and pass on every
unmodified rerun? Detection of each ``delay-<pct>`` run, false alarms of the gate (leave one out) and of ``compare``,
every wrong-result fault failing the gate, and ``ab``'s A/A alarms and detection where ``ab-*`` runs exist."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

from cudagraph_bench.errors import UsageError
from cudagraph_bench.results.runfile import Run
from cudagraph_bench.selftest.ab_verdicts import ABResult, evaluate_ab, markdown_section, split_ab_runs, summary_part
from cudagraph_bench.table import Column, render_table
from cudagraph_bench.variants import GATED

_DELAY = re.compile(r"delay-(\d+(?:\.\d+)?)")
#: The self-test runs (file stems) of the faults that give wrong results: each must fail the gate.
WRONG_RESULT_FAULTS = ("stale-input", "wrong-decode", "stale-mask", "stale-position", "eager-layer",
                       "skip-inductor-graphs")
#: The wrong-result faults every self-test plants: a folder without one of them has not tested what it claims.
ALWAYS_PLANTED = ("stale-input", "stale-mask", "eager-layer", "skip-inductor-graphs")
#: What each of them plants, in the page's words.
WRONG_RESULT_WORDS = {"stale-input": "a graph that replays without refreshing its static input",
                      "wrong-decode": "a graphed decode that gives other tokens",
                      "stale-mask": "padded and bucketed graphs that keep the attention mask of their first replay",
                      "stale-position": "a graphed decode that never refreshes its position",
                      "eager-layer": "a graph that runs its output layer eagerly after each replay",
                      "skip-inductor-graphs": "a compile+graph that runs its compiled forward without its graph"}


@dataclass
class CaseDetection:
    """One gated case: baseline spread and tolerance, and per planted delay (percent) whether the gate flagged it, the
    change seen and the delay measured."""

    label: str
    spread_pct: float | None
    tolerance_pct: float
    detected: dict[float, bool] = field(default_factory=dict)
    change_pct: dict[float, float] = field(default_factory=dict)
    planted_pct: dict[float, float | None] = field(default_factory=dict)
    on_target: dict[float, bool | None] = field(default_factory=dict)
    gate_alarms: int = 0
    gate_trials: int = 0
    pair_alarms: int = 0
    pair_trials: int = 0


@dataclass
class SelftestResult:
    """All verdicts; ``wrong``: fault -> (the gate failed on it, failing cases in one line); ``ab`` None: no ab runs."""

    cases: list[CaseDetection]
    wrong: dict[str, tuple[bool, str]]
    delays: list[float]
    n_unmodified: int
    baseline: str | None = None
    ab: ABResult | None = None

    @property
    def false_alarms(self) -> int:
        return sum(c.gate_alarms + c.pair_alarms for c in self.cases)

    def missed(self, pct: float) -> list[str]:
        return [c.label for c in self.cases if not c.detected.get(pct)]

    def off_target(self, pct: float) -> list[str]:
        """Cases whose planted delay missed its target by more than ``PLANT_TOLERANCE_POINTS``."""
        return [c.label for c in self.cases if c.on_target.get(pct) is False]

    @property
    def missing(self) -> list[str]:
        """Needed runs that are absent: a delay of at least 5%, each of :data:`ALWAYS_PLANTED`."""
        delay = [] if any(p >= 5 for p in self.delays) else ["a delay of at least 5% (delay-5)"]
        return delay + [name for name in ALWAYS_PLANTED if name not in self.wrong]

    @property
    def passed_targets(self) -> bool:
        """No run missing, no false alarm, the smallest delay >= 5% detected in every gated case, every wrong result
        failing the gate (``ab``'s detection is reported only)."""
        five = min((p for p in self.delays if p >= 5), default=None)
        return (not self.missing and self.false_alarms == 0 and all(ok for ok, _ in self.wrong.values())
                and five is not None and not self.missed(five) and (self.ab is None or self.ab.aa_alarms == 0))


def split_runs(runs: dict[str, Run]) -> tuple[list[Run], dict[float, Run], dict[str, Run]]:
    """``(unmodified runs, {delay pct: run}, {wrong-result fault: run})`` by file stem."""
    unmodified = [r for n, r in sorted(runs.items()) if n.startswith("unmodified-")]
    delays = {float(m.group(1)): r for n, r in runs.items() if (m := _DELAY.fullmatch(n))}
    wrong = {n: r for n, r in runs.items() if n in WRONG_RESULT_FAULTS}
    return unmodified, dict(sorted(delays.items())), wrong


def _baseline(runs: list[Run], min_runs: int):
    from cudagraph_bench.results.baseline import baseline_of, build_baseline

    return baseline_of(build_baseline(runs, min_runs=min_runs), Path("selftest-baseline.json"))


def evaluate_selftest(runs: dict[str, Run], baseline=None) -> SelftestResult:
    """The module's verdicts; ``baseline``: gate against it instead of one built from the unmodified runs. UsageError
    for fewer than 5 unmodified runs without ``baseline``, fewer than 2 with one."""
    from cudagraph_bench.results import gate
    from cudagraph_bench.results.compare import compare_runs

    unmodified, delays, wrong = split_runs(runs)
    given = baseline
    if given is None and len(unmodified) < 5:
        raise UsageError(f"the self-test needs at least 5 unmodified runs (the baseline), got {len(unmodified)}")
    if given is not None and len(unmodified) < 2:
        raise UsageError(f"the self-test needs at least 2 unmodified runs (their false alarms), got {len(unmodified)}")
    baseline = given or _baseline(unmodified, 5)
    cases: dict[str, CaseDetection] = {}
    for verdict in gate.evaluate(unmodified[0], baseline):   # the tolerance of one new run, as a CI job gates
        if verdict.variant == GATED and verdict.gated and verdict.regression is not None:
            reg = verdict.regression
            cases[verdict.label] = CaseDetection(verdict.label, reg.spread_pct, reg.tolerance_pct)
    for pct, run in delays.items():
        planted = {(m.case.model, m.case.dtype, m.case.seq_len): m.extra_info
                   for m in run.measurements.values() if m.suite == "forward" and m.case.variant == GATED}
        for verdict in gate.evaluate(run, baseline):
            c = cases.get(verdict.label)
            if c is None or verdict.variant != GATED or verdict.regression is None:
                continue
            c.detected[pct] = verdict.regression.regressed
            c.change_pct[pct] = verdict.regression.change_pct
            info = planted.get((verdict.model, verdict.dtype, verdict.seq_len), {})
            c.planted_pct[pct] = info.get("planted_measured_pct")
            c.on_target[pct] = info.get("planted_on_target")
    for i, held in enumerate(unmodified):
        others = unmodified[:i] + unmodified[i + 1:]
        for verdict in gate.evaluate(held, given or _baseline(others, len(others))):
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
    return SelftestResult(list(cases.values()), verdicts, list(delays), len(unmodified),
                          baseline=str(given.path) if given is not None else None, ab=evaluate_ab(runs, baseline))


def table(result: SelftestResult, fmt: str) -> str:
    """Per gated case: baseline spread and tolerance (percent), per planted delay the delay measured and the gate's
    verdict with the change seen, and the gate's and compare's false alarms."""
    cols = [Column("label", "case"), Column("spread_pct", "spread %", ".2f"),
            Column("tolerance_pct", "tolerance %", ".2f")]
    for p in result.delays:
        cols += [Column(f"planted_{p:g}", f"+{p:g}% planted (measured)"), Column(f"seen_{p:g}", f"+{p:g}% gate")]
    cols += [Column("gate_fa", "gate false alarms"), Column("pair_fa", "pair false alarms")]
    out = []
    for c in result.cases:
        row = {"label": c.label, "spread_pct": c.spread_pct, "tolerance_pct": c.tolerance_pct,
               "gate_fa": f"{c.gate_alarms}/{c.gate_trials}", "pair_fa": f"{c.pair_alarms}/{c.pair_trials}"}
        for p in result.delays:
            measured = c.planted_pct.get(p)
            row[f"planted_{p:g}"] = (f"{measured:+.1f}%" + (" (off target)" if c.on_target.get(p) is False else "")
                                     if measured is not None else "-")
            seen = c.change_pct.get(p)
            row[f"seen_{p:g}"] = ("-" if seen is None else
                                  f"{'FAIL' if c.detected.get(p) else 'pass'} ({seen:+.1f}%)")
        out.append(row)
    return render_table(cols, out, fmt=fmt)


def summary(result: SelftestResult) -> str:
    """One line: false alarms, detection per delay, wrong-result faults, and ``ab``'s when it ran."""
    n = len(result.cases)
    trials = sum(c.gate_trials + c.pair_trials for c in result.cases)
    parts = [f"{n} gated cases, {result.n_unmodified} unmodified runs: {result.false_alarms} false alarms in "
             f"{trials} trials"]
    parts += [f"+{p:g}% detected in {n - len(result.missed(p))}/{n}"
              + (f" ({len(result.off_target(p))} planted off target)" if result.off_target(p) else "")
              for p in result.delays]
    parts += [f"{name} {'fails the gate' if ok else 'PASSES the gate'}" for name, (ok, _) in result.wrong.items()]
    parts += [summary_part(result.ab)] if result.ab is not None else []
    parts += [f"missing runs: {', '.join(result.missing)}"] if result.missing else []
    return ("selftest PASS: " if result.passed_targets else "selftest FAIL: ") + "; ".join(parts)


def render_markdown(runs: dict[str, Run], result: SelftestResult, line: str, plain: list[Run] = ()) -> str:
    """The self-test page; ``plain``: the plain loop's runs, for the noise table."""
    env = next(iter(runs.values())).environment
    hosts = {r.environment.host for r in runs.values()}
    where = (f"all on one {env.gpu_name or env.gpu_slug}" if len(hosts) == 1 else
             f"on {len(hosts)} {env.gpu_name or env.gpu_slug} machines told apart by their GPU's UUID")
    wrong = "\n".join(f"- `{name}`: {'the gate fails' if ok else 'the gate PASSES'}: {why}"
                      for name, (ok, why) in result.wrong.items()) or "- none run"
    rule = ("each delay run is gated against it with the gate's rule on the device-side graph figure (CUDA events over "
            "back-to-back replays queued behind a held stream);")
    sources = "\n".join(f"- `{r.path.name}` ({r.environment.run_datetime}, GPU `{r.environment.host or 'not recorded'}`)"
                        for _, r in sorted(runs.items()))
    return "\n".join([
        "# The gate's self-test: planted faults and unmodified reruns", "",
        f"Generated by `cudagraph-bench selftest` from the runs below, {where} (torch {env.torch}, transformers "
        f"{env.transformers}); never edited by "
        "hand. Faults are planted into the real pipeline (`--plant-fault`), not into JSON: the gated graph "
        "captured again with a GPU delay kernel of a share of that case's own device time"
        + "".join(f", {WRONG_RESULT_WORDS[n]}" for n in WRONG_RESULT_FAULTS if n in result.wrong) + ".", "",
        *([f"- baseline: `{result.baseline}`, built on other machines than these runs'; {rule}",
           "- gate false alarms: each unmodified run gated against that baseline;"] if result.baseline else
          [f"- baseline: the {result.n_unmodified} unmodified runs (`cudagraph-bench baseline`); {rule}",
           f"- gate false alarms: each unmodified run gated against a baseline of the other "
           f"{result.n_unmodified - 1};"]),
        f"- pair false alarms: `compare` of every ordered pair of unmodified runs "
        f"({result.n_unmodified * (result.n_unmodified - 1)} pairs) with the baseline's noise model;",
        "- planted (measured): the delay the capture added, measured right after it, in the same process; a capture "
        "whose delay lands more than 1 point from its target is captured again with the miss corrected (at most 3 "
        "captures), and one still off target is marked so.", "",
        table(result, "markdown"), "",
        *_figure_note(runs),
        "Wrong results:", "", wrong, "", f"**{line}**", "", *_ab_section(result), *_noise_section(runs, plain),
        "Source runs:", "", sources, ""])


def _ab_section(result: SelftestResult) -> list[str]:
    if result.ab is None:
        return []
    noise = (f"`{result.baseline}`" if result.baseline else
             f"the self-test's baseline of its {result.n_unmodified} unmodified runs")
    return markdown_section(result.ab, noise)


def _figure_note(runs: dict[str, Run]) -> list[str]:
    """A paragraph when the unmodified runs' device figure was taken without the held stream."""
    from cudagraph_bench.results.runfile import forward_cases

    unmodified, _, _ = split_runs(runs)
    graphs = [m for run in unmodified for case, m in forward_cases(run).items()
              if case.variant == GATED and m.device_ms is not None]
    if not graphs or all("device_hold_ms" in m.extra_info for m in graphs):
        return []
    return ["These runs predate the held-stream device figure: each of their blocks of replays began with the host's "
            "latency to its first launch, which moved the figure between processes by several percent for calls of "
            "1-3 ms ([gate-noise.md](gate-noise.md) shows the held figure's spread). The gate's current rule, whose "
            "floor and tolerances are set for the held figure, judges them here; a self-test of the held figure "
            "replaces them.", ""]


def _noise_section(runs: dict[str, Run], plain: list[Run]) -> list[str]:
    """The spread between processes of the gated device figure (unmodified beside plain-loop runs, else 5+ unmodified ab
    runs, else a pointer)."""
    from cudagraph_bench.results import process_spread

    unmodified, _, _ = split_runs(runs)
    base, head, _ = split_ab_runs(runs)
    if plain:
        harness = unmodified
        what = (f"over the {len(unmodified)} unmodified runs (separate processes, one job, per machine); the plain "
                "capture/replay loop (`scripts/device/plain_loop`: torch and pytest-benchmark only, its own blocks of "
                f"20 replays) over {len(plain)} processes of the same job.")
    elif len(base) + len(head) >= 5:
        harness = base + head
        what = (f"over the {len(harness)} unmodified processes of the pull-request mode above (ab-base and ab-head, "
                "one job, per machine). No plain loop ran in that job, so each case is held to the target's floor, "
                f"{process_spread.MAX_SPAN_PCT:g}%. The spread beside a plain capture/replay loop's, within and across "
                "machines: [gate-noise.md](gate-noise.md).")
    else:
        return ["The spread between processes, within and across machines, beside a plain capture/replay loop's: "
                "[gate-noise.md](gate-noise.md).", ""]
    rows = process_spread.spread_rows(harness, list(plain))
    if not rows:
        return []
    cols, shown = process_spread.spread_table(rows, process_spread.hosts_of(harness))
    if not plain:
        cols = [c for c in cols if c.key in ("label", "within", "ok")]
    return ["## Spread between processes", "",
            f"Span = (max - min) / median of the run medians {what} device: CUDA events around blocks of replays "
            "queued behind a held stream (the figure the gate guards).", "",
            render_table(cols, shown, fmt="markdown"), "", f"**{process_spread.verdict(rows)}.**", ""]
