"""The parsers of the shared options, re-exported by :mod:`cudagraph_bench.options`: each returns the parsed value
or raises ``argparse.ArgumentTypeError`` with a message that says what to do (exit code 2 for the CLI, a usage
error for pytest). No torch import."""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import re
from dataclasses import dataclass
from decimal import Decimal

from cudagraph_bench.defaults import (
    FORWARD_VARIANTS, DEVICES, DTYPES, PRESET_NAMES, ATTN_IMPLEMENTATIONS, COMPILE_GRAPH_MODES,
    DECODE_COMPILE_TUNINGS)


def _split(text: str, example: str = "a,b") -> list[str]:
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise argparse.ArgumentTypeError(f"empty item in {text!r}: give a comma-separated list such as '{example}'")
    return items


def parse_models(text: str) -> tuple[str, ...]:
    """``"gpt2,bert-tiny"`` -> ``("gpt2", "bert-tiny")``: presets or ``save_pretrained`` directories (a preset name wins
    over a folder: write ``./gpt2``); duplicates kept once, as first spelt. Entries are checked later."""
    first: dict[str, str] = {}
    for name in _split(text):
        first.setdefault(name if name in PRESET_NAMES else os.path.realpath(name), name)
    return tuple(first.values())


def model_name_problem(name: str) -> str | None:
    """Why ``name`` names no loadable model (one line with the fix), or None. No file is read."""
    if name in PRESET_NAMES:
        return None
    if os.path.isfile(name):
        parent = os.path.dirname(name) or "."
        if os.path.isfile(os.path.join(parent, "config.json")):
            return (f"{name!r} is a file: give the directory that holds config.json and the weights ({parent!r}), as "
                    "written by save_pretrained()")
        return (f"{name!r} is a file: give a directory written by save_pretrained() (config.json and weights) or a "
                "preset")
    if not os.path.isdir(name):
        if name.startswith(("~", ".")) or os.sep in name or (os.altsep or os.sep) in name:   # no preset looks so
            return (f"no directory {os.path.abspath(os.path.expanduser(name))!r} (models load from local "
                    f"directories only, never from a model hub): give a directory written by save_pretrained() "
                    f"or a preset ({', '.join(PRESET_NAMES)})")
        return (f"unknown model {name!r}: use a preset ({', '.join(PRESET_NAMES)}) "
                f"or a local directory saved with save_pretrained()")
    config = os.path.join(name, "config.json")
    if os.path.isdir(config):
        return (f"{config!r} is a folder, not a file: give a directory written by save_pretrained() (config.json and "
                "weights) or a preset")
    if not os.path.isfile(config):
        return (f"{name!r} has no config.json: give a directory written by save_pretrained() (config.json and "
                f"weights) or a preset")
    return None


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


#: Most tokens of a prompt, a bucket or one decode request's new tokens: the largest position limit of any preset. A
#: model that records no limit (Mamba, ALiBi) is bounded by the request itself, so a mistyped count would run for days
#: without a word.
MAX_TOKENS = 131_072


def _token_counts(text: str, what: str, refusal: str) -> tuple[int, ...]:
    """:func:`_positive_ints`, each at most :data:`MAX_TOKENS`; ``refusal`` (``{got}`` the largest) otherwise."""
    counts = _positive_ints(text, what)
    if counts[-1] > MAX_TOKENS:
        digits = str(counts[-1])
        shown = digits if len(digits) <= 24 else f"a number of {len(digits)} digits"
        raise argparse.ArgumentTypeError(refusal.format(got=shown))
    return counts


def _lengths(text: str, what: str) -> tuple[int, ...]:
    return _token_counts(text, what, f"{what} must be at most {MAX_TOKENS} tokens (the largest position limit of any "
                                     "preset), got {got}: no model takes a prompt that long")


def parse_prompt_lengths(text: str) -> tuple[int, ...]:
    """``"16,50"`` -> ``(16, 50)`` (sorted, unique, each in [1, :data:`MAX_TOKENS`] tokens: no preset takes more)."""
    return _lengths(text, "prompt lengths")


