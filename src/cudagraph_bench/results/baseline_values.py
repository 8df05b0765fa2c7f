"""The values a baseline file may hold (no torch), checked before a reader sees it: a bad file is one line naming the
field and the fix (exit 2). An absurd spread or degree of freedom would pass any regression, so it is refused, never
clamped."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cudagraph_bench.errors import InputFileError
from cudagraph_bench.options import (parse_alpha, parse_count, parse_multiplier, parse_reduction_pct,
                                     parse_regression_pct, parse_spread_pct)
from cudagraph_bench.results.benchmark_values import (MAX_KEY_COUNT, is_finite, is_number, is_positive,
                                                      is_whole, json_type, shown)
from cudagraph_bench.variants import FORWARD_REFERENCE as REF
from cudagraph_bench.variants import GATED

SCHEMA_VERSION = 4
#: Schemas :func:`check_document` reads: 2 (one host, no host record), 3 (no capture cost) and 4.
READABLE_SCHEMAS = (2, 3, 4)
KIND = "cudagraph-bench-baseline"
#: The graph figures a baseline stores (``graph.figure``; absent: ``"wall"``).
FIGURES = ("wall", "device")
#: Spreads of a case's graph, in percent.
SPREAD_FIELDS = ("spread_pct", "within_host_spread_pct", "cross_host_spread_pct")
#: Fields of a case's graph that only schema 3 (the machines) writes.
MACHINE_FIELDS = ("run_hosts", "within_host_spread_pct", "within_host_df", "cross_host_spread_pct", "host_medians_ms")
#: Threshold keys of a baseline file and the parser that validates each (as its CLI flag, or as the field it is).
THRESHOLD_PARSERS = {"min_reduction_pct": parse_reduction_pct, "regression_floor_pct": parse_regression_pct,
                     "max_gated_len": parse_count, "noise_multiplier": parse_multiplier, "alpha": parse_alpha,
                     "cross_host_spread_pct": parse_spread_pct, "cross_host_df": parse_count,
                     "capture_floor_pct": parse_regression_pct, "memory_floor_mib": parse_regression_pct,
                     "memory_floor_pct": parse_regression_pct}


def regenerate(path) -> str:
    """The fix every refused baseline names: the command that writes ``path`` again from runs."""
    return f"regenerate it with cudagraph-bench baseline RUN1 ... RUN5 -o {path}"


def case_name(key: tuple[str, str, int]) -> str:
    """``("gpt2", "float32", 16)`` -> ``"gpt2 float32 L=16"``."""
    return "{} {} L={}".format(*key)


def _shown(value) -> str:
    return shown(json.dumps(value))


def check_schema(path: Path, data: dict) -> int:
    """The ``schema_version`` after checking ``kind``. InputFileError naming the value and the fix for schema 1, a
    non-integer, an unknown version, or another ``kind``."""
    version = _whole_float_as_int(data["schema_version"])
    if isinstance(version, str):
        raise InputFileError(f"baseline {path}: schema_version is the string {version!r}, not a number: write it "
                             f"without quotes (\"schema_version\": {SCHEMA_VERSION}), or {regenerate(path)}")
    if not is_whole(version):
        raise InputFileError(f"baseline {path}: schema_version is {_shown(version)} (a JSON {json_type(version)}), not "
                             f"a schema number such as {SCHEMA_VERSION}: {regenerate(path)}")
    if version == 1:
        raise InputFileError(f"baseline {path} is schema 1, built from a single run (no between-run noise model): "
                             "rebuild it from 5 or more separate runs with cudagraph-bench baseline RUN1 ... RUN5 "
                             f"-o {path}")
    if version not in READABLE_SCHEMAS:
        raise InputFileError(f"baseline {path} has unknown schema_version {version!r} (this cudagraph-bench reads "
                             f"{SCHEMA_VERSION}): {regenerate(path)}")
    if data.get("kind") != KIND:
        what = "no kind" if "kind" not in data else f"kind {_shown(data['kind'])}"
        raise InputFileError(f"baseline {path} has {what}, not {KIND!r}: it is no cudagraph-bench baseline; "
                             f"{regenerate(path)}")
    return version


def check_document(path: Path, data: dict) -> tuple[str, dict, dict]:
    """``(gpu_slug, cases, thresholds)``: ``cases`` maps ``(model, dtype, seq_len)`` to the file's case dict. Raises
    InputFileError (one line naming the field and the fix) for any value no ``cudagraph-bench baseline`` writes."""
    schema = check_schema(path, data)
    try:
        if not isinstance(data["cases"], list):
            raise TypeError(f"cases must be a list, got {type(data['cases']).__name__}")
        hosts = _hosts(path, data) if schema >= 3 else None
        cases = {}
        for index, c in enumerate(data["cases"]):
            _check_case_fields(path, index, c)
            for name in ("model", "dtype"):
                if not isinstance(c[name], str):
                    raise ValueError(f"cases[{index}].{name} is {json.dumps(c[name])[:40]}, not a string")
            seq_len = _whole_float_as_int(c["seq_len"])     # 50.0 is read as 50
            if not is_whole(seq_len) or not 1 <= seq_len <= MAX_KEY_COUNT:
                raise InputFileError(f"baseline {path}: cases[{index}] has seq_len {json.dumps(seq_len)}: a prompt "
                                     f"length is a whole number of tokens >= 1; fix it, or {regenerate(path)}")
            key = (str(c["model"]), str(c["dtype"]), seq_len)
            if key in cases:
                first = next(i for i, other in enumerate(data["cases"]) if other is cases[key])
                raise InputFileError(f"baseline {path} lists case {case_name(key)} twice (cases[{first}] and "
                                     f"cases[{index}]): delete one of them, or {regenerate(path)}")
            _check_case(path, key, c)
            where = f"cases[{index}] ({case_name(key)})"
            _check_points(path, index, where, c)
            _check_capture_cost(path, where, c, required=schema >= 4)
            if schema >= 3:
                _check_machines(path, where, c, hosts)
            else:
                _refuse_machine_fields(path, [(f"cases[{index}].{v}.{f}", c[v].get(f)) for v in (GATED, REF)
                                              for f in MACHINE_FIELDS])
            cases[key] = c
        if not cases:
            raise ValueError("it holds no cases")
        gpu = data.get("gpu_slug")
        if not isinstance(gpu, str) or not gpu.strip():
            what = _shown(gpu) if "gpu_slug" in data else "missing"
            raise _bad(path, f"gpu_slug is {what}, not the GPU's key as text (such as \"nvidia-h200\")")
        sources = data.get("sources")
        if not (isinstance(sources, list) and sources and all(isinstance(s, dict) for s in sources)):
            what = _shown(sources) if "sources" in data else "missing"
            raise _bad(path, f"sources is {what}, not a list of one object per run ({{file, sha256, ...}})")
        thresholds = _thresholds(data.get("thresholds", {}))
        if schema >= 3:
            _check_machine_thresholds(path, cases, thresholds, hosts)
        else:
            _refuse_machine_fields(path, [("hosts", data.get("hosts") or None),
                                          *((f"thresholds.{k}", thresholds.get(k))
                                            for k in ("cross_host_spread_pct", "cross_host_df"))])
    except InputFileError:
        raise  # already one line naming the case and the fix (InputFileError is a ValueError)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputFileError(f"baseline {path} is malformed ({type(exc).__name__}: {exc}): "
                             f"{regenerate(path)}") from None
    return gpu, cases, thresholds


def _bad(path: Path, what: str) -> InputFileError:
    return InputFileError(f"baseline {path}: {what}: {regenerate(path)}")


def _thresholds(raw: dict) -> dict:
    """Null: left out."""
    if not isinstance(raw, dict):
        raise TypeError(f"thresholds must be an object, got {raw!r}")
    thresholds = {}
    for key, parse in THRESHOLD_PARSERS.items():
        value = raw.get(key)
        if value is None:
            continue
        if not is_number(value):
            raise TypeError(f"thresholds.{key} must be a number, got {value!r}")
        if key in ("max_gated_len", "cross_host_df"):
            value = _whole_float_as_int(value)
        try:
            thresholds[key] = float(parse(str(value)))
        except argparse.ArgumentTypeError as exc:
            raise ValueError(f"thresholds.{key}: {exc}") from None
    return thresholds


def _whole_float_as_int(value):
    """``9.0`` read as 9; any other value as it is."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


