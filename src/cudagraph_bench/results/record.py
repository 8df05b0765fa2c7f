"""The typed record of a run (no torch): a pytest-benchmark JSON decoded once into :class:`Measurement`,
:class:`FailedCase` and :class:`Environment`; no other module reads the raw ``extra_info`` keys. A benchmark of no suite
decodes as an ``"other"`` measurement keyed by its test name."""

from __future__ import annotations

from dataclasses import astuple, dataclass, field
from datetime import datetime, timezone

import numpy as np

from cudagraph_bench import variants
from cudagraph_bench.cases import SUITE_CASES, SUITE_KEYS, Case, DecodeCase, LaunchCase, OtherCase
from cudagraph_bench.errors import InputFileError
from cudagraph_bench.results.benchmark_values import benchmark_name, is_number, is_whole
from cudagraph_bench.results.replay import replay_format_problem
from cudagraph_bench.results.replay import replay_problem as _replay_problem
from cudagraph_bench.results.stats import Summary, summarize

#: The key of a measurement: one class per suite, :class:`~cudagraph_bench.cases.OtherCase` for no suite.
CaseKey = Case | DecodeCase | LaunchCase | OtherCase
#: The four states of a recorded check (:attr:`CheckRecord.status`).
CHECK_STATUSES = ("reference", "pass", "fail", "unchecked")
#: Recorded case statuses (``extra_info.status``) that mean the variant did not match eager.
FAILED_OUTCOMES = ("mismatch", "failed")
#: ``extra_info.check`` of every benchmark of the plain capture/replay loop (``scripts/device/plain_loop``).
PLAIN_LOOP_CHECK = "plain loop (unchecked)"


def parse_stamp(raw) -> datetime | None:
    """An ISO 8601 stamp as an aware UTC datetime (naive: UTC), or None when missing or unreadable."""
    try:
        when = datetime.fromisoformat(str(raw))
    except ValueError:
        return None
    return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)


def is_peer(suite: str, variant: str | None) -> bool:
    """Whether ``variant`` of ``suite`` is a peer's code, whose failure is reported like an xfail."""
    row = variants.find(suite, variant)
    return row is not None and row.peer


@dataclass(frozen=True)
class CheckRecord:
    """The correctness check a run recorded for one benchmark or failed case; a field not recorded is None. ``status``:
    one of :data:`CHECK_STATUSES`; ``method``: the rule that decided (``extra_info.check``); ``max_abs_diff``: largest
    |variant - eager| over the check inputs, in logits; ``fp64_rmse_ratio``: RMSE against float64 / eager's own
    (dimensionless); ``outcome``: the recorded status when not ok; ``generate_check_passed`` (decode): tokens equal
    ``generate``'s or differ only at a rounding tie; ``matches_generate`` (decode): equal exactly."""

    status: str
    method: str | None = None
    max_abs_diff: float | None = None
    fp64_rmse_ratio: float | None = None
    reason: str | None = None
    outcome: str | None = None
    generate_check_passed: bool | None = None
    matches_generate: bool | None = None
    generate_check: str | None = None
    replay_problem: str | None = None

    @property
    def detail(self) -> str:
        """The check in words for error messages, e.g. ``"check strict, max |diff| 3.5"``."""
        vs_generate = self.generate_check_passed
        parts = [f"check {self.method}"] if self.method else [] if vs_generate is not None else ["check not recorded"]
        if self.max_abs_diff is not None:
            parts.append(f"max |diff| {self.max_abs_diff:.3g}")
        if self.reason:
            parts.append(self.reason)
        if vs_generate is not None and (vs_generate is False or not self.method):
            parts.append(f"check vs generate {'passed' if vs_generate else 'failed'}: "
                         f"{self.generate_check or 'no sentence recorded'}")
        if self.replay_problem:
            parts.append(self.replay_problem)
        return ", ".join(parts)

    @property
    def generate_recorded(self) -> bool:
        """Whether the run recorded a check of the decoded tokens against ``generate``."""
        return self.matches_generate is not None


