"""A readers-writer lock over the pytest-xdist workers of one session, so that a GPU test that times the GPU runs
alone: ``make test`` and ``make gpu-gate`` spread the GPU tests over several workers of one GPU, and a timing taken
while seven other processes queue kernels measures them too. Every test holds the lock shared from its setup to its
teardown; a test marked ``gpu_timing`` holds it exclusively, so it starts once the running tests end and no other
test starts before it ends. ``flock`` locks belong to an open file, so two opens of one path exclude each other in one
process as across processes; the kernel releases them when a worker dies."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from pathlib import Path

MARK = "gpu_timing"


def lock_path(run_id: str) -> Path:
    """The lock file of the xdist session ``run_id`` (``config.workerinput["testrunuid"]``, shared by its workers)."""
    return Path(tempfile.gettempdir()) / f"cudagraph-bench-gpu-timing-{run_id}.lock"


@contextlib.contextmanager
def held(path: Path, exclusive: bool):
    """Hold ``path``'s lock, exclusive or shared, for the ``with`` body (blocks until it is granted)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)                 # closing the file releases its lock
