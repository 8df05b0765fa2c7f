"""Splitting the suite over processes (CI jobs, ``run --gpus``): ``--shard K/N`` keeps shard K's test groups, and every
run records each test's seconds, the time per module and the session's wall time."""

from __future__ import annotations

import time
import warnings

import pytest

from cudagraph_bench.errors import UsageError
from cudagraph_bench.options import SHARD_OPTIONS, add_to_pytest
from cudagraph_bench.results.shards import (DURATIONS_KEY, assign_shards, base_nodeid, group_of, load_durations,
                                            time_per_part)
from cudagraph_bench.table import plural


class ShardSession:
    """Per-session state, registered as a plugin with the hooks that read it."""

    def __init__(self, durations: dict[str, float] | None):
        self.durations = durations
        self.ran_s: dict[str, float] = {}   # node id (no xdist suffix) -> setup + call + teardown seconds
        self.shard: dict | None = None
        self.started = time.perf_counter()

    def pytest_sessionstart(self, session):
        self.started = time.perf_counter()

    def pytest_runtest_logreport(self, report):
        key = base_nodeid(report.nodeid)
        self.ran_s[key] = self.ran_s.get(key, 0.0) + float(report.duration or 0.0)

    @property
    def wall_s(self) -> float:
        """Seconds since the session started."""
        return time.perf_counter() - self.started

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        """Keep shard K's groups (after ``-k``/``-m``), balanced by ``--shard-durations``, else by test count."""
        if self.durations and items and not any(base_nodeid(item.nodeid) in self.durations for item in items):
            warnings.warn(pytest.PytestConfigWarning(
                f"--shard-durations {config.getoption('shard_durations')} records none of the "
                f"{plural(len(items), 'test')} collected here (e.g. {base_nodeid(items[0].nodeid)}): the groups are "
                "balanced by test count; give a run of this suite made from the same rootdir"), stacklevel=2)
        shard = config.getoption("shard", None)
        if not shard:
            return
        index, count = shard
        groups: dict[str, list[str]] = {}
        of = [item_group(item) for item in items]
        for item, group in zip(items, of):
            groups.setdefault(group, []).append(base_nodeid(item.nodeid))
        keep = set(assign_shards(groups, count, self.durations)[index - 1])
        selected = [item for item, group in zip(items, of) if group in keep]
        deselected = [item for item, group in zip(items, of) if group not in keep]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
        items[:] = selected
        self.shard = {"index": index, "count": count, "groups": sorted(keep), "tests": len(selected),
                      "durations_from": config.getoption("shard_durations", None)}

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        """Time per part and the session's wall time."""
        if not self.ran_s or hasattr(config, "workerinput"):
            return
        terminalreporter.write_sep("-", "cudagraph-bench time per part")
        for part, t in time_per_part(self.ran_s).items():
            tests = "test " if t["tests"] == 1 else "tests"
            terminalreporter.write_line(f"{t['s']:8.1f} s  {t['tests']:4d} {tests}  {part}")
        terminalreporter.write_line(f"{sum(self.ran_s.values()):8.1f} s  in tests; session wall time "
                                    f"{self.wall_s:.1f} s")

    @pytest.hookimpl(trylast=True)
    def pytest_benchmark_update_json(self, config, benchmarks, output_json):
        """Durations, time per part, wall time and shard into the ``cudagraph_bench`` section."""
        section = output_json.setdefault("cudagraph_bench", {})
        section[DURATIONS_KEY] = dict(self.ran_s)
        section["time_per_part_s"] = {part: round(t["s"], 3) for part, t in time_per_part(self.ran_s).items()}
        section["wall_s"] = round(self.wall_s, 3)
        if self.shard is not None:
            section["shard"] = dict(self.shard)


def pytest_addoption(parser):
    add_to_pytest(parser.getgroup("cudagraph-bench"), SHARD_OPTIONS)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Load ``--shard-durations`` (usage error when it records none) and register the state."""
    durations = None
    if config.getoption("shard_durations", None):
        try:
            durations = load_durations(config.getoption("shard_durations"))
        except UsageError as exc:
            raise pytest.UsageError(f"--shard-durations: {exc}") from None
    config.pluginmanager.register(ShardSession(durations), "cudagraph-bench-shard")


def item_group(item) -> str:
    """Its own ``xdist_group`` mark's name, else the group of its parameters."""
    mark = item.get_closest_marker("xdist_group")
    name = mark and (mark.kwargs.get("name") or (mark.args[0] if mark.args else None))
    if name:
        return str(name)
    return group_of(dict(getattr(getattr(item, "callspec", None), "params", {})), item.nodeid)
