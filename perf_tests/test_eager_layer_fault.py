"""The self-test's ``eager-layer`` fault on the GPU: a gpt2-architecture graph with its LM head run eagerly after each
replay gives eager's outputs, and the replay proof counts its one graph launch and the kernels launched outside it,
so its recorded check fails (:mod:`cudagraph_bench.selftest.eager_layer`).

In a child process, like ``perf_tests/test_replay_proof.py``: a profiler session can leave CUPTI attached and slow
the benchmarks timed after it in this session (pytorch/pytorch#144455).
"""

from __future__ import annotations

import textwrap

import pytest
from child_process import run_script

_SCRIPT = textwrap.dedent("""
    import json
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    from cudagraph_bench.selftest.eager_layer import EagerLayerGraph
    from cudagraph_bench.measure.replay_proof import count_call
    from cudagraph_bench.models.presets import model_forward
    from cudagraph_bench.results.replay import replay_field, replay_problem

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=1000, n_positions=256, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config).cuda().eval()
    graph = EagerLayerGraph(model, 16)
    out = {"layer": graph.layer_name, "equal": []}
    for seed in range(3):
        ids = torch.randint(0, 1000, (1, 16), device="cuda", generator=torch.Generator("cuda").manual_seed(seed))
        with torch.inference_mode():
            expected = model_forward(model, ids).clone()
            graph.static_output.fill_(float("nan"))
            actual = graph(ids).clone()
        out["equal"].append(bool(torch.equal(actual, expected)))
    c = count_call(lambda: graph(ids))
    out["count"] = [c.graph_launches, c.kernels_outside_graph, c.copies_outside_graph]
    out["problem"] = replay_problem(replay_field(c, calls=1, expected_graph_launches=1, kernels_outside_allowed=0))
    graph.close()
    print(json.dumps(out))
""")


@pytest.mark.gpu
def test_the_eager_layer_graph_is_right_and_only_the_replay_proof_catches_it(record_property):
    got = run_script(_SCRIPT)
    record_property("eager_layer", got)
    assert got["layer"] == "lm_head", got
    assert got["equal"] == [True, True, True], "the eager-layer graph's outputs differ from eager's"
    assert got["count"][0] == 1 and got["count"][1] > 0, f"[launches, kernels outside, copies] = {got['count']}"
    assert got["problem"] and "part of the call ran outside its graph" in got["problem"], got["problem"]
