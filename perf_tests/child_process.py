"""A GPU test's script run in a child python process with this checkout's ``src`` on its path: a profiler session
can leave CUPTI attached and add host cost to every later launch (pytorch/pytorch#144455), which must not slow the
benchmarks of the test's own session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def run_script(script: str, *args: str, timeout_s: float = 600) -> dict:
    """Run ``python -c script args...`` and return the JSON object its last stdout line prints; the child's failure
    fails the calling test with the tail of its stderr."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=timeout_s,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
