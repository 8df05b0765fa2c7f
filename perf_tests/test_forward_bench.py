"""Benchmarks: one forward pass at batch 1, eager vs CUDA graph replay (and, with --with-compile,
torch.compile variants), per model x dtype x prompt length.

Each benchmark is a thin wrapper of the one measurement pipeline (:meth:`cudagraph_bench.plugin.Session.measure`):
build the variant, check it against eager (recorded as extra_info["correct"]; a failed check fails the test after
it is recorded), time it with pytest-benchmark over the round policy. Eager and graph of one case share a
pytest-benchmark group, so they print side by side. Every timed call ends with a synchronize; CUDA-event ms of
each round are in extra_info["cuda_event_ms"], and a graph's device-side time over back-to-back replays in
extra_info["device_ms"]. Kernel launches per eager forward (extra_info["n_kernels"]) are counted by
test_kernel_counts.py after every timed test: a profiler session can leave CUPTI attached and slow later launches.
"""

import pytest

pytestmark = pytest.mark.gpu


def test_forward(benchmark, cgb, fwd_case, request):
    cgb.measure(benchmark, fwd_case, request)
