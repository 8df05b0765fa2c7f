"""cudagraph-bench: measure, prove and guard what CUDA graph capture/replay buys over eager
PyTorch / Hugging Face transformers inference for LLMs at batch 1.

Subpackages, one layer each; a module imports only its own layer and those below it
(``tests/test_layout.py``):

- ``cli`` / ``__main__`` / ``plugin``  entry points: the ``cudagraph-bench`` command, the pytest plugin and its
                parts ``session`` (the ``cgb`` fixture, benchmark timing), ``sharding`` (``--shard``, recorded
                test durations) and ``gpu_workers`` (``--gpu-workers``)
- ``commands``  every command's front-end, one module each (options, ``main``): ``run``, ``gate``, ``compare``,
                ``baseline``, ``calibrate``, ``ab``, ``report``, ``launch_report``, ``merge`` (all but ``run``
                without torch)
- ``report``    markdown pages and plots of run JSONs, the forward and decode tables, the roofline tables, the
                launch-overhead page (no torch)
- ``measure``   variants, the one measurement pipeline of a case (``measure.case``: the pytest benchmarks and
                ``run`` both use it), the settings every case shares (``measure.settings``), planning and
                running ``run``'s cases, worker isolation, timing and the round policy, correctness, launch
                microbenchmarks, the roofline's inputs (bytes per decoded token, peak memory bandwidth, GPU
                busy time), the compiled static-cache ``generate`` peer of decode
- ``capture``   :class:`~cudagraph_bench.capture.graphed.GraphedForward`, padding and buckets, graphed decode
                (optionally with the step compiled), the torch.compile helpers
- ``results``   run files and the typed record they are decoded into (``runfile``, ``record``), statistics, the
                regression rule, the roofline arithmetic, and the logic of baseline, gate, compare, calibrate,
                A/B, shards and merging runs (no torch)
- ``models``    model presets and the transformers internals the suite touches
- ``options``, ``cases``, ``errors``, ``envinfo``, ``fsio``, ``paths``, ``table``: shared by every layer
"""

__version__ = "0.1.0"
