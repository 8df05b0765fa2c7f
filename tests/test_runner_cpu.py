"""What the runner, timing and correctness helpers do without CUDA."""

import pytest
import torch

from cudagraph_bench.measure.correctness import (TOLERANCES, assert_matches_eager, fp64_rmse_check, max_abs_diff, rmse,
                                         tolerance)
from cudagraph_bench.envinfo import cuda_fingerprint, gpu_slug
from cudagraph_bench.errors import CudaUnavailableError, UsageError
from cudagraph_bench.models.presets import load_model
from cudagraph_bench.capture.graphed import GraphedForward
from cudagraph_bench.measure.timing import time_call


def test_graphed_forward_needs_cuda():
    model = load_model("bert-tiny", "float32", "cpu")
    with pytest.raises(CudaUnavailableError, match="CUDA device"):
        GraphedForward(model, 16)


def test_graphed_forward_argument_checks():
    model = load_model("bert-tiny", "float32", "cpu")
    with pytest.raises(ValueError, match="warmup_iters must be >= 3"):
        GraphedForward(model, 16, warmup_iters=2)
    with pytest.raises(ValueError, match="seq_len"):
        GraphedForward(model, 0)


def test_static_buffers_are_read_only_properties():
    for name in ("static_input_ids", "static_attention_mask", "static_output", "graph"):
        assert isinstance(getattr(GraphedForward, name), property)
        assert getattr(GraphedForward, name).fset is None


def test_tolerances():
    assert tolerance("float32") == {"atol": 1e-5, "rtol": 1.3e-6}
    assert tolerance(torch.bfloat16) == TOLERANCES["bfloat16"]
    a = torch.ones(4)
    assert_matches_eager(a + 5e-6, a, "float32")
    with pytest.raises(AssertionError):
        assert_matches_eager(a + 5e-5, a, "float32")
    with pytest.raises(AssertionError):
        assert_matches_eager(torch.full((4,), float("nan")), a, "float32")
    assert max_abs_diff(a + 0.25, a) == 0.25
    assert max_abs_diff(torch.tensor([float("nan")]), torch.tensor([1.0])) == float("inf")


def test_rmse_with_literal_numbers():
    assert rmse(torch.tensor([3.0, -3.0, 3.0, -3.0]), torch.zeros(4)) == 3.0
    assert rmse(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 0.0])) == pytest.approx(0.5 ** 0.5)


def test_fp64_rmse_check_with_literal_numbers():
    ref = torch.zeros(4, dtype=torch.float64)
    eager = torch.tensor([1e-3, -1e-3, 1e-3, -1e-3])            # eager RMSE vs fp64: 1e-3
    # float32: limit = 2 * 1e-3 + 1e-4 / 10 = 2.01e-3
    c = fp64_rmse_check(torch.tensor([2e-3, 2e-3, 2e-3, -2e-3]), eager, ref)
    assert (c.rmse, c.eager_rmse) == (pytest.approx(2e-3), pytest.approx(1e-3))
    assert c.limit == pytest.approx(2.01e-3) and c.passed and c.ratio == pytest.approx(2.0)
    assert not fp64_rmse_check(torch.full((4,), 2.02e-3), eager, ref).passed
    c = fp64_rmse_check(torch.tensor([3e-3, 3e-3, 3e-3, 3e-3]), eager, ref)
    assert not c.passed and c.ratio == pytest.approx(3.0)
    # bfloat16: multiplier 3, atol 5e-2 -> limit = 3 * 1e-3 + 5e-3 = 8e-3
    c = fp64_rmse_check(torch.full((4,), 7e-3), eager, ref, "bfloat16")
    assert c.limit == pytest.approx(8e-3) and c.passed
    # eager exact: only tol / 10 of slack (1e-5 in float32); NaN never passes
    assert fp64_rmse_check(torch.full((4,), 5e-6), ref.float(), ref).passed
    assert fp64_rmse_check(torch.full((4,), 5e-6), ref.float(), ref).ratio == float("inf")
    assert not fp64_rmse_check(torch.full((4,), 2e-5), ref.float(), ref).passed
    assert not fp64_rmse_check(torch.tensor([float("nan"), 0, 0, 0]), eager, ref).passed


def test_time_call_validates():
    with pytest.raises(ValueError):
        time_call(lambda: None, rounds=0, warmup=1)


def test_gpu_slug():
    assert gpu_slug("NVIDIA H200") == "nvidia-h200"
    assert gpu_slug("NVIDIA GeForce RTX 4090") == "nvidia-geforce-rtx-4090"
    assert gpu_slug("  ") == "unknown-gpu"


def test_fingerprint_is_none_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cuda_fingerprint() is None


def test_usage_errors_are_value_errors():
    assert issubclass(UsageError, ValueError)


def test_capture_keeps_eager_sdpa_dispatch(monkeypatch):
    """While a stream captures, HF builds explicit masks; the runner's capture context restores the
    eager dispatch (no mask: is_causal for causal LMs, no mask for encoders) when there is no padding
    mask, and leaves a real padding mask alone. Capture is emulated by forcing is_tracing() True."""
    import torch.nn.functional as F
    import transformers.masking_utils as mu

    from cudagraph_bench.models.presets import model_forward
    from cudagraph_bench.models.hf_internals import eager_sdpa_dispatch_during_capture

    seen = []
    real_sdpa = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        seen.append((kwargs.get("attn_mask") is None, bool(kwargs.get("is_causal"))))
        return real_sdpa(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    for name, overrides, causal in (("gpt2", dict(n_layer=1, n_embd=64, n_head=2), True), ("bert-tiny", {}, False)):
        model = load_model(name, "float32", "cpu", overrides=overrides)
        ids = torch.randint(0, 1000, (1, 12))
        with torch.inference_mode():
            seen.clear()
            eager_out = model_forward(model, ids)
            eager = set(seen)
            assert eager == {(True, causal)}
            with monkeypatch.context() as capturing:
                capturing.setattr(mu, "is_tracing", lambda *a, **k: True)
                seen.clear()
                model_forward(model, ids)
                # what a plain capture runs: an explicit mask (the kernels differ from eager's), except where
                # the library already decides as in eager mode (transformers >= 5.24, bidirectional masks)
                assert set(seen) in ({(False, False)}, eager)
                with eager_sdpa_dispatch_during_capture():
                    seen.clear()
                    out = model_forward(model, ids)
                    assert set(seen) == eager
                    seen.clear()
                    model_forward(model, ids, torch.ones_like(ids))
                    assert set(seen) == {(False, False)}      # padding mask: library path untouched
        assert torch.equal(out, eager_out)
        assert mu.find_packed_sequence_indices.__name__ == "find_packed_sequence_indices"   # restored


def test_capture_dispatch_can_be_turned_off(monkeypatch):
    import transformers.masking_utils as mu

    from cudagraph_bench.models.hf_internals import eager_sdpa_dispatch_during_capture

    monkeypatch.setenv("CGB_HF_SDPA_SKIP", "0")
    before = mu._ignore_causal_mask_sdpa
    with eager_sdpa_dispatch_during_capture():
        assert mu._ignore_causal_mask_sdpa is before
