"""The verdicts of ``cudagraph-bench selftest`` (no torch): does the gate fail on every planted fault (delays, wrong
results, ``ab``'s planted delays) and pass on every unmodified rerun (gate, ``compare``, ``ab``'s A/A)?"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cudagraph_bench.errors import UsageError
from cudagraph_bench.results.compare import Change, compare_runs
from cudagraph_bench.results.noise import RegressionCheck
from cudagraph_bench.results.runfile import Run
from cudagraph_bench.table import Column, render_table
from cudagraph_bench.variants import FORWARD, GATED

_DELAY = re.compile(r"delay-(\d+(?:\.\d+)?)")
#: ``ab-base-<i>``, ``ab-head-<i>``, ``ab-delay-<pct>-<i>``: group and delay percent (None: unmodified).
_AB = re.compile(r"ab-(base|head|delay-(\d+(?:\.\d+)?))-\d+")
#: The wrong-result faults every self-test plants: a folder without one of them has not tested what it claims.
ALWAYS_PLANTED = ("stale-input", "stale-mask", "eager-layer", "skip-inductor-graphs")
#: The faults that give wrong results -> what each plants, in the page's words.
WRONG_RESULT_WORDS = {"stale-input": "a graph that replays without refreshing its static input",
                      "wrong-decode": "a graphed decode that gives other tokens",
                      "stale-mask": "padded and bucketed graphs that keep the attention mask of their first replay",
                      "stale-position": "a graphed decode that never refreshes its position",
                      "eager-layer": "a graph that runs its output layer eagerly after each replay",
                      "skip-inductor-graphs": "a compile+graph that runs its compiled forward without its graph"}
#: The self-test runs (file stems) of the faults that give wrong results: each must fail the gate.
WRONG_RESULT_FAULTS = tuple(WRONG_RESULT_WORDS)


@dataclass
class CaseDetection:
    """One gated case: baseline spread and tolerance (percent); per planted delay (percent) the gate's check and the
    delay run's ``planted_*`` fields; false alarms of the gate and of ``compare`` over their trials."""

    label: str
    spread_pct: float | None
    tolerance_pct: float
    seen: dict[float, RegressionCheck] = field(default_factory=dict)
    planted: dict[float, dict] = field(default_factory=dict)
    gate_alarms: int = 0
    gate_trials: int = 0
    pair_alarms: int = 0
    pair_trials: int = 0


@dataclass
class ABCase:
    """``aa``: A/A change or None; per delay: the change and ``(median delay measured, runs off target)``."""

    label: str
    aa: Change | None = None
    delayed: dict[float, Change] = field(default_factory=dict)
    planted: dict[float, tuple[float | None, int]] = field(default_factory=dict)


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
        return [c.label for c in self.cases if pct not in c.seen or not c.seen[pct].regressed]

    def off_target(self, pct: float) -> list[str]:
        """Cases whose planted delay missed its target by more than ``PLANT_TOLERANCE_POINTS``."""
        return [c.label for c in self.cases if c.planted.get(pct, {}).get("planted_on_target") is False]

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


def split_ab_runs(runs: dict[str, Run]) -> tuple[list[Run], list[Run], dict[float, list[Run]]]:
    """``(ab-base, ab-head, {delay pct: ab-delay})`` runs by file stem, each group in name order."""
    base, head, delay = [], [], {}
    for name, run in sorted(runs.items()):
        if m := _AB.fullmatch(name):
            if m.group(2) is not None:
                delay.setdefault(float(m.group(2)), []).append(run)
            else:
                (base if m.group(1) == "base" else head).append(run)
    return base, head, dict(sorted(delay.items()))


def _baseline(runs: list[Run], min_runs: int):
    from cudagraph_bench.results.baseline import baseline_of, build_baseline

    return baseline_of(build_baseline(runs, min_runs=min_runs), Path("selftest-baseline.json"))


