"""Options defined once, shared by the pytest plugin (``pytest --models ...``) and the CLI
(``cudagraph-bench run --models ...``), and the names and defaults every module takes from here:
variant, dtype and preset names, default models, prompt lengths, dtypes, buckets, rounds. No torch
import: option parsing must work anywhere.

Each parser raises ``argparse.ArgumentTypeError`` with a message that says what to do; argparse
turns that into exit code 2 for the CLI, pytest into a usage error.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any, Callable

from cudagraph_bench import variants as _variants

#: Variant names by suite, from the registry (:mod:`cudagraph_bench.variants`), which says what each one is.
FORWARD_VARIANTS = _variants.FORWARD_NAMES
DECODE_VARIANTS = _variants.DECODE_NAMES
LAUNCH_VARIANTS = _variants.LAUNCH_NAMES
#: Forward variants measured by default: every one but the torch.compile ones (``--with-compile`` adds them).
DEFAULT_VARIANTS = _variants.names(_variants.FORWARD, compiled=False)
#: Decode steps captured in one graph (a 1-step graph replays the remainder). Unrolling removes the host's
#: replay call and the GPU's gap between two graphs for all but one step in this many: gaps of the order
#: of one kernel launch against a step of hundreds of kernels, so beyond 8 the saving per token is lost in
#: the noise while capture time and graph size keep growing with it.
DEFAULT_DECODE_STEPS_PER_GRAPH = 8
#: Devices a case can run on: ``cpu`` runs only the variants that need no CUDA GPU (eager forward, HF
#: ``generate`` and the eager static-cache decode), to try the pipeline on any machine.
DEVICES = ("cuda", "cpu")
DTYPES = ("float32", "bfloat16", "float16")

#: Preset names (their configs live in :mod:`cudagraph_bench.models.presets`).
PRESET_NAMES = ("gpt2", "distilgpt2", "bert-tiny", "tinyllama-1.1b", "smollm2-360m", "qwen2.5-0.5b", "llama-3.2-1b",
                "gemma-2-2b", "phi-3.5-mini", "mistral-7b", "olmoe-1b-7b")
DEFAULT_MODELS = ("gpt2", "distilgpt2", "bert-tiny", "tinyllama-1.1b")
DEFAULT_PROMPT_LENGTHS = (16, 50, 128, 512, 1024)
DEFAULT_DTYPES = ("float32", "bfloat16")
#: Bucket lengths (tokens) for bucketed graphs, like serving engines' capture sizes.
DEFAULT_BUCKETS = (16, 32, 64, 128, 256, 512, 1024)
#: Decode benchmarks: prompt lengths (tokens) and new tokens per request.
DEFAULT_DECODE_PROMPT_LENGTHS = (50,)
DEFAULT_NEW_TOKENS = (64, 128)
#: Measured rounds per benchmark: at least ``DEFAULT_ROUNDS``, more until the median's 95% interval is
#: within ``DEFAULT_PRECISION_PCT`` % of the median, at most ``DEFAULT_MAX_ROUNDS`` and at most
#: ``DEFAULT_MAX_TIME_MS`` of calls (:func:`cudagraph_bench.measure.timing.plan_rounds`); unmeasured warmup rounds.
DEFAULT_ROUNDS = 20
DEFAULT_PRECISION_PCT = 1.0
DEFAULT_MAX_ROUNDS = 2000
#: Time cap (ms) of the rounds the precision target adds beyond ``DEFAULT_ROUNDS`` (0: none): host-bound eager
#: cases with a wide, drifting spread would otherwise take up to ``DEFAULT_MAX_ROUNDS`` slow calls each, most of
#: a session's time, for an interval their drift keeps wide anyway. 1 s per benchmark keeps the default suite
#: within minutes on one GPU (pytest-benchmark's ``--benchmark-max-time`` has the same role).
DEFAULT_MAX_TIME_MS = 1000.0
DEFAULT_WARMUP_ROUNDS = 10
#: Time floors (ms): warm up for at least ``DEFAULT_WARMUP_MS`` (GPU clocks, caches); measure for at least
#: ``DEFAULT_MIN_TIME_MS`` (0: the precision target decides).
DEFAULT_WARMUP_MS = 100.0
DEFAULT_MIN_TIME_MS = 0.0
#: Inductor modes of the ``compile+graph`` variants, forward and decode (inductor's own CUDA graphs off in both:
#: the suite captures): ``default`` (fusion, cuBLAS GEMMs, no autotuning; the kernels ``reduce-overhead`` runs,
#: compiled in seconds) and ``max-autotune-no-cudagraphs`` (also autotunes GEMM templates and fusions: minutes
#: per forward case in the committed float32 compile sweep, its "compile s" column in docs/compile/results.md).
COMPILE_GRAPH_MODES = ("default", "max-autotune-no-cudagraphs")
#: Seconds a decode compile variant may spend compiling and warming up before it is recorded as failed.
DEFAULT_COMPILE_TIMEOUT_S = 600.0
DEFAULT_COMPILE_GRAPH_MODE = "default"
#: Inductor settings the compiled decode step is compiled under (``--decode-compile-tuning``), by name:
#: ``coordinate-descent`` is gpt-fast's (``torch._inductor.config.coordinate_descent_tuning = True`` in its
#: generate.py): inductor then lowers a matmul with one row, the decode step's GEMVs, to Triton reductions
#: fused with the elementwise work around them, and tunes every kernel's launch configuration by coordinate
#: descent ("our matrix vector multiplies only achieve peak bandwidth with coordinate descent tuning",
#: torch/_inductor/decomposition.py); it makes the compile slower (tuning benchmarks every kernel). ``none``: inductor's
#: defaults (cuBLAS GEMVs). The forward variants never use it (a prompt's matmuls have more than one row).
DECODE_COMPILE_TUNINGS = {"coordinate-descent": {"coordinate_descent_tuning": True}, "none": {}}
DEFAULT_DECODE_COMPILE_TUNING = "coordinate-descent"
#: Fresh random inputs ``[1, seq_len]`` each variant is checked on against eager before it is timed.
DEFAULT_CHECK_INPUTS = 3
#: Length (tokens) the padded graph pads every prompt to, capped at the model's positions.
DEFAULT_PAD_TO = 1024


def _split(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise argparse.ArgumentTypeError(f"empty item in {text!r}: give a comma-separated list such as 'a,b'")
    return items


def parse_models(text: str) -> tuple[str, ...]:
    """``"gpt2,bert-tiny"`` -> ``("gpt2", "bert-tiny")``. Each name must be a preset or an existing
    local directory (loaded with ``from_pretrained``, offline); a preset name wins over a folder of that
    name (write ``./gpt2`` for the folder). A name given twice, or a folder given twice under two spellings
    (``m``, ``m/``, ``./m``), is measured once, under its first spelling."""
    names = _split(text)
    for name in names:
        if name not in PRESET_NAMES and os.path.isfile(name):
            raise argparse.ArgumentTypeError(
                f"{name!r} is a file: give the directory that holds config.json and the weights "
                f"({os.path.dirname(name) or '.'!r}), as written by save_pretrained()")
        if name not in PRESET_NAMES and not os.path.isdir(name):
            if _looks_like_a_path(name):
                raise argparse.ArgumentTypeError(
                    f"no directory {os.path.abspath(os.path.expanduser(name))!r} (models load from local "
                    f"directories only, never from a model hub): give a directory written by save_pretrained() "
                    f"or a preset ({', '.join(PRESET_NAMES)})")
            raise argparse.ArgumentTypeError(
                f"unknown model {name!r}: use a preset ({', '.join(PRESET_NAMES)}) "
                f"or a local directory saved with save_pretrained()")
        if name not in PRESET_NAMES and not os.path.isfile(os.path.join(name, "config.json")):
            raise argparse.ArgumentTypeError(
                f"{name!r} has no config.json: give a directory written by save_pretrained() (config.json and "
                f"weights) or a preset")
    first: dict[str, str] = {}
    for name in names:
        first.setdefault(name if name in PRESET_NAMES else os.path.realpath(name), name)
    return tuple(first.values())


def _looks_like_a_path(name: str) -> bool:
    """True for a model name written as a path (``/m``, ``./m``, ``out/m``, ``~/m``): no preset looks so."""
    return name.startswith(("~", ".")) or os.sep in name or (os.altsep or os.sep) in name


def _positive_ints(text: str, what: str) -> tuple[int, ...]:
    out = []
    for item in _split(text):
        try:
            value = int(item)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be whole numbers, got {item!r}: e.g. '16,50,128'") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{what} must be positive, got {value}")
        out.append(value)
    return tuple(sorted(set(out)))


def parse_prompt_lengths(text: str) -> tuple[int, ...]:
    """``"16,50"`` -> ``(16, 50)`` (sorted, unique, each > 0 tokens)."""
    return _positive_ints(text, "prompt lengths")


def parse_buckets(text: str) -> tuple[int, ...]:
    """``"16,32,64"`` -> ``(16, 32, 64)`` bucket lengths in tokens."""
    return _positive_ints(text, "bucket lengths")


def parse_dtypes(text: str) -> tuple[str, ...]:
    """``"float32,bf16"`` -> ``("float32", "bfloat16")``; aliases fp32/bf16/fp16/half."""
    aliases = {"fp32": "float32", "float": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}
    out = []
    for item in _split(text):
        name = aliases.get(item.lower(), item.lower())
        if name not in DTYPES:
            raise argparse.ArgumentTypeError(f"unknown dtype {item!r}: use one of {', '.join(DTYPES)}")
        out.append(name)
    return tuple(dict.fromkeys(out))


def parse_variants(text: str) -> tuple[str, ...]:
    """``"eager,graph"`` -> ``("eager", "graph")``: forward variants of the registry
    (:data:`FORWARD_VARIANTS`), in the order given, each once."""
    items = _split(text)
    for item in items:
        if item not in FORWARD_VARIANTS:
            raise argparse.ArgumentTypeError(f"unknown variant {item!r}: use {', '.join(FORWARD_VARIANTS)}")
    return tuple(dict.fromkeys(items))


def parse_device(text: str) -> str:
    """``cuda`` or ``cpu`` (:data:`DEVICES`)."""
    if text not in DEVICES:
        raise argparse.ArgumentTypeError(f"unknown device {text!r}: use cuda, or cpu to run the variants that need "
                                         "no GPU")
    return text


def parse_token_counts(text: str) -> tuple[int, ...]:
    """``"64,128"`` -> ``(64, 128)`` new tokens per decode request (each > 0)."""
    return _positive_ints(text, "token counts")


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def parse_reduction_pct(text: str) -> float:
    """A latency-reduction threshold in percent, 0 <= pct < 100 (e.g. ``30``)."""
    value = _finite(text)
    if not 0 <= value < 100:
        raise argparse.ArgumentTypeError(f"a reduction threshold is a percent in [0, 100), got {value:g}")
    return value


def _nonnegative(text: str, what: str) -> float:
    """A finite number >= 0; else ``argparse.ArgumentTypeError`` ("``what`` >= 0, got ...")."""
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{what} >= 0, got {value:g}")
    return value


def parse_regression_pct(text: str) -> float:
    """An allowed slowdown in percent, >= 0 (e.g. ``10``)."""
    return _nonnegative(text, "an allowed regression is a percent")


def _whole_number_at_least(text: str, lowest: int) -> int:
    """``int(text)`` when it is a whole number >= ``lowest``; else ``argparse.ArgumentTypeError``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < lowest:
        raise argparse.ArgumentTypeError(f"expected a number >= {lowest}, got {value}")
    return value


