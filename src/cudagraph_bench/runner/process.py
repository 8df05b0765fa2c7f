"""One watched pytest process of the suite, the isolation policy of every launched run: separate processes make runs
independent noise samples and keep a crash from taking other cases with it. Each runs in its own process group, so a
Ctrl-C reaches this process, which stops them all. No torch in this process."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from cudagraph_bench.errors import UsageError
from cudagraph_bench.fsio import LOG_HEADER, write_text_atomic
from cudagraph_bench.journal import EXIT_CUDA_BROKEN, read_journal
from cudagraph_bench.options import format_cpus

#: Restarts after crashes before the rest of a run is given up (each crash fails its own test only).
MAX_RESTARTS = 3
#: pytest's own exit codes (0 passed .. 5 nothing collected): the process ended normally.
PYTEST_EXIT_CODES = frozenset(range(6))
#: pytest's short test summary: failures and errors (its default, ``fE``) and the skipped tests with their reasons.
REPORT_CHARS = "-rfEs"
#: A line of that summary for skipped tests, one per location and reason: ``SKIPPED [count] path:line: reason``.
_SKIPPED_LINE = re.compile(r"^SKIPPED \[(\d+)\] [^:]*(?::\d+)?: (.+)$")
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")

#: Run by :func:`cuda_problem` in a child process: exit 0 with a CUDA GPU, 1 without, 3 without torch.
_CUDA_PROBE = ("import sys\n"
               "try:\n    import torch\n"
               "except Exception as exc:\n    print(f'{type(exc).__name__}: {exc}'.splitlines()[0]); sys.exit(3)\n"
               "sys.exit(0 if torch.cuda.is_available() else 1)")


def cuda_problem(python: str = sys.executable, timeout_s: float = 300.0) -> str | None:
    """Why ``python -m pytest`` would find no CUDA GPU, in a few words, or None; checked in a child process."""
    try:
        proc = subprocess.run([python, "-c", _CUDA_PROBE], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{python} could not check for CUDA ({type(exc).__name__})"
    if proc.returncode == 0:
        return None
    if proc.returncode == 1:
        return f"torch.cuda.is_available() is False for {python}"
    detail = (proc.stdout.strip() or proc.stderr.strip() or f"exit {proc.returncode}").splitlines()[-1][:120]
    return f"{python} cannot import torch ({detail})"


#: Run by :func:`zoo_types` in a child process: the installed transformers release and the zoo's list of model types.
_ZOO_TYPES_PROBE = ("import json, transformers\n"
                    "from cudagraph_bench.models.zoo_types import causal_lm_types\n"
                    "print(json.dumps([transformers.__version__, causal_lm_types()]))")


@functools.lru_cache(maxsize=8)
def zoo_types(tree: Path, python: str = sys.executable, timeout_s: float = 300.0) -> tuple[str, tuple[str, ...]]:
    """``(release, causal-LM model types)`` of the zoo's pytest process, read once per tree and interpreter in a child
    process with ``tree``'s ``src`` first on its path. UsageError when the child cannot list them."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree / "src"), os.environ.get("PYTHONPATH", "")])}
    detail = ""
    try:
        proc = subprocess.run([python, "-c", _ZOO_TYPES_PROBE], capture_output=True, text=True, timeout=timeout_s,
                              env=env, cwd=tree)
        detail = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        release, types = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError, TypeError) as exc:
        raise UsageError(f"{python} could not list transformers' causal-LM model types ("
                         f"{(detail or type(exc).__name__)[:160]}): install transformers in this environment") from None
    return str(release), tuple(str(t) for t in types)


def check_cpus(cpus, flag: str = "--cpus") -> None:
    """Check that ``cpus`` (None or empty: no pinning) can pin a child with ``taskset -c``. UsageError for a CPU this
    process may not run on (naming the allowed ones) or no ``taskset`` on PATH."""
    if not cpus:
        return
    if not hasattr(os, "sched_getaffinity") or shutil.which("taskset") is None:
        raise UsageError(f"{flag} pins with taskset (util-linux), which this machine lacks: install it or drop {flag}")
    allowed = os.sched_getaffinity(0)
    missing = sorted(set(cpus) - allowed)
    if missing:
        raise UsageError(f"{flag}: CPU(s) {format_cpus(missing)} not available to this process: choose among "
                         f"{format_cpus(allowed)}")


