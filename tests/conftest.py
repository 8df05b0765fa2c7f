"""Fixtures shared by the CPU tests."""

import pytest


@pytest.fixture(autouse=True)
def no_xdist_worker_environment(monkeypatch):
    """A pytest session that a test starts in a subprocess must not look like an xdist worker when the
    tests themselves run under ``pytest -n N``: pytest-benchmark disables every benchmark in a process
    whose environment has ``PYTEST_XDIST_WORKER``, and the child inherits that environment."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
