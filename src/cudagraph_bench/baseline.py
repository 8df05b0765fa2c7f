"""``cudagraph-bench baseline RUN -o baselines/<gpu>.json``: the versioned per-GPU baseline file.

A baseline (schema_version 1) is JSON with::

    schema_version: 1, kind: "cudagraph-bench-baseline", gpu_slug: "nvidia-h200",
    environment: {cuda: machine_info["cuda"], python, python_implementation, cpu, system, release,
                  machine, pytest_benchmark, commit_info, run_datetime},
    source: {file: run file name, sha256: of the run file},
    thresholds: {min_reduction_pct, max_regression_pct, max_gated_len},
    cases: [{model, dtype, seq_len, gated, min_reduction_pct,
             eager: {median_ms, p95_ms, n}, graph: {median_ms, p95_ms, n},
             reduction_pct, reduction_ci95_pct: [low, high] | null}, ...]

``gate`` reads it to check graph-median regressions and per-case thresholds (edit a case's ``gated`` or
``min_reduction_pct`` by hand to tune it; :func:`load_baseline` validates them as the CLI flags are
validated: ``gated`` true/false, ``min_reduction_pct`` a percent in [0, 100), one entry per case). Medians are
stored rounded to :data:`MEDIAN_DECIMALS` decimals of a ms; ``gate`` rounds a run's median the same way
(:func:`stored_ms`) before comparing, so a run gated against its own baseline never regresses. No torch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cudagraph_bench import stats
from cudagraph_bench.options import parse_count, parse_path, parse_reduction_pct, parse_regression_pct
from cudagraph_bench.errors import InputFileError, UsageError
from cudagraph_bench.runfile import (DEFAULT_STORAGE, Measurement, Run, forward_groups, load_run,
                                     refuse_overwriting_inputs, write_text_atomic)
from cudagraph_bench.table import Column, render_table

SCHEMA_VERSION = 1
KIND = "cudagraph-bench-baseline"
DEFAULT_MIN_REDUCTION_PCT = 30.0
DEFAULT_MAX_REGRESSION_PCT = 10.0
#: Prompt lengths (tokens) up to this are gated by default: launch overhead dominates short prompts.
DEFAULT_MAX_GATED_LEN = 128
#: Decimals of a ms that a baseline file keeps of each median and p95 (6: the ns).
MEDIAN_DECIMALS = 6


@dataclass(frozen=True)
class Baseline:
    """A loaded baseline. ``cases`` maps ``(model, dtype, seq_len)`` to the case dict of the file."""

    path: Path
    gpu_slug: str
    thresholds: dict
    cases: dict[tuple[str, str, int], dict]
    data: dict


def pct(fraction: float) -> float:
    """Fraction -> percent (0.4 -> 40.0)."""
    return 100.0 * fraction


def pair_reduction(eager: Measurement, graph: Measurement) -> tuple[float, tuple[float, float] | None]:
    """Median latency reduction of ``graph`` vs ``eager`` in percent, and its 95% bootstrap interval
    in percent (None when either run kept no per-round data or fewer than
    :data:`~cudagraph_bench.stats.MIN_BOOTSTRAP_ROUNDS` rounds)."""
    red = pct(stats.reduction(eager.summary.median_ms, graph.summary.median_ms))
    if not (eager.can_bootstrap and graph.can_bootstrap):
        return red, None
    low, high = stats.reduction_ci(eager.samples_ms, graph.samples_ms)
    return red, (pct(low), pct(high))


def _environment(run: Run) -> dict:
    mi = run.machine_info
    return {
        "cuda": run.cuda,
        "python": mi.get("python_version"),
        "python_implementation": mi.get("python_implementation"),
        "cpu": (mi.get("cpu") or {}).get("brand_raw"),
        "system": mi.get("system"),
        "release": mi.get("release"),
        "machine": mi.get("machine"),
        "pytest_benchmark": run.data.get("version"),
        "commit_info": run.data.get("commit_info"),
        "run_datetime": run.data.get("datetime"),
    }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def stored_ms(value: float) -> float:
    """A latency in ms rounded as a baseline file stores it (:data:`MEDIAN_DECIMALS` decimals of a ms).
    ``gate`` compares a run's median at this precision with the baseline's stored median."""
    return round(value, MEDIAN_DECIMALS)


def _point(m: Measurement) -> dict:
    """Median and p95 in ms (unrounded) and the number of rounds."""
    return {"median_ms": m.summary.median_ms, "p95_ms": m.summary.p95_ms, "n": m.summary.n}


def stored_case(case: dict) -> dict:
    """A case as the file stores it: median and p95 rounded to the ns (6 decimals of a ms), the
    reduction and its interval to 3 decimals of a percent."""
    ci = case["reduction_ci95_pct"]
    return {**case, **{v: {**case[v], "median_ms": _round(case[v]["median_ms"], MEDIAN_DECIMALS),
                           "p95_ms": _round(case[v]["p95_ms"], MEDIAN_DECIMALS)} for v in ("eager", "graph")},
            "reduction_pct": _round(case["reduction_pct"], 3),
            "reduction_ci95_pct": [_round(x, 3) for x in ci] if ci else None}


def build_baseline(run: Run, *, min_reduction_pct: float = DEFAULT_MIN_REDUCTION_PCT,
                   max_regression_pct: float = DEFAULT_MAX_REGRESSION_PCT,
                   max_gated_len: int = DEFAULT_MAX_GATED_LEN, rounded: bool = True) -> dict:
    """Baseline document (schema_version 1) from a run's forward-suite eager/graph pairs, its cases as
    stored (:func:`stored_case`); ``rounded=False`` keeps the exact values, to print the same one-decimal
    numbers as ``gate`` and ``report`` (rounding twice moves a digit: 78.7495 -> 78.75 -> 78.8).

    Raises InputFileError when the run has no GPU fingerprint (``machine_info["cuda"]["gpu_slug"]``),
    no forward benchmarks, or a case with eager but no graph.
    """
    if run.gpu_slug is None:
        raise InputFileError(f"{run.path} has no machine_info.cuda.gpu_slug: baselines are per GPU; "
                             "record the run on a GPU with the cudagraph-bench plugin")
    cases = []
    for (model, dtype, seq_len), variants in forward_groups(run).items():
        eager, graph = variants["eager"], variants["graph"]
        red, ci = pair_reduction(eager, graph)
        case = {
            "model": model, "dtype": dtype, "seq_len": seq_len,
            "gated": seq_len <= max_gated_len, "min_reduction_pct": min_reduction_pct,
            "eager": _point(eager), "graph": _point(graph),
            "reduction_pct": red, "reduction_ci95_pct": list(ci) if ci else None,
        }
        cases.append(stored_case(case) if rounded else case)
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "gpu_slug": run.gpu_slug,
        "environment": _environment(run),
        "source": {"file": run.path.name, "sha256": run.sha256},
        "thresholds": {"min_reduction_pct": min_reduction_pct, "max_regression_pct": max_regression_pct,
                       "max_gated_len": max_gated_len},
        "cases": cases,
    }


def load_baseline(path: str | Path) -> Baseline:
    """Load and validate a baseline file.

    Raises InputFileError for a missing, empty or invalid file or a folder, for a schema_version other than
    :data:`SCHEMA_VERSION`, and (naming the case and the fix) for a case whose ``seq_len`` is not a whole
    number >= 1 token, whose ``gated`` is not true/false, whose ``min_reduction_pct`` is not a percent in
    [0, 100) (what ``--min-reduction`` accepts; null means the file's threshold), or that is listed twice.
    """
    path = Path(path)
    if path.is_dir():
        raise InputFileError(f"baseline {path} is a folder: give a baseline file such as {path / '<gpu-slug>.json'}")
    if not path.is_file():
        raise InputFileError(f"no such baseline file: {path}: write one with "
                             "cudagraph-bench baseline RUN -o baselines/<gpu>.json")
    raw = path.read_bytes()
    if not raw.strip():
        raise InputFileError(f"baseline {path} is empty: rewrite it with cudagraph-bench baseline RUN -o {path}")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputFileError(f"baseline {path} is not valid JSON (truncated?): rewrite it with "
                             f"cudagraph-bench baseline RUN -o {path}") from None
    if not isinstance(data, dict) or "schema_version" not in data:
        hint = ("it looks like a pytest-benchmark run: pass it as RUN and this file as --baseline, or write "
                "a baseline from it with cudagraph-bench baseline RUN -o baselines/<gpu>.json"
                if isinstance(data, dict) and "benchmarks" in data else
                "write one with cudagraph-bench baseline RUN -o baselines/<gpu>.json")
        raise InputFileError(f"{path} is not a cudagraph-bench baseline (no schema_version): {hint}")
    if data["schema_version"] != SCHEMA_VERSION:
        raise InputFileError(f"baseline {path} has unknown schema_version {data['schema_version']!r} "
                             f"(this cudagraph-bench reads {SCHEMA_VERSION}): regenerate it with "
                             f"cudagraph-bench baseline RUN -o {path}")
    try:
        if not isinstance(data["cases"], list):
            raise TypeError(f"cases must be a list, got {type(data['cases']).__name__}")
        cases = {}
        for index, c in enumerate(data["cases"]):
            key = (str(c["model"]), str(c["dtype"]), _case_seq_len(path, index, c["seq_len"]))
            if key in cases:
                first = next(i for i, other in enumerate(data["cases"]) if other is cases[key])
                raise InputFileError(f"baseline {path} lists case {_case_name(key)} twice (cases[{first}] and "
                                     f"cases[{index}]): delete one of them, or regenerate the file with "
                                     f"cudagraph-bench baseline RUN -o {path}")
            _check_case(path, key, c)
            cases[key] = c
            if not float(c["graph"]["median_ms"]) > 0:
                raise ValueError("a graph median_ms is not > 0")
        if not cases:
            raise ValueError("it holds no cases")
        gpu = str(data["gpu_slug"])
        raw_thresholds = data.get("thresholds", {})
        if not isinstance(raw_thresholds, dict):
            raise TypeError(f"thresholds must be an object, got {raw_thresholds!r}")
        thresholds = {}
        for key, parse in (("min_reduction_pct", parse_reduction_pct), ("max_regression_pct", parse_regression_pct),
                           ("max_gated_len", parse_count)):
            value = raw_thresholds.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"thresholds.{key} must be a number, got {value!r}")
            if isinstance(value, float) and value.is_integer() and key == "max_gated_len":
                value = int(value)
            try:
                thresholds[key] = float(parse(str(value)))
            except argparse.ArgumentTypeError as exc:
                raise ValueError(f"thresholds.{key}: {exc}") from None
    except InputFileError:
        raise  # already one line naming the case and the fix (InputFileError is a ValueError)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputFileError(f"baseline {path} is malformed ({type(exc).__name__}: {exc}): "
                             f"regenerate it with cudagraph-bench baseline RUN -o {path}") from None
    return Baseline(path=path, gpu_slug=gpu, thresholds=thresholds, cases=cases, data=data)


def _case_name(key: tuple[str, str, int]) -> str:
    return "{} {} L={}".format(*key)


def _case_seq_len(path: Path, index: int, value) -> int:
    """A case's prompt length in tokens: a whole number >= 1 (``50.0`` is read as 50)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputFileError(f"baseline {path}: cases[{index}] has seq_len {json.dumps(value)}: a prompt length "
                             f"is a whole number of tokens >= 1; fix it, or regenerate the file with "
                             f"cudagraph-bench baseline RUN -o {path}")
    return value


