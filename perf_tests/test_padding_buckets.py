"""Correctness of padding and length buckets (GPU).

- padded graph (static input_ids + attention_mask) at the real positions equals eager on the
  unpadded prompt, for gpt2 (causal) and bert-tiny (bidirectional: without the mask it differs);
- the next-token logits at position L-1 give the same argmax;
- bucket edges (15/16/17, 31/32/33 tokens) replay equal eager on those inputs;
- a prompt above the largest bucket is an error before any GPU work;
- capture time and pool memory per bucket are reported; reserved memory stays flat while replaying.
"""

import pytest

from cudagraph_bench.plugin.memory import reserved_mib

pytestmark = pytest.mark.gpu

DTYPES = ("float32", "bfloat16")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("model_name", ["gpt2", "bert-tiny"])
def test_padded_graph_matches_unpadded_eager(cgb, model_name, dtype, record_property):
    import torch

    from cudagraph_bench.capture.buckets import BucketedGraphs, pad_prompt
    from cudagraph_bench.measure.correctness import assert_matches_eager, max_abs_diff
    from cudagraph_bench.models.presets import model_forward, model_kind

    model = cgb.model(model_name, dtype)
    pad_to = min(cgb.option("pad_to"), cgb.position_limit(model_name))
    padded = BucketedGraphs(model, (pad_to,))
    worst = 0.0
    try:
        for length in (16, 50, 128):
            (ids,) = cgb.inputs(model, length, n=1, seed=length)
            with torch.inference_mode():
                expected = model_forward(model, ids).clone()
                padded.graphs[pad_to].static_output.fill_(float("nan"))
            got = padded(ids).clone()
            assert got.shape == expected.shape
            assert_matches_eager(got, expected, dtype)
            worst = max(worst, max_abs_diff(got, expected))
            if model_kind(model) == "causal":
                assert torch.equal(got[:, -1].argmax(-1), expected[:, -1].argmax(-1))
            elif dtype == "float32":  # bidirectional: without the mask, real tokens attend to the padding
                with torch.inference_mode():
                    unmasked = model_forward(model, pad_prompt(ids, pad_to)[0])[:, :length]
                moved = max_abs_diff(unmasked, expected)
                print(f"bert-tiny L={length}: without the mask max |diff| = {moved:.3g}")
                assert moved > 100 * tolerance_of(dtype), "bert-tiny without the mask should differ"
    finally:
        padded.close()
        cgb.release()
    record_property("max_abs_diff", worst)
    print(f"{model_name} {dtype}: padded-to-{pad_to} graph vs unpadded eager, max |diff| = {worst:.3g}")


def tolerance_of(dtype) -> float:
    from cudagraph_bench.measure.correctness import tolerance

    return tolerance(dtype)["atol"]


@pytest.mark.parametrize("model_name", ["gpt2", "bert-tiny"])
def test_bucket_edges_match_eager(cgb, model_name, record_property):
    import torch

    from cudagraph_bench.capture.buckets import BucketedGraphs
    from cudagraph_bench.measure.correctness import assert_matches_eager
    from cudagraph_bench.models.presets import model_forward

    model = cgb.model(model_name, "float32")
    before = reserved_mib()
    graphs = BucketedGraphs(model, cgb.option("buckets"))
    try:
        for c in graphs.captures:
            print(f"{model_name} bucket {c.bucket:5d}: capture {c.capture_ms:8.1f} ms, pool +{c.pool_mib:7.1f} MiB")
        record_property("captures", [(c.bucket, round(c.capture_ms, 1), round(c.pool_mib, 1)) for c in graphs.captures])
        after_capture = reserved_mib()
        for length in (15, 16, 17, 31, 32, 33):   # eager references allocate too: memory is checked below
            for ids in cgb.inputs(model, length, n=2, seed=length):
                with torch.inference_mode():
                    expected = model_forward(model, ids).clone()
                got = graphs(ids)
                assert graphs.bucket_for(length) == (16 if length <= 16 else 32 if length <= 32 else 64)
                assert_matches_eager(got, expected, "float32")
        prompts = [cgb.inputs(model, bucket, n=1)[0] for bucket in graphs.buckets]
        for ids in prompts:          # first replay of every bucket
            graphs(ids)
        torch.cuda.synchronize()
        after_first = reserved_mib()
        for _ in range(5):           # more replays of every bucket: no new memory
            for ids in prompts:
                graphs(ids)
        torch.cuda.synchronize()
        after_replays = reserved_mib()
        print(f"{model_name}: reserved before capture {before:.0f} MiB, after capturing all buckets "
              f"{after_capture:.0f} MiB, after one replay of each {after_first:.0f} MiB, after 5 more rounds "
              f"{after_replays:.0f} MiB")
        assert after_replays == after_first
    finally:
        graphs.close()
        cgb.release()


def test_prompt_above_largest_bucket_is_refused_before_gpu_work(cgb, monkeypatch):
    import torch

    import cudagraph_bench.capture.buckets as buckets_mod
    from cudagraph_bench.capture.buckets import BucketedGraphs
    from cudagraph_bench.errors import RequestTooLongError

    model = cgb.model("gpt2", "float32")
    graphs = BucketedGraphs(model, (16, 32))
    try:
        ids = torch.ones(1, 33, dtype=torch.int64, device="cuda")
        calls = []
        monkeypatch.setattr(buckets_mod, "pad_prompt", lambda *a, **k: calls.append("pad"))
        for g in graphs.graphs.values():
            monkeypatch.setattr(g, "_graph", None)   # a replay would now raise "closed"
        with pytest.raises(RequestTooLongError, match="largest bucket"):
            graphs(ids)
        assert calls == []
    finally:
        graphs.close()
        cgb.release()
