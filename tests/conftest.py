"""Fixtures shared by the CPU tests."""

import sys

import pytest

try:
    # pytester (tests/test_plugin.py, test_gpu_workers.py, ...) restores sys.modules after each of its tests,
    # so a module first imported inside one is imported again later in the same process. Importing
    # torch.distributed._functional_collectives twice registers its wait_tensor autograd kernel twice, which
    # torch refuses ("already a kernel registered from python overriding wait_tensor"), and every later
    # import of transformers' generation utilities (which pull in torch.distributed.tensor) fails in that
    # process. Importing it once here, before any pytester test, keeps it out of the restored snapshot (the
    # pytester fixture below keeps every other module that a pytester test imports).
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


@pytest.fixture
def _modules_kept_after_pytester():
    """Set up before pytester and torn down after it: puts back the modules that the test imported and that
    pytester's restore of its sys.modules snapshot dropped (see :func:`pytester`)."""
    imported: dict = {}
    yield imported
    for name, module in imported.items():
        sys.modules.setdefault(name, module)


@pytest.fixture
def pytester(_modules_kept_after_pytester, pytester):
    """pytester, but a module first imported during its test stays imported: pytester restores sys.modules
    after each test, and a second import of some modules fails in the same process (torch registers a
    kernel twice; transformers' lazy modules then raise "Could not import module" in every later test of
    that pytest-xdist worker)."""
    before = set(sys.modules)
    yield pytester
    _modules_kept_after_pytester.update({name: module for name, module in sys.modules.items() if name not in before})
