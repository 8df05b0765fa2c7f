"""Correctness: a captured forward replayed with fresh inputs equals eager on those inputs.

Capture with the runner's own random input, then replay 3 fresh random inputs; before each replay the
static output is poisoned with NaN, so a replay that did not write it cannot pass. Tolerance:
cudagraph_bench.measure.correctness.TOLERANCES (float32: atol 1e-5, rtol 1.3e-6).
"""

import pytest

from cudagraph_bench.plugin.memory import reserved_mib

pytestmark = pytest.mark.gpu


def test_graph_replay_matches_eager(cgb, corr_case, record_property):
    import torch

    from cudagraph_bench.measure.correctness import assert_matches_eager, max_abs_diff
    from cudagraph_bench.models.presets import model_forward
    from cudagraph_bench.capture.graphed import GraphedForward

    from cudagraph_bench.errors import NotGraphableError

    case = corr_case
    cgb.skip_if_too_long(case.model, case.seq_len)
    model = cgb.model(case.model, case.dtype)
    try:
        graph = GraphedForward(model, case.seq_len, check_data_ptrs=True)
    except NotGraphableError as exc:
        pytest.skip(f"{case.model} cannot be graphed: {exc}")
    capture_ids = graph.static_input_ids.clone()
    worst = 0.0
    try:
        for ids in cgb.inputs(model, case.seq_len, n=3, seed=100):
            assert not torch.equal(ids, capture_ids), "fresh input must differ from the capture input"
            with torch.inference_mode():
                expected = model_forward(model, ids).clone()
                graph.static_output.fill_(float("nan"))
            got = graph(ids)
            torch.cuda.synchronize()
            assert not torch.isnan(got).any(), "replay left NaN in the static output: it did not write it"
            assert_matches_eager(got, expected, case.dtype)
            worst = max(worst, max_abs_diff(got, expected))
    finally:
        graph.close()
        cgb.release()
    record_property("max_abs_diff", worst)
    print(f"{case.test_id}: max |replay - eager| = {worst:.3g}")


def test_refuses_other_shapes_and_dtypes(cgb):
    import torch

    from cudagraph_bench.errors import ShapeMismatchError
    from cudagraph_bench.capture.graphed import GraphedForward

    model = cgb.model(cgb.option("models")[0], "float32")
    graph = GraphedForward(model, 16)
    try:
        with pytest.raises(ShapeMismatchError, match=r"\[1, 17\]"):
            graph(torch.ones(1, 17, dtype=torch.int64, device="cuda"))
        with pytest.raises(ShapeMismatchError, match="int32"):
            graph(torch.ones(1, 16, dtype=torch.int32, device="cuda"))
        with pytest.raises(ShapeMismatchError, match="with_attention_mask"):
            graph(torch.ones(1, 16, dtype=torch.int64, device="cuda"), torch.ones(1, 16, dtype=torch.int64, device="cuda"))
    finally:
        graph.close()
        cgb.release()


def test_graph_pools_are_released(cgb):
    """Capturing and closing the same graph 4 times leaves reserved memory where the first left it."""
    from cudagraph_bench.capture.graphed import GraphedForward

    model = cgb.model(cgb.option("models")[0], "float32")
    levels = []
    for _ in range(4):
        graph = GraphedForward(model, 128)
        graph.close()
        del graph
        cgb.release()
        levels.append(reserved_mib())
    print(f"reserved after each capture+release (MiB): {levels}")
    assert levels[-1] <= levels[0], levels
