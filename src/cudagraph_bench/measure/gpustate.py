"""GPU state through NVML (``pynvml``): clocks, temperature, power and clocks-event (throttle) reasons, read before and
after every benchmark so a throttled run says so. Nothing here raises: without NVML, a GPU or a query, None."""

from __future__ import annotations

import contextlib
import warnings

#: NVML clocks-event (throttle) reason bits 0x1 ... 0x400 -> names (``nvmlClocksEventReason*``, as the older API).
REASON_BITS = tuple((1 << i, name) for i, name in enumerate((
    "gpu_idle", "applications_clocks", "sw_power_cap", "hw_slowdown", "sync_boost", "sw_thermal", "hw_thermal",
    "hw_power_brake", "display_clocks", "board_limit", "reliability")))
#: Reasons that do not slow a busy GPU down: idle, clocks set by the user, clocks synced with other GPUs.
BENIGN_REASONS = frozenset({"gpu_idle", "applications_clocks", "sync_boost", "none"})

_nvml = None          # the pynvml module once nvmlInit succeeded, False when it failed
_handles: dict = {}   # torch device index -> (NVML handle, how it was matched)


class GpuThrottledWarning(UserWarning):
    """A benchmark ran while NVML reported a throttling clocks-event reason (power cap, thermal ...)."""


def reason_names(mask: int) -> list[str]:
    """``0x24`` -> ``["sw_power_cap", "sw_thermal"]``; ``0`` -> ``["none"]``; unknown bits -> ``"unknown_0x..."``."""
    mask = int(mask)
    if mask == 0:
        return ["none"]
    names = [name for bit, name in REASON_BITS if mask & bit]
    known = sum(bit for bit, _ in REASON_BITS)     # distinct bits
    if mask & ~known:
        names.append(f"unknown_{mask & ~known:#x}")
    return names


def throttle_reasons(*states: dict | None) -> list[str]:
    """Sorted unique reasons other than :data:`BENIGN_REASONS` in the readings; ``[]`` when none."""
    return sorted({r for state in states if state for r in state.get("clocks_event_reasons") or ()
                   if r not in BENIGN_REASONS})


def _init():
    global _nvml
    if _nvml is None:
        try:
            import pynvml

            pynvml.nvmlInit()
            _nvml = pynvml
        except Exception:  # not installed, no driver, no GPU
            _nvml = False
    return _nvml or None


def _handle(nvml, index: int):
    """By UUID, else PCI bus id, else NVML index."""
    if index in _handles:
        return _handles[index]
    import torch

    props = torch.cuda.get_device_properties(index)
    found = None
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        with contextlib.suppress(Exception):
            found = (nvml.nvmlDeviceGetHandleByUUID("GPU-" + str(uuid)), "uuid")
    if found is None and hasattr(props, "pci_bus_id"):
        bus_id = f"{getattr(props, 'pci_domain_id', 0):08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        with contextlib.suppress(Exception):
            found = (nvml.nvmlDeviceGetHandleByPciBusId(bus_id), "pci")
    if found is None:
        found = (nvml.nvmlDeviceGetHandleByIndex(index), "index")
    _handles[index] = found
    return found


def _query(fn, *args):
    try:
        return fn(*args)
    except Exception:  # not supported on this GPU / driver
        return None


def nvml_handle(device=None):
    """``(pynvml, handle)`` of ``device`` (None: current); None (never raises) without NVML or a CUDA GPU."""
    found = _device_handle(device)
    return None if found is None else found[:2]


def _device_handle(device):
    """``(pynvml, handle, how it was matched)``, or None as :func:`nvml_handle`."""
    try:
        import torch

        nvml = _init() if torch.cuda.is_available() else None
        if nvml is None:
            return None
        index = device if isinstance(device, int) else None if device is None else torch.device(device).index
        return nvml, *_handle(nvml, torch.cuda.current_device() if index is None else index)
    except Exception:  # an NVML reading must never fail a benchmark
        return None


def read_gpu_state(device=None) -> dict | None:
    """``{"sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w", "clocks_event_reasons", "nvml_match"}`` (MHz,
    °C, W) of ``device`` (None: current), unsupported fields None; None (never raises) without NVML or a CUDA GPU."""
    try:
        found = _device_handle(device)
        if found is None:
            return None
        nvml, handle, match = found
        reasons_fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        mask = _query(reasons_fn, handle)
        return {
            "sm_clock_mhz": _query(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM),
            "mem_clock_mhz": _query(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_MEM),
            "temperature_c": _query(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU),
            "power_w": None if (mw := _query(nvml.nvmlDeviceGetPowerUsage, handle)) is None else mw * 1e-3,
            "clocks_event_reasons": None if mask is None else reason_names(mask),
            "nvml_match": match,
        }
    except Exception:  # a GPU-state reading must never fail a benchmark
        return None


def warn_if_throttled(case: str, before: dict | None, after: dict | None) -> list[str]:
    """Warn naming ``case`` when either reading has a throttling reason; returns those (``[]`` when none)."""
    reasons = throttle_reasons(before, after)
    if reasons:
        warnings.warn(f"{case}: GPU clocks were limited while timing ({', '.join(reasons)}): its times may be "
                      "slower than the GPU's; let it cool down or check its power limit, then rerun",
                      GpuThrottledWarning, stacklevel=3)
    return reasons
