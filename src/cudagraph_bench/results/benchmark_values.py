"""The values one benchmark of a run may hold (no torch), checked before a reader sees it: a bad file is one line naming
the benchmark, the field and the fix (exit 2)."""

from __future__ import annotations

import collections
import math
from pathlib import Path

from cudagraph_bench.cases import DECODE_VARIANTS, DTYPES, FORWARD_VARIANTS, LAUNCH_VARIANTS, SUITE_KEYS
from cudagraph_bench.errors import InputFileError
from cudagraph_bench.results.replay import replay_format_problem

#: The ``stats`` fields every benchmark of pytest-benchmark output holds.
STAT_FIELDS = ("min", "max", "mean", "median", "rounds")
#: Longest plausible round, in seconds: a larger value is a corrupted file, not a latency.
MAX_ROUND_S = 3600.0
#: Variants each suite's benchmarks may carry (a renamed variant would silently escape the gate).
SUITE_VARIANTS = {"forward": FORWARD_VARIANTS, "decode": DECODE_VARIANTS, "launch": LAUNCH_VARIANTS}

#: Largest whole number of a benchmark's key (tokens, new tokens, launches per round); ``10**300`` would overflow.
MAX_KEY_COUNT = 10**9
#: Bounds of ``extra_info.device_median_ms`` as multiples of the wall median (committed H200 runs: 0.59 to 1.0).
DEVICE_TO_WALL = (1e-3, 10.0)
#: ``machine_info.cuda`` fields read as text that tell runs apart (GPU type, GPU UUID), with examples.
_ENVIRONMENT_TEXT = {"gpu_slug": "'nvidia-h200'", "gpu_uuid": "'GPU-5b1c...'", "id": "a commit hash"}
#: The whole-number fields of the suites' keys and what they count.
_KEY_COUNTS = {"seq_len": "tokens", "new_tokens": "tokens", "n_launches": "launches"}


def is_number(value) -> bool:
    """An int or a float, never a boolean."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_whole(value) -> bool:
    """An int, never a boolean."""
    return isinstance(value, int) and not isinstance(value, bool)


def shown(text: str, head: int = 30) -> str:
    """``text``, or its first ``head`` characters and its length when longer than 40."""
    return text if len(text) <= 40 else f"{text[:head]}... ({len(text)} characters)"


def is_finite(value) -> bool:
    """A number, neither infinite nor NaN."""
    return is_number(value) and math.isfinite(value)


def is_positive(value) -> bool:
    """A finite number > 0 (a time, a size)."""
    return is_finite(value) and value > 0


def _is_amount(value) -> bool:
    """A finite number >= 0."""
    return is_finite(value) and value >= 0


#: Other ``extra_info`` fields (also of a failed case) that the report formats or computes with: what each must be,
#: when not null.
VALUE_FIELDS = {"n_kernels": (lambda v: is_whole(v) and 0 <= v <= MAX_KEY_COUNT, "a whole number of kernels >= 0"),
                **dict.fromkeys(("weight_bytes", "kv_bytes_per_token", "bytes_per_token"),
                                (_is_amount, "a number of bytes >= 0")),
                **dict.fromkeys(("gpu_busy_ms", "ms_per_token"), (_is_amount, "a number of ms >= 0")),
                "tokens_per_s": (_is_amount, "a number of tokens per second >= 0"),
                "attn_implementation": (lambda v: isinstance(v, str), "a string such as 'sdpa'")}


def value_problem(info: dict, where: str) -> str | None:
    """``"<where>.<field> = ..., not ..."`` for the first field of :data:`VALUE_FIELDS` that is not what it must
    be, else None: the report would format or compute with it and crash."""
    for name, (fits, what) in VALUE_FIELDS.items():
        if info.get(name) is not None and not fits(info[name]):
            return f"{where}.{name} = {shown(repr(info[name]), 20)}, not {what}"
    return None


def _check_key_fields(bad, suite: str, info: dict, where: str = "extra_info") -> None:
    """``bad(...)`` for a key field of ``where`` (``extra_info`` or ``params``) of the wrong type (counts: whole, in
    [1, MAX_KEY_COUNT])."""
    for name, value in ((n, info[n]) for n in SUITE_KEYS[suite] if n in info):
        if name in _KEY_COUNTS:
            if not (is_whole(value) and 1 <= value <= MAX_KEY_COUNT):
                raise bad(f"has {where}.{name} = {shown(repr(value), 20)}, not a whole number of "
                          f"{_KEY_COUNTS[name]} >= 1 (and at most {MAX_KEY_COUNT:,})")
        elif not isinstance(value, str):
            raise bad(f"has {where}.{name} of type {json_type(value)}, not a string")


def json_type(value) -> str:
    """``object``, ``array``, ``string``, ``number``, ``boolean`` or ``null``."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def _check_timings(bad, info: dict) -> None:
    """``bad(...)`` for a time or rate (also nested) not finite and >= 0."""
    for key, value in info.items():
        if value is None or not (key.endswith(("_ms", "_s")) or key.startswith(("ms_per_", "us_per_"))):
            continue
        if type(value) is list and value:        # per-round times: two passes in C when all is well
            try:
                if math.isfinite(math.fsum(value)) and min(value) >= 0:
                    continue
            except (TypeError, ValueError, OverflowError):
                pass
        items = (value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list)
                 else [(None, value)])
        for sub, x in items:
            where = f"extra_info.{key}" + ("" if sub is None else f"[{sub}]" if isinstance(sub, int) else f".{sub}")
            if x is None and sub is not None:
                continue
            if not is_number(x):
                raise bad(f"has {where} of type {json_type(x)}, not a number of ms or s")
            if not (math.isfinite(x) and x >= 0):
                raise bad(f"has {where} = {x}, not a finite time >= 0")


