"""``cudagraph-bench baseline RUN... -o baselines/<gpu>.json``: the versioned per-GPU baseline (no torch), built from
separate runs of the same code on one GPU type, ideally several machines, so it holds the noise a gate must tolerate.
Schema and tolerance rule: docs/gate.md; a case's ``gated`` and ``min_reduction_pct`` may be edited by hand."""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cudagraph_bench.variants import FORWARD_REFERENCE as REF
from cudagraph_bench.variants import GATED
from cudagraph_bench.results import capture_cost, noise, stats
from cudagraph_bench.errors import FailedCheckError, InputFileError, UsageError
from cudagraph_bench.fsio import parse_json, read_input_bytes
from cudagraph_bench.results.baseline_values import KIND, SCHEMA_VERSION, case_name, check_document
from cudagraph_bench.results.checks import failed_checks, own_and_peer
from cudagraph_bench.results.runfile import (GZIP_MAGIC, Measurement, Run, check_one_gpu, distinct_runs,
                                             forward_groups, merged_forward_groups)
from cudagraph_bench.table import SHOWN_ITEMS, Column, plural

DEFAULT_MIN_REDUCTION_PCT = 30.0
#: Prompt lengths (tokens) up to this are gated by default: launch overhead dominates short prompts.
DEFAULT_MAX_GATED_LEN = 128
#: Decimals a baseline file keeps of each figure of a case: times (ms) and eager calls to the ns, percents to 3.
STORED_DECIMALS = {**dict.fromkeys(("median_ms", "p95_ms", "run_medians_ms", "wall_run_medians_ms", "host_medians_ms",
                                    "run_values_ms", "eager_calls", "run_eager_calls"), 6),
                   **dict.fromkeys(("spread_pct", "within_host_spread_pct", "cross_host_spread_pct", "reduction_pct",
                                    "reduction_range_pct"), 3)}


@dataclass(frozen=True)
class Baseline:
    """A loaded baseline; ``cases`` maps ``(model, dtype, seq_len)`` to the file's case dict."""

    path: Path
    gpu_slug: str
    thresholds: dict
    cases: dict[tuple[str, str, int], dict]
    data: dict

    @property
    def n_runs(self) -> int:
        """Runs the baseline was built from."""
        return len(self.data.get("sources") or [])

    @property
    def hosts(self) -> list[str]:
        """GPU UUIDs the runs came from; empty when none was recorded."""
        return [h["host"] for h in self.data.get("hosts") or [] if isinstance(h, dict) and h.get("host")]


def gated_case(key: tuple[str, str, int], baseline: Baseline | None, max_gated_len: int | None = None) -> bool:
    """Whether ``gate`` gates the graph of forward case ``key`` (model, dtype, seq_len): the baseline case's own
    ``gated``, else its prompt length at most ``max_gated_len``, the baseline's, else DEFAULT_MAX_GATED_LEN (a given
    ``max_gated_len`` wins over the case's mark). The one rule, so that ``compare`` calls gated what ``gate`` gates."""
    own = (baseline.cases.get(key) if baseline else None) or {}
    if max_gated_len is None and "gated" in own:
        return bool(own["gated"])
    th = baseline.thresholds if baseline else {}
    return key[2] <= (max_gated_len if max_gated_len is not None else int(th.get("max_gated_len",
                                                                                 DEFAULT_MAX_GATED_LEN)))


def _point(ms: list[Measurement], figure: str = "wall") -> dict:
    """A stored point of ``ms``: median of run medians of ``figure``, median of p95s, the run medians (device figure:
    also the wall run medians)."""
    p95s = [m.summary.p95_ms for m in ms if m.summary.p95_ms is not None]
    medians = [m.figure_ms(figure) for m in ms]
    point = {"median_ms": float(np.median(medians)), "p95_ms": float(np.median(p95s)) if p95s else None,
             "run_medians_ms": medians, "run_hosts": [m.environment.host for m in ms]}
    if figure != "wall":
        point.update(figure=figure, wall_run_medians_ms=[m.summary.median_ms for m in ms])
    return point


def baseline_of(doc: dict, path: Path) -> Baseline:
    """A :class:`Baseline` of a built document, as :func:`load_baseline` gives it for ``path``."""
    cases = {(str(c["model"]), str(c["dtype"]), int(c["seq_len"])): c for c in doc["cases"]}
    return Baseline(path=path, gpu_slug=str(doc["gpu_slug"]), thresholds=dict(doc["thresholds"]), cases=cases,
                    data=doc)