def parse_count(text: str) -> int:
    """A whole number >= 1 (rounds, iterations)."""
    return _whole_number_at_least(text, 1)


def parse_path(text: str) -> str:
    """A file or folder path that is not empty (an empty ``-o ""`` would write into the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a path, got an empty string: name a file or folder, e.g. "
                                         "out/report")
    return text


#: Upper bound of --rounds / --warmup-rounds: beyond it a run would not finish in any CI slot.
MAX_ROUNDS = 100_000


def _rounds_at_most_max(value: int, what: str) -> int:
    """``value`` when it is at most :data:`MAX_ROUNDS`. The message names no default: the suite's and
    ``cudagraph-bench run``'s differ (``--help`` of each shows its own)."""
    if value > MAX_ROUNDS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_ROUNDS} {what}, got {value}: a run that long "
                                         f"never finishes: give at most {MAX_ROUNDS}")
    return value


def parse_rounds(text: str) -> int:
    """Measured rounds: a whole number in [1, :data:`MAX_ROUNDS`]."""
    return _rounds_at_most_max(parse_count(text), "rounds")


def parse_max_rounds(text: str) -> int:
    """The most measured rounds the precision target and the time floor may ask for: a whole number in
    [1, :data:`MAX_ROUNDS`]."""
    return _rounds_at_most_max(parse_count(text), "rounds")