def _check_case(path: Path, key: tuple[str, str, int], case: dict) -> None:
    """Raise InputFileError (naming the file, the case and the fix) for a hand-edited ``gated`` that is not
    a JSON boolean or a ``min_reduction_pct`` that ``--min-reduction`` would refuse."""
    where = f"baseline {path}, case {_case_name(key)}"
    if "gated" in case and not isinstance(case["gated"], bool):
        raise InputFileError(f"{where}: gated is {json.dumps(case['gated'])}, not true or false: write "
                             '"gated": true or "gated": false (a JSON boolean, no quotes)')
    value = case.get("min_reduction_pct")
    if value is None:
        return
    fix = ("write a percent in [0, 100) such as 30, as --min-reduction takes, or null to use "
           "thresholds.min_reduction_pct")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputFileError(f"{where}: min_reduction_pct must be a number, got {json.dumps(value)}: {fix}")
    try:
        parse_reduction_pct(str(value))
    except argparse.ArgumentTypeError as exc:
        raise InputFileError(f"{where}: min_reduction_pct: {exc}: {fix}") from None


BASELINE_COLUMNS = [
    Column("model", "model"), Column("dtype", "dtype"), Column("seq_len", "L", "d"),
    Column("eager_ms", "eager ms", ".3f"), Column("eager_p95_ms", "eager p95", ".3f"),
    Column("graph_ms", "graph ms", ".3f"), Column("graph_p95_ms", "graph p95", ".3f"),
    Column("reduction_pct", "reduction %", ".1f"), Column("ci", "95% CI"), Column("gated", "gated"),
]