def stored_case(case, key: str | None = None):
    """``case`` (or a value under ``key`` in it) with its figures rounded as :data:`STORED_DECIMALS` says."""
    if isinstance(case, dict):
        return {k: stored_case(v, k) for k, v in case.items()}
    if isinstance(case, list):
        return [stored_case(v, key) for v in case]
    return round(case, STORED_DECIMALS[key]) if isinstance(case, float) and key in STORED_DECIMALS else case


def refuse_wrong_cases(runs: list[Run], *, allow_unchecked: bool = False, what: str = "baseline") -> None:
    """FailedCheckError naming the cases when ``runs`` recorded a failed check (peers' known failures excepted): a wrong
    result must never become the reference. UsageError when a graph benchmark recorded no check (unless
    ``allow_unchecked``)."""
    own, _ = own_and_peer(failed_checks(runs))
    if own:
        named = "; ".join(f"{f.text} in {f.path}" for f in own[:SHOWN_ITEMS])
        more = f"; and {len(own) - SHOWN_ITEMS} more" if len(own) > SHOWN_ITEMS else ""
        raise FailedCheckError(f"{plural(len(own), 'failed check')} in the runs: {named}{more}: {what} takes no "
                               "run with a wrong result; fix the case and rerun")
    for run in runs:
        for key, by_variant in forward_groups(run).items():
            if GATED in by_variant and by_variant[GATED].check.status == "unchecked" and not allow_unchecked:
                raise UsageError(f"{what}: {case_name(key)} {GATED} of {run.path} recorded no correctness check: rerun "
                                 "with the current plugin, or pass --allow unchecked for runs recorded before checks "
                                 "existed")


