"""``cudagraph-bench run``: measure eager vs CUDA graph replay (and padded, bucketed, torch.compile
variants) for a matrix of models x dtypes x prompt lengths, by hand, without pytest.

The standalone form of the source spec's ``cuda_graph_benchmark.py``::

    cudagraph-bench run --model gpt2 --prompt-lengths 50,128 --dtype float32 --iters 100 --warmup 10 \\
        --variants eager,graph,padded,compile,compile+graph -o out/run

The cases are planned by :mod:`cudagraph_bench.measure.plan` and run by :mod:`cudagraph_bench.measure.execute`;
this module is the command: options, the TOML config, the table and the files it writes.
For each case it builds the variant (:func:`cudagraph_bench.measure.variants.build_variant`), checks it
against eager on fresh random inputs (static output poisoned with NaN first), times ``--rounds``
calls on new random inputs (synchronized wall time and CUDA events, garbage collector off; the
process pinned to ``--cpus`` when given), and writes to the ``-o/--output-dir`` folder:

- ``run.json``: pytest-benchmark JSON, the same format ``pytest --benchmark-json`` writes and
  ``gate``/``compare``/``report`` read (per-round data in ``stats.data``, seconds); cases that failed
  or were skipped are listed under ``"cudagraph_bench"]["failures"]`` with their reason;
- ``latency_comparison.png`` and ``speedup_vs_length.png`` (:mod:`cudagraph_bench.report.plots`);
- ``workers.log``: stderr of the isolated workers (torch.compile logs, crash traces).

``run.json`` is rewritten (atomically) after every case, so a run stopped half-way keeps its data.
Risky variants (``--isolate``, default compile,compile+graph) run in worker subprocesses
(:func:`cudagraph_bench.measure.isolation.run_isolated`): a crash or a hang fails that case only.

Matrix from a TOML file (``--config``; flags given on the command line win)::

    models = ["gpt2", "tinyllama-1.1b"]
    prompt_lengths = [16, 32, 64, 128, 256, 512, 1024]
    dtypes = ["float32"]
    variants = ["eager", "graph", "compile", "compile+graph"]
    rounds = 100
    [[sweep]]                       # optional: extra sub-matrices, each inheriting the keys above
    models = ["bert-tiny"]
    prompt_lengths = [16, 128, 512]

Models of ``--models`` the suite cannot measure are refused up front, each with its reason on stderr and in
``run.json`` (``["cudagraph_bench"]["refused"]``); the others run.

Exit codes: 0 every measured case correct, the rest skipped up front; 1 a case failed or mismatched, a model
was refused, or no case was measured (all results are still written); 2 usage error (every model refused).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cudagraph_bench.errors import UsageError
from cudagraph_bench.fsio import check_output_folder
from cudagraph_bench.options import (DEFAULT_ISOLATED, MATRIX_OPTIONS, MAX_SEED, add_to_argparse, parse_cpus,
                                     parse_dtypes, parse_models, parse_path, parse_prompt_lengths, parse_seed)
from cudagraph_bench.measure.case import CaseResult
from cudagraph_bench.measure.execute import execute
from cudagraph_bench.measure.isolation import DEFAULT_CASE_TIMEOUT_S
from cudagraph_bench.measure.plan import DEFAULT_OUTDIR, Matrix, RunSettings, plan_cases
from cudagraph_bench.measure.settings import OPTION_FIELDS
from cudagraph_bench.measure.run_json import build_run_json, machine_and_commit_info, write_json_atomic
from cudagraph_bench.measure.variants import CUDA_VARIANTS, RUN_VARIANTS

#: Defaults of ``run`` that differ from the shared matrix defaults: the source spec's script measures
#: one model (gpt2) at one prompt length (50 tokens) in float32, at least 100 rounds.
RUN_DEFAULTS = {"models": ("gpt2",), "prompt_lengths": (50,), "dtypes": ("float32",), "rounds": 100}
DEFAULT_VARIANTS = ("eager", "graph", "padded")
#: What ``--device cpu`` runs when no variants are given: graph replay needs a CUDA GPU.
CPU_VARIANTS = ("eager",)
RUN_JSON = "run.json"
LATENCY_PNG = "latency_comparison.png"
SPEEDUP_PNG = "speedup_vs_length.png"
#: Aliases named in the source spec / issue -> dest of the shared option.
ALIASES = (("--model", "models"), ("--dtype", "dtypes"), ("--iters", "rounds"), ("--warmup", "warmup_rounds"))
#: Keys of a sub-matrix (top level or ``[[sweep]]``) -> parser of a comma-separated string.
MATRIX_KEYS = {"models": parse_models, "prompt_lengths": parse_prompt_lengths, "dtypes": parse_dtypes}


def parse_variants(text: str) -> tuple[str, ...]:
    """``"eager,graph"`` -> ``("eager", "graph")`` (each one of :data:`~cudagraph_bench.measure.variants.RUN_VARIANTS`)."""
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise argparse.ArgumentTypeError(f"empty item in {text!r}: give e.g. 'eager,graph'")
    for item in items:
        if item not in RUN_VARIANTS:
            raise argparse.ArgumentTypeError(f"unknown variant {item!r}: use {', '.join(RUN_VARIANTS)}")
    return tuple(dict.fromkeys(items))


def parse_isolate(text: str) -> tuple[str, ...]:
    """Variants to run in worker subprocesses; ``"none"`` for none."""
    return () if text.strip().lower() == "none" else parse_variants(text)


def parse_seconds(text: str) -> float:
    """A positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds (e.g. 600), got {text!r}")
    return value