def _checked(run: Run, baseline, cases: dict[str, CaseDetection]):
    """``(case, gate verdict)`` for each case of ``cases`` whose graph ``run``'s gate checked for a regression."""
    from cudagraph_bench.results import gate

    for verdict in gate.evaluate(run, baseline):
        if verdict.label in cases and verdict.variant == GATED and verdict.regression is not None:
            yield cases[verdict.label], verdict


def evaluate_selftest(runs: dict[str, Run], baseline=None) -> SelftestResult:
    """The module's verdicts; ``baseline``: gate against it instead of one built from the unmodified runs. UsageError
    for fewer than 5 unmodified runs without ``baseline``, fewer than 2 with one."""
    from cudagraph_bench.results import gate
    from cudagraph_bench.results.checks import failed_checks, own_and_peer

    unmodified, delays, wrong = split_runs(runs)
    given = baseline
    need, why = (5, "the baseline") if given is None else (2, "their false alarms")
    if len(unmodified) < need:
        raise UsageError(f"the self-test needs at least {need} unmodified runs ({why}), got {len(unmodified)}")
    baseline = given or _baseline(unmodified, 5)
    cases = {v.label: CaseDetection(v.label, v.regression.spread_pct, v.regression.tolerance_pct)
             for v in gate.evaluate(unmodified[0], baseline)   # the tolerance of one new run, as a CI job gates
             if v.variant == GATED and v.gated and v.regression is not None}
    for pct, run in delays.items():
        planted = {(m.case.model, m.case.dtype, m.case.seq_len): m.extra_info
                   for m in run.measurements.values() if m.suite == "forward" and m.case.variant == GATED}
        for c, verdict in _checked(run, baseline, cases):
            c.seen[pct] = verdict.regression
            c.planted[pct] = planted.get((verdict.model, verdict.dtype, verdict.seq_len), {})
    for i, held in enumerate(unmodified):
        others = unmodified[:i] + unmodified[i + 1:]
        for c, verdict in _checked(held, given or _baseline(others, len(others)), cases):
            c.gate_trials += 1
            c.gate_alarms += verdict.regression.regressed
    for old, new in itertools.permutations(unmodified, 2):
        for ch in compare_runs(old, new, baseline=baseline)[0]:
            c = cases.get(ch.label.rsplit(" ", 1)[0]) if ch.label.endswith(f" {GATED}") else None
            if c is not None:
                c.pair_trials += 1
                c.pair_alarms += ch.check.regressed
    verdicts = {}
    for name, run in wrong.items():
        own, _ = own_and_peer(failed_checks([run]))     # what the gate fails on, whatever the suite
        verdicts[name] = (bool(own), "; ".join(f.text for f in own[:3]) or "the gate passed")
    return SelftestResult(list(cases.values()), verdicts, list(delays), len(unmodified),
                          baseline=str(given.path) if given is not None else None, ab=evaluate_ab(runs, baseline))


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
            c.delayed[pct], c.planted[pct] = ch, measured.get(label, (None, 0))
    return ABResult(list(cases.values()), len(base), len(head), {p: len(r) for p, r in delays.items()})


def _verdict(check) -> str:
    """``FAIL (+3.1%)`` or ``pass (+0.2%)`` of a regression check; ``-`` without one."""
    return "-" if check is None else f"{'FAIL' if check.regressed else 'pass'} ({check.change_pct:+.1f}%)"


def _planted(measured: float | None, off: str) -> str:
    return "-" if measured is None else f"{measured:+.1f}%" + (f" ({off})" if off else "")


def _delay_columns(delays: list[float], judge: str) -> list[Column]:
    return [col for p in delays for col in (Column(f"planted_{p:g}", f"+{p:g}% planted (measured)"),
                                            Column(f"seen_{p:g}", f"+{p:g}% {judge}"))]