def baseline_rows(doc: dict) -> list[dict]:
    """Table rows (for :data:`BASELINE_COLUMNS`) of a baseline document."""
    rows = []
    for c in doc["cases"]:
        ci = c.get("reduction_ci95_pct")
        rows.append({"model": c["model"], "dtype": c["dtype"], "seq_len": c["seq_len"],
                     "eager_ms": c["eager"]["median_ms"], "eager_p95_ms": c["eager"]["p95_ms"],
                     "graph_ms": c["graph"]["median_ms"], "graph_p95_ms": c["graph"]["p95_ms"],
                     "reduction_pct": c["reduction_pct"],
                     "ci": f"[{ci[0]:.1f}, {ci[1]:.1f}]" if ci else None,
                     "gated": "yes" if c["gated"] else "no"})
    return rows


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``cudagraph-bench baseline RUN -o FILE``."""
    parser.add_argument("run", metavar="RUN", help="pytest-benchmark JSON of a GPU run (path or saved-run id, "
                                                   "e.g. 0001)")
    parser.add_argument("-o", "--output", required=True, type=parse_path, metavar="FILE",
                        help="baseline file to write, by convention baselines/<gpu_slug>.json")
    parser.add_argument("--storage", default=DEFAULT_STORAGE, metavar="DIR",
                        help="where saved-run ids are looked up (default: %(default)s)")
    parser.add_argument("--min-reduction", type=parse_reduction_pct, default=DEFAULT_MIN_REDUCTION_PCT, metavar="PCT",
                        help="per-case minimum median latency reduction stored for gated cases "
                             "(default: %(default)s)")
    parser.add_argument("--max-regression", type=parse_regression_pct, default=DEFAULT_MAX_REGRESSION_PCT, metavar="PCT",
                        help="allowed graph-median slow-down vs this baseline (default: %(default)s)")
    parser.add_argument("--max-gated-len", type=parse_count, default=DEFAULT_MAX_GATED_LEN, metavar="TOKENS",
                        help="cases with prompt length <= this are gated (default: %(default)s)")


def check_output_file(path: str | os.PathLike, flag: str, example: str) -> None:
    """Raise :class:`UsageError` (one line, before anything is printed or written) when ``path`` cannot be
    written by :func:`~cudagraph_bench.runfile.write_text_atomic`: it is a folder, a parent is a file, or
    the nearest existing folder (missing ones are created on write) refuses a new file. Probes by creating
    and removing a hidden temporary file there (``os.access`` says yes to root even on ``/proc``).
    ``example``: a file name to suggest inside a folder."""
    out = Path(path)
    if out.is_dir():
        raise UsageError(f"{flag} {out} is a directory: give a file such as {out / example}")
    folder = next(p for p in (out.parent, *out.parent.parents) if p.exists() or p == Path(p.anchor or "."))
    if not folder.is_dir():
        raise UsageError(f"{flag} {out}: {folder} is a file, not a folder: choose another path for {out.name}")
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=f".{out.name}.", suffix=".probe")
    except OSError as exc:
        raise UsageError(f"{flag} {out} cannot be written: {folder} does not take new files "
                         f"({exc.strerror or exc}): choose a path in a writable folder") from None
    os.close(fd)
    os.unlink(probe)


def main(args: argparse.Namespace) -> int:
    """Run ``cudagraph-bench baseline RUN -o FILE``. Returns 0; bad input or an output path that cannot be
    written raises :class:`~cudagraph_bench.errors.UsageError` (exit 2) before anything is printed or
    written."""
    run = load_run(args.run, args.storage)
    refuse_overwriting_inputs(args.output, "-o", [run.path])
    exact = build_baseline(run, min_reduction_pct=args.min_reduction, max_regression_pct=args.max_regression,
                           max_gated_len=args.max_gated_len, rounded=False)
    doc = {**exact, "cases": [stored_case(c) for c in exact["cases"]]}
    out = Path(args.output)
    check_output_file(out, "-o", doc["gpu_slug"] + ".json")
    if out.parent.name == "baselines" and out.stem != doc["gpu_slug"]:
        print(f"cudagraph-bench baseline: warning: {out} is named for another GPU; gate looks up "
              f"baselines/{doc['gpu_slug']}.json for this run", file=sys.stderr)
    print(render_table(BASELINE_COLUMNS, baseline_rows(exact)))  # exact values: printed as gate prints them
    write_text_atomic(out, json.dumps(doc, indent=2) + "\n")
    n_gated = sum(c["gated"] for c in doc["cases"])
    print(f"wrote {out}: {len(doc['cases'])} cases ({n_gated} gated), GPU {doc['gpu_slug']}, "
          f"from {run.path.name} (sha256 {run.sha256[:12]})")
    return 0