def build_baseline(runs: list[Run], *, min_reduction_pct: float = DEFAULT_MIN_REDUCTION_PCT,
                   regression_floor_pct: float | None = None,
                   noise_multiplier: float = noise.DEFAULT_MULTIPLIER, alpha: float = noise.DEFAULT_ALPHA,
                   max_gated_len: int = DEFAULT_MAX_GATED_LEN, min_runs: int = noise.MIN_BASELINE_RUNS,
                   allow_unchecked: bool = False, rounded: bool = True) -> dict:
    """Baseline document from ``runs`` of the same forward matrix on one GPU type: a case is stored when ``min_runs``
    runs measured its eager and graph; ``rounded=False`` keeps exact values. The graph's figure is device-side when
    every run recorded it, else wall. Raises UsageError: too few runs, a file twice, different GPUs or none, no case in
    ``min_runs`` runs, or a graph benchmark without its check (unless ``allow_unchecked``); FailedCheckError for a
    failed check."""
    if len(runs) < min_runs:
        raise UsageError(f"a baseline needs at least {min_runs} separate runs of the same matrix, got {len(runs)}: "
                         "run the benchmarks again (a new process each time) and pass every JSON")
    distinct_runs(runs, "baseline")
    cpu = next((r for r in runs if r.environment.gpu_slug is None), None)
    if cpu is not None:
        raise InputFileError(f"{cpu.path} has no machine_info.cuda.gpu_slug: baselines are per GPU; "
                             "record the run on a GPU with the cudagraph-bench plugin")
    check_one_gpu(runs, "a baseline is per GPU type; build one per GPU")
    planted = [r for r in runs if r.environment.planted_fault]
    if planted:
        raise UsageError(f"{planted[0].path} planted the self-test fault {planted[0].environment.planted_fault}: a "
                         "run with a planted fault is never a baseline; give unmodified runs")
    refuse_wrong_cases(runs, allow_unchecked=allow_unchecked)
    groups = merged_forward_groups(runs)
    figure = "device" if all(m.device_ms is not None for g in groups.values() for m in g.get(GATED, [])) else "wall"
    if regression_floor_pct is None:
        regression_floor_pct = noise.FLOORS_PCT[figure]
    cases, spreads = [], []
    runs_left, per_run = [capture_cost.memory_left(r) for r in runs], [forward_groups(r) for r in runs]
    for (model, dtype, seq_len), by_variant in groups.items():
        eager, graph = by_variant.get(REF, []), by_variant.get(GATED, [])
        if min(len(eager), len(graph)) < min_runs:
            print(f"cudagraph-bench baseline: warning: {model} {dtype} L={seq_len} is in "
                  f"{min(len(eager), len(graph))} of {len(runs)} runs (< {min_runs}): not stored", file=sys.stderr)
            continue
        e_point, g_point = _point(eager), _point(graph, figure)
        red, per_run_range = stats.runs_reduction_pct(e_point["run_medians_ms"],
                                                      g_point.get("wall_run_medians_ms") or g_point["run_medians_ms"])
        spread = noise.host_spread(g_point["run_medians_ms"], g_point["run_hosts"])
        several = spread.n_hosts >= 2 and spread.within_pct is not None
        g_point.update(spread_pct=spread.within_pct if several else noise.spread_pct(g_point["run_medians_ms"]),
                       within_host_spread_pct=spread.within_pct, within_host_df=spread.within_df,
                       cross_host_spread_pct=spread.cross_pct if several else None,
                       host_medians_ms=list(spread.host_medians_ms))
        if several:
            g_point["median_ms"] = spread.center_ms
            if seq_len <= max_gated_len:
                spreads.append(spread)
        key = (model, dtype, seq_len)
        pairs = [(g[key][REF], g[key][GATED]) for g in per_run if GATED in g.get(key, {})]   # eager is in every group
        case = {"model": model, "dtype": dtype, "seq_len": seq_len, "gated": seq_len <= max_gated_len,
                "min_reduction_pct": min_reduction_pct, "n_runs": len(graph), REF: e_point, GATED: g_point,
                "reduction_pct": red, "reduction_range_pct": list(per_run_range),
                capture_cost.FIELD: capture_cost.baseline_point(key, pairs, runs_left)}
        cases.append(stored_case(case) if rounded else case)
    if not cases:
        raise UsageError(f"no forward case was measured in {min_runs} of the {len(runs)} runs: give runs of the "
                         "same matrix")
    env = max(runs, key=lambda r: r.environment.started_at).environment
    cross, cross_df = noise.pooled_cross_host_pct(spreads)
    host_runs = Counter(r.environment.host for r in runs if r.environment.host)
    host_cpu = {r.environment.host: r.environment.cpu_text for r in reversed(runs)}   # each machine's first run's
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "gpu_slug": env.gpu_slug,
        "environment": {"cuda": env.cuda_fingerprint, "python": env.python_version,
                        "python_implementation": env.python_implementation, "cpu": env.cpu_brand, "system": env.system,
                        "release": env.release, "machine": env.machine, "pytest_benchmark": env.pytest_benchmark,
                        "commit_info": env.commit_info, "run_datetime": env.run_datetime},
        "sources": [{"file": r.path.name, "sha256": r.sha256, "run_datetime": r.environment.run_datetime,
                     "node": r.environment.node, "host": r.environment.host, "cpu": r.environment.cpu_text}
                    for r in runs],
        "hosts": [{"host": host, "runs": n, "cpu": host_cpu[host]} for host, n in host_runs.items()],
        "thresholds": {"min_reduction_pct": min_reduction_pct, "max_gated_len": max_gated_len,
                       "regression_floor_pct": regression_floor_pct, "noise_multiplier": noise_multiplier,
                       "alpha": alpha,
                       "cross_host_spread_pct": round(cross, 3) if rounded and cross is not None else cross,
                       "cross_host_df": cross_df if cross is not None else None, **capture_cost.THRESHOLDS},
        "cases": cases,
    }


def load_baseline(path: str | Path) -> Baseline:
    """Load and validate a baseline file. InputFileError for a missing, empty, invalid, irregular, too large or too deep
    file or a folder, and for every value no ``cudagraph-bench baseline`` writes (naming the field and the fix)."""
    path = Path(path)
    if path.is_dir():
        raise InputFileError(f"baseline {path} is a folder: give a baseline file such as {path / '<gpu-slug>.json'}")
    rebuild = "give a baseline file, written with cudagraph-bench baseline RUN1 ... RUN5 -o baselines/<gpu>.json"
    raw = read_input_bytes(path, "baseline", rebuild)
    if not raw.strip():
        raise InputFileError(f"baseline {path} is empty: {rebuild}")
    if raw.startswith(GZIP_MAGIC):
        raise InputFileError(f"baseline {path} is gzip-compressed: a baseline is plain JSON; gunzip it, or {rebuild}")
    try:
        data = parse_json(raw, path, "baseline", rebuild)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputFileError(f"baseline {path} is not valid JSON (not a baseline, or a truncated one): "
                             f"{rebuild}") from None
    if not isinstance(data, dict) or "schema_version" not in data:
        if isinstance(data, dict) and "benchmarks" in data:
            raise InputFileError(f"baseline {path} is a pytest-benchmark run, not a baseline (no schema_version): "
                                 "build a baseline from runs with cudagraph-bench baseline RUN1 ... RUN5 -o FILE and "
                                 "give --baseline FILE, or give --baseline the baseline file (baselines/<gpu>.json)")
        raise InputFileError(f"{path} is not a cudagraph-bench baseline (no schema_version): write one with "
                             "cudagraph-bench baseline RUN1 ... RUN5 -o baselines/<gpu>.json")
    gpu, cases, thresholds = check_document(path, data)
    return Baseline(path=path, gpu_slug=gpu, thresholds=thresholds, cases=cases, data=data)