def table(result: SelftestResult, fmt: str) -> str:
    """Per gated case: baseline spread and tolerance (percent), per planted delay the delay measured and the gate's
    verdict with the change seen, and the gate's and compare's false alarms."""
    cols = [Column("label", "case"), Column("spread_pct", "spread %", ".2f"),
            Column("tolerance_pct", "tolerance %", ".2f"), *_delay_columns(result.delays, "gate"),
            Column("gate_fa", "gate false alarms"), Column("pair_fa", "pair false alarms")]
    out = []
    for c in result.cases:
        row = {"label": c.label, "spread_pct": c.spread_pct, "tolerance_pct": c.tolerance_pct,
               "gate_fa": f"{c.gate_alarms}/{c.gate_trials}", "pair_fa": f"{c.pair_alarms}/{c.pair_trials}"}
        for p in result.delays:
            info = c.planted.get(p, {})
            row[f"planted_{p:g}"] = _planted(info.get("planted_measured_pct"),
                                             "off target" if info.get("planted_on_target") is False else "")
            row[f"seen_{p:g}"] = _verdict(c.seen.get(p))
        out.append(row)
    return render_table(cols, out, fmt=fmt)


def ab_table(result: ABResult, fmt: str) -> str:
    """Per gated case: A/A, and per planted delay the median delay measured (``(N off target)`` when some missed) and
    ab's verdict, each ``FAIL``/``pass`` with the change (percent)."""
    out = []
    for c in result.cases:
        row = {"label": c.label, "aa": _verdict(c.aa)}
        for p in result.delays:
            measured, off = c.planted.get(p, (None, 0))
            row[f"planted_{p:g}"] = _planted(measured, f"{off} off target" if off else "")
            row[f"seen_{p:g}"] = _verdict(c.delayed.get(p))
        out.append(row)
    return render_table([Column("label", "case"), Column("aa", "A/A ab"), *_delay_columns(result.delays, "ab")], out,
                        fmt=fmt)


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
    sources = "\n".join(f"- `{r.path.name}` ({r.environment.run_datetime}, GPU "
                        f"`{r.environment.host or 'not recorded'}`)" for _, r in sorted(runs.items()))
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


def summary_part(result: ABResult) -> str:
    """``ab: A/A false alarms a/N; +3% detected d/N`` (the parts that ran)."""
    n_aa = sum(c.aa is not None for c in result.cases)
    parts = [f"A/A false alarms {result.aa_alarms}/{n_aa}"] if result.n_base and result.n_head else []
    for p in result.delays if result.n_base else ():
        changes = [c.delayed[p] for c in result.cases if p in c.delayed]
        parts.append(f"+{p:g}% detected {sum(ch.regressed for ch in changes)}/{len(changes)}")
    return "ab: " + ("; ".join(parts) if parts else "no ab-base runs, nothing compared")


def _ab_section(result: SelftestResult) -> list[str]:
    """The page section "Pull-request mode (`ab`)", when ab runs exist."""
    ab = result.ab
    if ab is None:
        return []
    noise = (f"`{result.baseline}`" if result.baseline else
             f"the self-test's baseline of its {result.n_unmodified} unmodified runs")
    groups = [f"{ab.n_base} `ab-base-<i>`", f"{ab.n_head} `ab-head-<i>`"]
    groups += [f"{n} `ab-delay-{p:g}-<i>`" for p, n in ab.n_delay.items()]
    delays = ", ".join(f"+{p:g}%" for p in ab.delays) or "none"
    return ["## Pull-request mode (`ab`)", "",
            f"Runs of the same job, each a pytest process of the gated matrix: {', '.join(groups)}, interleaved as "
            "`ab` interleaves its sides (base, head, delay, delay, head, base, ...). Base and head are both the "
            f"unmodified checkout; the delay runs plant a GPU delay on head ({delays}, `--plant-fault`). Each "
            "comparison is `ab`'s own (`compare --old` the base runs `--new` the others: the change of the median of "
            "run medians beyond its tolerance, and the one-sided rank test agreeing), with the noise model of "
            f"{noise}.", "",
            "- A/A: ab-base against ab-head; a FAIL is a false alarm, and fails the self-test;",
            "- planted: ab-base against the delay runs; reported, with no target; planted (measured): the median "
            "over the delay runs of the delay each measured right after its capture.", "",
            *([ab_table(ab, "markdown"), ""] if ab.cases else []),
            f"**{summary_part(ab)}**", ""]


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
