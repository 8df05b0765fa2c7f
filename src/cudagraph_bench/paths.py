"""Where the tools look for files the user did not name (the GPU's baseline, saved runs), whatever the working
directory: an environment variable (:data:`BASELINES_ENV`, :data:`STORAGE_ENV`), else the checkout this package is
imported from, else (saved runs only) pytest-benchmark's ``./.benchmarks``. No torch."""

from __future__ import annotations

import os
from pathlib import Path

#: Folder holding ``<gpu_slug>.json`` baselines, overriding the checkout's ``baselines/``.
BASELINES_ENV = "CUDAGRAPH_BENCH_BASELINES"
#: Folder of pytest-benchmark saved runs (``--benchmark-storage``), overriding the checkout's ``.benchmarks/``.
STORAGE_ENV = "CUDAGRAPH_BENCH_STORAGE"


def checkout_root() -> Path | None:
    """The cudagraph-bench checkout this package is imported from (its ``pyproject.toml`` names the project), or
    None for an installed copy."""
    root = Path(__file__).resolve().parents[2]
    project = root / "pyproject.toml"
    try:
        if project.is_file() and 'name = "cudagraph-bench"' in project.read_text(encoding="utf-8"):
            return root
    except OSError:
        return None
    return None


def baseline_dirs() -> list[Path]:
    """Folders searched for ``<gpu_slug>.json``, first match wins: ``$CUDAGRAPH_BENCH_BASELINES``, then
    the checkout's ``baselines/``."""
    dirs = []
    if os.environ.get(BASELINES_ENV, "").strip():
        dirs.append(Path(os.environ[BASELINES_ENV]).expanduser())
    root = checkout_root()
    if root is not None:
        dirs.append(root / "baselines")
    return dirs


def default_baseline(gpu_slug: str) -> tuple[Path | None, list[Path]]:
    """``(baseline file for gpu_slug or None, the candidate paths looked at)``.

    Raises:
        UsageError: ``$CUDAGRAPH_BENCH_BASELINES`` is set to something that is not a folder (not silently the
            checkout's)."""
    from cudagraph_bench.errors import UsageError

    env = os.environ.get(BASELINES_ENV, "").strip()
    if env and not Path(env).expanduser().is_dir():
        raise UsageError(f"${BASELINES_ENV} is {env!r}, which is not a folder: set it to the folder that holds "
                         f"{gpu_slug}.json, or unset it to use the checkout's baselines/")
    tried = [d / f"{gpu_slug}.json" for d in baseline_dirs()]
    return next((p for p in tried if p.is_file()), None), tried


def default_storage() -> str:
    """Where saved-run ids are looked up: ``$CUDAGRAPH_BENCH_STORAGE``, else the checkout's ``.benchmarks``, else
    ``.benchmarks`` of the working directory (pytest-benchmark's default for an installed copy)."""
    if os.environ.get(STORAGE_ENV, "").strip():
        return os.environ[STORAGE_ENV]
    root = checkout_root()
    return str(root / ".benchmarks") if root is not None else ".benchmarks"