#: Fields every case of a baseline holds (``cudagraph-bench baseline`` writes each; the readers look each up).
CASE_FIELDS = ("model", "dtype", "seq_len", "n_runs", REF, GATED)


def _check_case_fields(path: Path, index: int, c) -> None:
    if not isinstance(c, dict):
        raise _bad(path, f"cases[{index}] is {_shown(c)}, not a case object (model, dtype, seq_len, n_runs, "
                         f"{REF}, {GATED}, ...)")
    where = f"cases[{index}]"
    if isinstance(c.get("model"), str) and isinstance(c.get("dtype"), str) and is_whole(c.get("seq_len")):
        where += f" ({case_name((c['model'], c['dtype'], c['seq_len']))})"
    for name in CASE_FIELDS:
        if name not in c:
            raise _bad(path, f"{where} has no {name}")
    for variant in (REF, GATED):
        if not isinstance(c[variant], dict):
            raise _bad(path, f"{where}: {variant} is {_shown(c[variant])}, not an object of its times "
                             "(median_ms, p95_ms, run_medians_ms, ...)")
        for name in ("median_ms", "run_medians_ms"):
            if name not in c[variant]:
                raise _bad(path, f"{where}: {variant} has no {name}")


def _check_points(path: Path, index: int, where: str, c: dict) -> None:
    """The times and spreads of both variants, and ``n_runs`` a whole number (``9.0`` is read as 9) of graph runs."""
    for variant in (REF, GATED):
        for name in ("median_ms", "p95_ms"):   # a p95 may be null (runs without per-round data)
            value = c[variant].get(name)
            if not (value is None and name == "p95_ms" or is_positive(value)):
                raise ValueError(f"cases[{index}].{variant}.{name} is {value!r}, not a finite time > 0 ms")
        medians = c[variant]["run_medians_ms"]
        if not (isinstance(medians, list) and medians and all(is_positive(x) for x in medians)):
            raise ValueError(f"{where}: {variant}.run_medians_ms must be a list of positive finite ms")
    g = c[GATED]
    runs = len(g["run_medians_ms"])
    for field in SPREAD_FIELDS:
        spread = g.get(field)
        if spread is None:
            continue
        if not is_finite(spread) or spread < 0 or runs < 2:
            raise ValueError(f"{where}: graph.{field} must be a finite percent >= 0 from 2 or more run medians, "
                             "or null")
        try:
            parse_spread_pct(str(spread))
        except argparse.ArgumentTypeError as exc:
            raise _bad(path, f"{where}: graph.{field}: {exc}") from None
    df = g.get("within_host_df")
    if df is not None and (not is_whole(df) or df < 0):
        raise ValueError(f"{where}: graph.within_host_df must be a whole number >= 0, or null")
    if df is not None and df >= runs:
        raise _bad(path, f"{where}: graph.within_host_df is {df}, more than its {runs} run medians give (at most "
                         f"{runs - 1}: each machine's median takes one)")
    host_medians = g.get("host_medians_ms")
    if host_medians is not None and not (isinstance(host_medians, list) and all(is_positive(x) for x in host_medians)):
        raise ValueError(f"{where}: graph.host_medians_ms must be a list of positive ms")
    figure = g.get("figure", "wall")
    if figure not in FIGURES:
        raise _bad(path, f"{where}: graph.figure is {_shown(figure)}, not one of {', '.join(map(repr, FIGURES))} "
                         "(or absent: the synchronized wall median)")
    walls = g.get("wall_run_medians_ms")
    if (figure == "device" or walls is not None) and not (
            isinstance(walls, list) and len(walls) == runs and all(is_positive(x) for x in walls)):
        raise _bad(path, f"{where}: graph.wall_run_medians_ms must list one positive wall median (ms) per run median "
                         "of the device figure (the latency reduction's)")
    n_runs = _whole_float_as_int(c["n_runs"])
    if not is_whole(n_runs) or n_runs < 1:
        raise _bad(path, f"{where}: n_runs is {_shown(n_runs)}, not a whole number of runs >= 1 (no quotes)")
    if n_runs != runs:
        raise _bad(path, f"{where}: n_runs is {n_runs}, but graph.run_medians_ms holds {runs} run medians (one per "
                         "run)")


