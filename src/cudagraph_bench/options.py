"""Options defined once for the pytest plugin and the CLI: the :class:`Option` table and how it is added to argparse and
pytest. No torch import: option parsing must work anywhere."""

from __future__ import annotations

import argparse
import functools
from dataclasses import dataclass
from typing import Any, Callable

from cudagraph_bench.defaults import (  # noqa: F401  (re-exported: the names every module takes from here)
    FORWARD_VARIANTS, DECODE_VARIANTS, LAUNCH_VARIANTS, DEFAULT_VARIANTS, DEFAULT_DECODE_STEPS_PER_GRAPH,
    DEVICES, DTYPES, PRESET_NAMES, ATTN_IMPLEMENTATIONS, DEFAULT_MODELS, DEFAULT_PROMPT_LENGTHS, DEFAULT_DTYPES,
    DEFAULT_BUCKETS, DEFAULT_DECODE_PROMPT_LENGTHS, DEFAULT_NEW_TOKENS, DEFAULT_ROUNDS, DEFAULT_PRECISION_PCT,
    DEFAULT_MAX_ROUNDS, DEFAULT_MAX_TIME_MS, DEFAULT_WARMUP_ROUNDS, DEFAULT_WARMUP_MS, DEFAULT_MIN_TIME_MS,
    COMPILE_GRAPH_MODES, DEFAULT_COMPILE_TIMEOUT_S, DEFAULT_COMPILE_GRAPH_MODE, DECODE_COMPILE_TUNINGS,
    DEFAULT_DECODE_COMPILE_TUNING, DEFAULT_CHECK_INPUTS, DEFAULT_PAD_TO, DEFAULT_FLOOR_PCT, DEVICE_FLOOR_PCT)
from cudagraph_bench.errors import UsageError
from cudagraph_bench.parsers import (  # noqa: F401  (re-exported)
    parse_models, model_name_problem, parse_prompt_lengths, parse_buckets, parse_dtypes, parse_variants,
    parse_device, parse_check_inputs, parse_token_counts, parse_reduction_pct, parse_regression_pct, parse_count,
    parse_path, parse_markdown_path, parse_run_path, parse_baseline_path, parse_toml_path, parse_rounds,
    parse_warmup_rounds, parse_nonneg, parse_confirm, parse_multiplier, parse_ms,
    parse_timeout_s, parse_pct, parse_spread_pct, parse_alpha, parse_attn_implementation, parse_compile_mode,
    parse_decode_compile_tuning, parse_cpus, format_cpus, parse_shard, parse_seconds_as_ms, ms_as_seconds_text,
    MAX_ROUNDS, MAX_CONFIRM, MAX_SHARDS, MAX_SPREAD_PCT, MAX_TOKENS)


@dataclass(frozen=True)
class Option:
    """One option shared by pytest and the CLI; ``dest`` is the attribute name in both."""

    flag: str
    dest: str
    type: Callable[[str], Any]
    default: Any
    help: str
    metavar: str | None = None
    #: Type of its value in a ``run --config`` TOML file: ``(T,)`` a list of T's; ``float`` takes an integer too.
    toml: Any = str


