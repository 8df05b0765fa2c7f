"""Root conftest: loads the cudagraph-bench pytest plugin for perf_tests/ and tests/, and pytester for the tests
that run pytest sessions (tests/conftest.py keeps what their tests import)."""

pytest_plugins = ["cudagraph_bench.plugin", "pytester"]