def parse_overrides(text: str) -> dict:
    """JSON object of preset config fields (testing: tiny models on CPU)."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--model-overrides is not JSON ({exc.msg}): give e.g. "
                                         "'{\"n_layer\": 1}'") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("--model-overrides must be a JSON object such as '{\"n_layer\": 1}'")
    return value


#: Parsers of the non-matrix settings (config values go through the same parsers as the flags): those of the
#: shared options (:data:`~cudagraph_bench.measure.settings.OPTION_FIELDS`), then ``run``'s own.
SETTING_PARSERS = {**{o.dest: o.type for o in MATRIX_OPTIONS if o.dest in OPTION_FIELDS},
                   "isolate": parse_isolate, "case_timeout_s": parse_seconds, "seed": parse_seed,
                   "time_budget_s": parse_seconds, "variants": parse_variants}
#: Top-level keys of the TOML config that are not matrix keys.
SETTING_KEYS = tuple(k for k in SETTING_PARSERS if k != "variants")


@dataclass(frozen=True)
class Given:
    """A value given on the command line (not a default): such values win over ``--config``."""

    value: object


def _given(parse):
    def wrapped(text: str) -> Given:
        return Given(parse(text))

    wrapped.__name__ = getattr(parse, "__name__", "value")
    return wrapped


class StoreOneName(argparse.Action):
    """argparse's store, except that an option given under two names (``--rounds 5 --iters 7``, an
    alias and its option) is a usage error instead of the last one silently winning."""

    def __call__(self, parser, namespace, values, option_string=None):
        names = namespace.__dict__.setdefault("_option_names", {})
        first = names.setdefault(self.dest, option_string)
        if first != option_string:
            parser.error(f"{first} and {option_string} are the same option: give one of them")
        setattr(namespace, self.dest, values)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_to_argparse(parser, MATRIX_OPTIONS, action=StoreOneName)
    parser.set_defaults(**RUN_DEFAULTS)
    by_dest = {o.dest: o for o in MATRIX_OPTIONS}
    for flag, dest in ALIASES:  # same dest and parser as the shared option; no default of their own
        parser.add_argument(flag, dest=dest, type=by_dest[dest].type, default=argparse.SUPPRESS,
                            action=StoreOneName, help=f"alias of {by_dest[dest].flag}")
    parser.add_argument("--variants", type=parse_variants, default=DEFAULT_VARIANTS,
                        help=f"comma-separated variants: {', '.join(RUN_VARIANTS)} (default: %(default)s)")
    parser.add_argument("--config", metavar="TOML", default=None,
                        help="TOML file with the matrix (models, prompt_lengths, dtypes, variants, [[sweep]] ...); "
                             "flags given on the command line win")
    parser.add_argument("-o", "--output-dir", dest="outdir", type=parse_path, default=DEFAULT_OUTDIR, metavar="DIR",
                        help="folder for run.json and the PNGs (default: %(default)s)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cuda (default), or cpu: eager only (its default variants), to try the pipeline "
                             "without a GPU")
    parser.add_argument("--isolate", type=parse_isolate, default=DEFAULT_ISOLATED,
                        help="variants run in a worker subprocess, so a crash fails one case only "
                             "(default: %(default)s; 'none' for none)")
    parser.add_argument("--case-timeout", dest="case_timeout_s", type=parse_seconds, default=DEFAULT_CASE_TIMEOUT_S,
                        help="seconds an isolated case may take (compile included) before its worker is killed "
                             "(default: %(default)s)")
    parser.add_argument("--time-budget", dest="time_budget_s", type=parse_seconds, default=None,
                        help="stop starting cases this many seconds after the command started; the rest are "
                             "recorded as skipped (bound a run to a time slot); an isolated case still running then "
                             "is stopped (its CUDA teardown and the PNGs take some seconds more)")
    parser.add_argument("--seed", type=parse_seed, default=0,
                        help=f"seed of weights and inputs, 0 to {MAX_SEED} (default: 0)")
    parser.add_argument("--cpus", type=parse_cpus, default=None, metavar="LIST",
                        help="pin the run (and its workers) to these CPUs, e.g. 0-7 or 0,2,4-6 (default: no pinning)")
    parser.add_argument("--model-overrides", dest="overrides", type=parse_overrides, default=None,
                        help=argparse.SUPPRESS)  # testing: JSON of preset config fields (tiny models on CPU)
    for action in parser._actions:  # mark command-line values, so that they win over --config
        if action.type is not None and action.dest != "overrides":
            action.type = _given(action.type)


# --------------------------------------------------------------------------------------------------
# settings: command line + TOML config


def _as_text(value) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    if isinstance(value, bool):
        raise argparse.ArgumentTypeError(f"expected a value, got a boolean ({value})")
    return str(value)


#: Config keys whose value is a list (the others take one value).
LIST_KEYS = frozenset({"models", "prompt_lengths", "dtypes", "variants", "buckets", "isolate"})


def _parse_config_value(path: str, where: str, key: str, value, parser):
    if isinstance(value, (list, tuple)) and key not in LIST_KEYS:
        raise UsageError(f"{path}: {where}key '{key}': expected one value, got a list ({value!r})")
    try:
        return parser(_as_text(value))
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"{path}: {where}key '{key}': {exc}") from None


def load_config(path: str) -> tuple[dict, list[dict]]:
    """Read a TOML matrix config. Returns ``(top-level settings, [sweep dicts])`` with every value
    parsed by the same parser as its command-line flag.

    Raises:
        UsageError: missing/unreadable file, invalid TOML, an unknown key or a bad value (the message
            names the file and the key).
    """
    import tomllib

    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except FileNotFoundError:
        raise UsageError(f"config file not found: {path}") from None
    except OSError as exc:
        raise UsageError(f"cannot read config {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8 text: save the TOML config as UTF-8") from None
    matrix_parsers = {**MATRIX_KEYS, "variants": parse_variants}
    known = sorted([*matrix_parsers, *SETTING_KEYS, "sweep"])
    top: dict = {}
    for key, value in doc.items():
        if key == "sweep":
            continue
        parser = matrix_parsers.get(key) or SETTING_PARSERS.get(key)
        if parser is None:
            raise UsageError(f"{path}: unknown key '{key}': use one of {', '.join(known)}")
        top[key] = _parse_config_value(path, "", key, value, parser)
    sweeps = []
    raw_sweeps = doc.get("sweep", [])
    if not isinstance(raw_sweeps, list) or not all(isinstance(s, dict) for s in raw_sweeps):
        raise UsageError(f"{path}: key 'sweep' must be an array of tables ([[sweep]] sections)")
    if "sweep" in doc and not raw_sweeps:
        raise UsageError(f"{path}: 'sweep' is empty: give at least one [[sweep]] table, or remove the key")
    for i, raw in enumerate(raw_sweeps):
        sweep = {}
        for key, value in raw.items():
            if key not in matrix_parsers:
                raise UsageError(f"{path}: [[sweep]] #{i + 1}: unknown key '{key}': use one of "
                                 f"{', '.join(matrix_parsers)}")
            sweep[key] = _parse_config_value(path, f"[[sweep]] #{i + 1}: ", key, value, matrix_parsers[key])
        sweeps.append(sweep)
    return top, sweeps


def resolve_settings(args: argparse.Namespace) -> RunSettings:
    """:func:`merge_settings`, then :func:`check_device`. Raises :class:`UsageError`."""
    settings = merge_settings(args)
    check_device(settings)
    return settings


def merge_settings(args: argparse.Namespace) -> RunSettings:
    """Merge the command line, ``--config`` and the defaults (flags given on the command line win over
    the config, which wins over the defaults). Raises :class:`UsageError` for a bad config.

    With ``[[sweep]]`` tables the cases are the union of the sweeps; each sweep takes the keys it
    does not set from the top level (config, then command line defaults). Matrix flags given on the
    command line override every sweep.
    """
    names = ("models", "prompt_lengths", "dtypes", "variants", *SETTING_KEYS)
    values, explicit = {}, set()
    for key in names:
        if hasattr(args, key):
            value = getattr(args, key)
            if isinstance(value, Given):
                explicit.add(key)
                value = value.value
            values[key] = value
    sweeps: list[dict] = [{}]
    chosen = "variants" in explicit
    if args.config:
        top, config_sweeps = load_config(args.config)
        values.update({k: v for k, v in top.items() if k not in explicit})
        sweeps = config_sweeps or [{}]
        chosen = chosen or "variants" in top
    if args.device == "cpu" and not chosen:
        values["variants"] = CPU_VARIANTS  # the default variants need a GPU; a chosen one is checked
    base = {k: values[k] for k in ("models", "prompt_lengths", "dtypes", "variants")}
    matrices = [Matrix(**{**base, **{k: v for k, v in s.items() if k not in explicit}}) for s in sweeps]
    return RunSettings(matrices=matrices, device=args.device, outdir=_plain(args.outdir),
                       overrides=_plain(args.overrides), config=args.config,
                       **{k: values[k] for k in SETTING_KEYS if k in values})


def _plain(value):
    return value.value if isinstance(value, Given) else value


def check_device(settings: RunSettings) -> None:
    """Refuse graph/compile variants without a CUDA GPU, before any model is built.

    Raises:
        UsageError: "graph variants need a CUDA GPU ..." (``--device cpu`` with a non-eager variant, or
            ``--device cuda`` on a machine where ``torch.cuda.is_available()`` is False).
    """
    needs_cuda = [v for v in settings.variants if v in CUDA_VARIANTS]
    if settings.device == "cpu":
        if needs_cuda:
            raise UsageError(f"graph variants need a CUDA GPU: --device cpu runs only --variants eager "
                             f"(drop {', '.join(needs_cuda)})")
        return
    import torch

    if not torch.cuda.is_available():
        if needs_cuda:
            raise UsageError(f"graph variants need a CUDA GPU ({', '.join(needs_cuda)}); torch.cuda.is_available() "
                             "is False here: run on a GPU machine, or try the pipeline with --device cpu --variants eager")
        raise UsageError("no CUDA GPU (torch.cuda.is_available() is False): use --device cpu")


# --------------------------------------------------------------------------------------------------
# progress and the table


def _label(r) -> str:
    return f"{r.model} {r.dtype} L={r.seq_len} {r.variant}"


def _one_line(r: CaseResult) -> str:
    if r.wall_ms:
        import numpy as np

        text = f"{_label(r)}: median {float(np.median(r.wall_ms)):.3f} ms"
        if r.compile_ms is not None:
            text += f", compile {r.compile_ms / 1e3:.1f} s"
        return text + ("" if r.status == "ok" else f" [{r.status}: {r.reason}]")
    return f"{_label(r)}: {r.status}: {r.reason}"


class _NoBar:
    """Stand-in for a tqdm bar when tqdm is not installed: per-case lines only."""

    def update(self, n: int = 1) -> None:
        pass

    def write(self, text: str, file=None) -> None:
        print(text, file=file or sys.stderr)

    def close(self) -> None:
        pass


def progress_bar(total: int):
    """A tqdm progress bar over the cases on stderr (hidden when stderr is not a terminal)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc="cases", unit="case", file=sys.stderr, disable=None)