#: Options of the benchmark matrix, in the order they are shown in ``--help``.
MATRIX_OPTIONS = (
    Option("--models", "models", parse_models, DEFAULT_MODELS,
           "comma-separated presets or local model dirs (default: %(default)s)", toml=(str,)),
    Option("--prompt-lengths", "prompt_lengths", parse_prompt_lengths, DEFAULT_PROMPT_LENGTHS,
           "comma-separated prompt lengths in tokens (default: %(default)s)", toml=(int,)),
    Option("--dtypes", "dtypes", parse_dtypes, DEFAULT_DTYPES,
           "comma-separated dtypes: float32,bfloat16,float16 (default: %(default)s)", toml=(str,)),
    Option("--variants", "variants", parse_variants, DEFAULT_VARIANTS,
           "comma-separated forward variants: eager,graph,padded,bucketed,compile,compile+graph (default: "
           "%(default)s; --with-compile adds compile,compile+graph)", toml=(str,)),
    Option("--device", "device", parse_device, "cuda",
           "cuda, or cpu: only the variants that need no GPU (eager forward, generate and static-eager decode), "
           "to try the pipeline on any machine (default: %(default)s)"),
    Option("--attn-implementation", "attn_implementation", parse_attn_implementation, None,
           "attention every model runs: eager, sdpa, flash_attention_2 or flex_attention (where installed); a model "
           "whose transformers class lacks it is refused with the reason (default: each model's own: SDPA where "
           "transformers has it, else eager)", "NAME"),
    Option("--max-positions", "max_positions", parse_count, None,
           "position limit (tokens) of models whose config records none (ALiBi such as BLOOM, NoPE): longer prompts "
           "are skipped and KV caches sized from the request (default: the longest request of the matrix)", "N",
           toml=int),
    Option("--rounds", "rounds", parse_rounds, DEFAULT_ROUNDS,
           "at least this many measured rounds per benchmark; more while the median's 95%% interval is wider "
           "than --precision-pct (default: %(default)s)", toml=int),
    Option("--precision-pct", "precision_pct", parse_pct, DEFAULT_PRECISION_PCT,
           "measure until the median's 95%% interval is within this %% of the median, planned from a pilot "
           "of the first calls; 0: exactly the fewest rounds (default: %(default)s)", toml=float),
    Option("--max-rounds", "max_rounds", parse_rounds, DEFAULT_MAX_ROUNDS,
           "most measured rounds that --precision-pct and --min-time-ms may ask for (default: %(default)s)", toml=int),
    Option("--max-time-ms", "max_time_ms", parse_ms, DEFAULT_MAX_TIME_MS,
           "most ms of measured calls that --precision-pct may add to a benchmark beyond --rounds (the --rounds "
           "floor and --min-time-ms take precedence); 0: no cap (default: %(default)s)", toml=float),
    Option("--warmup-rounds", "warmup_rounds", parse_warmup_rounds, DEFAULT_WARMUP_ROUNDS,
           "unmeasured calls per benchmark before its measured rounds, the pilot's counted in (default: %(default)s)",
           toml=int),
    Option("--warmup-ms", "warmup_ms", parse_ms, DEFAULT_WARMUP_MS,
           "warm up each benchmark for at least this many ms, the pilot's calls counted in, and at least "
           "the fewest warmup calls (default: %(default)s)", toml=float),
    Option("--min-time-ms", "min_time_ms", parse_ms, DEFAULT_MIN_TIME_MS,
           "measure each benchmark for at least this many ms (up to --max-rounds rounds); 0: no time floor "
           "(default: %(default)s)", toml=float),
    Option("--check-inputs", "check_inputs", parse_check_inputs, DEFAULT_CHECK_INPUTS,
           "fresh random inputs each variant is checked on against eager before it is timed (default: %(default)s)",
           toml=int),
    Option("--compile-mode", "compile_mode", parse_compile_mode, DEFAULT_COMPILE_GRAPH_MODE,
           "inductor mode of the compile+graph variants, forward and decode: default (fusion; the kernels "
           "reduce-overhead runs) or max-autotune-no-cudagraphs (also autotuning; minutes per prompt length) "
           "(default: %(default)s)"),
    Option("--pad-to", "pad_to", parse_count, DEFAULT_PAD_TO,
           "length (tokens) that the padded graph pads every prompt to, capped at the model's positions "
           "(default: %(default)s)", toml=int),
    Option("--buckets", "buckets", parse_buckets, DEFAULT_BUCKETS,
           "bucket lengths in tokens for bucketed graphs (default: %(default)s)", toml=(int,)),
)


#: Options that split a suite over CI jobs (:mod:`cudagraph_bench.plugin.sharding`).
SHARD_OPTIONS = (
    Option("--shard", "shard", parse_shard, None,
           "run only shard K of N (1-based, e.g. 2/4; a CI matrix job each): the tests of one model and dtype "
           "(else of one module) stay together; groups are spread by --shard-durations, else by test count; "
           "the rest is deselected", "K/N"),
    Option("--shard-durations", "shard_durations", parse_run_path, None,
           "a previous run's --benchmark-json whose recorded test durations (cudagraph_bench.test_durations_s) "
           "balance --shard (default: count tests)", "FILE"),
)


