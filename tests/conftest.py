"""Fixtures shared by the CPU tests."""

import pytest

try:
    # pytester (tests/test_plugin.py, test_gpu_workers.py, ...) restores sys.modules after each of its tests,
    # so a module first imported inside one is imported again later in the same process. Importing
    # torch.distributed._functional_collectives twice registers its wait_tensor autograd kernel twice, which
    # torch refuses ("already a kernel registered from python overriding wait_tensor"), and every later
    # import of transformers' generation utilities (which pull in torch.distributed.tensor) fails in that
    # process. Importing it once here, before any pytester test, keeps it out of the restored snapshot.
    import torch.distributed.tensor  # noqa: F401
except ImportError:   # a torch build without distributed support: nothing to register twice
    pass


@pytest.fixture(autouse=True)
def no_xdist_worker_environment(monkeypatch):
    """A pytest session that a test starts in a subprocess must not look like an xdist worker when the
    tests themselves run under ``pytest -n N``: pytest-benchmark disables every benchmark in a process
    whose environment has ``PYTEST_XDIST_WORKER``, and the child inherits that environment."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
