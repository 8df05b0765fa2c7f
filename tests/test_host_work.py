"""Host work inside a forward (cudagraph_bench.capture.host_work), on the CPU: the watch finds every kind of host
work a CUDA graph capture forbids with the model's tensors on ``meta`` (plain torch modules, as a forward would do
them), and the device constants make a forward's host data on the device with the values of the eager forward."""

import pytest
import torch

from cudagraph_bench.capture.host_work import (DeviceConstants, HostWorkWatch, device_tensor_from_host_data,
                                              host_work_in_failed_capture)


def find_host_work(run, device):
    """What :class:`HostWorkWatch` finds in ``run()``."""
    with HostWorkWatch(device) as watch:
        run()
    return watch.found


DATA = [0.0, -2, 7, True, [3, 1, 4], [0, 2, 4, 6], [5, 4, 3], [[1, 2], [3, 4]], [True, False, True], [1.5, -0.25]]


@pytest.mark.parametrize("data", DATA, ids=[repr(d) for d in DATA])
@pytest.mark.parametrize("dtype", [None, torch.bfloat16, torch.int32])
def test_host_data_made_on_the_device_equals_torch_tensor(data, dtype):
    """One element (torch.full) and integer progressions (torch.arange) are made by device ops, with the value,
    dtype and shape of torch.tensor(data, dtype=dtype); anything else needs pinned memory (a CUDA device)."""
    expected = torch.tensor(data, dtype=dtype)
    made = device_tensor_from_host_data(data, device="meta", dtype=dtype)
    if made is None:
        assert expected.numel() > 1 and not (expected.dim() == 1 and _progression(expected))
        return
    assert (made.device.type, made.dtype, made.shape) == ("meta", expected.dtype, expected.shape)
    on_cpu = device_tensor_from_host_data(data, device="cpu", dtype=dtype)
    assert on_cpu.dtype == expected.dtype and torch.equal(on_cpu, expected)


def _progression(t) -> bool:
    if t.dtype.is_floating_point or t.dtype == torch.bool or t.numel() < 2:
        return False
    step = int(t[1] - t[0])
    return step != 0 and torch.equal(t, torch.arange(int(t[0]), int(t[0]) + step * t.numel(), step, dtype=t.dtype))


class HostWork(torch.nn.Module):
    """A forward that does one kind of host work on its input ``x`` (on the model's device)."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind
        self.table = torch.arange(8.0)          # a plain attribute: stays on the host when the module moves

    def forward(self, x):
        if self.kind == "tensor()":
            return x + torch.tensor(0.5, device=x.device)
        if self.kind == "list index":
            return x[:, [-2]]
        if self.kind == "bool list index":
            return x[:, [True, False, True, False]]
        if self.kind == "table to device":
            return x * self.table[:4].to(x.device)
        if self.kind == "host index":
            return x[:, torch.tensor([0, 2])]
        if self.kind == "item":
            return x * x.sum().item()
        if self.kind == "bool":
            return x if bool(x.sum() > 0) else -x
        if self.kind == "mask index":
            return x[x > 0]
        if self.kind == "nonzero":
            return torch.nonzero(x)
        if self.kind == "to host":
            return x.cpu()
        if self.kind == "new host tensor to device":
            return x + torch.zeros(2, 4).to(x)
        if self.kind == "arange of a device bound":
            start = x.sum().long()
            return torch.arange(start, start + 4, device=x.device)
        if self.kind == "masked_fill by a device value":
            return torch.masked_fill(x, x > 0, torch.scalar_tensor(-1.0, device=x.device))
        if self.kind == "device ops":
            return torch.softmax(x, -1) * torch.full((), 2.0, device=x.device) + torch.arange(4, device=x.device)
        raise ValueError(self.kind)


#: kind -> what the watch names, or None (no host work).
KINDS = {"tensor()": "tensor() of host data copied to the meta device", "list index": "a Python list indexing",
         "bool list index": "a Python list indexing", "table to device": "a copy of a host tensor [4] to the device",
         "host index": "aten.index on a host tensor and a device tensor", "item": "a host read of a device value",
         "bool": "a host read of a device value", "nonzero": "a host read of a device value (aten.nonzero",
         "mask index": "a host read of a device value (aten.index by a boolean mask",
         "to host": "a host read of a device value (Tensor.cpu", "device ops": None,
         "new host tensor to device": "a copy of a host tensor [2, 4] to the device",
         "arange of a device bound": "a host read of a device value (torch.arange of a bound held in a device tensor",
         "masked_fill by a device value": "a host read of a device value (aten.masked_fill by a value tensor"}


@pytest.mark.parametrize("inference", [False, True], ids=["grad mode", "inference mode"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_the_watch_names_each_kind_of_host_work_and_where(kind, inference):
    """Under inference mode (every forward of the suite) some ops reach the watch whole (``aten.to``, not
    ``aten._to_copy``): it names the same work."""
    module = HostWork(kind)
    x = torch.ones(2, 4, device="meta")
    with torch.inference_mode(inference):
        found = find_host_work(lambda: module(x), "meta")
    if KINDS[kind] is None:
        assert found is None
    else:
        assert found is not None and found.startswith(KINDS[kind]), found
        assert "tests/test_host_work.py:" in found and "(forward)" in found


@pytest.mark.parametrize("kind", ["tensor()", "list index", "bool list index"])
def test_device_constants_remove_the_host_data_copies_and_keep_the_eager_values(kind):
    """Under DeviceConstants the watch finds nothing left (model on meta), and on the CPU the forward's output is
    the plain forward's, bit for bit."""
    module = HostWork(kind)
    with HostWorkWatch("meta") as watch, DeviceConstants("meta"):
        module(torch.ones(2, 4, device="meta"))
    assert watch.found is None
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(0))
    with DeviceConstants("cpu"):
        got = module(x)
    assert torch.equal(got, module(x))


def test_the_library_eager_mask_of_older_releases_is_found_and_the_suites_is_clean():
    """transformers' eager-attention mask (5.17) turns its bool mask into 0/-inf through torch.tensor(0.0,
    device=...): the watch names it where a release does so; the suite's capture-safe mask does no host work."""
    import transformers.masking_utils as mu

    from cudagraph_bench.models.hf_internals import capture_safe_eager_mask

    args = dict(batch_size=1, q_length=6, kv_length=6, mask_function=mu.causal_mask_function, dtype=torch.float32,
                device="meta")
    found = find_host_work(lambda: mu.eager_mask(**args), "meta")
    assert found is None or ("tensor() of host data" in found and "masking_utils.py" in found)
    assert find_host_work(lambda: capture_safe_eager_mask(**args), "meta") is None


def _capture_error(message):
    def forward():
        raise RuntimeError(message)

    try:
        try:
            forward()
        except RuntimeError as exc:
            raise RuntimeError("operation failed due to a previous error during capture") from exc
    except RuntimeError as exc:
        return exc


def test_a_capture_broken_by_host_work_names_the_error_and_the_line():
    """Host work in a kernel's own launcher (``torch.histc``'s) runs below the watch; the failed capture's chain
    still names it and the innermost frame outside torch."""
    found = host_work_in_failed_capture(_capture_error(
        "Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU tensor is pinned."))
    assert found.startswith("Cannot copy between CPU and CUDA tensors during CUDA graph capture at ")
    assert "tests/test_host_work.py:" in found and found.endswith("(forward)")
    assert host_work_in_failed_capture(_capture_error("CUDA error: operation not permitted when stream is "
                                                      "capturing")).startswith("operation not permitted")
    assert host_work_in_failed_capture(_capture_error("CUDA error: an illegal memory access")) is None

