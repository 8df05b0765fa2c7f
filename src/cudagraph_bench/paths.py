"""Where the tools look for files the user did not name: an environment variable, else this package's checkout, else
(saved runs only) ``./.benchmarks``. No torch."""

from __future__ import annotations

import os
from pathlib import Path

from cudagraph_bench.errors import UsageError

#: Folder holding ``<gpu_slug>.json`` baselines, overriding the checkout's ``baselines/``.
BASELINES_ENV = "CUDAGRAPH_BENCH_BASELINES"
#: Folder of pytest-benchmark saved runs (``--benchmark-storage``), overriding the checkout's ``.benchmarks/``.
STORAGE_ENV = "CUDAGRAPH_BENCH_STORAGE"


def checkout_root() -> Path | None:
    """The checkout this package is imported from, or None for an installed copy."""
    root = Path(__file__).resolve().parents[2]
    project = root / "pyproject.toml"
    try:
        return root if project.is_file() and 'name = "cudagraph-bench"' in project.read_text(encoding="utf-8") else None
    except OSError:
        return None


def default_baseline(gpu_slug: str) -> tuple[Path | None, list[Path]]:
    """``(file or None, candidates)``: ``<gpu_slug>.json`` in ``$CUDAGRAPH_BENCH_BASELINES``, then in the checkout's
    ``baselines/``; the first found wins. UsageError when ``$CUDAGRAPH_BENCH_BASELINES`` is no folder."""
    env = os.environ.get(BASELINES_ENV, "").strip()
    if env and not Path(env).expanduser().is_dir():
        raise UsageError(f"${BASELINES_ENV} is {env!r}, which is not a folder: set it to the folder that holds "
                         f"{gpu_slug}.json, or unset it to use the checkout's baselines/")
    dirs = [Path(os.environ[BASELINES_ENV]).expanduser()] if env else []
    root = checkout_root()
    if root is not None:
        dirs.append(root / "baselines")
    tried = [d / f"{gpu_slug}.json" for d in dirs]
    return next((p for p in tried if p.is_file()), None), tried


def default_storage() -> str:
    """``$CUDAGRAPH_BENCH_STORAGE``, else the checkout's ``.benchmarks``, else the working directory's. An empty (or
    blank) value means unset, as for ``$CUDAGRAPH_BENCH_BASELINES`` and ``$CUDA_VISIBLE_DEVICES``."""
    if os.environ.get(STORAGE_ENV, "").strip():
        return os.environ[STORAGE_ENV]
    root = checkout_root()
    return str(root / ".benchmarks") if root is not None else ".benchmarks"
