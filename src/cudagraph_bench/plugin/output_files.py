"""``--benchmark-json`` and ``--journal`` checked before any test, so an unwritable path is a usage error (exit 4), not
results lost at the end. Nothing is created or truncated."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cudagraph_bench.errors import UsageError
from cudagraph_bench.fsio import check_output_file

#: option dest -> (its flag, a file name to suggest inside a directory given by mistake, whose suffix is the kind of
#: file it replaces: :func:`cudagraph_bench.fsio.written_here`).
CHECKED = {"benchmark_json": ("--benchmark-json", "run.json"), "journal": ("--journal", "run.journal")}


def output_file_problem(path, flag: str, example: str) -> str | None:
    """Why ``path`` cannot be written, one line naming the fix; None when it can, or it is None or an open file."""
    if path is None or hasattr(path, "write"):
        return None
    out = Path(os.fspath(path))
    if not out.is_dir() and not out.parent.exists():        # neither option creates folders
        return (f"{flag} {out}: folder {out.parent} does not exist: create it first (mkdir -p {out.parent}) or give "
                "a path in an existing folder")
    try:
        check_output_file(out, flag, example, command="pytest")   # a directory, a parent that is a file, no new file
    except UsageError as exc:
        return str(exc)
    if out.exists() and not os.access(out, os.W_OK):
        return f"{flag} {out} cannot be written (permission denied): choose a writable file"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """An xdist worker writes neither file. pytest.UsageError naming the option, path and fix."""
    if hasattr(config, "workerinput"):
        return
    for dest, (flag, example) in CHECKED.items():
        problem = output_file_problem(config.getoption(dest, None), flag, example)
        if problem:
            raise pytest.UsageError(problem)
