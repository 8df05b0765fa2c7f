"""GPU tests of the device-side figure the gate guards (:func:`cudagraph_bench.measure.timing.back_to_back_ms`) and of
the planted delay the self-test measures it with (:func:`cudagraph_bench.measure.faults.capture_delayed`).

The figure must be the GPU's own time of a call, whatever the host's: a call whose host work takes four times its
GPU work must still read its GPU work. Without the held stream it read the host's time.
"""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.gpu

GPU_MS = 0.05          # the GPU work of one call
HOST_MS = 0.2          # the host work of one call, before it queues the GPU work


def _spin_host(ms: float) -> None:
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


def test_device_figure_is_the_gpu_time_whatever_the_host_time():
    import torch

    from cudagraph_bench.measure.timing import back_to_back_ms, sleep_cycles_per_ms

    cycles = max(1, int(GPU_MS * sleep_cycles_per_ms()))
    # the reference: the same GPU work queued 200 times by a host far faster than it (one launch each)
    torch.cuda._sleep(cycles * 200)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(200):
        torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize()
    reference_ms = start.elapsed_time(end) / 200

    def call():
        _spin_host(HOST_MS)
        torch.cuda._sleep(cycles)

    figure = back_to_back_ms(call)
    assert figure is not None and figure.uncovered_blocks <= 1
    assert figure.enqueue_ms >= HOST_MS            # the host's time was measured, and left out:
    assert figure.median_ms == pytest.approx(reference_ms, rel=0.05), (
        f"device figure {figure.median_ms:.4f} ms vs the GPU work's {reference_ms:.4f} ms (host {figure.enqueue_ms:.3f} "
        f"ms a call)")
    assert figure.hold_ms > figure.enqueue_ms * figure.calls_per_block


def test_planted_delay_lands_on_its_target():
    import torch

    from cudagraph_bench.measure.faults import PLANT_TOLERANCE_POINTS, capture_delayed
    from cudagraph_bench.models.presets import load_model

    model = load_model("gpt2", "bfloat16", "cuda")
    try:
        graph, fields = capture_delayed(model, 50, 3.0)
        graph.close()
    finally:
        del model
        torch.cuda.empty_cache()
    assert abs(fields["planted_measured_pct"] - 3.0) <= PLANT_TOLERANCE_POINTS, fields
    assert fields["planted_on_target"] is True
