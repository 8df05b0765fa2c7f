"""Reading and validating pytest-benchmark JSON runs (no torch): a ``--benchmark-json`` file, plain or gzip, or a saved
run by id (``0001``) or file stem. Every problem with an input file raises InputFileError with one line naming the file
and the fix (exit 2)."""

from __future__ import annotations

import contextlib
import contextvars
import gzip
import io
import hashlib
import json
import zlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import MappingProxyType

from cudagraph_bench import variants
from cudagraph_bench.cases import SUITE_KEYS, Case
from cudagraph_bench.errors import InputFileError, UsageError
from cudagraph_bench.fsio import MAX_JSON_BYTES, parse_json, read_input_bytes
from cudagraph_bench.paths import STORAGE_ENV, default_storage
from cudagraph_bench.results import identity
from cudagraph_bench.results.benchmark_values import (STAT_FIELDS, check_benchmark, check_environment,
                                                      check_suite_benchmarks, is_number, value_problem)
from cudagraph_bench.results.record import (PLAIN_LOOP_CHECK, RECORD_LISTS, Environment, FailedCase, Measurement,
                                            decode_environment, decode_failure, decode_measurement,
                                            records_without_benchmarks)
from cudagraph_bench.results.shards import durations_of
from cudagraph_bench.results.stats import MIN_BOOTSTRAP_ROUNDS, reduction_ci, reduction_pct, runs_reduction_pct

#: Default storage folder of pytest-benchmark (``--benchmark-storage=file://./.benchmarks``).
DEFAULT_STORAGE = ".benchmarks"


#: The key of a run's ``cudagraph_bench`` section that marks the run of an interrupted session (Ctrl-C).
INTERRUPTED = "interrupted"
_ALLOW_INTERRUPTED = contextvars.ContextVar("allow_interrupted", default=False)


@contextlib.contextmanager
def interrupted_runs_allowed(allowed: bool = True):
    """Within the block, :func:`load_run` reads runs of interrupted sessions (``--allow interrupted``)."""
    token = _ALLOW_INTERRUPTED.set(allowed)
    try:
        yield
    finally:
        _ALLOW_INTERRUPTED.reset(token)


@dataclass(frozen=True)
class Run:
    """A loaded run: ``data`` the parsed JSON (never changed), ``sha256`` of the decompressed bytes; decoded fields are
    computed once, when first asked for."""

    path: Path
    data: dict
    sha256: str

    @property
    def benchmarks(self) -> list[dict]:
        return self.data["benchmarks"]

    @cached_property
    def content_digest(self) -> str | None:
        """None without benchmarks."""
        return identity.content_digest(self.data)

    @cached_property
    def environment(self) -> Environment:
        """GPU, versions, commit, time and host of the run (shared by all its measurements)."""
        return decode_environment(self.data)

    @cached_property
    def measurements(self) -> Mapping[tuple, Measurement]:
        """Keyed by ``(suite, *key)``, in file order (read-only); InputFileError on a malformed or duplicate key."""
        out: dict[tuple, Measurement] = {}
        for i, bench in enumerate(self.benchmarks):
            m = decode_measurement(self.path, i, bench, self.environment)
            full_key = (m.suite, *m.key)
            if full_key in out:
                raise InputFileError(f"{self.path}: {m.label!r} appears twice ({out[full_key].name}, {m.name}): "
                                     "give each run in a file of its own")
            out[full_key] = m
        return MappingProxyType(out)

    @property
    def on_cpu(self) -> bool:
        """No GPU recorded, or a benchmark measured with ``--device cpu``: a hint names a CUDA GPU, not a rerun that a
        CPU cannot do."""
        return self.environment.gpu_slug is None or any(
            isinstance(b.get("extra_info"), dict) and b["extra_info"].get("device") == "cpu" for b in self.benchmarks)

    @cached_property
    def failures(self) -> tuple[FailedCase, ...]:
        """In file order."""
        section = self.data.get("cudagraph_bench") or {}
        decoded = (decode_failure(f) for f in section.get("failures") or [])
        return tuple(f for f in decoded if f is not None)


