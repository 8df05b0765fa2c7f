"""GPU tests of the device-side figure the gate guards (:func:`cudagraph_bench.measure.timing.back_to_back_ms`) and of
the planted delay the self-test measures it with (:func:`cudagraph_bench.selftest.faults.capture_delayed`).

The figure must be the GPU's own time of a call, whatever the host's: a call whose host work takes four times its
GPU work must still read its GPU work. Without the held stream it read the host's time.
"""

from __future__ import annotations

import time

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.gpu_timing]     # each runs while no other test runs

GPU_MS = 0.05          # the GPU work of one call
HOST_MS = 0.2          # the host work of one call, before it queues the GPU work


def _spin_host(ms: float) -> None:
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


def test_device_figure_is_the_gpu_time_whatever_the_host_time():
    """The same GPU work queued by a host that adds 0.2 ms of its own per call, and by one that adds none: the two
    figures agree (taken in alternation, so that another process on the GPU, as under ``make test -n N``, slows
    both alike), and neither holds the host's 0.2 ms."""
    import statistics

    import torch

    from cudagraph_bench.measure.timing import back_to_back_ms, sleep_cycles_per_ms

    cycles = max(1, int(GPU_MS * sleep_cycles_per_ms()))

    def slow_host():
        _spin_host(HOST_MS)
        torch.cuda._sleep(cycles)

    def fast_host():
        torch.cuda._sleep(cycles)

    slow, fast = [], []
    for _ in range(3):
        slow.append(back_to_back_ms(slow_host))
        fast.append(back_to_back_ms(fast_host))
    slow_ms = statistics.median(f.median_ms for f in slow)
    fast_ms = statistics.median(f.median_ms for f in fast)
    assert all(f.enqueue_ms >= HOST_MS for f in slow)              # the host's time was measured, and left out:
    # without the hold the first would read the host's pace, HOST_MS + GPU_MS = 5x the second
    assert slow_ms == pytest.approx(fast_ms, rel=0.25), f"{slow_ms:.4f} ms with the host's work, {fast_ms:.4f} without"
    assert slow_ms < HOST_MS, f"the figure {slow_ms:.4f} ms holds the host's {HOST_MS} ms a call"
    assert all(f.hold_ms > f.enqueue_ms * f.calls_per_block for f in slow)


def test_planted_delay_lands_on_its_target():
    import torch

    from cudagraph_bench.selftest.faults import PLANT_TOLERANCE_POINTS, capture_delayed
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
