"""Running the forward benchmarks in separate processes (no torch in this process): the building block
of ``cudagraph-bench ab`` and of ``gate --confirm``. A separate process is what makes two runs
independent samples of the between-run noise (:mod:`cudagraph_bench.results.noise`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCH_TARGET = "perf_tests/test_forward_bench.py"

#: Run by :func:`cuda_problem` in a child process: exit 0 with a CUDA GPU, 1 without, 3 without torch.
_CUDA_PROBE = ("import sys\n"
               "try:\n    import torch\n"
               "except Exception as exc:\n    print(f'{type(exc).__name__}: {exc}'.splitlines()[0]); sys.exit(3)\n"
               "sys.exit(0 if torch.cuda.is_available() else 1)")


def cuda_problem(python: str = sys.executable, timeout_s: float = 300.0) -> str | None:
    """Why the benchmark processes (``python -m pytest``, the interpreter the runs use) would find no
    CUDA GPU, in a few words, or None when torch sees one. Checked in a child process, so this process
    imports no torch."""
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


def forward_command(json_path: Path, selection: list[str] | None = None, pytest_args: list[str] = ()) -> list[str]:
    """The pytest command line of one forward-benchmark run writing ``json_path``; ``selection``: node
    ids (default: the whole file)."""
    return [sys.executable, "-m", "pytest", *(selection or [BENCH_TARGET]), "--benchmark-only",
            f"--benchmark-json={json_path}", "-p", "no:cacheprovider", "-q", *pytest_args]


def run_one(cmd: list[str], cwd: Path, env: dict, log: Path) -> int:
    """Run one benchmark process, its output into ``log``; returns its exit code."""
    with open(log, "w", encoding="utf-8") as fh:
        return subprocess.run(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode


def run_forward(tree: Path, json_path: Path, selection: list[str] | None = None, pytest_args: list[str] = ()) -> bool:
    """One forward-benchmark run in the checkout ``tree`` (its ``src`` on PYTHONPATH), output and log
    next to ``json_path``; True when it exited 0 and wrote the JSON."""
    log = json_path.with_suffix(".log")
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "PYTHONUNBUFFERED": "1"}
    rc = run_one(forward_command(json_path, selection, pytest_args), tree, env, log)
    ok = rc == 0 and json_path.is_file() and json_path.stat().st_size > 0
    if not ok:
        why = (f"exit {rc}" if rc != 0 else
               "no JSON written: every benchmark was skipped (no CUDA GPU?) or deselected")
        print(f"run {json_path.name} FAILED ({why}), see {log}", file=sys.stderr, flush=True)
    return ok