#: suite flag -> (pytest-benchmark flag, suite text -> its text, its text -> suite value): one switch per setting.
PYTEST_BENCHMARK_SPELLING = {
    "--rounds": ("--benchmark-min-rounds", str, parse_rounds),
    "--max-time-ms": ("--benchmark-max-time", ms_as_seconds_text, parse_seconds_as_ms),
    "--warmup-rounds": ("--benchmark-warmup-iterations", str, parse_warmup_rounds),
}


def pytest_argument(flag: str, text: str) -> tuple[str, str]:
    """pytest-benchmark's flag for a round option it spells itself (``("--max-time-ms", "250.0")`` ->
    ``("--benchmark-max-time", "0.25")``), else unchanged."""
    pytest_flag, convert, _ = PYTEST_BENCHMARK_SPELLING.get(flag, (flag, str, None))
    return pytest_flag, convert(text)


def matrix_arguments(values: dict) -> list[str]:
    """The one serializer of a matrix to pytest arguments: each :data:`MATRIX_OPTIONS` ``dest`` in ``values`` (None: not
    given), in table order, pytest's spelling. ValueError for a key that is no matrix option's ``dest``."""
    unknown = sorted(set(values) - {o.dest for o in MATRIX_OPTIONS})
    if unknown:
        raise ValueError(f"not matrix options: {', '.join(unknown)}")
    return [text for opt in MATRIX_OPTIONS if values.get(opt.dest) is not None
            for text in pytest_argument(opt.flag, show_default(values[opt.dest]))]


#: The matrix options ``run`` takes before ``--``; the others come after ``--`` in pytest's spelling, or from TOML.
RUN_FLAGS = ("--models", "--prompt-lengths", "--dtypes", "--variants", "--device")
#: The suite's pytest options ``run`` passes on after ``--`` (pytest-benchmark's own, ``--benchmark-*``, too).
AFTER_DOUBLE_DASH = frozenset({*(o.flag for o in MATRIX_OPTIONS if o.flag not in RUN_FLAGS), "--replay-proof",
                               "--with-compile"})
#: How a command takes pytest's arguments after ``--`` (``run``, ``ab``, ``selftest``).
PYTEST_ARGS_METAVAR = "-- PYTEST_ARGS"


def parse_pytest_matrix(args: list[str], where: str, own: dict[str, str]) -> tuple[dict, list[str]]:
    """``({dest: value}, other arguments in order)`` of the matrix options among pytest ``args`` (the last of one flag
    wins). ``own``: flags the caller sets -> why, refused; ``where`` names the arguments in a message. UsageError: a
    value its parser refuses, a round option under its TOML name, or an ``own`` flag."""
    if args and not args[0].startswith("-"):
        raise UsageError(f"{where} {args[0]}: pytest's arguments after -- start with an option "
                         "(e.g. -- --benchmark-min-rounds 50)")
    parser = argparse.ArgumentParser(prog=where, add_help=False, allow_abbrev=False, exit_on_error=False)
    for opt in MATRIX_OPTIONS:
        if opt.flag in own:
            continue
        flag, _, parse = PYTEST_BENCHMARK_SPELLING.get(opt.flag, (opt.flag, None, opt.type))
        parser.add_argument(flag, dest=opt.dest, type=_named(flag, parse), default=argparse.SUPPRESS)
        if flag != opt.flag:        # pytest-benchmark's spelling of a round option: its TOML name refused
            parser.add_argument(opt.flag, dest=f"toml_name_{opt.dest}", type=refuse_run_name(opt.flag),
                                default=argparse.SUPPRESS)
    for flag in own:
        parser.add_argument(flag, dest=f"own_{flag}", nargs="?", const="", default=argparse.SUPPRESS)
    try:
        given, rest = parser.parse_known_args(args)
    except argparse.ArgumentError as exc:
        raise UsageError(f"{where}: {exc.message}") from None
    for item in rest:
        if item == "--" or item.endswith(".py") or "::" in item:
            raise UsageError(f"{where} ... {item}: the command chooses the test modules, and pytest's arguments come "
                             "after one --: select cases with the matrix options or -k EXPR")
    values = vars(given)
    for flag, why in own.items():
        if f"own_{flag}" in values:
            raise UsageError(f"{where}: {flag}: {why}: leave it out")
    return values, rest