def parse_warmup_rounds(text: str) -> int:
    """Unmeasured warmup rounds: a whole number in [0, :data:`MAX_ROUNDS`]."""
    return _rounds_at_most_max(parse_nonneg(text), "warmup rounds")


def parse_nonneg(text: str) -> int:
    """A whole number >= 0 (warmup rounds)."""
    return _whole_number_at_least(text, 0)


#: Largest seed: the inputs' generator is seeded with ``seed * 1_000_003 + seq_len``, which must fit in
#: a signed 64-bit integer (``torch.Generator.manual_seed``); 2**32 - 1 leaves room for any prompt length.
MAX_SEED = 2**32 - 1


def parse_seed(text: str) -> int:
    """A seed of weights and inputs: a whole number in [0, :data:`MAX_SEED`]."""
    value = parse_nonneg(text)
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected a seed in [0, {MAX_SEED}], got {value}: give a smaller seed")
    return value


def parse_multiplier(text: str) -> float:
    """A finite multiplier >= 0 (of the between-run spread, e.g. ``3``; ``0`` leaves the tolerance's floor)."""
    return _nonnegative(text, "expected a multiplier of the spread")


def parse_ms(text: str) -> float:
    """A duration in milliseconds, finite and >= 0 (e.g. ``100``; ``0`` turns the time floor or cap off)."""
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected milliseconds >= 0, got {value:g}")
    return value


