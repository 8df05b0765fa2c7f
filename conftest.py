"""Root conftest: loads the cudagraph-bench pytest plugin for perf_tests/ and tests/."""

pytest_plugins = ["cudagraph_bench.plugin"]