def accept_models(settings: RunSettings) -> tuple:
    """Check every model of the run's matrices before any case (:func:`cudagraph_bench.models.refusals.check_models`,
    as the pytest suite does): the refused ones leave the matrices, each printed on stderr with its reason
    (``refused:``), the notes too (``note:``). Returns the refusals (for run.json and the exit code).

    Raises:
        UsageError: every model was refused (one line each), or ``--attn-implementation`` is not installed."""
    from dataclasses import replace

    from cudagraph_bench.models.refusals import all_refused_message, check_models, refusal_lines

    models = tuple(dict.fromkeys(m for matrix in settings.matrices for m in matrix.models))
    checks = check_models(models, settings.attn_implementation)
    if not checks.accepted:
        raise UsageError(all_refused_message(checks.refused))
    settings.matrices = [replace(m, models=tuple(x for x in m.models if x in checks.accepted))
                         for m in settings.matrices]
    for line in refusal_lines(checks.refused):
        print(f"refused: {line}", file=sys.stderr)
    for note in checks.notes:
        print(f"note: {note}", file=sys.stderr)
    return checks.refused


def main(args: argparse.Namespace) -> int:
    """Run the matrix; write run.json and the PNGs; print the table. Returns 0, 1 (a case failed or
    differs from eager, or no case was measured) or raises :class:`UsageError` (exit 2)."""
    from datetime import datetime, timezone

    from cudagraph_bench.envinfo import pin_cpus

    t0 = time.monotonic()
    settings = resolve_settings(args)
    pin_cpus(_plain(getattr(args, "cpus", None)))
    refused = accept_models(settings)
    plan = plan_cases(settings)
    outdir = Path(settings.outdir)
    check_output_folder(outdir, [RUN_JSON], create=True)  # before any case is measured
    started = datetime.now(timezone.utc).isoformat()
    machine_info, commit_info = machine_and_commit_info(settings.device)
    extra: dict = {}
    if settings.device == "cuda":
        import torch

        extra["memory_reserved_start_mib"] = torch.cuda.memory_reserved() / 2**20
    if refused:
        from cudagraph_bench.models.refusals import refused_json

        extra["refused"] = refused_json(refused)
    results: list[CaseResult] = list(plan.skipped)
    json_path = outdir / RUN_JSON

    bar = progress_bar(plan.n_cases)
    earlier_plots_removed = False

    def record(result: CaseResult) -> None:
        nonlocal earlier_plots_removed
        if not earlier_plots_removed:  # run.json is about to be this run's: an earlier run's plots go with it
            _remove_earlier_plots(outdir)
            earlier_plots_removed = True
        results.append(result)
        bar.update(1)
        bar.write(_one_line(result), file=sys.stderr)
        write_json_atomic(json_path, build_run_json(results, settings, machine_info=machine_info,
                                                    commit_info=commit_info, started=started, extra=extra))

    for r in plan.skipped:
        print(_one_line(r), file=sys.stderr)
    try:
        execute(plan, settings, record=record, started_at=t0)
    finally:
        bar.close()
    doc = build_run_json(results, settings, machine_info=machine_info, commit_info=commit_info,
                         started=started, extra=extra)
    write_json_atomic(json_path, doc)
    from cudagraph_bench.models.refusals import exit_status

    return exit_status(finish(json_path, outdir, results), refused)