@dataclass(frozen=True)
class PytestRun:
    """One pytest process to start: ``tree``, the checkout it runs (its ``src`` first on PYTHONPATH); ``json_path``, its
    merged ``--benchmark-json`` with journal and log beside it (made absolute); ``cpus``, pinned CPUs (empty: none)."""

    tree: Path
    json_path: Path
    args: tuple[str, ...] = ()
    env: dict = field(default_factory=dict)
    cpus: tuple[int, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "json_path", Path(self.json_path).absolute())

    log_path = property(lambda self: self.json_path.with_suffix(".log"))
    journal_path = property(lambda self: self.json_path.with_suffix(".journal"))

    def part_path(self, attempt: int) -> Path:
        """The JSON of attempt ``attempt`` (0: the first), merged into ``json_path`` and removed."""
        return self.json_path.with_name(f"{self.json_path.stem}.part{attempt}.json")

    def files(self) -> list[Path]:
        """Every file the run writes, replaces or removes, for a command to check before it starts."""
        return [self.json_path, self.log_path, self.journal_path, *map(self.part_path, range(MAX_RESTARTS + 1))]


@dataclass
class RunOutcome:
    """``returncode`` (pytest's last; 1 when a crash was recorded), ``json_path`` (None when nothing was written),
    ``crashes`` (failure entries), ``skipped``."""

    returncode: int
    json_path: Path | None
    crashes: list[dict]
    log_path: Path | None = None
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.json_path is not None


def command(run: PytestRun, json_path: Path, deselect: list[str]) -> list[str]:
    """The command line of one attempt of ``run`` writing ``json_path``."""
    pinned = ["taskset", "-c", format_cpus(run.cpus)] if run.cpus else []
    return [*pinned, sys.executable, "-m", "pytest", *run.args, f"--benchmark-json={json_path}",
            f"--journal={run.journal_path}", "-p", "no:cacheprovider", REPORT_CHARS, "-q",
            *[f"--deselect={n}" for n in deselect]]


def skip_reasons(log_text: str) -> dict[str, int]:
    """Distinct skip reasons of a pytest log's short summary -> how many tests, in the order first seen."""
    out: dict[str, int] = {}
    for line in log_text.splitlines():
        found = _SKIPPED_LINE.match(_ANSI_ESCAPE.sub("", line).rstrip())
        if found:
            out[found.group(2)] = out.get(found.group(2), 0) + int(found.group(1))
    return out


#: Seconds an interrupted pytest process group has to end (writing its partial run) before it is killed.
STOP_GRACE_S = 20.0
_children: set[subprocess.Popen] = set()
_children_lock = threading.Lock()
_stopping = threading.Event()


class Stopped(Exception):
    """The command is stopping: no pytest process is started any more."""


def run_process(cmd: list[str], cwd: Path, env: dict, log) -> int:
    """Run ``command`` in ``cwd`` with ``env``, output into ``log``, in its own process group; returns its exit code
    (negative for a signal). Raises Stopped when :func:`stop_children` ran, before or while it ran."""
    with _children_lock:
        if _stopping.is_set():
            raise Stopped
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        _children.add(proc)
    try:
        rc = proc.wait()
    except KeyboardInterrupt:          # Ctrl-C in the thread that waits (ab, gate --confirm): stop it, then go on
        stop_children()
        allow_new_children()
        raise
    finally:
        with _children_lock:
            _children.discard(proc)
    if _stopping.is_set():
        raise Stopped
    return rc


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def stop_children(grace_s: float = STOP_GRACE_S) -> int:
    """Stop every process group :func:`run_process` started: SIGINT (pytest writes what it measured, marked
    interrupted), SIGKILL after ``grace_s`` seconds; nothing starts after it. Returns how many were running."""
    with _children_lock:
        _stopping.set()
        running = list(_children)
    for proc in running:
        _signal_group(proc, signal.SIGINT)
    deadline = time.monotonic() + grace_s
    for proc in running:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        _signal_group(proc, signal.SIGKILL)      # the process past its grace, and what it started and left behind
        proc.wait()
        gone_by = time.monotonic() + 5.0
        while _group_alive(proc.pid) and time.monotonic() < gone_by:
            time.sleep(0.01)
    return len(running)


def _group_alive(pgid: int) -> bool:
    """Whether /proc lists a non-zombie process of group ``pgid`` (False where it cannot be read)."""
    with contextlib.suppress(OSError):
        for name in filter(str.isdigit, os.listdir("/proc")):
            with contextlib.suppress(OSError), open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
                if fields[0] != "Z" and int(fields[2]) == pgid:
                    return True
    return False