def parse_timeout_s(text: str) -> float:
    """A time limit in seconds, finite and >= 0 (e.g. ``600``; ``0`` turns the limit off)."""
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0 (0: no limit), got {value:g}")
    return value


def parse_pct(text: str) -> float:
    """A percentage, finite and >= 0 (``1`` = 1%; ``0`` turns the precision target off)."""
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a percentage >= 0, got {value:g}: e.g. 1 for +-1%")
    return value


def parse_compile_mode(text: str) -> str:
    """An inductor mode of the ``compile+graph`` variants, one of :data:`COMPILE_GRAPH_MODES`."""
    if text not in COMPILE_GRAPH_MODES:
        raise argparse.ArgumentTypeError(f"unknown compile mode {text!r}: use one of {', '.join(COMPILE_GRAPH_MODES)} "
                                         "(inductor's own CUDA graphs stay off: the suite captures)")
    return text


def parse_decode_compile_tuning(text: str) -> str:
    """A name of :data:`DECODE_COMPILE_TUNINGS` (the inductor settings of the compiled decode step)."""
    if text not in DECODE_COMPILE_TUNINGS:
        raise argparse.ArgumentTypeError(f"unknown decode compile tuning {text!r}: use one of "
                                         f"{', '.join(DECODE_COMPILE_TUNINGS)}")
    return text


def parse_cpus(text: str) -> tuple[int, ...]:
    """A CPU list as ``taskset -c`` takes it: ``"0-7"`` or ``"0,2,4-6"`` -> sorted unique CPU numbers.
    Only the syntax is checked here; :func:`cudagraph_bench.envinfo.pin_cpus` checks that the CPUs exist."""
    cpus = set()
    for item in _split(text):
        first, sep, last = item.partition("-")
        try:
            lo, hi = int(first), int(last if sep else first)
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad CPU list item {item!r}: give CPU numbers and ranges such as "
                                             "'0-7' or '0,2,4-6'") from None
        if lo < 0 or hi < lo:
            raise argparse.ArgumentTypeError(f"bad CPU range {item!r}: give FIRST-LAST with 0 <= FIRST <= LAST, "
                                             "e.g. '0-7'")
        cpus.update(range(lo, hi + 1))
    return tuple(sorted(cpus))