def parse_buckets(text: str) -> tuple[int, ...]:
    """``"16,32,64"`` -> ``(16, 32, 64)`` bucket lengths in tokens, bounded as prompt lengths."""
    return _lengths(text, "bucket lengths")


def _known(name: str, choices, what: str, text: str, use: str = "") -> str:
    """``name`` when in ``choices``, else ``unknown WHAT TEXT: use USE`` (default: one of the choices)."""
    if name not in choices:
        raise argparse.ArgumentTypeError(f"unknown {what} {text!r}: use {use or 'one of ' + ', '.join(choices)}")
    return name


def parse_dtypes(text: str) -> tuple[str, ...]:
    """``"float32,bf16"`` -> ``("float32", "bfloat16")``; aliases fp32/bf16/fp16/half."""
    aliases = {"fp32": "float32", "float": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}
    return tuple(dict.fromkeys(_known(aliases.get(t.lower(), t.lower()), DTYPES, "dtype", t) for t in _split(text)))


def parse_variants(text: str) -> tuple[str, ...]:
    """``"eager,graph"`` -> ``("eager", "graph")``: registry forward variants in the order given, each once."""
    use = ", ".join(FORWARD_VARIANTS)
    return tuple(dict.fromkeys(_known(t, FORWARD_VARIANTS, "variant", t, use) for t in _split(text)))


def parse_device(text: str) -> str:
    """``cuda`` or ``cpu`` (:data:`DEVICES`)."""
    return _known(text, DEVICES, "device", text, "cuda, or cpu to run the variants that need no GPU")


def parse_token_counts(text: str) -> tuple[int, ...]:
    """``"64,128"`` -> ``(64, 128)`` new tokens per decode request, each in [1, :data:`MAX_TOKENS`] (the largest
    position limit of any preset: a longer request fits no preset and never finishes on a model without a limit)."""
    return _token_counts(text, "token counts", f"expected at most {MAX_TOKENS} new tokens (the largest position limit "
                                               "of any preset), got {got}: a request that long never finishes")


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    if value == 0 and _decimal(text) != 0:       # 1e-400: a positive number a float cannot hold, not 0 ("off")
        raise argparse.ArgumentTypeError(f"{text!r} is too small to tell from 0, which turns the setting off: "
                                         "give 0, or a larger value")
    return value


def _decimal(text: str) -> Decimal:
    return Decimal(str(text).strip())


#: Longest time a round option may ask for (ms): an hour per benchmark.
MAX_MS = 3_600_000.0


def _within_an_hour(ms: float, text: str, unit: str) -> float:
    if ms > MAX_MS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_MS / (1 if unit == 'ms' else 1000):.0f} {unit} "
                                         f"(an hour per benchmark), got {text}: a run that long never finishes")
    return ms


def parse_seconds_as_ms(text: str) -> float:
    """Seconds, finite, >= 0 and at most an hour, as milliseconds converted exactly (``0.5001`` -> ``500.1``)."""
    _nonnegative(text, "expected seconds")
    return _within_an_hour(float(_decimal(text) * 1000), text, "s")


def ms_as_seconds_text(text: str) -> str:
    """Milliseconds (``"500.1"``) as exact seconds text (``"0.5001"``)."""
    return format((_decimal(text) / 1000).normalize(), "f")


def parse_reduction_pct(text: str) -> float:
    """A latency-reduction threshold in percent, 0 <= pct < 100 (e.g. ``30``)."""
    value = _finite(text)
    if not 0 <= value < 100:
        raise argparse.ArgumentTypeError(f"a reduction threshold is a percent in [0, 100), got {value:g}")
    return value


def _nonnegative(text: str, what: str, zero: str = "", example: str = "") -> float:
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{what} >= 0{zero}, got {value:g}{example}")
    return value


def parse_regression_pct(text: str) -> float:
    """An allowed slowdown in percent, >= 0 (e.g. ``10``)."""
    return _nonnegative(text, "an allowed regression is a percent")


