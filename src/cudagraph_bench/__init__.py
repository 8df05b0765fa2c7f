"""cudagraph-bench: measure, prove and guard what CUDA graph capture/replay buys over eager
PyTorch / Hugging Face transformers inference for LLMs at batch 1.

Modules (one job each):

- ``presets``   model presets built offline from transformers configs, or ``from_pretrained`` dirs
- ``runner``    :class:`GraphedForward`: static buffers, side-stream warmup, capture, replay
- ``buckets``   padding to a fixed length and per-length bucket graphs in one graph pool
- ``decode``    greedy decode with a static KV cache: eager loop and graphed decode step
- ``timing``    synchronized wall time and CUDA-event timing of one call
- ``launch``    launch-overhead microbenchmarks (tiny-kernel loop vs graph, clocks, baked pointers)
- ``plugin``    the pytest / pytest-benchmark plugin (options, machine_info, fixtures)
- ``stats``     medians, p95, bootstrap intervals (numpy only, no torch)
- ``runfile``   reading pytest-benchmark JSON runs and saved-run ids (no torch)
- ``gate`` / ``compare`` / ``baseline``  the regression gate, run comparison, baseline files
- ``cli``       the ``cudagraph-bench`` command
"""

__version__ = "0.1.0"