def check_benchmark(path: Path, i: int, bench: dict, stats: dict) -> None:
    """One-line InputFileError for values no benchmark can have: bad stats, a key field of the wrong type, an unknown
    variant or dtype, a bad time in ``extra_info``, a device figure outside :data:`DEVICE_TO_WALL` times the wall
    median, per-round data that is no list of positive finite seconds."""
    def bad(what: str):
        return InputFileError(f"{path}: benchmarks[{i}] {what}: rerun the benchmarks to rewrite the file")

    info = bench.get("extra_info")
    if info is not None and not isinstance(info, dict):
        raise bad(f"has extra_info of type {type(info).__name__}, not an object")
    info = info or {}
    suite = info.get("suite")
    if suite is not None and not isinstance(suite, str):
        raise bad(f"has extra_info.suite of type {json_type(suite)}, not a string such as 'forward'")
    params = bench.get("params")
    if params is not None and not isinstance(params, dict):
        raise bad(f"has params of type {json_type(params)}, not an object (pytest's parameters of the case)")
    if suite in SUITE_KEYS:
        _check_key_fields(bad, suite, info)
        _check_key_fields(bad, suite, params or {}, "params")       # the same key, as pytest-benchmark groups it
    _check_timings(bad, info)
    problem = value_problem(info, "extra_info") or ("replay" in info and replay_format_problem(info["replay"]))
    if problem:
        raise bad(f"has {problem}")
    if "correct" in info and not isinstance(info["correct"], (bool, type(None))):
        raise bad(f"has extra_info.correct = {info['correct']!r}, not true/false")
    if not all(math.isfinite(stats[f]) and stats[f] >= 0 for f in STAT_FIELDS) or not stats["median"] > 0:
        raise bad("has stats that are negative, zero or not finite")
    stddev = stats.get("stddev")
    if stddev is not None and not (is_finite(stddev) and stddev >= 0):
        raise bad(f"has stats.stddev = {stddev!r}, not a finite spread >= 0")
    if any(stats[f] > MAX_ROUND_S for f in ("min", "max", "mean", "median")):
        raise bad(f"has a round time above {MAX_ROUND_S:g} s")
    device = info.get("device_median_ms")
    if device is not None:
        what, wall_ms, (low, high) = "the device-side median of one call", stats["median"] * 1e3, DEVICE_TO_WALL
        if not is_number(device):
            raise bad(f"has extra_info.device_median_ms of type {json_type(device)}, not a number of ms ({what})")
        if not device > 0:
            raise bad(f"has extra_info.device_median_ms = {device!r}, not a time > 0 ms ({what})")
        if not low <= device / wall_ms <= high:
            raise bad(f"has extra_info.device_median_ms = {device:.6g} ms, {device / wall_ms:.3g} times its "
                      f"synchronized wall median ({wall_ms:.6g} ms): {what} lies within {low:g} and {high:g} times "
                      "the synchronized call")
    if suite in SUITE_VARIANTS and "variant" in info and info["variant"] not in SUITE_VARIANTS[suite]:
        raise bad(f"has {suite} variant {info['variant']!r}, not one of {', '.join(SUITE_VARIANTS[suite])}")
    if suite in ("forward", "decode") and "dtype" in info and info["dtype"] not in DTYPES:
        raise bad(f"has dtype {info['dtype']!r}, not one of {', '.join(DTYPES)}")
    data = stats.get("data")
    if data is not None:
        if isinstance(data, list) and not data:
            raise bad("has an empty stats.data (no rounds)")
        if not isinstance(data, list) or not all(is_positive(x) for x in data):
            raise bad("has stats.data that is not a list of positive finite seconds")
        if max(data) > MAX_ROUND_S:
            raise bad(f"has a round of {max(data):g} s in stats.data, above {MAX_ROUND_S:g} s")


