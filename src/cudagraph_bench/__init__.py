"""cudagraph-bench: measure, prove and guard what CUDA graph capture/replay buys over eager
PyTorch / Hugging Face transformers inference for LLMs at batch 1.

Subpackages, one layer each; a module imports only its own layer and those below it (``tests/test_layout.py``,
``docs/architecture.md``):

- ``cli`` / ``__main__``  the ``cudagraph-bench`` command
- ``plugin``    the pytest plugin: the harness every benchmark runs in (the ``cgb`` session, the one pipeline)
- ``commands``  every command's front-end, one module each (options, ``main``); none imports torch
- ``runner``    pytest processes launched and watched (``run``, ``ab``, ``gate --confirm``, one per GPU)
- ``report``    markdown pages and plots of run JSONs (no torch)
- ``measure``   the pipeline of a forward and a decode case, the variant builders, timing, correctness, kernel
                counts, the roofline's inputs, the launch microbenchmarks
- ``capture``   :class:`~cudagraph_bench.capture.graphed.GraphedForward`, padding and buckets, graphed decode,
                torch.compile helpers
- ``results``   run files and their typed record, statistics, the regression rule, baseline, gate, compare,
                calibrate, shards and merging (no torch)
- ``models``    model presets and the transformers internals the suite touches
- ``variants`` (the registry), ``cases`` (the keys), ``options``, ``journal``, ``errors``, ``envinfo``, ``fsio``,
  ``paths``, ``table``: shared by every layer
"""

__version__ = "0.1.0"
