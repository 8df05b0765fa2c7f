"""pytest sessions in this process, where pytester's per-test fixture does not fit: the checkout's ``perf_tests``
as pytest collects them with given options (what the plugin parametrizes, read by the tests of the matrix and of
the registry), a session for a module-scoped fixture, and a stand-in for the launcher's pytest process
(:func:`cudagraph_bench.runner.process.run_process`). No subprocess, no second torch import."""

import contextlib
import functools
import gc
import json
import os
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


class _Items:
    """A plugin that keeps the collected tests as plain data."""

    def __init__(self):
        self.items: list[dict] = []

    def pytest_collection_finish(self, session):
        self.items = [{"nodeid": i.nodeid, "fixturenames": list(i.fixturenames),
                       "params": json.loads(json.dumps(dict(getattr(getattr(i, "callspec", None), "params", {})),
                                                       default=lambda o: f"UNSERIALIZABLE[{o!r}]")),
                       "markers": sorted({m.name for m in i.iter_markers()})}
                      for i in session.items]


@functools.lru_cache(maxsize=None)
def collect_perf_tests(*args: str) -> tuple[dict, ...]:
    """Every test of ``perf_tests`` collected with the options ``args`` (``--models gpt2 ...``): ``{"nodeid",
    "fixturenames", "params", "markers"}`` each (params as JSON values; an object that is not one shows as
    ``UNSERIALIZABLE[...]``), once per process and options. Fails the calling test when collection fails."""
    items = _Items()
    rc = run_session([str(ROOT / "perf_tests"), "--collect-only", "-q", *args], plugins=[items])
    assert rc == pytest.ExitCode.OK, f"collecting perf_tests {' '.join(args)} gave exit code {rc}"
    return tuple(items.items)


@contextlib.contextmanager
def _not_an_xdist_worker():
    """The session must not look like an xdist worker when the tests run under ``pytest -n N``: pytest-benchmark
    disables every benchmark of a process whose environment has ``PYTEST_XDIST_WORKER``."""
    names = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")
    saved = {n: os.environ.pop(n) for n in names if n in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def run_session(args, plugins=()) -> int:
    """``pytest.main(args)`` in this process (``-p no:cacheprovider`` added), as no xdist worker; its exit code.
    The garbage collector's frozen objects are unfrozen after it (the plugin freezes what survives a case)."""
    args = [*args, *([] if "no:cacheprovider" in args else ["-p", "no:cacheprovider"])]
    try:
        with _not_an_xdist_worker():
            return pytest.main(args, plugins=list(plugins))
    finally:
        gc.unfreeze()


_ONE_SESSION_AT_A_TIME = threading.Lock()


def run_process_in_process(cmd: list[str], cwd, env: dict, log) -> int:
    """A stand-in for :func:`cudagraph_bench.runner.process.run_process`: the ``python -m pytest ...`` command runs
    as a pytest session in this process, in ``cwd``, its output into the open file ``log``, one session at a
    time (the launcher starts the shards of ``--gpus`` from threads); ``env`` (``CUDA_VISIBLE_DEVICES``,
    ``PYTHONPATH``) does not apply. Returns pytest's exit code."""
    if cmd[0] == "taskset":                 # pinned (``taskset -c LIST``): this process keeps its CPUs
        cmd = cmd[3:]
    assert cmd[:3] == [sys.executable, "-m", "pytest"], cmd
    with _ONE_SESSION_AT_A_TIME, contextlib.chdir(cwd), contextlib.redirect_stdout(log), \
            contextlib.redirect_stderr(log):
        return int(run_session(cmd[3:]))