def machines_of(run_hosts: list) -> int:
    """A null counts as a machine of its own."""
    return len({h for h in run_hosts if h is not None}) + sum(h is None for h in run_hosts)


def _hosts(path: Path, data: dict) -> list[str]:
    """``{host, runs, cpu}`` objects, each machine once."""
    hosts = data.get("hosts")
    fix = 'a list of {"host": GPU UUID, "runs": whole number >= 1, "cpu": text or null}'
    if not isinstance(hosts, list):
        raise _bad(path, f"hosts is {_shown(hosts) if 'hosts' in data else 'missing'}, not {fix}")
    names = []
    for i, h in enumerate(hosts):
        if not isinstance(h, dict):
            raise _bad(path, f"hosts[{i}] is {_shown(h)}, not an object: hosts is {fix}")
        if not isinstance(h.get("host"), str) or not h["host"]:
            raise _bad(path, f"hosts[{i}].host is {_shown(h.get('host'))}, not the machine's GPU UUID (text)")
        if not is_whole(h.get("runs")) or h["runs"] < 1:
            raise _bad(path, f"hosts[{i}].runs is {_shown(h.get('runs'))}, not a whole number of runs >= 1")
        if h.get("cpu") is not None and not isinstance(h["cpu"], str):
            raise _bad(path, f"hosts[{i}].cpu is {_shown(h['cpu'])}, not text or null")
        if h["host"] in names:
            raise _bad(path, f"hosts lists machine {h['host']} twice (hosts[{names.index(h['host'])}] and hosts[{i}])")
        names.append(h["host"])
    return names