def check_baseline_gpu(baseline: Baseline, gpu_slug: str | None, command: str,
                       allow_gpu_mismatch: bool = False) -> None:
    """UsageError when ``baseline`` is for another GPU than ``gpu_slug`` (None: no GPU), unless ``allow_gpu_mismatch``;
    ``command`` names the use (``"gate"``, ``"compare"``)."""
    if baseline.gpu_slug != gpu_slug and not allow_gpu_mismatch:
        fix = f"against a baseline of {gpu_slug}" if gpu_slug else f"runs recorded on {baseline.gpu_slug}"
        raise UsageError(f"baseline {baseline.path} is for GPU {baseline.gpu_slug} but the run is from "
                         f"{gpu_slug or 'no GPU'}: {command} {fix}, or pass --allow gpu-mismatch to compare anyway")


def case_tolerance(base_case: dict, thresholds: dict, new_ms, *, floor_pct: float | None = None,
                   figure: str | None = None) -> noise.RegressionCheck:
    """Regression check of ``new_ms: [n]`` run medians (ms, one host) against a baseline case: across hosts when it was
    measured on 2+ hosts, else by the plain rule. ``floor_pct`` None: the baseline's, else the floor of ``figure``
    (None: the case's)."""
    graph = base_case[GATED]
    floor = noise.floor_of(thresholds, figure or graph.get("figure", "wall"), floor_pct)
    alpha = float(thresholds.get("alpha", noise.DEFAULT_ALPHA))
    pooled = thresholds.get("cross_host_spread_pct")
    if pooled is not None:          # the baseline measured its machines' spread: a run of another machine
        n_hosts = max(1, len(graph.get("host_medians_ms") or []))
        within = graph.get("within_host_spread_pct")
        return noise.check_across_hosts(
            graph["run_medians_ms"], float(graph["median_ms"]), new_ms,
            within_pct=within if within is not None else graph.get("spread_pct"),
            within_df=int(graph.get("within_host_df") or len(graph["run_medians_ms"]) - 1),
            cross_pct=float(pooled), cross_df=int(thresholds.get("cross_host_df") or 1), n_hosts=n_hosts,
            floor_pct=floor, alpha=alpha)
    return noise.check_regression(graph["run_medians_ms"], new_ms, spread=graph.get("spread_pct"), floor_pct=floor,
                                  multiplier=thresholds.get("noise_multiplier", noise.DEFAULT_MULTIPLIER), alpha=alpha)


BASELINE_COLUMNS = [
    Column("model", "model"), Column("dtype", "dtype"), Column("seq_len", "L", "d"), Column("n_runs", "runs", "d"),
    Column("eager_ms", "eager ms", ".3f"), Column("graph_ms", "graph ms", ".3f"), Column("figure", "graph figure"),
    Column("graph_p95_ms", "graph p95", ".3f"), Column("spread_pct", "within-host spread %", ".2f"),
    Column("cross_pct", "cross-host spread %", ".2f"), Column("tolerance_pct", "tolerance %", ".2f"),
    Column("reduction_pct", "reduction %", ".1f"),
    Column("range", "per-run reduction %"), Column("gated", "gated"),
]


def baseline_rows(doc: dict) -> list[dict]:
    """``tolerance_pct`` is the allowed graph slow-down of one gated run against this baseline."""
    return [{"model": c["model"], "dtype": c["dtype"], "seq_len": c["seq_len"], "n_runs": c["n_runs"],
             "eager_ms": c[REF]["median_ms"], "graph_ms": c[GATED]["median_ms"], "graph_p95_ms": c[GATED]["p95_ms"],
             "spread_pct": c[GATED].get("spread_pct"), "cross_pct": c[GATED].get("cross_host_spread_pct"),
             "figure": c[GATED].get("figure", "wall"),
             "tolerance_pct": case_tolerance(c, doc["thresholds"], [c[GATED]["median_ms"]]).tolerance_pct,
             "reduction_pct": c["reduction_pct"], "range": "[{:.1f}, {:.1f}]".format(*c["reduction_range_pct"]),
             "gated": "yes" if c["gated"] else "no"} for c in doc["cases"]]