@dataclass(frozen=True)
class Environment:
    """Where and with what a run was measured; a field the run did not record is None (``commit_dirty``: False).
    ``gpu_name`` None for a CPU run; ``gpu_slug`` names ``baselines/<gpu_slug>.json``; ``host``: the GPU's UUID (cloud
    host names repeat); ``run_datetime``: ISO 8601 as written (UTC); ``cuda_fingerprint``, ``commit_info``: whole, as
    recorded; ``gpu_workers``: an older run's xdist workers, else 0; ``planted_fault``: the self-test fault planted
    (e.g. ``"delay:5"``), None for a real run."""

    gpu_name: str | None = None
    gpu_slug: str | None = None
    driver: str | None = None
    cuda_runtime: str | None = None
    torch: str | None = None
    transformers: str | None = None
    pytest_benchmark: str | None = None
    commit_id: str | None = None
    commit_dirty: bool = False
    run_datetime: str | None = None
    node: str | None = None
    host: str | None = None
    cpu_brand: str | None = None
    cpu_count: int | None = None
    python_version: str | None = None
    python_implementation: str | None = None
    system: str | None = None
    release: str | None = None
    machine: str | None = None
    cuda_fingerprint: dict | None = None
    commit_info: dict | None = None
    gpu_workers: int = 0
    planted_fault: str | None = None

    @property
    def on_gpu(self) -> bool:
        """The run recorded a CUDA fingerprint (a GPU run)."""
        return self.cuda_fingerprint is not None

    @property
    def started_at(self) -> datetime:
        """:attr:`run_datetime` as an aware ``datetime`` (naive: UTC); the earliest possible time when unreadable."""
        return parse_stamp(self.run_datetime) or datetime.min.replace(tzinfo=timezone.utc)

    @property
    def known_commit(self) -> str | None:
        """:attr:`commit_id` where the run recorded a readable commit, else None."""
        unread = self.commit_id == "unknown" or "error" in (self.commit_info or {})
        return None if unread else self.commit_id

    @property
    def cpu_text(self) -> str | None:
        """E.g. ``"Intel(R) Xeon(R) Platinum 8480C, 16 cores"``, or None."""
        if not self.cpu_brand:
            return None
        return self.cpu_brand + (f", {self.cpu_count} cores" if self.cpu_count else "")

    def versions(self, keys: tuple[str, ...] = ("torch", "cuda_runtime", "driver", "transformers"),
                 labels: dict[str, str] | None = None) -> list[str]:
        """``"<label> <version>"`` for each of ``keys`` recorded; ``labels`` default to the key."""
        labels = labels or {}
        return [f"{labels.get(k, k)} {getattr(self, k)}" for k in keys if getattr(self, k)]


@dataclass(frozen=True)
class Measurement:
    """One benchmark of a run, decoded. ``suite``: ``"forward"``, ``"decode"``, ``"launch"``, or ``"other"`` (key
    ``OtherCase(fullname)``); ``samples_ms``: per-round ``[rounds]`` float64 ms, None when the run kept no data;
    ``summary``: ms (from ``samples_ms``, else the run's ``stats``, then ``p95_ms`` None); ``environment``: shared by
    every measurement of a run."""

    suite: str
    case: CaseKey
    label: str
    name: str
    samples_ms: np.ndarray | None
    summary: Summary
    check: CheckRecord
    environment: Environment
    extra_info: dict

    @property
    def key(self) -> tuple:
        """The case's fields in order, or ``(fullname,)``."""
        return astuple(self.case)

    @property
    def device_ms(self) -> float | None:
        """Device-side median ms of one call over back-to-back calls, or None."""
        value = self.extra_info.get("device_median_ms")
        return float(value) if is_number(value) and value > 0 else None

    def figure_ms(self, figure: str) -> float | None:
        """The median of ``figure`` (``"device"``: :attr:`device_ms`, ``"wall"``: the synchronized wall median) in ms;
        None when not recorded."""
        return self.device_ms if figure == "device" else self.summary.median_ms


