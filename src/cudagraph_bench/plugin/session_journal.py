"""The session's journal for the launcher (``--journal FILE``) and the stop after a test that broke the CUDA context."""

from __future__ import annotations

import argparse
import json

import pytest

from cudagraph_bench.journal import EXIT_CUDA_BROKEN, is_fatal_cuda_error
from cudagraph_bench.plugin.params import case_of_item


def pytest_addoption(parser):
    """``--journal FILE``: a JSON line per test started and finished, naming a crashed process's test; hidden."""
    parser.getgroup("cudagraph-bench").addoption(
        "--journal", dest="journal", default=None, metavar="FILE", help=argparse.SUPPRESS)


class Journal:
    """Events appended to ``path`` (None: none written), and the stop after a broken CUDA context."""

    def __init__(self, path: str | None):
        """``path`` was checked writable before (:mod:`cudagraph_bench.plugin.output_files`)."""
        self._fh = open(path, "a", encoding="utf-8", buffering=1) if path else None

    def write(self, **event) -> None:
        if self._fh is not None:     # line-buffered: each event reaches the file as it is written
            self._fh.write(json.dumps(event) + "\n")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        case = case_of_item(item)
        self.write(start=item.nodeid, **({"case": case.extra_info()} if case is not None else {}))

    def pytest_runtest_logfinish(self, nodeid, location):
        self.write(finish=nodeid)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report):
        """Stop with ``EXIT_CUDA_BROKEN`` after a sticky CUDA error; what was measured is still written."""
        if not report.failed or not is_fatal_cuda_error(str(report.longrepr)):
            return
        from cudagraph_bench.capture.graphed import cuda_context_usable

        if cuda_context_usable():
            return
        text = str(report.longrepr).splitlines()
        reason = next((line.strip() for line in text if is_fatal_cuda_error(line)), "CUDA error")[:300]
        self.write(stop=report.nodeid, reason=reason)
        pytest.exit(f"{report.nodeid} broke the CUDA context ({reason}): the other tests need a new process",
                    returncode=EXIT_CUDA_BROKEN)

    def pytest_unconfigure(self, config):
        if self._fh is not None:
            self._fh.close()


def pytest_configure(config):
    worker = hasattr(config, "workerinput")     # an xdist worker: its controller keeps the journal
    config.pluginmanager.register(Journal(None if worker else config.getoption("journal", None)),
                                  "cudagraph-bench-journal")
