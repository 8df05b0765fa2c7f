"""The proof of replay on the GPU: one profiled call of a real graph shows one graph launch and no kernel outside it,
one eager call no graph launch and many kernels (:mod:`cudagraph_bench.measure.replay_proof`).

In a child process, like ``perf_tests/test_launch.py::test_count_kernel_launches``: a profiler session can leave CUPTI
attached and add host cost to every later launch (pytorch/pytorch#144455), which must not slow the benchmarks of this
session. The child also times a tiny eager forward before and after its first profile and reports the ratio
(``record_property("replay_proof")["eager_after_profile_ratio"]``): what one proof costs the cases timed after it,
the figure that decides whether ``--replay-proof`` can be on by default.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from child_process import run_script

_SCRIPT = textwrap.dedent("""
    import json, statistics, sys, time
    from types import SimpleNamespace
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    from cudagraph_bench.capture.decode import GreedyDecoder
    from cudagraph_bench.measure.launch_overhead import TinyKernelSequence
    from cudagraph_bench.measure.replay_proof import count_call, replay_expectation
    from cudagraph_bench.measure.forward_variants import build_variant
    from cudagraph_bench.models.presets import model_forward
    from cudagraph_bench.variants import variant

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=1000, n_positions=256, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config).cuda().eval()
    ids = torch.randint(0, 1000, (1, 16), device="cuda")

    def eager():
        with torch.inference_mode():
            return model_forward(model, ids)

    def median_ms(fn, n=300):
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(n):
            start = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - start) * 1e3)
        return statistics.median(times)

    before_ms = median_ms(eager)                 # before any profiler session of this process
    out = {}
    c = count_call(eager)
    out["eager"] = [c.graph_launches, c.kernels_outside_graph, c.copies_outside_graph]
    out["eager_after_profile_ratio"] = median_ms(eager) / before_ms
    for name, kwargs in (("graph", {}), ("padded", {"pad_to": 32})):
        v = build_variant(model, name, 16, **kwargs)
        c = count_call(lambda: v(ids))
        out[name] = [c.graph_launches, c.kernels_outside_graph, c.copies_outside_graph]
        v.close()
    seq = TinyKernelSequence(37)
    c = count_call(seq.replay)
    out["tiny_replay"] = [c.graph_launches, c.kernels_outside_graph, c.copies_outside_graph]
    c = count_call(seq.run_loop)
    out["tiny_loop"] = [c.graph_launches, c.kernels_outside_graph, c.copies_outside_graph]
    decoder = GreedyDecoder(model, 64, use_graph=True, steps_per_graph=4)
    c = count_call(lambda: decoder.generate(ids, 10))       # 9 steps: 2 replays of 4 steps, 1 of 1 step
    spec = SimpleNamespace(variant_spec=variant("decode", "graph"), new_tokens=10, seq_len=16)
    out["decode"] = [c.graph_launches, c.kernels_outside_graph, c.copies_outside_graph]
    out["decode_expected"] = list(replay_expectation(SimpleNamespace(spec=spec, decoder=decoder)))
    decoder.close()
    print(json.dumps(out))
""")


@pytest.mark.gpu
def test_one_graph_call_is_one_launch_and_an_eager_call_launches_every_kernel(record_property):
    from cudagraph_bench.measure.replay_proof import PAD_INPUT_KERNELS

    got = run_script(_SCRIPT)
    record_property("replay_proof", got)
    print(json.dumps(got))
    assert got["graph"][:2] == [1, 0], f"a graph call: [launches, kernels outside] = {got['graph'][:2]}"
    assert got["graph"][2] >= 1, "the static input copy is a memcpy call"
    assert got["padded"][0] == 1 and got["padded"][1] <= PAD_INPUT_KERNELS, got["padded"]
    assert got["eager"][0] == 0 and got["eager"][1] >= 20, f"an eager forward: {got['eager']}"
    assert got["tiny_replay"][:2] == [1, 0], got["tiny_replay"]
    assert got["tiny_loop"][:2] == [0, 37], got["tiny_loop"]
    assert got["decode"][0] == got["decode_expected"][0] == 3, (got["decode"], got["decode_expected"])