#: Largest between-run spread (percent) a baseline may hold: beyond it runs differ by a factor e, not by noise.
MAX_SPREAD_PCT = 100.0


def parse_spread_pct(text: str) -> float:
    """A between-run spread in percent in [0, :data:`MAX_SPREAD_PCT`]: a larger one would pass every regression."""
    value = _finite(text)
    if not 0 <= value <= MAX_SPREAD_PCT:
        raise argparse.ArgumentTypeError(f"a between-run spread is a percent in [0, {MAX_SPREAD_PCT:g}], got {value:g}"
                                         + (f" (above {MAX_SPREAD_PCT:g} percent)" if value > MAX_SPREAD_PCT else ""))
    return value


def parse_alpha(text: str) -> float:
    """A significance level in (0, 1) (a baseline's ``alpha``, the rank test's)."""
    value = _finite(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"a significance level is in (0, 1), got {value:g}")
    return value


def _whole(text: str, lowest: int, highest: int | None = None, what: str = "", why: str = "") -> int:
    """``int(text)`` in [lowest, highest]; above ``highest``: ``expected at most HIGHEST WHAT, got VALUE`` + ``why``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < lowest:
        raise argparse.ArgumentTypeError(f"expected a number >= {lowest}, got {value}")
    if highest is not None and value > highest:
        raise argparse.ArgumentTypeError(f"expected at most {highest} {what}, got {value}{why}")
    return value


def parse_count(text: str) -> int:
    """A whole number >= 1 (rounds, iterations)."""
    return _whole(text, 1)


#: Most fresh inputs a variant is checked on before it is timed.
MAX_CHECK_INPUTS = 1000


def parse_check_inputs(text: str) -> int:
    """A whole number from 1 to :data:`MAX_CHECK_INPUTS`."""
    return _whole(text, 1, MAX_CHECK_INPUTS, "inputs")


def parse_path(text: str, example: str = "a folder, e.g. out/report") -> str:
    """A path that is not empty (an empty ``-o ""`` would write into the current folder); an empty one is refused
    naming ``example``: the kind of path the option takes and one such path (a folder; a file: the partials below)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a path, got an empty string: name {example}")
    return text


#: :func:`parse_path` of an option naming a file: a markdown page, a run JSON, a baseline, a TOML config.
parse_markdown_path = functools.partial(parse_path, example="a markdown file, e.g. out/report.md")
parse_run_path = functools.partial(parse_path, example="a run JSON, e.g. out/run.json")
parse_baseline_path = functools.partial(parse_path, example="a baseline, e.g. baselines/<gpu_slug>.json")
parse_toml_path = functools.partial(parse_path, example="a TOML file, e.g. scripts/device/compile-sweep.toml")


#: Upper bound of --rounds / --warmup-rounds: beyond it a run would not finish in any CI slot.
MAX_ROUNDS = 100_000
#: The fix when a round option asks for more (naming no default: pytest's and ``run``'s differ).
_TOO_MANY_ROUNDS = f": a run that long never finishes: give at most {MAX_ROUNDS}"


def parse_rounds(text: str) -> int:
    """Measured rounds: a whole number in [1, :data:`MAX_ROUNDS`]."""
    return _whole(text, 1, MAX_ROUNDS, "rounds", _TOO_MANY_ROUNDS)


def parse_warmup_rounds(text: str) -> int:
    """Unmeasured warmup rounds: a whole number in [0, :data:`MAX_ROUNDS`]."""
    return _whole(text, 0, MAX_ROUNDS, "warmup rounds", _TOO_MANY_ROUNDS)


def parse_nonneg(text: str) -> int:
    """A whole number >= 0 (warmup rounds)."""
    return _whole(text, 0)


#: Most confirmation reruns of ``gate --confirm K`` (a pytest process each; beyond a handful the verdict holds).
MAX_CONFIRM = 20