def resolve_run_path(ref: str, storage: str | os.PathLike | None = None) -> Path:
    """Path of a run given as a path or saved-run id (``storage`` None: the default). Raises InputFileError for a
    missing file, an unknown id (listing those found) or an ambiguous id."""
    path = Path(ref)
    if path.exists():
        return path
    storage = default_storage() if storage is None else storage
    if not str(storage).strip():
        raise InputFileError("the saved-run folder is empty: give the folder pytest-benchmark saves runs in "
                             f"(default {DEFAULT_STORAGE})")
    if Path(storage).is_file():
        raise InputFileError(f"the saved-run folder {storage} is a file: set ${STORAGE_ENV} to the folder "
                             f"pytest-benchmark saves runs in (default {DEFAULT_STORAGE}), or pass the run file "
                             "itself as RUN")
    looks_like_path = ref.endswith((".json", ".json.gz")) or os.sep in ref or "/" in ref
    folder, pattern = Path(storage), "[0-9][0-9][0-9][0-9]_*.json"
    saved = sorted({*folder.glob(f"*/{pattern}"), *folder.glob(pattern)}) if folder.is_dir() else []
    matches = [p for p in saved if p.stem == ref or p.stem.split("_", 1)[0] == ref]
    if matches and not looks_like_path:
        if len(matches) > 1:
            raise InputFileError(f"saved-run id {ref!r} is ambiguous: {', '.join(str(p) for p in matches)}; "
                                 "give the file path")
        return matches[0]
    if looks_like_path:
        raise InputFileError(f"no such file: {ref}: give the path of a pytest-benchmark JSON "
                             "(pytest --benchmark-json=FILE) or a saved-run id")
    if not saved:
        raise InputFileError(f"no file or saved-run id {ref!r}: {storage}/ holds no saved runs "
                             "(save one with pytest --benchmark-autosave)")
    ids = sorted({p.stem.split("_", 1)[0] for p in saved})
    shown = ", ".join(ids[:20]) + (f", ... ({len(ids)} in all)" if len(ids) > 20 else "")
    raise InputFileError(f"unknown saved-run id {ref!r}: ids in {storage}/ are {shown}")


