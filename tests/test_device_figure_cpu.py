"""The device-side figure's method (:func:`cudagraph_bench.measure.timing.back_to_back_ms`) on a simulated GPU: one
stream whose work starts when both the host has queued it and the work before it has finished, with CUDA events
that read the stream's clock. A call whose host work is four times its GPU work must read its GPU work; a block
whose queueing outlasts the hold is dropped and the hold doubled. The real GPU test is
perf_tests/test_device_figure.py."""

import time

import pytest

GPU_MS = 0.05
HOST_MS = 0.2


class FakeStream:
    """The GPU's one stream, in host perf_counter milliseconds: ``free_at`` is when its queued work ends."""

    def __init__(self):
        self.free_at = 0.0

    def now(self) -> float:
        return time.perf_counter() * 1e3

    def run(self, ms: float) -> None:
        self.free_at = max(self.free_at, self.now()) + ms


@pytest.fixture
def gpu(monkeypatch):
    import torch

    from cudagraph_bench.measure import timing

    stream = FakeStream()

    class Event:
        def __init__(self, enable_timing=False):
            self.at = None

        def record(self):
            self.at = max(stream.free_at, stream.now())

        def elapsed_time(self, end):
            return end.at - self.at

    def synchronize(*_):
        while stream.now() < stream.free_at:
            pass

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: stream.run(cycles / 1e6))   # 1e6 cycles a ms
    monkeypatch.setattr(timing, "_CYCLES_PER_MS", {})
    return stream


def spin(ms: float) -> None:
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


def test_the_figure_is_the_gpu_time_of_a_call_whose_host_time_is_larger(gpu):
    from cudagraph_bench.measure.timing import back_to_back_ms, sleep_cycles_per_ms

    def call():
        spin(HOST_MS)
        gpu.run(GPU_MS)

    figure = back_to_back_ms(call, min_blocks=8, budget_ms=1.0, max_blocks=8)
    assert sleep_cycles_per_ms() == pytest.approx(1e6, rel=1e-2)
    # the sizing call is timed as it is queued (host and GPU): 2 ms of it make a block
    assert 1 <= figure.calls_per_block <= int(2.0 / (HOST_MS + GPU_MS)) and len(figure.block_ms) == 8
    assert figure.median_ms == pytest.approx(GPU_MS, rel=1e-6)
    assert figure.enqueue_ms >= HOST_MS                              # measured, and left out of the figure
    assert figure.hold_ms >= 3 * figure.calls_per_block * HOST_MS and figure.uncovered_blocks <= 1
    record = figure.record()
    assert record["device_median_ms"] == figure.median_ms and record["device_ms"] == figure.block_ms
    assert record["host_enqueue_ms"] == figure.enqueue_ms
    assert record["device_calls_per_block"] == figure.calls_per_block


def test_without_the_hold_the_same_blocks_read_the_host(gpu):
    """What the hold removes: blocks timed as they are queued, the GPU waiting for the host between calls."""
    def call():
        spin(HOST_MS)
        gpu.run(GPU_MS)

    import torch

    start, end = torch.cuda.Event(), torch.cuda.Event()
    torch.cuda.synchronize()
    start.record()
    for _ in range(20):
        call()
    end.record()
    assert start.elapsed_time(end) / 20 > 2 * GPU_MS


def test_a_block_queued_slower_than_its_hold_is_dropped_and_the_hold_doubled(gpu, monkeypatch):
    from cudagraph_bench.measure import timing

    holds: list[float] = []
    hold_stream = timing.hold_stream

    def counted_hold(ms):
        holds.append(ms)
        hold_stream(ms)

    def call():
        # the first call after the second hold queues for twice that hold, whatever the host's pace
        slow = len(holds) == 2 and not slowed
        slowed.extend([len(holds)] if slow else [])
        spin(2 * holds[-1] if slow else HOST_MS)
        gpu.run(GPU_MS)

    slowed: list[int] = []
    monkeypatch.setattr(timing, "hold_stream", counted_hold)
    figure = timing.back_to_back_ms(call, min_blocks=6, budget_ms=1.0, max_blocks=6)
    assert slowed == [2] and figure.uncovered_blocks >= 1 and len(figure.block_ms) == 6
    assert len(holds) == 6 + figure.uncovered_blocks and holds[2] == 2 * holds[1] and figure.hold_ms == holds[-1]
    assert figure.median_ms == pytest.approx(GPU_MS, rel=1e-6) and max(figure.block_ms) == pytest.approx(GPU_MS)


def test_no_cuda_no_figure(monkeypatch):
    import torch

    from cudagraph_bench.measure.timing import back_to_back_ms

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert back_to_back_ms(lambda: None) is None
