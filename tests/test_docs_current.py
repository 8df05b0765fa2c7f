"""The committed README results block and docs/*.md are what scripts/regenerate_docs.sh makes from the
committed H200 JSON: nobody edited a number by hand, and nobody forgot to regenerate after a new run."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", "docs/results.md", "docs/launch-overhead.md", "docs/compile/results.md", "docs/smoke/results.md",
         "docs/gate-noise.md", "docs/presets/results.md"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_docs_are_regenerated_from_the_committed_json(tmp_path):
    for name in ("README.md", "docs", "baselines", "results", "scripts"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    proc = subprocess.run(["bash", "scripts/regenerate_docs.sh"], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PY": sys.executable, "PYTHONPATH": str(ROOT / "src")},
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for page in PAGES:
        assert (tmp_path / page).read_text() == (ROOT / page).read_text(), (
            f"{page} differs from what scripts/regenerate_docs.sh makes from baselines/: run it and commit")
