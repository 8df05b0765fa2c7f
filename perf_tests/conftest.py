"""perf_tests' own hook: under pytest-xdist, a test marked ``gpu_timing`` runs while no other test of the session
runs (:mod:`timing_lock`); in one process nothing changes."""

import pytest
from timing_lock import MARK, held, lock_path


def pytest_configure(config):
    config.addinivalue_line("markers", f"{MARK}: times the GPU: runs while no other test of the session runs "
                                       "(pytest-xdist workers wait for it, and it for them)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    workerinput = getattr(item.config, "workerinput", None)
    if workerinput is None:
        yield
        return
    with held(lock_path(workerinput["testrunuid"]), exclusive=item.get_closest_marker(MARK) is not None):
        yield
