"""Shared by the CLI tests: the real H200 run fixture and small helpers around ``cli.main``."""

import json
from pathlib import Path

from cudagraph_bench import cli

FIXTURE = Path(__file__).parent / "data" / "h200-forward.json"
DOC = json.loads(FIXTURE.read_text())
TIME_FIELDS = ("min", "max", "mean", "stddev", "median", "iqr", "q1", "q3", "ld15iqr", "hd15iqr", "total")


def run_cli(capsys, *argv):
    """``cli.main(argv)`` -> (exit code, stdout, stderr)."""
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def write(doc, path):
    """Write ``doc`` as JSON to ``path`` (parents created); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path
