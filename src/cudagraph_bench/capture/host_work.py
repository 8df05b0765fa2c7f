"""Host work inside a forward, which a CUDA graph capture forbids (a pageable host-to-device copy, a host read of a
device value): found before the capture with its model source line, and host data made on the device instead. Both are
``TorchFunctionMode`` / ``TorchDispatchMode`` watches (as torch's ``FakeTensorMode``) and run on ``meta`` too."""

from __future__ import annotations

import contextlib
import os
import traceback

from cudagraph_bench.models.hf_internals import (capture_code_path, eager_sdpa_dispatch_during_capture,
                                                 static_rope_during_capture)

#: aten ops whose boolean-mask index makes the output's size a device value (read on the host).
MASK_INDEX_OPS = ("index", "index_put", "index_put_", "_index_put_impl_")
#: ``Tensor`` methods that read a device value on the host (watched by name too: some raise on ``meta``).
HOST_READ_METHODS = ("item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__", "__index__", "__complex__")
#: aten ops that read a device value on the host (a synchronize): forbidden while a stream captures.
HOST_READ_OPS = ("_local_scalar_dense", "nonzero", "masked_select", "_unique2", "unique_dim", "unique_consecutive",
                 "equal", "is_nonzero")
#: torch factories whose bounds are Python numbers: a bound given as a device tensor is read on the host.
RANGE_FACTORIES = ("arange", "range", "linspace", "logspace", "full")
#: This module's file: its frames are not the model's code when a finding names its source line.
_OWN_FILE = os.path.abspath(__file__)


def _is_host_index(value) -> bool:
    return isinstance(value, list) and bool(value) and all(
        _is_host_index(v) if isinstance(v, list) else isinstance(v, (bool, int)) for v in value)


def device_tensor_from_host_data(data, *, device, dtype=None, kept: dict | None = None):
    """``torch.tensor(data, dtype=dtype)`` on ``device`` without a pageable copy: ``torch.full`` for one element,
    ``torch.arange`` for a 1-D integer progression, else a copy from pinned memory kept in ``kept`` (keep it as long as
    the graph); None when none applies (no ``kept``, or no pinned memory)."""
    import torch

    host = torch.tensor(data, dtype=dtype)
    device = torch.device(device)
    if host.numel() == 1:
        return torch.full(host.shape, host.item(), dtype=host.dtype, device=device)
    integer = not host.dtype.is_floating_point and not host.dtype.is_complex and host.dtype != torch.bool
    if integer and host.dim() == 1 and host.numel() > 1:
        start, step = int(host[0]), int(host[1] - host[0])
        progression = {"start": start, "end": start + step * host.numel(), "step": step, "dtype": host.dtype}
        if step != 0 and torch.equal(host, torch.arange(**progression)):
            return torch.arange(**progression, device=device)
    if device.type == "cpu":
        return host
    if kept is None or device.type != "cuda":
        return None
    key = (str(host.dtype), tuple(host.shape), tuple(host.flatten().tolist()))
    if key not in kept:
        kept[key] = host.pin_memory()
    return kept[key].to(device, non_blocking=True)


def _device_index(index, device, kept: dict):
    """``index`` with its lists of ints or bools made into device tensors."""
    def convert(value):
        if not _is_host_index(value):
            return value
        if all(isinstance(v, bool) for v in value):     # a 1-D mask of one dimension: the positions it keeps
            value = [i for i, keep in enumerate(value) if keep]
            if not value:
                return value
        made = device_tensor_from_host_data(value, device=device, kept=kept)
        return value if made is None else made

    if isinstance(index, tuple):
        converted = tuple(convert(v) for v in index)
        return converted if any(a is not b for a, b in zip(converted, index)) else index
    return convert(index)


def _creation_device(func, args, kwargs):
    """The device a tensor factory call makes a tensor of host data on, or None (another call)."""
    import torch

    if func in (torch.tensor, torch.as_tensor, torch.asarray) and args and not isinstance(args[0], torch.Tensor) \
            and kwargs.get("device") is not None:
        return torch.device(kwargs["device"])
    if func is torch.Tensor.new_tensor and len(args) >= 2 and not isinstance(args[1], torch.Tensor):
        return torch.device(kwargs.get("device") or args[0].device)
    return None