def _check_machines(path: Path, where: str, c: dict, hosts: list[str]) -> None:
    for variant in (GATED, REF):
        point = c[variant]
        run_hosts = point.get("run_hosts")
        if run_hosts is None and variant == GATED:
            raise _bad(path, f"{where}: graph.run_hosts is missing: a schema-3 baseline records the machine of every "
                             "run median")
        if run_hosts is None:
            continue
        if not (isinstance(run_hosts, list) and len(run_hosts) == len(point["run_medians_ms"])
                and all(h is None or isinstance(h, str) for h in run_hosts)):
            raise ValueError(f"{where}: {variant}.run_hosts must list one host (text or null) per run median")
        unknown = next((h for h in run_hosts if h is not None and hosts and h not in hosts), None)
        if unknown is not None:
            raise _bad(path, f"{where}: {variant}.run_hosts names machine {unknown}, which hosts does not list "
                             f"({', '.join(hosts)})")
    g = c[GATED]
    machines = machines_of(g["run_hosts"])
    if g.get("host_medians_ms") is not None and len(g["host_medians_ms"]) != machines:
        raise _bad(path, f"{where}: graph.host_medians_ms holds {len(g['host_medians_ms'])} medians, but "
                         f"graph.run_hosts names {machines} machine{'s' if machines != 1 else ''} (one median per "
                         "machine)")


def _refuse_machine_fields(path: Path, fields) -> None:
    """Raise for the first of ``fields`` a schema-2 file carries (non-null)."""
    for name, value in fields:
        if value is not None:
            raise _bad(path, f"{name} is a schema-3 machine field, but the file says schema_version 2 (one "
                             "machine, no machine record)")


def _check_machine_thresholds(path: Path, cases: dict, thresholds: dict, hosts: list[str]) -> None:
    """Present exactly when the cases measured one, ``cross_host_df`` at most cases x machines."""
    cross, df = thresholds.get("cross_host_spread_pct"), thresholds.get("cross_host_df")
    spanning = [key for key, c in cases.items()
                if machines_of(c[GATED]["run_hosts"]) >= 2 and _repeats_a_machine(c[GATED]["run_hosts"])]
    if cross is None and len(hosts) >= 2 and spanning:
        raise _bad(path, f"thresholds.cross_host_spread_pct is missing, but hosts lists {len(hosts)} machines and "
                         f"{len(spanning)} case(s) were measured on several of them (first: "
                         f"{case_name(spanning[0])}): a run of another machine would be judged without the spread "
                         "between machines")
    if cross is not None and len(hosts) < 2 and not spanning:
        raise _bad(path, f"thresholds.cross_host_spread_pct is {cross:g}, but hosts lists {len(hosts)} machine"
                         f"{'s' if len(hosts) != 1 else ''} and no case was measured on 2 or more: a spread "
                         "across machines needs them")
    if (cross is None) != (df is None):
        raise _bad(path, "thresholds.cross_host_df and thresholds.cross_host_spread_pct go together (the pooled spread "
                         "across machines and its degrees of freedom): one of them is missing")
    machines = max([len(hosts), *(machines_of(c[GATED]["run_hosts"]) for c in cases.values())])
    if df is not None and df > len(cases) * machines:
        raise _bad(path, f"thresholds.cross_host_df is {df:.0f}, more than the file's {len(cases)} cases x {machines} "
                         f"machines ({len(cases) * machines}) can give")


