"""Roofline arithmetic on recorded numbers (no torch; bytes, ms, GB/s with GB = 1e9 bytes): decode at batch 1 is
memory-bound, so :func:`achieved_gbps` is its bandwidth per token as gpt-fast's ``generate.py`` reports it;
a short forward is launch-bound, so :func:`overhead` is what a variant adds above the GPU's busy time."""

from __future__ import annotations

import math

#: Peak memory bandwidth in GB/s (1e9 bytes/s) per GPU, as torch names the device (lower case), from NVIDIA's
#: datasheet of each GPU (H200, H100, A100, L40S, L4, A10, V100; the RTX 4090's specifications: 21 Gbps GDDR6X on
#: a 384-bit bus).
DATASHEET_PEAK_GBPS = {
    "nvidia h200": 4800.0,
    "nvidia h200 nvl": 4800.0,
    "nvidia h100 80gb hbm3": 3350.0,
    "nvidia h100 pcie": 2000.0,
    "nvidia h100 nvl": 3900.0,
    "nvidia a100-sxm4-80gb": 2039.0,
    "nvidia a100 80gb pcie": 1935.0,
    "nvidia a100-sxm4-40gb": 1555.0,
    "nvidia a100-pcie-40gb": 1555.0,
    "nvidia l40s": 864.0,
    "nvidia l4": 300.0,
    "nvidia a10": 600.0,
    "tesla v100-sxm2-16gb": 900.0,
    "tesla v100-sxm2-32gb": 900.0,
    "nvidia geforce rtx 4090": 1008.0,
}
#: Largest relative difference between the NVML-derived peak and the datasheet's that still takes NVML's.
NVML_TABLE_TOLERANCE = 0.10


def table_peak_gbps(gpu_name: str | None) -> float | None:
    """The datasheet peak memory bandwidth (GB/s) of the GPU named ``gpu_name`` (torch's device name,
    e.g. ``"NVIDIA H200"``; case and surrounding spaces ignored), or None for a GPU not in the table."""
    if not gpu_name:
        return None
    return DATASHEET_PEAK_GBPS.get(" ".join(str(gpu_name).lower().split()))


def nvml_peak_gbps(max_mem_clock_mhz: float, bus_width_bits: float) -> float:
    """Peak memory bandwidth in GB/s from NVML's maximum memory clock (MHz) and bus width (bits):
    ``MHz x bits x 2 / 8 / 1000`` (double data rate). Raises ValueError for a clock or width that is not a
    positive finite number."""
    for name, value in (("memory clock", max_mem_clock_mhz), ("bus width", bus_width_bits)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"NVML {name} must be a positive number, got {value!r}")
    return max_mem_clock_mhz * bus_width_bits * 2 / 8 / 1000


def choose_peak(gpu_name: str | None, max_mem_clock_mhz: float | None = None,
                bus_width_bits: float | None = None) -> dict | None:
    """The peak memory bandwidth of a GPU from its NVML readings and/or the datasheet table.

    NVML's value (:func:`nvml_peak_gbps`) is taken when both readings are usable and it is within
    :data:`NVML_TABLE_TOLERANCE` of the table's (or the GPU is not in the table), else the table's.

    Returns ``{"gbps", "source" ("nvml" or "table"), "nvml_gbps", "table_gbps", "nvml_max_mem_clock_mhz",
    "nvml_bus_width_bits", "gpu_name"}`` (missing values None), or None when neither gives a value."""
    try:
        nvml = nvml_peak_gbps(max_mem_clock_mhz, bus_width_bits)
    except ValueError:
        nvml = None
    table = table_peak_gbps(gpu_name)
    if nvml is not None and (table is None or abs(nvml / table - 1.0) <= NVML_TABLE_TOLERANCE):
        gbps, source = nvml, "nvml"
    elif table is not None:
        gbps, source = table, "table"
    else:
        return None
    return {"gbps": gbps, "source": source, "nvml_gbps": nvml, "table_gbps": table,
            "nvml_max_mem_clock_mhz": max_mem_clock_mhz, "nvml_bus_width_bits": bus_width_bits,
            "gpu_name": gpu_name}


def run_peak(machine_info: dict | None) -> dict | None:
    """The peak memory bandwidth of a run: ``machine_info["cuda"]["peak_memory_bandwidth"]`` when the
    plugin recorded one with a positive ``gbps``, else the datasheet value of ``["cuda"]["gpu_name"]``
    (source ``"table"``), else None (a CPU run, or a GPU in neither)."""
    cuda = (machine_info or {}).get("cuda")
    if not isinstance(cuda, dict):
        return None
    recorded = cuda.get("peak_memory_bandwidth")
    if isinstance(recorded, dict) and _positive(recorded.get("gbps")):
        return recorded
    return choose_peak(cuda.get("gpu_name"))


def _positive(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def achieved_gbps(bytes_per_token: float, ms_per_token: float) -> float | None:
    """Memory bandwidth reached in GB/s: ``bytes_per_token`` bytes read per token in ``ms_per_token`` ms
    (``bytes / (ms x 1e6)``). None when either is missing or not positive."""
    if not (_positive(bytes_per_token) and _positive(ms_per_token)):
        return None
    return bytes_per_token / ms_per_token / 1e6


def bandwidth_floor_ms(bytes_per_token: float, peak_gbps: float | None) -> float | None:
    """The least time per token in ms that reading ``bytes_per_token`` bytes takes at ``peak_gbps``
    (the roofline's limit); None without a peak."""
    if not (_positive(bytes_per_token) and _positive(peak_gbps)):
        return None
    return bytes_per_token / peak_gbps / 1e6


def pct_of_peak(gbps: float | None, peak_gbps: float | None) -> float | None:
    """``gbps`` as a percentage of ``peak_gbps``; None when either is missing or the peak is not positive."""
    if gbps is None or not _positive(peak_gbps):
        return None
    return 100.0 * gbps / peak_gbps


def overhead(median_ms: float | None, busy_ms: float | None,
             n_kernels: int | None) -> tuple[float | None, float | None]:
    """``(overhead_ms, overhead_us_per_node)`` of a forward variant above the GPU's busy time: ``median_ms -
    busy_ms``, and that in µs per kernel (None without a positive ``n_kernels``); ``(None, None)`` when the median
    or the busy time is missing."""
    if median_ms is None or not _positive(busy_ms):
        return None, None
    over = median_ms - busy_ms
    per_node = over * 1000.0 / n_kernels if isinstance(n_kernels, int) and not isinstance(n_kernels, bool) \
        and n_kernels > 0 else None
    return over, per_node


__all__ = ["DATASHEET_PEAK_GBPS", "NVML_TABLE_TOLERANCE", "table_peak_gbps", "nvml_peak_gbps", "choose_peak",
           "run_peak", "achieved_gbps", "bandwidth_floor_ms", "pct_of_peak", "overhead"]
