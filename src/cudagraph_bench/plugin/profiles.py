"""Kernel counts and GPU busy times of eager forwards, once per case in the session's process; the ``profiles`` tests
run last, since CUPTI left attached slows later launches (pytorch#144455)."""

from __future__ import annotations

import pytest

#: Marker of the tests that profile (kernel counts, busy times): run after every other test of the session.
PROFILES_MARK = "profiles"


def pytest_configure(config):
    config.addinivalue_line("markers", f"{PROFILES_MARK}: profiles eager forwards (torch.profiler): runs after every "
                                       "timed test of the session, since a profiler can slow later launches")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """The ``profiles`` tests last, in collected order."""
    items.sort(key=lambda item: item.get_closest_marker(PROFILES_MARK) is not None)    # stable: in collected order


class Profiles:
    """``(model, dtype, seq_len) -> KernelCount``, each profiled once; ``model(name, dtype)`` gives the model."""

    def __init__(self, model):
        self._model = model
        self.done: dict = {}

    def get(self, key: tuple[str, str, int]):
        """Profiled at the first ask (a failure is a ``failed`` count)."""
        from cudagraph_bench.measure.kernel_counts import count_case

        if key not in self.done:
            self.done[key] = count_case(*key, self._model)
        return self.done[key]
