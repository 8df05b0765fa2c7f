"""Roofline arithmetic on recorded numbers (no torch; GB = 1e9 bytes): decode at batch 1 is memory-bound (bandwidth per
token as gpt-fast's ``generate.py`` reports it); a short forward is launch-bound (overhead above busy time)."""

from __future__ import annotations

from cudagraph_bench.results.benchmark_values import is_positive

#: Peak memory bandwidth in GB/s per GPU (torch's lower-case device name), from NVIDIA's datasheets.
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
    """Datasheet peak GB/s of torch's device name (case and spaces ignored), or None when not in the table."""
    if not gpu_name:
        return None
    return DATASHEET_PEAK_GBPS.get(" ".join(str(gpu_name).lower().split()))


def nvml_peak_gbps(max_mem_clock_mhz: float, bus_width_bits: float) -> float:
    """``MHz x bits x 2 / 8 / 1000`` GB/s; ValueError for a clock or width that is not a positive finite number."""
    for name, value in (("memory clock", max_mem_clock_mhz), ("bus width", bus_width_bits)):
        if not is_positive(value):
            raise ValueError(f"NVML {name} must be a positive number, got {value!r}")
    return max_mem_clock_mhz * bus_width_bits * 2 / 8 / 1000


def choose_peak(gpu_name: str | None, max_mem_clock_mhz: float | None = None,
                bus_width_bits: float | None = None) -> dict | None:
    """NVML's peak when usable and within :data:`NVML_TABLE_TOLERANCE` of the table's (or not in it), else the table's.
    Returns ``{"gbps", "source", "nvml_gbps", "table_gbps", "nvml_max_mem_clock_mhz", "nvml_bus_width_bits",
    "gpu_name"}`` (missing values None), or None when neither gives a value."""
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
    """The recorded peak with a positive ``gbps``, else the datasheet value of the GPU, else None."""
    cuda = (machine_info or {}).get("cuda")
    if not isinstance(cuda, dict):
        return None
    recorded = cuda.get("peak_memory_bandwidth")
    if isinstance(recorded, dict) and is_positive(recorded.get("gbps")):
        return recorded
    return choose_peak(cuda.get("gpu_name"))


def achieved_gbps(bytes_per_token: float, ms_per_token: float) -> float | None:
    """``bytes / (ms x 1e6)`` GB/s; None when either is missing or not positive."""
    if not (is_positive(bytes_per_token) and is_positive(ms_per_token)):
        return None
    return bytes_per_token / ms_per_token / 1e6


def bandwidth_floor_ms(bytes_per_token: float, peak_gbps: float | None) -> float | None:
    """Least ms per token to read ``bytes_per_token`` at ``peak_gbps`` (the same quotient); None without a peak."""
    return achieved_gbps(bytes_per_token, peak_gbps)


def pct_of_peak(gbps: float | None, peak_gbps: float | None) -> float | None:
    """None when either is missing or the peak is not positive."""
    if gbps is None or not is_positive(peak_gbps):
        return None
    return 100.0 * gbps / peak_gbps


def overhead(median_ms: float | None, busy_ms: float | None,
             n_kernels: int | None) -> tuple[float | None, float | None]:
    """``(median_ms - busy_ms, that in µs per kernel)`` (second None without positive ``n_kernels``); ``(None, None)``
    when the median or busy time is missing."""
    if median_ms is None or not is_positive(busy_ms):
        return None, None
    over = median_ms - busy_ms
    return over, over * 1000.0 / n_kernels if type(n_kernels) is int and n_kernels > 0 else None  # no bool
