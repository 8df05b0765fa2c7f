"""The files a session writes at its end or while it runs, checked before any test: ``--benchmark-json PATH``
(pytest-benchmark writes it after the last test, so a path it cannot open would lose every result of the session)
and ``--journal PATH`` (:mod:`cudagraph_bench.plugin.session_journal`, opened at configure). A path that is a
directory, lies in a folder that does not exist (neither option creates folders), under a file, or in a folder
that takes no new file (read-only), and an existing file that cannot be written, are a ``pytest.UsageError`` in
one line naming the option and the fix (pytest's usage-error exit, 4). Nothing is created or truncated: the
folder is probed with a hidden temporary file, removed at once.

pytest-benchmark before 5.3 opens ``--benchmark-json`` itself while it parses the command line (an open file
object is the option's value then): that open already succeeded, so there is nothing left to check.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: option dest -> (its flag, a file name to suggest inside a directory given by mistake).
CHECKED = {"benchmark_json": ("--benchmark-json", "run.json"), "journal": ("--journal", "journal.jsonl")}


def output_file_problem(path, flag: str, example: str) -> str | None:
    """Why ``path`` (given with ``flag``) cannot be opened for writing, in one line naming the fix; None when it
    can, or when ``path`` is None or an already open file."""
    from cudagraph_bench.errors import UsageError
    from cudagraph_bench.fsio import check_output_file

    if path is None or hasattr(path, "write"):
        return None
    out = Path(os.fspath(path))
    if not out.is_dir() and not out.parent.exists():        # neither option creates folders
        return (f"{flag} {out}: folder {out.parent} does not exist: create it first (mkdir -p {out.parent}) or give "
                "a path in an existing folder")
    try:
        check_output_file(out, flag, example)               # a directory, a parent that is a file, no new file
    except UsageError as exc:
        return str(exc)
    if out.exists() and not os.access(out, os.W_OK):
        return f"{flag} {out} cannot be written (permission denied): choose a writable file"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Check :data:`CHECKED` before any test (module docstring); an xdist worker writes neither file.

    Raises:
        pytest.UsageError: one line naming the option, the path and the fix."""
    if hasattr(config, "workerinput"):
        return
    for dest, (flag, example) in CHECKED.items():
        problem = output_file_problem(config.getoption(dest, None), flag, example)
        if problem:
            raise pytest.UsageError(problem)
