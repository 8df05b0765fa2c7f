import pytest
import torch

from cudagraph_bench.capture.buckets import cap_buckets, pad_prompt, select_bucket
from cudagraph_bench.errors import RequestTooLongError, UsageError
from cudagraph_bench.options import DEFAULT_BUCKETS
from cudagraph_bench.models.presets import load_model, model_forward, random_input_ids


@pytest.mark.parametrize("length, bucket", [(1, 16), (15, 16), (16, 16), (17, 32), (31, 32), (32, 32), (33, 64),
                                            (513, 1024), (1024, 1024)])
def test_select_bucket(length, bucket):
    assert select_bucket(length, DEFAULT_BUCKETS) == bucket


def test_select_bucket_errors():
    with pytest.raises(RequestTooLongError, match="longer than the largest bucket \\(1024\\)"):
        select_bucket(1025, DEFAULT_BUCKETS)
    with pytest.raises(UsageError):
        select_bucket(0, DEFAULT_BUCKETS)
    with pytest.raises(UsageError):
        select_bucket(5, ())


def test_cap_buckets_at_positions():
    assert cap_buckets(DEFAULT_BUCKETS, 512) == (16, 32, 64, 128, 256, 512)
    assert cap_buckets((100, 1000), 512) == (100, 512)
    assert cap_buckets((16, 32), 512) == (16, 32)
    with pytest.raises(UsageError):
        cap_buckets((1024,), 0)


def test_pad_prompt_right_pads_with_mask():
    ids = torch.tensor([[5, 6, 7]])
    padded, mask = pad_prompt(ids, 6, pad_token_id=9)
    assert padded.tolist() == [[5, 6, 7, 9, 9, 9]]
    assert mask.tolist() == [[1, 1, 1, 0, 0, 0]]
    assert padded.dtype == mask.dtype == torch.int64
    with pytest.raises(RequestTooLongError, match="--pad-to"):
        pad_prompt(ids, 2)


@pytest.mark.parametrize("name, overrides", [
    ("gpt2", dict(n_layer=2, n_embd=64, n_head=4)),
    ("bert-tiny", {}),
])
def test_padding_with_mask_equals_unpadded_on_cpu(name, overrides):
    model = load_model(name, "float32", "cpu", overrides=overrides)
    ids = random_input_ids(model, 11, device="cpu")
    padded, mask = pad_prompt(ids, 32)
    with torch.inference_mode():
        expected = model_forward(model, ids)
        got = model_forward(model, padded, mask)[:, :11]
        unmasked = model_forward(model, padded)[:, :11]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1.3e-6)
    if name == "bert-tiny":  # bidirectional: the mask is what keeps padding out
        assert (unmasked - expected).abs().max() > 1e-2
    else:  # causal: real positions never see later (padding) positions
        torch.testing.assert_close(unmasked, expected, atol=1e-5, rtol=1.3e-6)