def load_run(ref: str, storage: str | os.PathLike | None = None, *, records_only: bool = False,
             interrupted_fix: str = "pass --allow interrupted to read it anyway") -> Run:
    """Load and validate a run (path or saved-run id), plain or gzip. ``records_only``: accept a run without benchmarks
    that records kernel counts or failed cases (for ``merge``). Raises InputFileError (one line): missing, irregular,
    too large, empty, invalid JSON or gzip, nested too deep, not pytest-benchmark output, a suite benchmark without its
    key, no benchmarks (nor records), or an interrupted session's run (its error ends in ``interrupted_fix``, the fix
    the caller offers)."""
    if not str(ref).strip():
        raise InputFileError("expected a run, got an empty string: name a pytest-benchmark JSON file or a saved-run id")
    path = resolve_run_path(ref, storage)
    if path.is_dir():
        inside = path / "run.json"
        hint = f"{inside}?" if inside.is_file() else ("a file written by pytest --benchmark-json=FILE or "
                                                      "cudagraph-bench run -o DIR (DIR/run.json)")
        raise InputFileError(f"{path} is a folder, not a run JSON: give a run file, e.g. {hint}")
    fix = "give a pytest-benchmark JSON run (pytest --benchmark-json=FILE)"
    raw = _decompressed(path, read_input_bytes(path, "run", fix), fix)
    if not raw.strip():
        raise InputFileError(f"{path} is empty: rerun the benchmarks with --benchmark-json={path}")
    try:
        data = parse_json(raw, path, "run", fix)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise InputFileError(f"{path} is not valid JSON{where}: give a pytest-benchmark JSON run (--benchmark-json); "
                             "if it is one, it is truncated or corrupt: rerun the benchmarks to rewrite it") from None
    if not (isinstance(data, dict) and isinstance(data.get("benchmarks"), list)
            and isinstance(data.get("machine_info"), dict)):
        raise InputFileError(f"{path} is not pytest-benchmark output (needs 'machine_info' and a "
                             "'benchmarks' list): give a file written by pytest --benchmark-json")
    section = data.get("cudagraph_bench")
    interrupted = section.get(INTERRUPTED) if isinstance(section, dict) else None
    if interrupted and not _ALLOW_INTERRUPTED.get():
        interrupted = interrupted if isinstance(interrupted, str) else "the session was interrupted"
        raise InputFileError(f"{path} is the run of an interrupted session ({interrupted}): its last benchmark may "
                             "have been cut short and the cases after it are missing: rerun the benchmarks, or "
                             f"{interrupted_fix}")
    if not data["benchmarks"] and not (records_only and records_without_benchmarks(data.get("cudagraph_bench"))):
        raise _no_benchmarks_error(path, data.get("cudagraph_bench"))
    for key in ("commit_info", "cudagraph_bench"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise InputFileError(f"{path}: '{key}' must be an object, got {type(data[key]).__name__}: "
                                 "rerun the benchmarks to rewrite the file")
    section = data.get("cudagraph_bench") or {}
    for key in RECORD_LISTS:
        records = section.get(key, [])
        if not (isinstance(records, list) and all(isinstance(f, dict) for f in records)):
            raise InputFileError(f"{path}: cudagraph_bench.{key} must be a list of objects (one per case), got "
                                 f"{json.dumps(records)[:60]}: rerun the benchmarks to rewrite the file")
        for j, record in enumerate(records):
            if problem := value_problem(record, f"cudagraph_bench.{key}[{j}]"):
                raise InputFileError(f"{path}: {problem}: rerun the benchmarks to rewrite the file")
    durations_of(data, str(path), required=False)
    check_environment(path, data)
    for i, bench in enumerate(data["benchmarks"]):
        stats = bench.get("stats") if isinstance(bench, dict) else None
        if not (isinstance(stats, dict) and all(is_number(stats.get(f)) for f in STAT_FIELDS)):
            raise InputFileError(f"{path}: benchmarks[{i}] has no numeric stats "
                                 f"({', '.join(STAT_FIELDS)}): not pytest-benchmark output")
        check_benchmark(path, i, bench, stats)
    check_suite_benchmarks(path, data["benchmarks"])
    return Run(path=path, data=data, sha256=hashlib.sha256(raw).hexdigest())


#: The first bytes of every gzip stream (RFC 1952).
GZIP_MAGIC = b"\x1f\x8b"


def _decompressed(path: Path, raw: bytes, fix: str) -> bytes:
    """``raw``, gunzipped if gzip, refused past ``MAX_JSON_BYTES``; InputFileError for a corrupt stream."""
    if not (path.name.endswith(".gz") or raw.startswith(GZIP_MAGIC)):
        return raw
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as fh:
            data = fh.read(MAX_JSON_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputFileError(f"{path} is not a valid gzip file ({exc}): give the run as written by pytest "
                             "--benchmark-json, or compressed whole with gzip (gzip -k FILE.json)") from None
    if len(data) > MAX_JSON_BYTES:
        raise InputFileError(f"run {path} inflates to more than {MAX_JSON_BYTES:,} bytes ({MAX_JSON_BYTES / 2**20:g} "
                             f"MiB), read at most (no run is that large): {fix}")
    return data


def _no_benchmarks_error(path: Path, section) -> InputFileError:
    """One line naming what the run holds instead and what to do."""
    section = section if isinstance(section, dict) else {}
    records = records_without_benchmarks(section)
    failures = section.get("failures") if records.get("failures") else []
    first = ""
    if failures and isinstance(failures[0], dict):
        f = failures[0]
        first = (f" (first: {f.get('model')} {f.get('dtype')} L={f.get('seq_len')} {f.get('variant')}: "
                 f"{f.get('status')}: {f.get('reason')})")
    if section.get("tool") == "cudagraph-bench run" and failures:
        return InputFileError(f"{path} holds no measured benchmark: all {len(failures)} case(s) of this "
                              f"`cudagraph-bench run` failed or were skipped{first}; see its "
                              "cudagraph_bench.failures and rerun")
    if records:
        held = ([f"the kernel counts of {records['kernel_counts']} forward case(s)"] if "kernel_counts" in records
                else [])
        held += [f"{len(failures)} case(s) that failed or were skipped{first}"] if failures else []
        return InputFileError(f"{path} holds no benchmarks, only {' and '.join(held)} (a session that ran no "
                              "benchmark, e.g. a --shard K/N of the profiling tests): merge it with the runs that "
                              "hold the benchmarks first (cudagraph-bench merge -o merged.json RUN...)")
    return InputFileError(f"{path} holds no benchmarks: did every benchmark skip (no CUDA GPU)? "
                          "see why with pytest perf_tests --benchmark-only -rs")


def measurements(run: Run) -> Mapping[tuple, Measurement]:
    """:attr:`Run.measurements`; InputFileError on a malformed or duplicate key."""
    return run.measurements


def require_suite_benchmarks(runs: list[Run]) -> None:
    """InputFileError when no benchmark of ``runs`` is this suite's and no run records a failed case."""
    if any((run.data.get("cudagraph_bench") or {}).get("failures")
           or any((b.get("extra_info") or {}).get("suite") in SUITE_KEYS for b in run.benchmarks) for run in runs):
        return
    names = " or ".join(str(r.path) for r in runs)
    *first, last = SUITE_KEYS
    raise InputFileError(f"no cudagraph-bench benchmark in {names} (no benchmark's extra_info names the suite "
                         f"{', '.join(first)} or {last}: plain pytest-benchmark output?): run `cudagraph-bench run "
                         "-o DIR` or `pytest perf_tests --benchmark-only --benchmark-json=FILE`")


def forward_cases(run: Run) -> dict[Case, Measurement]:
    """Forward-suite benchmarks of a run keyed by :class:`~cudagraph_bench.cases.Case`."""
    return {m.case: m for m in measurements(run).values() if m.suite == "forward"}


def forward_groups(run: Run) -> dict[tuple[str, str, int], dict[str, Measurement]]:
    """``(model, dtype, seq_len)`` -> ``{variant: Measurement}``, sorted, variants in registry order. InputFileError
    without forward benchmarks, or when a group lacks ``eager`` or ``graph``."""
    groups: dict[tuple[str, str, int], dict[str, Measurement]] = {}
    cases = forward_cases(run)
    for case in sorted(cases, key=lambda c: (c.without_variant(), variants.display_rank(variants.FORWARD, c.variant),
                                             c.variant)):
        groups.setdefault(case.without_variant(), {})[case.variant] = cases[case]
    if not groups:
        raise InputFileError(f"{run.path} has no forward-suite benchmarks (extra_info suite 'forward'): "
                             "run pytest perf_tests --benchmark-only with the cudagraph-bench plugin")
    if is_plain_loop_run(run):
        raise InputFileError(f"{run.path} is {PLAIN_LOOP_RUN}, not a run to gate or build a baseline from: give a run "
                             "of the suite (pytest perf_tests --benchmark-only), or pass it to calibrate with --plain")
    for (model, dtype, seq_len), by_variant in groups.items():
        for need, other in ((variants.GATED, variants.FORWARD_REFERENCE), (variants.FORWARD_REFERENCE, variants.GATED)):
            if other in by_variant and need not in by_variant:
                fix = (f"the {need} variant needs a CUDA GPU and this is a CPU run: rerun on a GPU machine"
                       if need == variants.GATED and run.on_cpu else f"rerun without filtering out the {need} variant")
                raise InputFileError(f"{run.path}: {model} {dtype} L={seq_len} has {other} but no {need} "
                                     f"benchmark: {fix}")
        if variants.FORWARD_REFERENCE not in by_variant:
            raise InputFileError(f"{run.path}: {model} {dtype} L={seq_len} has no eager or graph benchmark "
                                 f"(only {', '.join(by_variant)}): rerun with the eager and graph variants")
    return groups


#: A run of the plain capture/replay loop, as error messages describe it.
PLAIN_LOOP_RUN = ("a run of the plain capture/replay loop (scripts/device/plain_loop: graph replays timed with torch "
                  "and pytest-benchmark only, no eager benchmark, no check)")


def is_plain_loop_run(run: Run) -> bool:
    """Whether every (and at least one) forward benchmark is the plain loop's: a noise reference, never gated."""
    forward = forward_cases(run).values()
    return bool(forward) and all(m.check.method == PLAIN_LOOP_CHECK for m in forward)


def merged_forward_groups(runs: list[Run]) -> dict[tuple[str, str, int], dict[str, list[Measurement]]]:
    """``(model, dtype, seq_len)`` -> ``{variant: [Measurement per run]}``, sorted; errors as :func:`forward_groups`."""
    merged: dict[tuple[str, str, int], dict[str, list[Measurement]]] = {}
    for run in runs:
        for key, by_variant in forward_groups(run).items():
            for variant, m in by_variant.items():
                merged.setdefault(key, {}).setdefault(variant, []).append(m)
    return dict(sorted(merged.items()))


def pairs_reduction_pct(pairs: list[tuple[Measurement, Measurement]]
                        ) -> tuple[float, tuple[float, float] | None]:
    """Median latency reduction (percent) of the variant vs eager from ``(eager, variant)`` pairs, one per run, and an
    interval: one pair, the 95% bootstrap interval over rounds (None without per-round data); several, the range of the
    per-run reductions. ValueError for no pairs."""
    if len(pairs) == 1:
        eager, other = pairs[0]
        red = reduction_pct(eager.summary.median_ms, other.summary.median_ms)
        if not all(m.samples_ms is not None and len(m.samples_ms) >= MIN_BOOTSTRAP_ROUNDS for m in pairs[0]):
            return red, None
        low, high = reduction_ci(eager.samples_ms, other.samples_ms)
        return red, (100.0 * low, 100.0 * high)
    return runs_reduction_pct([e.summary.median_ms for e, _ in pairs], [o.summary.median_ms for _, o in pairs])


def check_one_gpu(runs: list[Run], fix: str) -> None:
    """UsageError naming the GPUs when ``runs`` are from different GPUs; ``fix`` ends it."""
    slugs = {r.environment.gpu_slug for r in runs}
    if len(slugs) > 1:
        raise UsageError(f"the runs are from different GPUs ({', '.join(sorted(s or 'no GPU' for s in slugs))}): {fix}")


def distinct_runs(runs: list[Run], what: str) -> list[Run]:
    """``runs``; UsageError when a run is given twice (that would narrow the noise model)."""
    repeat = identity.repeated_run(runs)
    if repeat:
        earlier, run, why = repeat
        raise UsageError(f"{what}: {run.path} and {earlier.path} are the same run ({why}): give each separate run once")
    return runs
