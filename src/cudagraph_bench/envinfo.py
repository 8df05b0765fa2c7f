"""Environment fingerprint of a GPU run, stored in ``machine_info``; baselines are keyed by :func:`gpu_slug`. Only
:func:`cuda_fingerprint` imports torch."""

from __future__ import annotations

import os
import re
import subprocess

from cudagraph_bench.options import format_cpus  # noqa: F401  (the CPU list form, shared)


def gpu_slug(gpu_name: str) -> str:
    """``"NVIDIA GeForce RTX 4090"`` -> ``"nvidia-geforce-rtx-4090"``."""
    slug = re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-")
    return slug or "unknown-gpu"


def _nvidia_smi_driver() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):     # no nvidia-smi, or it failed
        return None
    return next((line.strip() for line in out.splitlines() if line.strip()), None)


def cuda_fingerprint() -> dict | None:
    """``machine_info["cuda"]``, or None without a CUDA GPU: ``gpu_name, gpu_slug, gpu_uuid`` (device 0's, None where
    torch lacks it), ``compute_capability, gpu_memory_gib, device_count, driver`` (may be None), ``cuda_runtime, cudnn,
    torch, transformers``."""
    import torch
    import transformers

    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    return {
        "gpu_name": props.name,
        "gpu_slug": gpu_slug(props.name),
        "gpu_uuid": f"GPU-{props.uuid}" if getattr(props, "uuid", None) is not None else None,
        "compute_capability": f"{props.major}.{props.minor}",
        "gpu_memory_gib": round(props.total_memory / 2**30, 1),
        "device_count": torch.cuda.device_count(),
        "driver": _nvidia_smi_driver(),
        "cuda_runtime": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def cpu_affinity() -> str | None:
    """A CPU list (``"0-7"``), or None without ``os.sched_getaffinity``."""
    getaffinity = getattr(os, "sched_getaffinity", None)
    return format_cpus(getaffinity(0)) if getaffinity else None
