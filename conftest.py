"""Root conftest: loads the cudagraph-bench pytest plugin for perf_tests/ and tests/, and pytester for the tests
that run pytest sessions (tests/conftest.py keeps what their tests import). It also holds the plugin's
grouping hook, which pytest-benchmark's standalone ``pytest-benchmark compare`` takes from ``./conftest.py``
(``--group-by=param:model`` on runs with launch benchmarks, which have no ``model``)."""

pytest_plugins = ["cudagraph_bench.plugin", "pytester"]


def pytest_benchmark_group_stats(config, benchmarks, group_by):
    """The plugin's grouping (imported here, not at the top: pytest imports the plugin itself, with
    assertion rewriting)."""
    from cudagraph_bench.plugin.output import pytest_benchmark_group_stats as group_stats

    return group_stats(config=config, benchmarks=benchmarks, group_by=group_by)
