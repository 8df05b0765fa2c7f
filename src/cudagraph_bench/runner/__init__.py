"""Launching the suite: pytest processes started and watched from a process that imports no torch
(:mod:`~cudagraph_bench.runner.process`), for ``run``, ``ab``, ``gate --confirm`` and ``selftest``."""
