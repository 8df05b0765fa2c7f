"""The pytest plugin of cudagraph-bench (loaded by the root ``conftest.py``): one concept per module, each a plugin of
its own in :data:`pytest_plugins`, through public hooks and options only. :class:`Session` is the ``cgb`` fixture."""

from cudagraph_bench.plugin.session import Session

#: The plugin's parts, loaded with it.
pytest_plugins = [
    "cudagraph_bench.plugin.pytest_options",
    "cudagraph_bench.plugin.params",
    "cudagraph_bench.plugin.session",
    "cudagraph_bench.plugin.profiles",
    "cudagraph_bench.plugin.output",
    "cudagraph_bench.plugin.sharding",
    "cudagraph_bench.plugin.output_files",
    "cudagraph_bench.plugin.session_journal",
    "cudagraph_bench.plugin.zoo_tests",
]

__all__ = ["Session"]
