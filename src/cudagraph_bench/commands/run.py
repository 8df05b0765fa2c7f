"""``cudagraph-bench run``: measure eager vs CUDA graph replay (and padded, bucketed, torch.compile
variants) for a matrix of models x dtypes x prompt lengths, by hand, without pytest.

The standalone form of the source spec's ``cuda_graph_benchmark.py``::

    cudagraph-bench run --model gpt2 --prompt-lengths 50,128 --dtype float32 --iters 100 --warmup 10 \\
        --variants eager,graph,padded,compile,compile+graph -o out/run

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

Exit codes: 0 every measured case correct, the rest skipped up front; 1 a case failed or mismatched,
or no case was measured (all results are still written); 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace

from cudagraph_bench.errors import UsageError
from cudagraph_bench.fsio import check_output_folder
from cudagraph_bench.options import (DEFAULT_BUCKETS, DEFAULT_ISOLATED, DEFAULT_PAD_TO, DEFAULT_ROUNDS,
                                     DEFAULT_WARMUP_ROUNDS, MATRIX_OPTIONS, add_to_argparse, parse_buckets, parse_count, parse_cpus,
                                     parse_dtypes, parse_models, parse_nonneg, parse_path, parse_prompt_lengths,
                                     parse_rounds, parse_warmup_rounds)
from cudagraph_bench.measure.case import CaseResult, CaseSpec
from cudagraph_bench.measure.isolation import DEFAULT_CASE_TIMEOUT_S
from cudagraph_bench.measure.run_json import build_run_json, machine_and_commit_info, write_json_atomic
from cudagraph_bench.measure.variants import CUDA_VARIANTS, RUN_VARIANTS

#: Defaults of ``run`` that differ from the shared matrix defaults: the source spec's script measures
#: one model (gpt2) at one prompt length (50 tokens) in float32.
RUN_DEFAULTS = {"models": ("gpt2",), "prompt_lengths": (50,), "dtypes": ("float32",)}
DEFAULT_VARIANTS = ("eager", "graph", "padded")
#: What ``--device cpu`` runs when no variants are given: graph replay needs a CUDA GPU.
CPU_VARIANTS = ("eager",)
DEFAULT_OUTDIR = "out/run"
RUN_JSON = "run.json"
LATENCY_PNG = "latency_comparison.png"
SPEEDUP_PNG = "speedup_vs_length.png"
#: Aliases named in the source spec / issue -> dest of the shared option.
ALIASES = (("--model", "models"), ("--dtype", "dtypes"), ("--iters", "rounds"), ("--warmup", "warmup_rounds"))
#: Keys of a sub-matrix (top level or ``[[sweep]]``) -> parser of a comma-separated string.
MATRIX_KEYS = {"models": parse_models, "prompt_lengths": parse_prompt_lengths, "dtypes": parse_dtypes}
#: Top-level keys of the TOML config that are not matrix keys.
SETTING_KEYS = ("rounds", "warmup_rounds", "pad_to", "buckets", "isolate", "case_timeout_s", "check_inputs",
                "seed", "time_budget_s")


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


#: Parsers of the non-matrix settings (config values go through the same parsers as the flags).
SETTING_PARSERS = {"rounds": parse_rounds, "warmup_rounds": parse_warmup_rounds, "pad_to": parse_count,
                   "buckets": parse_buckets, "isolate": parse_isolate, "case_timeout_s": parse_seconds,
                   "check_inputs": parse_count, "seed": parse_nonneg, "time_budget_s": parse_seconds,
                   "variants": parse_variants}


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
    parser.add_argument("--check-inputs", dest="check_inputs", type=parse_count, default=3,
                        help="fresh random inputs of the correctness check against eager (default: %(default)s)")
    parser.add_argument("--seed", type=parse_nonneg, default=0, help="seed of weights and inputs (default: 0)")
    parser.add_argument("--cpus", type=parse_cpus, default=None, metavar="LIST",
                        help="pin the run (and its workers) to these CPUs, e.g. 0-7 or 0,2,4-6 (default: no pinning)")
    parser.add_argument("--model-overrides", dest="overrides", type=parse_overrides, default=None,
                        help=argparse.SUPPRESS)  # testing: JSON of preset config fields (tiny models on CPU)
    for action in parser._actions:  # mark command-line values, so that they win over --config
        if action.type is not None and action.dest != "overrides":
            action.type = _given(action.type)


# --------------------------------------------------------------------------------------------------
# settings: command line + TOML config


@dataclass(frozen=True)
class Matrix:
    """One sub-matrix: every model x dtype x prompt length x variant."""

    models: tuple[str, ...]
    prompt_lengths: tuple[int, ...]
    dtypes: tuple[str, ...]
    variants: tuple[str, ...]


@dataclass
class RunSettings:
    """Resolved settings of a run (command line over config over defaults)."""

    matrices: list[Matrix]
    rounds: int = DEFAULT_ROUNDS
    warmup_rounds: int = DEFAULT_WARMUP_ROUNDS
    pad_to: int = DEFAULT_PAD_TO
    buckets: tuple[int, ...] = DEFAULT_BUCKETS
    isolate: tuple[str, ...] = DEFAULT_ISOLATED
    case_timeout_s: float = DEFAULT_CASE_TIMEOUT_S
    check_inputs: int = 3
    seed: int = 0
    time_budget_s: float | None = None
    device: str = "cuda"
    outdir: str = DEFAULT_OUTDIR
    overrides: dict | None = None
    config: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def variants(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v for m in self.matrices for v in m.variants))

    def as_dict(self) -> dict:
        return {"matrices": [asdict(m) for m in self.matrices], "rounds": self.rounds,
                "warmup_rounds": self.warmup_rounds, "pad_to": self.pad_to, "buckets": list(self.buckets),
                "isolate": list(self.isolate), "case_timeout_s": self.case_timeout_s,
                "check_inputs": self.check_inputs, "seed": self.seed, "time_budget_s": self.time_budget_s,
                "device": self.device, "overrides": self.overrides, "config": self.config}


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
# planning


def position_limit(model: str, overrides: dict | None) -> int:
    """Position limit (tokens) of a preset or a local model dir, from its config (no weights built)."""
    from cudagraph_bench.models.presets import PRESETS, directory_config, max_positions, preset_config

    config = preset_config(model, overrides) if model in PRESETS else directory_config(model)
    return max_positions(SimpleNamespace(config=config))


def _skip_reason(spec: CaseSpec, positions: int) -> str | None:
    from cudagraph_bench.capture.buckets import cap_buckets

    if spec.seq_len > positions:
        return f"prompt of {spec.seq_len} tokens exceeds the model's {positions} positions"
    if spec.variant == "padded" and spec.seq_len > min(spec.pad_to, positions):
        return f"prompt of {spec.seq_len} tokens is longer than the padded length {min(spec.pad_to, positions)}"
    if spec.variant == "bucketed" and spec.seq_len > max(cap_buckets(spec.buckets, positions)):
        return f"prompt of {spec.seq_len} tokens is longer than the largest bucket"
    return None


@dataclass
class Plan:
    """Cases in execution order, grouped by (model, dtype): in-process cases first, then one queue per
    isolated variant. ``skipped`` are recorded up front with their reason."""

    groups: list[tuple[tuple[str, str], list[CaseSpec], dict[str, list[CaseSpec]]]]
    skipped: list[CaseResult]

    @property
    def n_cases(self) -> int:
        return sum(len(inproc) + sum(len(q) for q in iso.values()) for _, inproc, iso in self.groups)


def plan_cases(settings: RunSettings, positions=position_limit) -> Plan:
    """Expand the matrices into :class:`CaseSpec` s (unique, in a stable order) and split off the
    cases that cannot run (prompt longer than the model's positions or the padded length)."""
    specs: dict[tuple, CaseSpec] = {}
    for m in settings.matrices:
        for model in m.models:
            for dtype in m.dtypes:
                for seq_len in m.prompt_lengths:
                    for variant in m.variants:
                        spec = CaseSpec(model=model, dtype=dtype, seq_len=seq_len, variant=variant,
                                        rounds=settings.rounds, warmup_rounds=settings.warmup_rounds,
                                        pad_to=settings.pad_to, buckets=tuple(settings.buckets),
                                        check_inputs=settings.check_inputs, device=settings.device,
                                        seed=settings.seed, overrides=settings.overrides)
                        specs.setdefault((model, dtype, seq_len, variant), spec)
    order = {v: i for i, v in enumerate(RUN_VARIANTS)}
    limits: dict[str, int] = {}
    skipped: list[CaseResult] = []
    grouped: dict[tuple[str, str], tuple[list, dict]] = {}
    for key in sorted(specs, key=lambda k: (k[0], k[1], order[k[3]], k[2])):
        spec = specs[key]
        if spec.model not in limits:
            limits[spec.model] = positions(spec.model, settings.overrides)
        reason = _skip_reason(spec, limits[spec.model])
        if reason:
            skipped.append(CaseResult.of(spec, "skipped", reason, "plan"))
            continue
        inproc, iso = grouped.setdefault((spec.model, spec.dtype), ([], {}))
        if spec.variant in settings.isolate:
            iso.setdefault(spec.variant, []).append(spec)
        else:
            inproc.append(spec)
    ordered = sorted(grouped.items(), key=lambda kv: ([m for mx in settings.matrices for m in mx.models].index(kv[0][0]),
                                                      kv[0][1]))
    return Plan(groups=[(k, inproc, iso) for k, (inproc, iso) in ordered], skipped=skipped)


# --------------------------------------------------------------------------------------------------
# execution


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


def execute(plan: Plan, settings: RunSettings, *, record, worker_cmd=None, started_at: float | None = None) -> None:
    """Run every planned case, calling ``record(CaseResult)`` after each. In-process cases of a
    (model, dtype) share one model. A case that fails (a capture that fails included) is that case's
    result; when a failure leaves the process's CUDA context unusable
    (:func:`~cudagraph_bench.capture.graphed.cuda_context_usable` is False after it), every remaining case,
    of this model and the next ones, runs in worker processes (:func:`~cudagraph_bench.measure.isolation.run_isolated`),
    so one broken case never stops the run.

    ``settings.time_budget_s`` counts from ``started_at`` (a ``time.monotonic()`` value; default: now),
    so that the command's start-up (importing torch, reading the GPU) is inside the budget."""
    from cudagraph_bench.measure.case import ModelCache, measure_with_cache
    from cudagraph_bench.measure.isolation import IsolationStats, is_fatal_cuda_error, run_isolated

    t0 = time.monotonic() if started_at is None else started_at
    deadline = t0 + settings.time_budget_s if settings.time_budget_s else None
    broken = False
    log_path = str(Path(settings.outdir) / "workers.log")

    def in_workers(specs) -> None:
        if specs:
            run_isolated([s.to_dict() for s in specs], timeout_s=settings.case_timeout_s, worker_cmd=worker_cmd,
                         deadline=deadline, log_path=log_path, stats=IsolationStats(),
                         on_result=lambda i, d: record(CaseResult.from_dict(d)))

    for (model, dtype), inproc, isolated in plan.groups:
        models = ModelCache()
        pending = list(inproc)
        while pending and not broken:
            spec = pending.pop(0)
            if deadline is not None and time.monotonic() >= deadline:
                record(CaseResult.of(spec, "skipped", "time budget exhausted", "budget"))
                continue
            result = measure_with_cache(spec, models)
            record(result)
            if result.status == "failed" and is_fatal_cuda_error(result.reason) and not _context_usable(spec):
                broken = True
        models.clear()
        if broken:   # this process can no longer run CUDA work: the rest of this model in fresh workers
            in_workers(pending)
        for variant, specs in isolated.items():
            in_workers(specs)


def _context_usable(spec: CaseSpec) -> bool:
    """Whether the CUDA context survived a failed case (always True for a CPU case)."""
    if spec.device != "cuda":
        return True
    from cudagraph_bench.capture.graphed import cuda_context_usable

    return cuda_context_usable()


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


def main(args: argparse.Namespace) -> int:
    """Run the matrix; write run.json and the PNGs; print the table. Returns 0, 1 (a case failed or
    differs from eager, or no case was measured) or raises :class:`UsageError` (exit 2)."""
    from datetime import datetime, timezone

    from cudagraph_bench.envinfo import pin_cpus

    t0 = time.monotonic()
    settings = resolve_settings(args)
    pin_cpus(_plain(getattr(args, "cpus", None)))
    plan = plan_cases(settings)
    outdir = Path(settings.outdir)
    check_output_folder(outdir, [RUN_JSON], create=True)  # before any case is measured
    started = datetime.now(timezone.utc).isoformat()
    machine_info, commit_info = machine_and_commit_info(settings.device)
    extra: dict = {}
    if settings.device == "cuda":
        import torch

        extra["memory_reserved_start_mib"] = torch.cuda.memory_reserved() / 2**20
    results: list[CaseResult] = list(plan.skipped)
    json_path = outdir / RUN_JSON

    bar = progress_bar(plan.n_cases)

    def record(result: CaseResult) -> None:
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
    return finish(json_path, outdir, results)


def finish(json_path: Path, outdir: Path, results: list[CaseResult]) -> int:
    """Print the table of ``json_path``, write the PNGs next to it. Exit code 1 when a case failed or
    mismatched, or when no case was measured (everything skipped up front is no success); else 0."""
    from cudagraph_bench.report import pages as report
    from cudagraph_bench.results.runfile import load_run

    measured = any(r.wall_ms for r in results)
    if measured:
        run = load_run(str(json_path))
        rows = report.forward_rows([run])
        print(report.render_long_table(rows, fmt="text"))
        print()
        print(report.render_summary_table(rows, fmt="text"))
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print(f"matplotlib is not installed: no PNGs; render them on another machine with "
                  f"`cudagraph-bench report {json_path} -o DIR`", file=sys.stderr)
        else:
            for path in report.write_plots([run], outdir):
                print(f"wrote {path}", file=sys.stderr)
    else:
        for name in (report.LATENCY_PNG, report.SPEEDUP_PNG):   # PNGs of an earlier run would not match
            (outdir / name).unlink(missing_ok=True)
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