def allow_new_children() -> None:
    """Undo :func:`stop_children`'s stop once every thread that might start a process has ended."""
    _stopping.clear()


def crash_reason(returncode: int, log_tail: str) -> str:
    """One line: the signal's name or the exit code, and the last line printed."""
    signal_name = {s.value: s.name for s in signal.Signals}.get(-returncode, f"signal {-returncode}")
    how = f"killed by {signal_name}" if returncode < 0 else f"exit code {returncode}"
    last = next((line.strip() for line in reversed(log_tail.splitlines()) if line.strip()), "")
    return f"the pytest process died in this test ({how})" + (f": {last[:200]}" if last else "")


def run_pytest(run: PytestRun) -> RunOutcome:
    """Run ``run``'s pytest with ``--journal``; when it dies in a test (or stops after it broke the CUDA context), the
    test is recorded as failed and the process restarted without it and the tests done, up to :data:`MAX_RESTARTS`
    times. The documents are merged into ``run.json_path``, crashes under ``["cudagraph_bench"]["failures"]``; output
    goes to ``run.log_path``."""
    from cudagraph_bench.results.merge import merge_runs

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(run.tree / "src"), os.environ.get("PYTHONPATH", "")]),
           "PYTHONUNBUFFERED": "1", **run.env}
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        env.pop(name, None)      # pytest-benchmark disables benchmarks in what looks like an xdist worker
    documents, crashes, written, rc = [], [], set(), 0
    with open(run.log_path, "w", encoding="utf-8") as log:
        print(f"{LOG_HEADER} {run.json_path.name}", file=log)      # the mark of a log this tool wrote
        for attempt in range(MAX_RESTARTS + 1):
            part = run.part_path(attempt)
            part.unlink(missing_ok=True)
            run.journal_path.unlink(missing_ok=True)
            deselect = sorted({*written, *(e["fullname"] for e in crashes)})
            log.flush()
            start = log.tell()
            try:
                rc = run_process(command(run, part, deselect), run.tree, env, log)
            except Stopped:                  # the command was interrupted: no restart, no outcome worth keeping
                return RunOutcome(130, None, [], run.log_path, {})
            log.flush()
            _, finished, in_flight, stop = read_journal(run.journal_path)
            if part.is_file() and part.stat().st_size > 0:
                documents.append((part.name, json.loads(part.read_text(encoding="utf-8"))))
                written |= finished          # their results are in that document: not measured again
            part.unlink(missing_ok=True)
            if rc in PYTEST_EXIT_CODES:
                break
            with open(run.log_path, encoding="utf-8", errors="replace") as fh:
                fh.seek(start)
                tail = fh.read()[-4000:]
            reason = (stop if rc == EXIT_CUDA_BROKEN else None) or crash_reason(rc, tail)
            if in_flight is None:            # not in a test (start-up, collection): nothing to leave out
                print(f"{run.json_path.name}: pytest ended outside any test: {reason}", file=log, flush=True)
                break
            crashes.append({**(in_flight.get("case") or {}), "status": "failed", "phase": "process", "reason": reason,
                            "fullname": in_flight.get("start", "?")})
            print(f"{run.json_path.name}: {crashes[-1]['fullname']}: {reason}; starting pytest again without it",
                  file=log, flush=True)
    run.journal_path.unlink(missing_ok=True)
    skipped = {}
    with contextlib.suppress(OSError):
        skipped = skip_reasons(run.log_path.read_text(encoding="utf-8", errors="replace"))
    if not documents:                # a crash recorded without a document is a failure all the same
        return RunOutcome(rc if rc or not crashes else 1, None, crashes, run.log_path, skipped)
    doc = documents[0][1] if len(documents) == 1 else merge_runs(documents, entries_key="attempts")
    if crashes:
        section = doc.setdefault("cudagraph_bench", {})
        section["failures"] = [*(section.get("failures") or []), *crashes]
    write_text_atomic(run.json_path, json.dumps(doc, indent=4))
    with open(run.log_path, "a", encoding="utf-8") as log:    # pytest's own lines above name the attempts' files
        print(f"{', '.join(name for name, _ in documents)} merged into {run.json_path} (attempt files removed)",
              file=log)
    return RunOutcome(1 if crashes and rc == 0 else rc, run.json_path, crashes, run.log_path, skipped)
