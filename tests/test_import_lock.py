"""The test suite's guard against a leaked global import lock (``conftest.import_lock_released``): a test after one
that left the main thread holding the lock still imports from a thread."""

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

LEAK_THEN_IMPORT_IN_A_THREAD = """
import _imp, importlib, threading

def test_leaves_the_import_lock_held():
    _imp.acquire_lock()          # as a signal handler's exception in importlib's lock context leaves it

def test_a_thread_imports_afterwards():
    worker = threading.Thread(target=importlib.import_module, args=("colorsys",), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "the thread waits for the import lock"
"""


def test_a_leaked_import_lock_is_released_after_its_test_and_the_test_named(pytester):
    pytester.makeconftest((Path(__file__).with_name("conftest.py")).read_text())
    pytester.makepyfile(test_leak=LEAK_THEN_IMPORT_IN_A_THREAD)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:cudagraph_bench", "-W",
                                          "default::RuntimeWarning")
    result.assert_outcomes(passed=2, warnings=1)
    result.stdout.fnmatch_lines(["*test_leak.py::test_leaves_the_import_lock_held*",
                                 "*still held the global import lock after this test (1 level(s)): released*"])