def add_regression_floor_option(parser: argparse.ArgumentParser) -> None:
    """``--max-regression PCT``, the regression tolerance's floor; default None: the baseline's, else the figure's."""
    parser.add_argument("--max-regression", type=parse_regression_pct, default=None, metavar="PCT",
                        help="floor of the regression tolerance in percent; a noisier case gets a multiple of its "
                             f"between-run spread (default: the baseline's, else {DEVICE_FLOOR_PCT:g} for the "
                             f"device-side graph figure, {DEFAULT_FLOOR_PCT:g} for wall medians)")


def allow_dest(word: str) -> str:
    """``gpu-mismatch`` -> ``allow_gpu_mismatch``."""
    return "allow_" + word.replace("-", "_")


class AllowAction(argparse.Action):
    """``--allow WORD[,WORD...]``; a word the command does not honour is a one-line usage error."""

    def __init__(self, option_strings, dest, allowances, **kwargs):
        self.allowances = tuple(allowances)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        for word in values.split(","):
            word = word.strip()
            if word not in self.allowances:
                parser.error(f"{option_string} {word or repr(values)}: expected one of "
                             f"{', '.join(self.allowances)} (comma-separated)")
            setattr(namespace, allow_dest(word), True)


def add_allow_option(parser: argparse.ArgumentParser, allowances: dict[str, str]) -> None:
    """``--allow WHAT``: one option for every refusal a user may lift (``allowances``: word -> what it accepts)."""
    parser.set_defaults(**{allow_dest(word): False for word in allowances})
    shown = "\n".join(f"{word}: {text}" for word, text in allowances.items())
    parser.add_argument("--allow", action=AllowAction, allowances=allowances, default=argparse.SUPPRESS,
                        metavar="WHAT", help=f"accept what is refused by default (default: nothing); several words "
                                             f"with commas, or --allow repeated:\n{shown}")


def show_default(value: Any) -> str:
    """Tuples and lists comma-separated (``gpt2,bert-tiny``)."""
    return ",".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)


def add_to_argparse(parser: argparse.ArgumentParser | argparse._ArgumentGroup, options=MATRIX_OPTIONS,
                    action: type[argparse.Action] | None = None) -> None:
    """``action``: an ``argparse.Action`` class to store them with (default: plain store)."""
    for opt in options:
        parser.add_argument(opt.flag, dest=opt.dest, type=opt.type, default=opt.default, help=opt.help,
                            metavar=opt.metavar, action=action or "store")


def _named(flag: str, parse: Callable[[str], Any], error: type[Exception] = argparse.ArgumentTypeError):
    """``parse`` (its name kept) whose ``ArgumentTypeError`` is raised again as ``error("FLAG TEXT: reason")``."""
    @functools.wraps(parse)
    def value(text: str):
        try:
            return parse(text)
        except argparse.ArgumentTypeError as exc:
            raise error(f"{flag} {text}: {exc}") from None
    return value


def refuse_run_name(flag: str) -> Callable[[str], Any]:
    """Refuses a round option's TOML name on pytest's command line, naming pytest-benchmark's flag."""
    pytest_flag, convert, _ = PYTEST_BENCHMARK_SPELLING[flag]
    run_parse = next(o.type for o in MATRIX_OPTIONS if o.flag == flag)

    def refuse(text: str):
        try:
            example = convert(str(run_parse(text)))
        except (argparse.ArgumentTypeError, ValueError, ArithmeticError):
            example = "N"
        raise argparse.ArgumentTypeError(f"{flag} is the round option's name in a run's TOML config: on pytest's "
                                         f"command line it is pytest-benchmark's {pytest_flag} (e.g. {pytest_flag} "
                                         f"{example})")
    return refuse


def add_to_pytest(group, options=MATRIX_OPTIONS) -> None:
    """Add options to a pytest group (a bad value: a one-line ``pytest.UsageError``; a round option's name: refused)."""
    import pytest

    for opt in options:
        if opt.flag in PYTEST_BENCHMARK_SPELLING:
            group.addoption(opt.flag, dest=f"run_name_{opt.dest}", default=None, help=argparse.SUPPRESS,
                            type=_named(opt.flag, refuse_run_name(opt.flag), pytest.UsageError))
            continue
        extra = {"metavar": opt.metavar} if opt.metavar else {}
        group.addoption(opt.flag, dest=opt.dest, type=_named(opt.flag, opt.type, pytest.UsageError),
                        default=opt.default, help=opt.help.replace("%(default)s", show_default(opt.default)), **extra)