def format_cpus(cpus) -> str:
    """CPU numbers -> the compact list form ``parse_cpus`` reads: ``{0, 1, 2, 5}`` -> ``"0-2,5"``."""
    out, run = [], []
    for cpu in sorted(set(cpus)):
        if run and cpu == run[-1] + 1:
            run.append(cpu)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [cpu]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


#: Most shards ``--shard K/N`` takes: GitHub Actions runs at most 256 jobs per matrix, and the split keeps a
#: load per shard (a mistyped ``1/100000000`` would fill the memory before a test ran).
MAX_SHARDS = 256


def parse_shard(text: str) -> tuple[int, int]:
    """A CI-matrix shard ``"K/N"`` (1-based, ``1 <= K <= N <=`` :data:`MAX_SHARDS`) -> ``(K, N)``, e.g.
    ``"2/4"`` -> ``(2, 4)``."""
    first, sep, last = text.strip().partition("/")
    try:
        index, count = int(first), int(last)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad shard {text!r}: give K/N, this job's shard K of N (1-based), "
                                         "e.g. 1/2") from None
    if not sep or count < 1 or not 1 <= index <= count:
        raise argparse.ArgumentTypeError(f"bad shard {text!r}: give K/N with 1 <= K <= N, e.g. 1/2 and 2/2")
    if count > MAX_SHARDS:
        raise argparse.ArgumentTypeError(f"bad shard {text!r}: give at most {MAX_SHARDS} shards (a CI matrix job "
                                         "each), e.g. 1/4")
    return index, count


@dataclass(frozen=True)
class Option:
    """One option shared by pytest and the CLI. ``dest`` is the attribute name in both."""

    flag: str
    dest: str
    type: Callable[[str], Any]
    default: Any
    help: str
    metavar: str | None = None


#: Options of the benchmark matrix, in the order they are shown in ``--help``.
MATRIX_OPTIONS = (
    Option("--models", "models", parse_models, DEFAULT_MODELS,
           "comma-separated presets or local model dirs (default: %(default)s)"),
    Option("--prompt-lengths", "prompt_lengths", parse_prompt_lengths, DEFAULT_PROMPT_LENGTHS,
           "comma-separated prompt lengths in tokens (default: %(default)s)"),
    Option("--dtypes", "dtypes", parse_dtypes, DEFAULT_DTYPES,
           "comma-separated dtypes: float32,bfloat16,float16 (default: %(default)s)"),
    Option("--variants", "variants", parse_variants, DEFAULT_VARIANTS,
           "comma-separated forward variants: eager,graph,padded,bucketed,compile,compile+graph (default: "
           "%(default)s; --with-compile adds compile,compile+graph)"),
    Option("--device", "device", parse_device, "cuda",
           "cuda, or cpu: only the variants that need no GPU (eager forward, generate and static-eager decode), "
           "to try the pipeline on any machine (default: %(default)s)"),
    Option("--rounds", "rounds", parse_rounds, DEFAULT_ROUNDS,
           "at least this many measured rounds per benchmark; more while the median's 95%% interval is wider "
           "than --precision-pct (default: %(default)s)"),
    Option("--precision-pct", "precision_pct", parse_pct, DEFAULT_PRECISION_PCT,
           "measure until the median's 95%% interval is within this %% of the median, planned from a pilot "
           "of the first calls; 0: exactly --rounds (default: %(default)s)"),
    Option("--max-rounds", "max_rounds", parse_max_rounds, DEFAULT_MAX_ROUNDS,
           "most measured rounds that --precision-pct and --min-time-ms may ask for (default: %(default)s)"),
    Option("--max-time-ms", "max_time_ms", parse_ms, DEFAULT_MAX_TIME_MS,
           "most ms of measured calls that --precision-pct may add to a benchmark beyond --rounds (the --rounds "
           "floor and --min-time-ms take precedence); 0: no cap (default: %(default)s)"),
    Option("--warmup-rounds", "warmup_rounds", parse_warmup_rounds, DEFAULT_WARMUP_ROUNDS,
           "unmeasured calls per benchmark before its measured rounds, the pilot's counted in (default: %(default)s)"),
    Option("--warmup-ms", "warmup_ms", parse_ms, DEFAULT_WARMUP_MS,
           "warm up each benchmark for at least this many ms, the pilot's calls counted in, and at least "
           "--warmup-rounds calls (default: %(default)s)"),
    Option("--min-time-ms", "min_time_ms", parse_ms, DEFAULT_MIN_TIME_MS,
           "measure each benchmark for at least this many ms (up to --max-rounds rounds); 0: no time floor "
           "(default: %(default)s)"),
    Option("--check-inputs", "check_inputs", parse_count, DEFAULT_CHECK_INPUTS,
           "fresh random inputs each variant is checked on against eager before it is timed "
           "(default: %(default)s)"),
    Option("--compile-mode", "compile_mode", parse_compile_mode, DEFAULT_COMPILE_GRAPH_MODE,
           "inductor mode of the compile+graph variants, forward and decode: default (fusion; the kernels "
           "reduce-overhead runs) or max-autotune-no-cudagraphs (also autotuning; minutes per prompt length) "
           "(default: %(default)s)"),
    Option("--pad-to", "pad_to", parse_count, DEFAULT_PAD_TO,
           "length (tokens) that the padded graph pads every prompt to, capped at the model's positions "
           "(default: %(default)s)"),
    Option("--buckets", "buckets", parse_buckets, DEFAULT_BUCKETS,
           "bucket lengths in tokens for bucketed graphs (default: %(default)s)"),
)


