"""The front-end of every ``cudagraph-bench`` command, one module each (``configure_parser`` and ``main``). No module
imports torch (``run`` launches the pytest processes that do)."""
