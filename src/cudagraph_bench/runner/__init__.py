"""Launching the suite: pytest processes started and watched from a process that imports no torch.

- :mod:`~cudagraph_bench.runner.process`  one pytest process and its isolation policy (a crash fails its test only);
- :mod:`~cudagraph_bench.runner.matrix_processes` ``cudagraph-bench run``: the matrix as pytest processes (the
  isolated variants apart, one process per GPU with ``--gpus``), merged into one run;
- :mod:`~cudagraph_bench.runner.ab`       ``cudagraph-bench ab``: base and head measured interleaved in git worktrees;
- :mod:`~cudagraph_bench.runner.confirm`  ``gate --confirm``: the regressed cases measured again.
"""