def benchmark_name(i: int, bench: dict) -> str:
    """Its ``fullname``, else ``name``, else index."""
    return str(bench.get("fullname") or bench.get("name") or f"benchmarks[{i}]")


def _test_of(i: int, bench: dict) -> str:
    """``...::test_forward``: the name without parameters."""
    return benchmark_name(i, bench).split("[", 1)[0]


def check_suite_benchmarks(path: Path, benchmarks: list[dict]) -> None:
    """One-line InputFileError for a benchmark without ``extra_info``, or without ``extra_info.suite`` where its test's
    other benchmarks name one (it would read as a filtered-out variant), or without a ``params`` key they have."""
    suites: dict[str, str] = {}
    for i, bench in enumerate(benchmarks):
        info = bench.get("extra_info")
        if isinstance(info, dict) and info.get("suite") in SUITE_KEYS:
            suites.setdefault(_test_of(i, bench), info["suite"])
    if not suites:
        return
    params = collections.defaultdict(set)      # pytest gives every case of one test the same parameter names
    for i, bench in enumerate(benchmarks):
        params[_test_of(i, bench)].update(bench.get("params") or {})
    for i, bench in enumerate(benchmarks):
        info = bench.get("extra_info")
        fix = "rerun the benchmarks to rewrite the file"
        lacks = sorted(params[_test_of(i, bench)] - set(bench.get("params") or {}))
        if lacks:
            raise InputFileError(f"{path}: benchmarks[{i}] ({benchmark_name(i, bench)}) lacks params."
                                 f"{', params.'.join(lacks)}, which other benchmarks of its test record: {fix}")
        if info is None:
            raise InputFileError(f"{path}: benchmarks[{i}] ({benchmark_name(i, bench)}) has no extra_info, where this "
                                 f"suite records the case it measured (suite, model, variant, ...): {fix}")
        suite = suites.get(_test_of(i, bench))
        if suite is not None and info.get("suite") is None:
            missing = [f for f in ("suite", *SUITE_KEYS[suite]) if f not in info]
            raise InputFileError(f"{path}: benchmarks[{i}] ({benchmark_name(i, bench)}) lacks extra_info "
                                 f"{', '.join(missing)}, which the other benchmarks of its test record (suite "
                                 f"{suite!r}): {fix}")


def check_environment(path: Path, data: dict) -> None:
    """One-line InputFileError when ``machine_info.cuda.gpu_slug``, ``.gpu_uuid`` or ``commit_info.id`` is not text."""
    info = data.get("machine_info")
    cuda = info.get("cuda") if isinstance(info, dict) else None
    commit = data.get("commit_info")
    fields = [("machine_info.cuda", k, cuda.get(k)) for k in ("gpu_slug", "gpu_uuid")] if isinstance(cuda, dict) else []
    fields += [("commit_info", "id", commit.get("id"))] if isinstance(commit, dict) else []
    for section, key, value in fields:
        if value is not None and not isinstance(value, str):
            raise InputFileError(f"{path}: {section}.{key} is {shown(repr(value))} (of type {json_type(value)}), not "
                                 f"text such as {_ENVIRONMENT_TEXT[key]}: rerun the benchmarks to rewrite the file")
