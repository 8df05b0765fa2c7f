"""The pytest plugin of cudagraph-bench (loaded by the checkout's root ``conftest.py``).

pytest is the harness: every benchmark and GPU test of ``perf_tests/`` runs through it, and
``cudagraph-bench run`` launches it (:mod:`cudagraph_bench.runner`). One concept per module, each a pytest
plugin of its own, loaded together through :data:`pytest_plugins`; it extends pytest, pytest-xdist and
pytest-benchmark through their public hooks and options only:

- :mod:`~cudagraph_bench.plugin.pytest_options` the options (the matrix, shared with the CLI), garbage collector
  off while timing, CPU pinning, the GPU skip, the ``--models`` check;
- :mod:`~cudagraph_bench.plugin.benchmark_options` pytest-benchmark's calibration options: the ones the round policy
  has a counterpart for set it, the others are refused;
- :mod:`~cudagraph_bench.plugin.params`   the matrix as plain test parameters and the case fixtures;
- :mod:`~cudagraph_bench.plugin.session`  the ``cgb`` fixture: :class:`Session` ties the parts below to the one
  measurement pipeline (:mod:`cudagraph_bench.measure.case`, :mod:`cudagraph_bench.measure.decode_case`);
- :mod:`~cudagraph_bench.plugin.models`   the session's one model cache (eviction by GPU memory);
- :mod:`~cudagraph_bench.plugin.references` the decode references (HF ``generate``, the eager static-cache loop,
  float64 logits), computed once per prompt;
- :mod:`~cudagraph_bench.plugin.padding`  the padded and bucketed graphs a model's prompt lengths share;
- :mod:`~cudagraph_bench.plugin.memory`   releasing a case's GPU memory and the ledger that checks it;
- :mod:`~cudagraph_bench.plugin.records`  what a session records besides benchmarks (failed cases, kernel
  counts), written into the run JSON;
- :mod:`~cudagraph_bench.plugin.benchmark_timing` ``benchmark.pedantic`` over the round policy, the device-side
  figure;
- :mod:`~cudagraph_bench.plugin.profiles` kernel counts and GPU busy times, profiled in-process after every
  timed test;
- :mod:`~cudagraph_bench.plugin.replay_proofs` ``--replay-proof``: each timed graph case built again and one call
  profiled after the session's last test;
- :mod:`~cudagraph_bench.plugin.output`   ``machine_info``, the run JSON's ``cudagraph_bench`` section, a run JSON
  for a session that measured nothing but recorded failures;
- :mod:`~cudagraph_bench.plugin.sharding` ``--shard K/N`` and the recorded test durations;
- :mod:`~cudagraph_bench.plugin.output_files` ``--benchmark-json`` and ``--journal`` checked before any test (a
  directory, a missing or read-only folder: one usage error, not results lost at the end);
- :mod:`~cudagraph_bench.plugin.session_journal` ``--journal FILE`` (the tests started and finished, for the
  launcher) and the stop after a broken CUDA context;
- :mod:`~cudagraph_bench.plugin.zoo_tests` ``--zoo``: the architecture zoo (``perf_tests/test_zoo.py``, collected
  only then), one forward and one decode test per causal-LM model type.
"""

from cudagraph_bench.plugin.pytest_options import GPU_SKIP_REASON
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

__all__ = ["Session", "GPU_SKIP_REASON"]
