"""The committed evidence fits and is listed: every file under ``results/`` has a row in its GPU folder's
manifest (``results/<gpu>/README.md``) and every row names a file that exists; every ``cudagraph-bench`` command a
manifest gives parses today; the runs are stored gzip-compressed; ``results/`` stays within its size budget."""

import json
import re
import shlex
from pathlib import Path

import pytest

pytestmark = pytest.mark.transformers_free

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
#: Most bytes ``results/`` may hold: room for the next runs (a rebuilt baseline, presets) within the GPU call's
#: 64 MiB limit on the whole tracked tree.
MAX_RESULTS_BYTES = 8_000_000


def results_files() -> list[Path]:
    """Every file on disk under ``results/`` (a clean clone holds the tracked ones; a file not yet committed must
    be listed too before it is)."""
    return sorted(p for p in RESULTS.rglob("*") if p.is_file())


def manifest_rows(manifest: Path) -> list[str]:
    """The file paths (relative to the manifest's folder) in the first cell of the manifest's table rows."""
    rows = []
    for line in manifest.read_text(encoding="utf-8").splitlines():
        match = re.match(r"\|\s*`([^`]+)`\s*\|", line)
        if match:
            rows.append(match.group(1))
    return rows


def gpu_folders() -> list[Path]:
    """``results/<gpu>/`` of every file under results/ (each GPU folder has its own manifest)."""
    return sorted({RESULTS / p.relative_to(RESULTS).parts[0] for p in results_files()})


def test_every_results_file_is_in_its_manifest_and_every_row_exists():
    files = results_files()
    assert files, "results/ holds no files"
    for folder in gpu_folders():
        manifest = folder / "README.md"
        assert manifest.is_file(), f"{folder.relative_to(ROOT)} has no README.md manifest"
        rows = manifest_rows(manifest)
        assert len(rows) == len(set(rows)), f"{manifest.relative_to(ROOT)} lists a file twice"
        listed = {folder / r for r in rows}
        present = {p for p in files if folder in p.parents}
        assert not present - listed, (f"{manifest.relative_to(ROOT)} does not list "
                                      f"{sorted(str(p.relative_to(folder)) for p in present - listed)}: add a row")
        assert not listed - present, (f"{manifest.relative_to(ROOT)} lists files that are not committed: "
                                      f"{sorted(str(p.relative_to(folder)) for p in listed - present)}")


#: The manifests' placeholders in commands -> a value of their kind.
PLACEHOLDERS = {"CPUS": "0-15", "DIR": "out/selftest", "S": "430"}


def test_every_cudagraph_bench_command_of_a_manifest_parses(monkeypatch):
    """Each backquoted ``cudagraph-bench COMMAND ARGS`` goes through the CLI's parser (and ``run``'s matrix: its
    ``--config`` and the arguments after ``--``), nothing run: a command the CLI refuses reproduces nothing."""
    from cudagraph_bench.cli import build_parser
    from cudagraph_bench.commands import run
    from cudagraph_bench.errors import UsageError

    monkeypatch.chdir(ROOT)         # the commands are given from the checkout's root
    commands = [(folder, c) for folder in gpu_folders()     # a command with its arguments, not one named in prose
                for c in re.findall(r"`(cudagraph-bench [a-z-]+ [^`]+)`", (folder / "README.md").read_text("utf-8"))]
    assert any(" run " in c for _, c in commands)
    for folder, command in commands:
        argv = [PLACEHOLDERS.get(word, word) for word in shlex.split(command)[1:]]
        try:
            args, extra = build_parser().parse_known_args(argv)
            assert not extra, f"{folder.name}: {command}: unrecognized {extra}"
            if args.command == "run":
                run.matrices(args)
        except (SystemExit, UsageError) as exc:
            pytest.fail(f"{folder.name}/README.md: {command}: the CLI refuses it: {exc}")


def test_runs_are_stored_compressed():
    """A plain ``.json`` under results/ is another tool's output (graphs.cu, compute-sanitizer), never a run."""
    plain_runs = [p.relative_to(ROOT) for p in results_files()
                  if p.suffix == ".json" and "benchmarks" in json.loads(p.read_text(encoding="utf-8"))]
    assert not plain_runs, f"commit runs as FILE.json.gz (gzip -9 -n FILE.json): {plain_runs}"


def test_results_fit_the_budget():
    size = sum(p.stat().st_size for p in results_files())
    assert size <= MAX_RESULTS_BYTES, (f"results/ holds {size / 1e6:.1f} MB, more than {MAX_RESULTS_BYTES / 1e6:g} MB: "
                                       "drop superseded runs (git history keeps them) or compress")


@pytest.mark.parametrize("line, path", [("| `forward/a.json.gz` | what | cmd |", "forward/a.json.gz"),
                                        ("| file | what it is |", None), ("text `x.json` here", None)])
def test_manifest_rows_are_the_backquoted_first_cells(tmp_path, line, path):
    manifest = tmp_path / "README.md"
    manifest.write_text(f"# m\n\n{line}\n")
    assert manifest_rows(manifest) == ([path] if path else [])