def _host_index_call(func, args, device_type: str) -> bool:
    """Indexing a tensor on ``device_type`` with (or setting) a host list."""
    import torch

    if func not in (torch.Tensor.__getitem__, torch.Tensor.__setitem__) or len(args) < 2 \
            or not isinstance(args[0], torch.Tensor) or args[0].device.type != device_type:
        return False
    index = args[1] if isinstance(args[1], tuple) else (args[1],)
    value = [args[2]] if func is torch.Tensor.__setitem__ and len(args) > 2 else []
    return any(_is_host_index(v) for v in (*index, *value))


class DeviceConstants:
    """A context making host data a forward turns into tensors on ``device``. ``kept``: the pinned host tensors the
    copies read from; keep this object as long as a graph captured inside it."""

    def __init__(self, device):
        import torch

        self.device = torch.device(device)
        self.kept: dict = {}
        self._mode = _make_constants_mode(self)

    def __enter__(self):
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        return self._mode.__exit__(*exc)


def _make_constants_mode(owner: DeviceConstants):
    import torch
    from torch.overrides import TorchFunctionMode

    class _ConstantsMode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            device = _creation_device(func, args, kwargs)
            if device is not None and device.type == owner.device.type and not kwargs.get("requires_grad"):
                data = args[1] if func is torch.Tensor.new_tensor else args[0]
                dtype = kwargs.get("dtype") or (args[0].dtype if func is torch.Tensor.new_tensor else None)
                made = device_tensor_from_host_data(data, device=device, dtype=dtype, kept=owner.kept)
                if made is not None:
                    return made
            if _host_index_call(func, args, owner.device.type):
                target = args[0]
                converted = [args[0], _device_index(args[1], target.device, owner.kept), *args[2:]]
                if func is torch.Tensor.__setitem__ and len(args) > 2 and _is_host_index(args[2]):
                    value = device_tensor_from_host_data(args[2], device=target.device, dtype=target.dtype,
                                                         kept=owner.kept)
                    converted[2] = args[2] if value is None else value
                args = tuple(converted)
            return func(*args, **kwargs)

    return _ConstantsMode()


class _HostWorkFound(Exception):
    """Raised inside the watched forward at its first host work, the finding its one argument."""


def _frame_text(frames) -> str:
    """``"<file>:<line> (<function>)"`` of the innermost frame outside torch and this module, or ``""``."""
    import torch

    torch_folder = os.path.dirname(torch.__file__) + os.sep
    for frame in reversed(frames):
        filename = os.path.abspath(frame.filename)
        if filename.startswith(torch_folder) or filename == _OWN_FILE:
            continue
        parts = filename.replace(os.sep, "/").split("/")
        for package in ("transformers", "cudagraph_bench"):
            if package in parts:
                filename = "/".join(parts[parts.index(package):])
                break
        return f"{filename}:{frame.lineno} ({frame.name})"
    return ""


def _tensors(value):
    import torch
    from torch.utils._pytree import tree_flatten

    return [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]


def _pageable(t) -> bool:
    try:
        return not t.is_pinned()
    except RuntimeError:      # no accelerator to pin for: every host tensor is pageable
        return True


def _run_unless_host_work(func, args, kwargs, finding):
    """``func(*args, **kwargs)``, or _HostWorkFound (with the model's source line) when ``finding`` names host work."""
    found = finding(func, args, kwargs)
    if found:
        where = _frame_text(traceback.extract_stack())
        raise _HostWorkFound(f"{found} at {where}" if where else found)
    return func(*args, **kwargs)


