"""The front-end of every ``cudagraph-bench`` command, one module each (``configure_parser(parser)`` and
``main(args)``, registered in :data:`cudagraph_bench.cli.COMMANDS`): options, reading the inputs, calling the logic
of ``runner/``, ``results/`` and ``report/``, printing and writing. No module imports torch (``run`` launches the
pytest processes that do)."""
