"""Where the tools look for files by default, independent of the working directory (no torch).

A command that looks up a file the user did not name (the GPU's baseline, a saved-run id) resolves it
against, in order:

1. an environment variable (:data:`BASELINES_ENV`, :data:`STORAGE_ENV`), for installed copies and CI;
2. the cudagraph-bench checkout this package is imported from (``src/cudagraph_bench`` inside a folder
   whose ``pyproject.toml`` names the project: an editable install or ``PYTHONPATH=src``);
3. for saved runs only, pytest-benchmark's own default, ``./.benchmarks`` of the working directory
   (an installed package has no checkout to look in).

So ``cudagraph-bench gate RUN`` picks ``<checkout>/baselines/<gpu>.json`` from any folder, and says
where it looked when there is none.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Folder holding ``<gpu_slug>.json`` baselines, overriding the checkout's ``baselines/``.
BASELINES_ENV = "CUDAGRAPH_BENCH_BASELINES"
#: Folder of pytest-benchmark saved runs (``--benchmark-storage``), overriding the checkout's ``.benchmarks/``.
STORAGE_ENV = "CUDAGRAPH_BENCH_STORAGE"


def checkout_root() -> Path | None:
    """The cudagraph-bench checkout this package is imported from, or None for an installed copy."""
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
        UsageError: ``$CUDAGRAPH_BENCH_BASELINES`` is set to something that is not a folder (a typo
            would otherwise fall back to the checkout's baselines without a word)."""
    from cudagraph_bench.errors import UsageError

    env = os.environ.get(BASELINES_ENV, "").strip()
    if env and not Path(env).expanduser().is_dir():
        raise UsageError(f"${BASELINES_ENV} is {env!r}, which is not a folder: set it to the folder that holds "
                         f"{gpu_slug}.json, or unset it to use the checkout's baselines/")
    tried = [d / f"{gpu_slug}.json" for d in baseline_dirs()]
    return next((p for p in tried if p.is_file()), None), tried


def default_storage() -> str:
    """Default ``--storage``: ``$CUDAGRAPH_BENCH_STORAGE``, else the checkout's ``.benchmarks``, else
    ``.benchmarks`` of the working directory (pytest-benchmark's default for an installed copy)."""
    if os.environ.get(STORAGE_ENV, "").strip():
        return os.environ[STORAGE_ENV]
    root = checkout_root()
    return str(root / ".benchmarks") if root is not None else ".benchmarks"