@dataclass(frozen=True)
class FailedCase:
    """A forward or decode case a run could not measure (a failures entry); a field not recorded is None. ``status``:
    ``"failed"`` (default), ``"skipped"``, ``"mismatch"``; ``phase``: ``"build"``, ``"capture"``, ``"check"``, ...;
    ``compile_ms``: the compiling first call's wall ms; ``details``: the entry's other fields."""

    case: Case | DecodeCase
    status: str
    phase: str | None
    check: CheckRecord
    compile_ms: float | None = None
    name: str | None = None
    details: dict = field(default_factory=dict)


def _text(value) -> str | None:
    return None if value is None else str(value)


def _number(value) -> float | None:
    return float(value) if is_number(value) else None


def _flag(value) -> bool | None:
    return value if isinstance(value, bool) else None


def decode_check(info: dict, variant: str | None, suite: str = variants.FORWARD) -> CheckRecord:
    """The :class:`CheckRecord` of one ``extra_info`` (or failure entry): ``fail`` when ``correct`` is false, the status
    is ``mismatch``/``failed``, the generate check failed or a replay proof shows no replay; else ``pass`` when
    ``correct`` (or the generate check) passed; else ``reference`` or ``unchecked``."""
    correct, outcome = info.get("correct"), info.get("status")
    vs_generate = _flag(info.get("generate_check_passed"))
    replay = info.get("replay")
    replay_failed = _replay_problem(replay) if isinstance(replay, dict) and replay_format_problem(replay) is None \
        else None
    row = variants.find(suite, variant)
    status = ("fail" if correct is False or outcome in FAILED_OUTCOMES or vs_generate is False or replay_failed else
              "pass" if correct is True or (correct is None and vs_generate is True) else
              "reference" if row is not None and row.is_reference else "unchecked")
    return CheckRecord(status, _text(info.get("check")), _number(info.get("max_abs_diff")),
                       _number(info.get("fp64_rmse_ratio")), _text(info.get("reason")) or None,
                       str(outcome) if outcome else None, vs_generate, _flag(info.get("matches_generate")),
                       _text(info.get("generate_check")), replay_failed)


def _mapping(value) -> dict:
    return value if isinstance(value, dict) else {}


def decode_environment(data: dict) -> Environment:
    """The :class:`Environment` of a run document (the parsed JSON)."""
    info = _mapping(data.get("machine_info"))
    cuda = info.get("cuda") if isinstance(info.get("cuda"), dict) else None
    gpu = cuda or {}
    commit = data.get("commit_info") if isinstance(data.get("commit_info"), dict) else None
    cpu = _mapping(info.get("cpu"))
    count = cpu.get("count")
    return Environment(
        **{k: _text(gpu.get(k)) for k in ("gpu_name", "driver", "cuda_runtime", "torch", "transformers")},
        **{k: _text(info.get(k)) for k in ("node", "python_version", "python_implementation", "system", "release",
                                           "machine")},
        gpu_slug=_text(gpu.get("gpu_slug")) or None, host=_text(gpu.get("gpu_uuid")) or None,
        pytest_benchmark=_text(data.get("version")), commit_id=_text((commit or {}).get("id")) or None,
        commit_dirty=bool((commit or {}).get("dirty")), run_datetime=_text(data.get("datetime")),
        cpu_brand=_text(cpu.get("brand_raw")) or None,
        cpu_count=count if is_whole(count) else None,
        cuda_fingerprint=cuda, commit_info=commit,
        gpu_workers=len(info["workers"]) if isinstance(info.get("workers"), list) else 0,
        planted_fault=_text(_mapping(data.get("cudagraph_bench")).get("planted_fault")) or None)