def parse_confirm(text: str) -> int:
    """Confirmation reruns of the gate: a whole number in [0, :data:`MAX_CONFIRM`] (0: off)."""
    return _whole(text, 0, MAX_CONFIRM, "reruns",
                  f": each is a separate pytest process on the GPU; give --confirm 0 to {MAX_CONFIRM}")


def parse_multiplier(text: str) -> float:
    """A finite multiplier >= 0 (of the between-run spread, e.g. ``3``; ``0`` leaves the tolerance's floor)."""
    return _nonnegative(text, "expected a multiplier of the spread")


def parse_ms(text: str) -> float:
    """Milliseconds, finite, in [0, an hour] (e.g. ``100``; ``0`` turns the time floor or cap off)."""
    return _within_an_hour(_nonnegative(text, "expected milliseconds"), text, "ms")


def parse_timeout_s(text: str) -> float:
    """A time limit in seconds, finite and >= 0 (e.g. ``600``; ``0`` turns the limit off)."""
    return _nonnegative(text, "expected seconds", zero=" (0: no limit)")


def parse_pct(text: str) -> float:
    """A percentage, finite and >= 0 (``1`` = 1%; ``0`` turns the precision target off)."""
    return _nonnegative(text, "expected a percentage", example=": e.g. 1 for +-1%")


def parse_attn_implementation(text: str) -> str:
    """One of :data:`ATTN_IMPLEMENTATIONS` (``flash``, ``flex`` as short names); installation is checked later."""
    short = {"flash": "flash_attention_2", "flash_attention": "flash_attention_2", "flex": "flex_attention"}
    name = short.get(text.strip().lower(), text.strip().lower())
    return _known(name, ATTN_IMPLEMENTATIONS, "attention implementation", text,
                  f"one of {', '.join(ATTN_IMPLEMENTATIONS)} (or leave it out: each model's own)")


def parse_compile_mode(text: str) -> str:
    """An inductor mode of the ``compile+graph`` variants, one of :data:`COMPILE_GRAPH_MODES`."""
    return _known(text, COMPILE_GRAPH_MODES, "compile mode", text, f"one of {', '.join(COMPILE_GRAPH_MODES)} "
                  "(inductor's own CUDA graphs stay off: the suite captures)")


def parse_decode_compile_tuning(text: str) -> str:
    """A name of :data:`DECODE_COMPILE_TUNINGS` (the inductor settings of the compiled decode step)."""
    return _known(text, DECODE_COMPILE_TUNINGS, "decode compile tuning", text)


#: Bound of a CPU number (``--cpus``): a mistyped ``0-99999999999`` would fill the memory before any check.
MAX_CPU = 65535


def parse_cpus(text: str) -> tuple[int, ...]:
    """``taskset -c`` syntax (``"0-7"``, ``"0,2,4-6"``) -> sorted unique CPUs, each at most :data:`MAX_CPU`. Syntax
    only; :func:`cudagraph_bench.runner.process.check_cpus` checks this process may run on them."""
    cpus = set()
    for item in _split(text, "0-3,8"):
        first, sep, last = item.partition("-")
        try:
            lo, hi = int(first), int(last if sep else first)
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad CPU list item {item!r}: give CPU numbers and ranges such as "
                                             "'0-7' or '0,2,4-6'") from None
        if hi < lo:
            raise argparse.ArgumentTypeError(f"bad CPU range {item!r}: give FIRST-LAST with 0 <= FIRST <= LAST, "
                                             "e.g. '0-7'")
        if hi > MAX_CPU:
            raise argparse.ArgumentTypeError(f"bad CPU number in {item[:40]!r}: CPUs are numbered 0 to at most "
                                             f"{MAX_CPU} (see nproc), e.g. '0-7'")
        cpus.update(range(lo, hi + 1))
    return tuple(sorted(cpus))


def format_cpus(cpus) -> str:
    """CPU numbers -> the compact list form ``parse_cpus`` reads: ``{0, 1, 2, 5}`` -> ``"0-2,5"``."""
    out = []
    for _, consecutive in itertools.groupby(enumerate(sorted(set(cpus))), lambda pair: pair[1] - pair[0]):
        run = [cpu for _, cpu in consecutive]
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