def _remove_earlier_plots(outdir: Path, keep: tuple[Path, ...] | list[Path] = ()) -> None:
    """Remove the plots in ``outdir`` other than ``keep``: an earlier run's, which would not match the
    run.json beside them (a run stopped half-way, or one with less data for plots)."""
    from cudagraph_bench.report import pages as report

    for path in report.stale_plots(outdir, list(keep)):
        path.unlink(missing_ok=True)
        print(f"removed {path}: an earlier run's plot", file=sys.stderr)


def finish(json_path: Path, outdir: Path, results: list[CaseResult]) -> int:
    """Print the table of ``json_path``, write the PNGs next to it. Exit code 1 when a case failed or
    mismatched, or when no case was measured (everything skipped up front is no success); else 0."""
    from cudagraph_bench.report import forward_tables
    from cudagraph_bench.report import pages as report
    from cudagraph_bench.results.runfile import load_run

    measured = any(r.wall_ms for r in results)
    if measured:
        run = load_run(str(json_path))
        rows = forward_tables.forward_rows([run])
        print(forward_tables.render_long_table(rows, fmt="text"))
        print()
        print(forward_tables.render_summary_table(rows, fmt="text"))
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print(f"matplotlib is not installed: no PNGs; render them on another machine with "
                  f"`cudagraph-bench report {json_path} -o DIR`", file=sys.stderr)
        else:
            written = report.write_plots([run], outdir)
            for path in written:
                print(f"wrote {path}", file=sys.stderr)
            _remove_earlier_plots(outdir, written)
    else:
        _remove_earlier_plots(outdir)   # PNGs of an earlier run would not match
        print("no case was measured (exit code 1): see the reasons above", file=sys.stderr)
    print(f"wrote {json_path}", file=sys.stderr)
    skipped = [r for r in results if r.status == "skipped"]
    if skipped:
        reasons = sorted({str(r.reason) for r in skipped})
        print(f"{len(skipped)} of {len(results)} case(s) skipped: {'; '.join(reasons)}", file=sys.stderr)
    bad = [r for r in results if r.status in ("failed", "mismatch")]
    if bad:
        print(f"{len(bad)} case(s) failed or differ from eager: see the table and {json_path}", file=sys.stderr)
        return 1
    return 0 if measured else 1