def decode_case(path, name: str, info: dict) -> CaseKey:
    """The key of a benchmark from its ``extra_info`` (``OtherCase(name)`` for no suite). Raises InputFileError (naming
    ``path`` and the benchmark) when a key field is missing or malformed."""
    suite = info.get("suite")
    if suite not in SUITE_CASES:
        return OtherCase(name)
    missing = [f for f in SUITE_KEYS[suite] if f not in info]
    if missing:
        raise InputFileError(f"{path}: {name} (suite {suite!r}) lacks extra_info "
                             f"{', '.join(missing)}: was the run written by the cudagraph-bench plugin?")
    try:
        return SUITE_CASES[suite].from_extra_info(info)
    except (TypeError, ValueError):
        key = tuple(info[f] for f in SUITE_KEYS[suite])
        raise InputFileError(f"{path}: {name} has a malformed {suite} key {key!r}") from None


def attach_kernel_counts(benchmarks: list[dict], kernel_counts: list[dict]) -> None:
    """Write each ``kernel_counts`` entry's fields into its case's eager forward ``extra_info``, in place, keeping any
    it has (profiles may come from another process)."""
    fields = {(k.get("model"), k.get("dtype"), k.get("seq_len")):
              {f: v for f, v in k.items() if f not in ("model", "dtype", "seq_len")} for k in kernel_counts}
    for bench in benchmarks:
        info = bench.get("extra_info") or {}
        if info.get("suite") == variants.FORWARD and info.get("variant") == variants.FORWARD_REFERENCE:
            found = fields.get((info.get("model"), info.get("dtype"), info.get("seq_len")), {})
            info.update({name: value for name, value in found.items() if name not in info})


#: The lists of a run's ``cudagraph_bench`` section that are worth a run file even without benchmarks.
RECORD_LISTS = ("kernel_counts", "failures")


def records_without_benchmarks(section) -> dict[str, int]:
    """``{list: entries}`` of the non-empty :data:`RECORD_LISTS`; ``{}`` means nothing worth a file."""
    if not isinstance(section, dict):
        return {}
    return {key: len(section[key]) for key in RECORD_LISTS if isinstance(section.get(key), list) and section[key]}


def decode_measurement(path, index: int, bench: dict, environment: Environment) -> Measurement:
    """The :class:`Measurement` of ``benchmarks[index]``, an entry ``check_benchmark`` accepted (``stats.data`` in
    seconds). Raises InputFileError for a malformed key."""
    info = bench.get("extra_info") or {}
    name = benchmark_name(index, bench)
    case = decode_case(path, name, info)
    stats = bench["stats"]
    samples = np.asarray(stats["data"], dtype=np.float64) * 1000.0 if stats.get("data") else None
    summary = summarize(samples) if samples is not None else Summary(
        int(stats["rounds"]), stats["mean"] * 1e3, stats["median"] * 1e3, None, stats["min"] * 1e3,
        stats["max"] * 1e3, float(stats.get("stddev") or 0.0) * 1e3)
    return Measurement(suite=case.suite, case=case, label=case.label, name=name, samples_ms=samples,
                       summary=summary, check=decode_check(info, case.variant, case.suite), environment=environment,
                       extra_info=dict(info))


def decode_failure(entry) -> FailedCase | None:
    """The :class:`FailedCase` of one failures entry; None when it names no forward or decode case."""
    suite = entry.get("suite") or "forward" if isinstance(entry, dict) else None
    if suite not in ("forward", "decode") or not set(SUITE_KEYS[suite]) <= entry.keys():
        return None
    try:
        case = (Case if suite == "forward" else DecodeCase).from_extra_info(entry)
    except (TypeError, ValueError):
        return None
    known = {"suite", *SUITE_KEYS[suite], "status", "phase", "compile_ms", "fullname", "reason", "check",
             "max_abs_diff", "fp64_rmse_ratio", "correct"}
    return FailedCase(case=case, status=str(entry.get("status") or "failed"), phase=_text(entry.get("phase")),
                      check=decode_check(entry, case.variant, case.suite), compile_ms=_number(entry.get("compile_ms")),
                      name=_text(entry.get("fullname")), details={k: v for k, v in entry.items() if k not in known})