#: Options that split a suite over CI jobs (pytest plugin, :mod:`cudagraph_bench.sharding`).
SHARD_OPTIONS = (
    Option("--shard", "shard", parse_shard, None,
           "run only shard K of N (1-based, e.g. 2/4; a CI matrix job each): the tests of one model and dtype "
           "(else of one module) stay together; groups are spread by --shard-durations, else by test count; "
           "the rest is deselected", "K/N"),
    Option("--shard-durations", "shard_durations", parse_path, None,
           "a previous run's --benchmark-json whose recorded test durations (cudagraph_bench.test_durations_s) "
           "balance --shard (default: count tests)", "FILE"),
)


def add_storage_option(parser: argparse.ArgumentParser) -> None:
    """``--storage DIR``: where saved-run ids (``0001``) are looked up. The default (None) is resolved by
    :func:`cudagraph_bench.paths.default_storage`, never against the working directory of a checkout."""
    parser.add_argument("--storage", type=parse_path, default=None, metavar="DIR",
                        help="pytest-benchmark storage folder where saved-run ids are looked up (default: "
                             "$CUDAGRAPH_BENCH_STORAGE, else the checkout's .benchmarks/, else ./.benchmarks)")


def show_default(value: Any) -> str:
    """A default as a user types it: tuples and lists comma-separated (``gpt2,bert-tiny``)."""
    return ",".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)


def add_to_argparse(parser: argparse.ArgumentParser | argparse._ArgumentGroup, options=MATRIX_OPTIONS,
                    action: type[argparse.Action] | None = None) -> None:
    """Add options to an ``argparse`` parser (the CLI); ``action``: an ``argparse.Action`` class to store
    them with (default: argparse's plain store)."""
    for opt in options:
        extra = {"action": action} if action is not None else {}
        if opt.metavar:
            extra["metavar"] = opt.metavar
        parser.add_argument(opt.flag, dest=opt.dest, type=opt.type, default=opt.default, help=opt.help, **extra)


def add_to_pytest(group, options=MATRIX_OPTIONS) -> None:
    """Add options to a pytest option group (the plugin). Same flags, parsers and defaults as the CLI."""
    for opt in options:
        extra = {"metavar": opt.metavar} if opt.metavar else {}
        group.addoption(opt.flag, dest=opt.dest, type=opt.type, default=opt.default,
                        help=opt.help.replace("%(default)s", show_default(opt.default)), **extra)