#: Most shards ``--shard K/N`` takes: GitHub Actions' limit of jobs per matrix (``1/100000000`` would fill memory).
MAX_SHARDS = 256


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` (1-based, ``1 <= K <= N <=`` :data:`MAX_SHARDS`) -> ``(K, N)``."""
    first, _, last = text.strip().partition("/")
    try:
        index, count = int(first), int(last)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad shard {text!r}: give K/N, this job's shard K of N (1-based), "
                                         "e.g. 1/2") from None
    if not 1 <= index <= count:
        raise argparse.ArgumentTypeError(f"bad shard {text!r}: give K/N with 1 <= K <= N, e.g. 1/2 and 2/2")
    if count > MAX_SHARDS:
        raise argparse.ArgumentTypeError(f"bad shard {text!r}: give at most {MAX_SHARDS} shards (a CI matrix job "
                                         "each), e.g. 1/4")
    return index, count


#: A model type as transformers spells one (``gpt2``, ``qwen3_next``, ``xlm-roberta``).
_MODEL_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_ZOO_SHARD = re.compile(r"(\d+)\s*/\s*(\d+)")
ZOO_TYPES_FIX = "give all, K/N (every N-th type from the K-th, 1 <= K <= N) or model types separated by commas"


@dataclass(frozen=True)
class ZooTypes:
    """All (neither field), every N-th from the K-th (``shard``) or ``names``; ``str()`` is what ``--zoo`` takes."""

    shard: tuple[int, int] | None = None
    names: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.shard is not None:
            return f"{self.shard[0]}/{self.shard[1]}"
        return ",".join(self.names) if self.names else "all"

    def pick(self, installed: list[str], flag: str, release: str) -> list[str]:
        """The types of ``installed`` (the zoo's list for ``release``) this selects. ValueError (one line naming
        ``flag``): a name that is no causal-LM type of the release, or a K past its types."""
        if self.shard is not None:
            k, n = self.shard
            if k > len(installed):
                raise ValueError(f"{flag} {self}: transformers {release} has {len(installed)} causal-LM model types: "
                                 f"give K <= {len(installed)}")
            return installed[k - 1::n]
        if not self.names:
            return list(installed)
        unknown = [t for t in self.names if t not in installed]
        if unknown:
            raise ValueError(f"{flag}: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} no causal-LM model "
                             f"type of transformers {release} (it has {len(installed)}; {flag} all runs them)")
        return list(self.names)


def parse_zoo_types(text: str) -> ZooTypes:
    """``all``, ``K/N`` (``1 <= K <= N``) or comma-separated types, each once; names checked by ``pick``."""
    stripped = text.strip()
    if not stripped:
        raise argparse.ArgumentTypeError(f"empty: {ZOO_TYPES_FIX}")
    if stripped == "all":
        return ZooTypes()
    shard = _ZOO_SHARD.fullmatch(stripped)
    if shard:
        k, n = int(shard.group(1)), int(shard.group(2))
        if not 1 <= k <= n:
            raise argparse.ArgumentTypeError(f"{stripped}: K/N needs 1 <= K <= N, e.g. 1/2 and 2/2")
        return ZooTypes(shard=(k, n))
    if "/" in stripped:
        raise argparse.ArgumentTypeError(f"{stripped!r}: K/N takes two whole numbers, e.g. 1/2; or {ZOO_TYPES_FIX}")
    names = _split(stripped)
    bad = [t for t in names if not _MODEL_TYPE.fullmatch(t)]
    if bad:
        raise argparse.ArgumentTypeError(f"{bad[0]!r} is no model type name: {ZOO_TYPES_FIX}")
    twice = sorted({t for t in names if names.count(t) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"{', '.join(twice)} given twice: name each model type once")
    if "all" in names:
        raise argparse.ArgumentTypeError("all runs every type: give it alone, not in a list")
    return ZooTypes(names=tuple(names))