def _make_watch(device_type: str):
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    factories = tuple(getattr(torch, n) for n in RANGE_FACTORIES)
    read = "a host read of a device value"

    def function_finding(func, args, kwargs) -> str | None:
        device = _creation_device(func, args, kwargs)
        if device is not None and device.type == device_type:
            return f"{getattr(func, '__name__', func)}() of host data copied to the {device_type} device"
        if func in factories and any(isinstance(a, torch.Tensor) and a.device.type == device_type
                                     for a in (*args, *kwargs.values())):
            return f"{read} (torch.{func.__name__} of a bound held in a device tensor: a synchronize)"
        if _host_index_call(func, args, device_type):
            return "a Python list indexing a device tensor (copied to the device)"
        name = getattr(func, "__name__", "")
        if name in HOST_READ_METHODS and args and isinstance(args[0], torch.Tensor) and \
                args[0].device.type == device_type and getattr(torch.Tensor, name, None) is func:
            return f"{read} (Tensor.{name}: a synchronize)"
        return None

    def dispatch_finding(func, args, kwargs) -> str | None:
        name = func.overloadpacket.__name__
        tensors = _tensors((args, kwargs))
        on_device = [t for t in tensors if t.device.type == device_type]
        if name in HOST_READ_OPS and on_device:
            return f"{read} (aten.{name}: a synchronize)"
        if name in ("masked_fill", "masked_fill_") and len(args) > 2 and isinstance(args[2], torch.Tensor) \
                and args[2].device.type == device_type:
            return f"{read} (aten.{name} by a value tensor on the device: its kernel reads the value on the host, " \
                   "a synchronize)"
        indices = _tensors(args[1]) if name in MASK_INDEX_OPS and len(args) > 1 else []
        if any(t.dtype in (torch.bool, torch.uint8) and t.device.type == device_type for t in indices):
            return f"{read} (aten.{name} by a boolean mask: a synchronize for the output's size)"
        if name in ("_to_copy", "to") and tensors:      # under inference mode aten.to reaches the mode whole
            source, target = tensors[0], kwargs.get("device")
            if target is None:       # None: the source's device
                target = next((a for a in args[1:] if isinstance(a, torch.device)), source.device)
            target = torch.device(target).type
            if source.device.type == "cpu" and target == device_type and _pageable(source):
                return f"a copy of a host tensor {list(source.shape)} to the device"
            if source.device.type == device_type and target == "cpu":
                return f"a copy of a device tensor {list(source.shape)} to the host (a synchronize)"
        elif name == "copy_" and len(tensors) >= 2:
            target, source = tensors[0], tensors[1]
            if target.device.type == device_type and source.device.type == "cpu" and _pageable(source):
                return f"a copy of a host tensor {list(source.shape)} into a device tensor"
            if target.device.type == "cpu" and source.device.type == device_type:
                return "a copy of a device tensor to the host (a synchronize)"
        elif on_device and any(t.dim() > 0 and t.device.type == "cpu" for t in tensors):
            return f"aten.{name} on a host tensor and a device tensor (the host one is copied to the device)"
        return None

    class _FunctionWatch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return _run_unless_host_work(func, args, kwargs or {}, function_finding)

    class _DispatchWatch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return _run_unless_host_work(func, args, kwargs or {}, dispatch_finding)

    return _FunctionWatch(), _DispatchWatch()


class HostWorkWatch:
    """``with HostWorkWatch(device) as watch, DeviceConstants(device): forward()``, then ``watch.found``: the first host
    work on ``device`` the forward did, as one line with the model source line, or None. The forward stops there; its
    other exceptions propagate."""

    def __init__(self, device):
        import torch

        self.found: str | None = None
        self._modes = _make_watch(torch.device(device).type)

    def __enter__(self):
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb):
        for mode in reversed(self._modes):
            mode.__exit__(exc_type, exc, tb)
        if isinstance(exc, _HostWorkFound):
            self.found = exc.args[0]
            return True
        return False


def capture_path_host_work(model, run, device, *, max_positions: int, eager_sdpa_dispatch: bool = True,
                           constants: DeviceConstants | None = None) -> str | None:
    """The :class:`HostWorkWatch` finding of ``run()`` inside the contexts GraphedForward captures in (``constants``
    None: a fresh one). Raises NotGraphableError for RoPE that changes within ``max_positions``, else whatever ``run``
    raises."""
    dispatch = eager_sdpa_dispatch_during_capture() if eager_sdpa_dispatch else contextlib.nullcontext()
    constants = constants if constants is not None else DeviceConstants(device)
    with static_rope_during_capture(model, max_positions), dispatch, capture_code_path(), \
            HostWorkWatch(device) as watch, constants:
        run()
    return watch.found


def root_exception(exc: BaseException) -> BaseException:
    """The exception that started ``exc``'s chain of causes and contexts."""
    seen = set()
    while (exc.__cause__ or exc.__context__) is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return exc


#: What CUDA and torch raise when a capture meets host work (a pageable copy, a synchronize).
CAPTURE_HOST_WORK_ERRORS = ("Cannot copy between CPU and CUDA tensors during CUDA graph capture",
                            "operation not permitted when stream is capturing")


def host_work_in_failed_capture(exc: BaseException) -> str | None:
    """The host work that broke a capture, from its exception chain, or None for another failure: host work inside a
    kernel's own launcher, below any dispatch mode."""
    root = root_exception(exc)
    text = (str(root).strip().splitlines() or [""])[0]
    error = next((e for e in CAPTURE_HOST_WORK_ERRORS if e in text), None)
    if error is None:
        return None
    where = _frame_text(traceback.extract_tb(root.__traceback__))
    return f"{error} at {where}" if where else error
