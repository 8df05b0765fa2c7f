"""The committed README results block and docs/*.md are what scripts/regenerate_docs.sh makes from the
committed H200 JSON: nobody edited a number by hand, and nobody forgot to regenerate after a new run.

The script's own commands are taken from it (run with a recorder in place of the ``cudagraph-bench`` command,
its ``CG``) and run here in-process, in a scratch tree that sees the committed ``results/`` and ``baselines/``, with ``report
--no-plots``: every page is regenerated and compared, the PNGs (drawn from the same data) are not redrawn."""

import shutil
import subprocess
from pathlib import Path

import pytest

from cudagraph_bench import cli

pytestmark = pytest.mark.transformers_free

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "regenerate_docs.sh"
#: Pages under docs/ that are written by hand, not by the script.
HAND_WRITTEN = {"docs/architecture.md", "docs/running.md", "docs/measurement.md", "docs/gate.md", "docs/ci.md"}
#: Exit codes the script accepts per command: calibrate's 1 reports false alarms on its page, selftest's 1 a
#: missed target on its page.
ACCEPTED_RC = {"report": {0}, "launch-report": {0}, "calibrate": {0, 1}, "selftest": {0, 1}, "zoo": {0, 1}}


def script_commands(tmp_path: Path) -> list[list[str]]:
    """The ``cudagraph-bench`` argument lists scripts/regenerate_docs.sh runs, in order (paths relative to the
    repository root, globs expanded by the script's shell), recorded without running them."""
    record, recorder = tmp_path / "commands.tsv", tmp_path / "record.sh"
    recorder.write_text('for a in "$@"; do printf "%s\\t" "$a"; done >> "$CGB_RECORD"; echo >> "$CGB_RECORD"\n')
    proc = subprocess.run(["bash", str(SCRIPT)], env={"PATH": "/usr/bin:/bin", "CG": f"bash {recorder}",
                                                      "CGB_RECORD": str(record)},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [line.rstrip("\t").split("\t") for line in record.read_text().splitlines()]


def committed_pages() -> set[str]:
    return {"README.md"} | {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")} - HAND_WRITTEN


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_docs_are_regenerated_from_the_committed_json(tmp_path, monkeypatch, capsys):
    commands = script_commands(tmp_path)
    assert commands and {c[0] for c in commands} <= set(ACCEPTED_RC), commands
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(ROOT / "README.md", tree / "README.md")
    (tree / "results").symlink_to(ROOT / "results")
    (tree / "baselines").symlink_to(ROOT / "baselines")              # the self-test's runs are gated against it
    monkeypatch.chdir(tree)
    for argv in commands:
        rc = cli.main([*argv, "--no-plots"] if argv[0] == "report" else argv)
        assert rc in ACCEPTED_RC[argv[0]], (argv, capsys.readouterr().err[-2000:])
    written = {"README.md"} | {p.relative_to(tree).as_posix() for p in (tree / "docs").rglob("*.md")}
    assert written == committed_pages(), "scripts/regenerate_docs.sh writes other pages than docs/ holds"
    for page in sorted(written):
        assert (tree / page).read_text() == (ROOT / page).read_text(), (
            f"{page} differs from what scripts/regenerate_docs.sh makes from results/: run it and commit")
