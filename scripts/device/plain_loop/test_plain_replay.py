"""The plain capture/replay loop the harness's noise is measured against: no suite code in the timing, only
torch and pytest-benchmark. Per gated case: capture the forward once, then 300 synchronized replays (the rounds,
timed by pytest-benchmark) and 30 blocks of 20 back-to-back replays between CUDA events
(``extra_info["device_ms"]``: per-replay ms of each block).

Run it in separate processes, without the suite's plugin but with its machine_info hook (the GPU fingerprint):

    python -m pytest --noconftest -p cudagraph_bench.plugin.output scripts/device/plain_loop \\
        --benchmark-only --benchmark-json=out/plain-1.json
"""

import statistics

import pytest
import torch

from cudagraph_bench.models.presets import load_model
from cudagraph_bench.options import DEFAULT_DTYPES, DEFAULT_MODELS, DEFAULT_PROMPT_LENGTHS
from cudagraph_bench.results.baseline import DEFAULT_MAX_GATED_LEN
from cudagraph_bench.results.record import PLAIN_LOOP_CHECK

LENGTHS = [n for n in DEFAULT_PROMPT_LENGTHS if n <= DEFAULT_MAX_GATED_LEN]
CASES = [(m, d, n) for m in DEFAULT_MODELS for d in DEFAULT_DTYPES for n in LENGTHS]
_MODELS = {}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("model,dtype,seq_len", CASES, ids=[f"{m}-{d}-L{n}" for m, d, n in CASES])
def test_plain_replay(benchmark, model, dtype, seq_len):
    if (model, dtype) not in _MODELS:
        _MODELS.clear()
        _MODELS[(model, dtype)] = load_model(model, dtype, "cuda")
    net = _MODELS[(model, dtype)]
    if seq_len > getattr(net.config, "max_position_embeddings", getattr(net.config, "n_positions", seq_len)):
        pytest.skip(f"{model} has fewer positions than {seq_len}")
    static = torch.randint(1, 100, (1, seq_len), device="cuda")
    fresh = torch.randint(1, 100, (1, seq_len), device="cuda")
    with torch.inference_mode():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                net(static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            net(static)

        def replay():
            static.copy_(fresh)
            graph.replay()
            torch.cuda.synchronize()

        benchmark.group = f"{model} {dtype} L={seq_len}"
        benchmark.pedantic(replay, rounds=300, warmup_rounds=30, iterations=1)
        blocks = []
        for _ in range(31):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(20):
                static.copy_(fresh)
                graph.replay()
            end.record()
            torch.cuda.synchronize()
            blocks.append(start.elapsed_time(end) / 20)
    benchmark.extra_info.update(suite="forward", model=model, dtype=dtype, seq_len=seq_len, variant="graph", batch=1,
                                device_ms=blocks[1:], device_median_ms=statistics.median(blocks[1:]),
                                check=PLAIN_LOOP_CHECK)
    del graph
