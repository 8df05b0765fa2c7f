"""cudagraph-bench: measure, prove and guard what CUDA graph capture/replay buys over eager
PyTorch / Hugging Face transformers inference for LLMs at batch 1.

Subpackages, one layer each; a module imports only its own layer and those below it
(``tests/test_layout.py``):

- ``cli`` / ``__main__`` / ``plugin``  entry points: the ``cudagraph-bench`` command, the pytest plugin
- ``commands``  every command's front-end, one module each (options, ``main``): ``run``, ``gate``, ``compare``,
                ``baseline``, ``calibrate``, ``ab``, ``report``, ``launch_report`` (all but ``run`` without torch)
- ``report``    markdown pages and plots of run JSONs, the forward and decode tables, the launch-overhead page
                (no torch)
- ``measure``   variants, measuring one case, planning and running ``run``'s cases, worker isolation, timing,
                correctness, launch microbenchmarks, the compiled static-cache ``generate`` peer of decode
- ``capture``   :class:`~cudagraph_bench.capture.graphed.GraphedForward`, padding and buckets, graphed decode
                (optionally with the step compiled), the torch.compile helpers
- ``results``   run files, statistics, the regression rule, and the logic of baseline, gate, compare, calibrate,
                A/B (no torch)
- ``models``    model presets and the transformers internals the suite touches
- ``options``, ``cases``, ``errors``, ``envinfo``, ``fsio``, ``paths``, ``table``: shared by every layer
"""

__version__ = "0.1.0"
