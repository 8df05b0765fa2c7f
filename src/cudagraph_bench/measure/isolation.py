"""Crash isolation: measuring cases in a worker subprocess that a restarting parent watches.

Risky variants (by default ``compile`` and ``compile+graph``: a device-side assert kills the CUDA
context and with it the process) run in a worker subprocess, ``python -m cudagraph_bench.measure.isolation
--worker``, that measures a queue of cases and streams one JSON line per finished case;
:func:`run_isolated` restarts a dead or hung worker and records the in-flight case as failed.
This module imports no torch; the worker does, through :func:`~cudagraph_bench.measure.case.measure_case`.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Callable

from cudagraph_bench.measure.case import CaseSpec, ModelCache, measure_with_cache

#: Default per-case timeout of an isolated worker, in seconds (a max-autotune compile can take minutes).
DEFAULT_CASE_TIMEOUT_S = 300.0
_PROTOCOL_KEY = "cgb"


#: Exit code of a worker that stops because the CUDA context is unusable (parent restarts it).
WORKER_EXIT_CUDA_BROKEN = 70
_FATAL_CUDA_MARKERS = ("CUDA error", "device-side assert", "illegal memory access", "cudaError",
                       "CUBLAS_STATUS", "CUDNN_STATUS", "unspecified launch failure", "AcceleratorError")


def is_fatal_cuda_error(reason: str | None) -> bool:
    """True when a failure reason looks like a sticky CUDA error (device-side assert, illegal memory
    access, ...): after one, every later CUDA call of the process fails, so the process must end."""
    return bool(reason) and any(m.lower() in reason.lower() for m in _FATAL_CUDA_MARKERS)


def worker_command() -> list[str]:
    """The command of a real worker: this interpreter running ``-m cudagraph_bench.measure.isolation --worker``."""
    return [sys.executable, "-m", "cudagraph_bench.measure.isolation", "--worker"]


def _worker_env() -> dict:
    env = dict(os.environ)
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def worker_main(stdin=None, measure: Callable[[CaseSpec, ModelCache], object] = measure_with_cache,
                prepare: Callable[[CaseSpec, ModelCache], None] | None = None) -> int:
    """Body of ``python -m cudagraph_bench.measure.isolation --worker`` (and of other workers that speak the same
    protocol, e.g. ``python -m cudagraph_bench.measure.kernel_counts --worker``).

    Reads ``{"cases": [CaseSpec dicts]}`` (one JSON line) from stdin, then writes JSON lines to its original
    stdout: ``{"cgb": "ready"}`` once, and per case ``{"cgb": "start", "index": i}`` before and
    ``{"cgb": "result", "index": i, "result": ...}`` after ``measure(spec, models)`` (default
    :func:`measure_with_cache`; any result object with ``status``, ``reason``, ``isolated`` and
    ``to_dict()`` like :class:`CaseResult`). Everything else the process prints goes to stderr (file
    descriptor 1 is redirected), so library output never corrupts the protocol.

    A job with ``"hold": true`` (a :class:`HeldWorker`) is prepared and then held: after ``ready`` the worker
    runs ``prepare(first spec, models)`` (e.g. CUDA initialised and the first model built; an exception there
    is left for that case's own measurement to report), writes ``{"cgb": "prepared"}`` and measures nothing
    until the line ``go`` arrives on stdin (end of input: it exits without measuring).
    """
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    stdin = stdin or sys.stdin
    job = json.loads(stdin.readline())

    def emit(**msg):
        proto.write(json.dumps({_PROTOCOL_KEY: msg.pop("event"), **msg}) + "\n")
        proto.flush()

    emit(event="ready", pid=os.getpid())
    models = ModelCache()
    if job.get("hold"):
        if prepare is not None and job["cases"]:
            try:
                prepare(CaseSpec.from_dict(job["cases"][0]), models)
            except Exception as exc:  # the first case's measurement meets it again and reports it
                print(f"worker: preparing failed ({type(exc).__name__}: {exc})", file=sys.stderr, flush=True)
        emit(event="prepared")
        if stdin.readline().strip() != "go":
            return 0
    for i, raw in enumerate(job["cases"]):
        emit(event="start", index=i)
        spec = CaseSpec.from_dict(raw)
        result = measure(spec, models)
        result.isolated = True
        emit(event="result", index=i, result=result.to_dict())
        if result.status == "failed" and is_fatal_cuda_error(result.reason) and i + 1 < len(job["cases"]):
            print(f"worker: CUDA context unusable after {spec.variant} L={spec.seq_len}; exiting so that "
                  "a fresh worker takes the remaining cases", file=sys.stderr, flush=True)
            os._exit(WORKER_EXIT_CUDA_BROKEN)  # skip CUDA teardown, which may hang on a broken context
    return 0


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _tail(path: str, lines: int = 4, limit: int = 400) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 16384))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
    out = " | ".join(kept)
    return out if len(out) <= limit else "..." + out[-(limit - 3):]


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the worker and the processes it started (it leads its own process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    proc.wait()


def _spawn(worker_cmd: list[str], job: dict, log_path: str, *, hold: bool = False):
    """Start a worker on ``job`` (its stderr appended to ``log_path``): ``(process, lines)``, where a
    thread puts each stdout line (bytes) on the ``lines`` queue and None at the end. The job goes to stdin as
    one JSON line; stdin is closed after it unless ``hold`` (the worker then waits for ``go``)."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(worker_cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                env=_worker_env(), start_new_session=True)
    lines: queue.Queue = queue.Queue()

    def read(stream=proc.stdout, q=lines):
        for raw in iter(stream.readline, b""):
            q.put(raw)
        q.put(None)

    threading.Thread(target=read, daemon=True).start()
    try:
        proc.stdin.write(json.dumps({**job, **({"hold": True} if hold else {})}).encode() + b"\n")
        proc.stdin.flush()
        if not hold:
            proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass
    return proc, lines


class HeldWorker:
    """A worker started ahead of its cases, prepared and held until :func:`run_isolated` needs it.

    Workflow: :meth:`start` spawns the worker with its whole job; it announces itself, runs its ``prepare``
    step (:func:`worker_main`: e.g. imports, CUDA initialised, the first model built) and reports
    ``prepared``, then waits. :meth:`wait_prepared` blocks until then (the caller can keep other work off the
    GPU and the CPU meanwhile); ``run_isolated(specs, held=...)`` with the same specs sends ``go`` and reads
    its results like those of a worker it started itself. :meth:`close` kills a worker nobody took.

    It does not: measure anything before ``go``, or survive a job that changed (``run_isolated`` then kills
    it and starts a fresh worker; a held worker that died or did not prepare in time is replaced the same way).
    """

    def __init__(self, specs: list[dict], worker_cmd: list[str], log_path: str | None = None):
        self._own_log = log_path is None
        if self._own_log:
            fd, log_path = tempfile.mkstemp(prefix="cgb-held-worker-", suffix=".log")
            os.close(fd)
        self.specs, self.log_path = list(specs), log_path
        self.proc, self.lines = _spawn(worker_cmd, {"cases": self.specs}, log_path, hold=True)
        self.prepared: bool | None = None     # None: not known yet

    @classmethod
    def start(cls, specs: list[dict], worker_cmd: list[str], log_path: str | None = None) -> "HeldWorker":
        """Spawn ``worker_cmd`` on ``specs`` and hold it (stderr appended to ``log_path``, or a temporary
        file that :meth:`close` removes)."""
        return cls(specs, worker_cmd, log_path)

    def wait_prepared(self, timeout_s: float) -> bool:
        """Block until the worker reported ``prepared`` (True), or it ended or sent nothing for ``timeout_s``
        seconds (False: it is killed). Returns at once once known."""
        while self.prepared is None:
            try:
                raw = self.lines.get(timeout=max(timeout_s, 0.0))
            except queue.Empty:
                raw = None
            if raw is None:
                self.prepared = False
                self.close()
                break
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get(_PROTOCOL_KEY) == "prepared":
                self.prepared = True
        return bool(self.prepared)

    def go(self) -> None:
        """Let the prepared worker measure its cases."""
        try:
            self.proc.stdin.write(b"go\n")
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    def close(self) -> None:
        """Kill the worker (and its process group) if it still runs; remove its own temporary log."""
        if self.proc.poll() is None:
            _kill_group(self.proc)
        if self._own_log:
            try:
                os.unlink(self.log_path)
            except OSError:
                pass
            self._own_log = False


@dataclass
class IsolationStats:
    """What :func:`run_isolated` did: workers started, and how many of them died or timed out."""

    workers: int = 0
    died: int = 0
    timed_out: int = 0


def run_isolated(specs: list[dict], *, timeout_s: float = DEFAULT_CASE_TIMEOUT_S,
                 worker_cmd: list[str] | None = None, deadline: float | None = None,
                 on_result: Callable[[int, dict], None] | None = None, log_path: str | None = None,
                 stats: IsolationStats | None = None, held: HeldWorker | None = None) -> list[dict]:
    """Measure ``specs`` (JSON-able case dicts) in a worker subprocess, restarting it when it dies.

    The worker (``worker_cmd``, default :func:`worker_command`) gets the remaining specs on stdin and
    streams JSON lines (see :func:`worker_main`). When it exits early (crash, device-side assert,
    ``os.abort()``), the in-flight case becomes a ``failed`` result whose reason names the exit code
    or signal and the last stderr lines, and a new worker takes the cases after it. When no line
    arrives for ``timeout_s`` seconds (per case; model loading included), the worker's process group
    is killed and the case fails as timed out. A worker that dies before announcing itself
    (``ready``) fails all remaining cases with its reason (a startup error is not case-specific).

    Args:
        specs: case dicts (:meth:`CaseSpec.to_dict`); passed through to the worker unchanged.
        timeout_s: per-case limit in seconds.
        worker_cmd: argv of the worker process.
        deadline: ``time.monotonic()`` value after which the worker is stopped and the cases not
            finished become ``skipped`` ("time budget exhausted").
        on_result: called as ``on_result(index, result_dict)`` when each case finishes (also for
            failures produced here).
        log_path: file that collects the workers' stderr (appended); a temporary file if None.
        stats: filled with counts of workers started / died / timed out.
        held: a :class:`HeldWorker` started on these ``specs``: the first worker, once prepared (one that
            holds other specs, died or does not prepare within ``timeout_s`` is killed and a fresh worker
            started instead). Its stderr stays in its own log.

    Returns:
        one result dict per spec, in order (:class:`CaseResult` fields).
    """
    worker_cmd = worker_cmd or worker_command()
    stats = stats if stats is not None else IsolationStats()
    results: dict[int, dict] = {}
    own_log = log_path is None
    if own_log:
        fd, log_path = tempfile.mkstemp(prefix="cgb-worker-", suffix=".log")
        os.close(fd)

    def finish(index: int, result: dict) -> None:
        results[index] = result
        if on_result is not None:
            on_result(index, result)

    def synthetic(index: int, status: str, reason: str, phase: str) -> dict:
        s = specs[index]
        return {"model": s.get("model"), "dtype": s.get("dtype"), "seq_len": s.get("seq_len"),
                "variant": s.get("variant"), "status": status, "reason": reason, "phase": phase,
                "wall_ms": [], "event_ms": [], "isolated": True, "device": s.get("device", "cuda"), "notes": []}

    taken = None         # the held worker, once taken: closed at the end (its own log removed)
    try:
        pending = list(range(len(specs)))
        while pending:
            if deadline is not None and time.monotonic() >= deadline:
                for i in pending:
                    finish(i, synthetic(i, "skipped", "time budget exhausted", "budget"))
                break
            stats.workers += 1
            ready, in_flight, done_local = False, None, set()
            job = [specs[i] for i in pending]
            if held is not None and held.specs == job and held.wait_prepared(timeout_s):
                proc, lines, ready, proc_log = held.proc, held.lines, True, held.log_path
                held.go()
                taken = held
            else:
                if held is not None:
                    held.close()
                with open(log_path, "ab") as log:
                    log.write(f"\n=== worker {stats.workers}: {len(pending)} case(s) ===\n".encode())
                proc, lines = _spawn(worker_cmd, {"cases": job}, log_path)
                proc_log = log_path
            held = None        # taken or replaced: a restarted worker is a fresh one
            last = time.monotonic()
            failure: tuple[str, str, str] | None = None  # (status, reason, phase) for the in-flight case
            while True:
                now = time.monotonic()
                wait = timeout_s - (now - last)
                budget_hit = deadline is not None and deadline - now < wait
                if budget_hit:
                    wait = deadline - now
                try:
                    raw = lines.get(timeout=max(wait, 0.0))
                except queue.Empty:
                    _kill_group(proc)
                    if budget_hit:
                        failure = ("skipped", "time budget exhausted (worker stopped)", "budget")
                    else:
                        stats.timed_out += 1
                        failure = ("failed", f"timed out after {timeout_s:g} s (per-case limit); worker killed",
                                   "timeout")
                    break
                if raw is None:  # EOF: the worker exited
                    code = proc.wait()
                    if len(done_local) == len(pending):
                        break
                    stats.died += 1
                    how = f"killed by {_signal_name(code)}" if code < 0 else f"exited with code {code}"
                    tail = _tail(proc_log)
                    failure = ("failed", f"worker {how}" + (f"; stderr: {tail}" if tail else ""), "worker")
                    break
                try:
                    msg = json.loads(raw)
                except ValueError:
                    continue
                if not isinstance(msg, dict) or _PROTOCOL_KEY not in msg:
                    continue
                last = time.monotonic()
                event = msg[_PROTOCOL_KEY]
                if event == "ready":
                    ready = True
                elif event == "start":
                    in_flight = int(msg["index"])
                elif event == "result":
                    local = int(msg["index"])
                    done_local.add(local)
                    in_flight = None
                    result = dict(msg["result"])
                    result["isolated"] = True
                    finish(pending[local], result)
                    if len(done_local) == len(pending):
                        break  # all done: do not wait for the worker's exit
            _kill_group(proc)
            remaining = [pending[j] for j in range(len(pending)) if j not in done_local]
            if failure is None or not remaining:
                pending = remaining
                continue
            status, reason, phase = failure
            if status == "skipped":
                for i in remaining:
                    finish(i, synthetic(i, status, reason, phase))
                break
            if not ready:  # the worker never started: not the fault of one case
                for i in remaining:
                    finish(i, synthetic(i, status, reason + " (before the first case)", phase))
                break
            if in_flight is None and done_local:
                pending = remaining  # it exited between cases (e.g. after a CUDA error): just restart
                continue
            culprit = pending[in_flight] if in_flight is not None else remaining[0]
            finish(culprit, synthetic(culprit, status, reason, phase))
            pending = [i for i in remaining if i != culprit]
    finally:
        if taken is not None:
            taken.close()
        if own_log:
            try:
                os.unlink(log_path)
            except OSError:
                pass
    return [results[i] for i in range(len(specs))]


def _main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m cudagraph_bench.measure.isolation",
                                     description="worker process of cudagraph-bench run (reads cases on stdin)")
    parser.add_argument("--worker", action="store_true", required=True,
                        help="measure the cases given as JSON on stdin; stream JSON lines to stdout")
    parser.parse_args(argv)
    return worker_main()


if __name__ == "__main__":
    sys.exit(_main())