def _repeats_a_machine(run_hosts: list) -> bool:
    named = [h for h in run_hosts if h is not None]
    return len(named) > len(set(named))


def _check_case(path: Path, key: tuple[str, str, int], case: dict) -> None:
    """InputFileError for a non-boolean ``gated`` or a ``min_reduction_pct`` ``--min-reduction`` would refuse."""
    where = f"baseline {path}, case {case_name(key)}"
    if "gated" in case and not isinstance(case["gated"], bool):
        raise InputFileError(f"{where}: gated is {json.dumps(case['gated'])}, not true or false: write "
                             '"gated": true or "gated": false (a JSON boolean, no quotes)')
    value = case.get("min_reduction_pct")
    if value is None:
        return
    fix = ("write a percent in [0, 100) such as 30, as --min-reduction takes, or null to use "
           "thresholds.min_reduction_pct")
    if not is_number(value):
        raise InputFileError(f"{where}: min_reduction_pct must be a number, got {json.dumps(value)}: {fix}")
    try:
        parse_reduction_pct(str(value))
    except argparse.ArgumentTypeError as exc:
        raise InputFileError(f"{where}: min_reduction_pct: {exc}: {fix}") from None


def _check_capture_cost(path: Path, where: str, c: dict, *, required: bool) -> None:
    """Null, or ``capture_ms`` > 0 ms with a percent spread and ``pool_left_mib`` null or finite MiB of 2+ runs
    (``required``: schema 4). InputFileError naming the field."""
    if required and "capture_cost" not in c:
        raise _bad(path, f"{where}: capture_cost is missing: a schema-4 baseline records it in every case (null "
                         "when the runs recorded no capture time)")
    cost = c.get("capture_cost")
    if cost is None:
        return
    if not isinstance(cost, dict) or not isinstance(cost.get("capture_ms"), dict):
        raise _bad(path, f"{where}: capture_cost is {_shown(cost)}, not an object with capture_ms")
    cap = cost["capture_ms"]
    values = cap.get("run_values_ms")
    if not (isinstance(values, list) and values and all(is_positive(x) for x in values)):
        raise _bad(path, f"{where}: capture_cost.capture_ms.run_values_ms is {_shown(values)}, not a list of "
                         "capture times > 0 ms")
    if not is_positive(cap.get("median_ms")):
        raise _bad(path, f"{where}: capture_cost.capture_ms.median_ms is {_shown(cap.get('median_ms'))}, not a "
                         "capture time > 0 ms")
    spread = cap.get("spread_pct")
    if spread is not None:
        try:
            if not is_finite(spread) or len(values) < 2:
                raise argparse.ArgumentTypeError("not a finite percent from 2 or more runs")
            parse_spread_pct(str(spread))
        except argparse.ArgumentTypeError as exc:
            raise _bad(path, f"{where}: capture_cost.capture_ms.spread_pct is {_shown(spread)}: {exc}") from None
    mem = cost.get("pool_left_mib")
    if mem is None:
        return
    runs = mem.get("run_values_mib") if isinstance(mem, dict) else None
    if not (isinstance(runs, list) and len(runs) >= 2 and all(is_finite(x) for x in runs)
            and is_finite(mem.get("median_mib"))):
        raise _bad(path, f"{where}: capture_cost.pool_left_mib is {_shown(mem)}, not null or "
                         "{median_mib, run_values_mib} of finite MiB from 2 or more runs")
