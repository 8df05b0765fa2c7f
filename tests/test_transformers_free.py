"""Test modules marked ``transformers_free`` test only what imports no torch or transformers: the layers that read,
gate, compare and report runs. CI's pass against the oldest supported transformers (.ci/run) deselects them,
since a transformers release cannot change what they run. Read from the source with ``ast``, so nothing is
imported here; a marked module is held to:

- no import of torch, transformers, a module of the package that may import them (tests/test_layout.py's layers),
  or the test helpers that build models (``tiny_models``, ``in_process``);
- no fixture that builds a model or starts a pytest session (:data:`MODEL_FIXTURES`);
- no ``cudagraph-bench`` command that starts pytest processes (:data:`LAUNCHING`; ``selftest`` without ``--from``),
  except as bad input, which is refused before anything starts (``run_bad_input``), or ``--help``."""

import ast
from pathlib import Path

import pytest

from test_layout import MODULES, no_torch_module

TESTS = Path(__file__).resolve().parent
MARK = "transformers_free"
MODEL_FIXTURES = {"pytester", "tiny_gpt2_dir", "tiny_model", "tiny", "checkpoints", "in_process_pytest", "cgb",
                  "real_run"}
HELPERS_THAT_BUILD_MODELS = {"tiny_models", "in_process"}
LAUNCHING = {"run", "ab", "zoo"}
#: Functions of the tests that call ``cudagraph-bench``: the first string among their arguments is the command.
CLI_CALLS = {"run_cli", "main", "cli_main", "_main"}


def marked(tree: ast.Module) -> bool:
    """Whether the module's ``pytestmark`` names ``pytest.mark.transformers_free``."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            return any(isinstance(n, ast.Attribute) and n.attr == MARK for n in ast.walk(node.value))
    return False


MARKED = sorted(p.name for p in TESTS.glob("test_*.py") if marked(ast.parse(p.read_text(encoding="utf-8"))))


def _strings(node) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def violations(source: str) -> list[str]:
    """What keeps a test module's source from being transformers-free (empty when nothing does)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:     # a name from a package: its submodule, if one
            package = node.module.removeprefix("cudagraph_bench").lstrip(".")
            names = [f"cudagraph_bench.{package}.{a.name}".replace("..", ".")
                     if f"{package}.{a.name}".lstrip(".") in MODULES else node.module for a in node.names]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += [f"line {node.lineno}: fixture {a.arg}" for a in node.args.args if a.arg in MODEL_FIXTURES]
            continue
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in CLI_CALLS:
            words = _strings(ast.Module(body=[ast.Expr(a) for a in node.args], type_ignores=[]))
            command = words[0] if words else None
            if "--help" not in words and (command in LAUNCHING or (command == "selftest" and "--from" not in words)):
                found.append(f"line {node.lineno}: cudagraph-bench {command} starts pytest processes")
            continue
        else:
            continue
        for name in names:
            head = name.split(".")[0]
            package = name[len("cudagraph_bench."):] if name.startswith("cudagraph_bench.") else None
            if head in ("torch", "transformers") or head in HELPERS_THAT_BUILD_MODELS:
                found.append(f"line {node.lineno}: imports {name}")
            elif package is not None and package in MODULES and not no_torch_module(package):
                found.append(f"line {node.lineno}: imports {name}, which may import torch")
    return found


def test_the_oldest_transformers_pass_skips_only_a_part_of_the_suite():
    assert 5 <= len(MARKED) < len(list(TESTS.glob("test_*.py"))) // 2, MARKED


@pytest.mark.parametrize("name", MARKED)
def test_a_transformers_free_module_runs_nothing_transformers_could_change(name):
    assert violations((TESTS / name).read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("source, says", [
    ("import torch\n", "imports torch"),
    ("from cudagraph_bench.measure import case\n", "may import torch"),
    ("from tiny_models import TINY_CAUSAL\n", "imports tiny_models"),
    ("def test_x(tiny_gpt2_dir):\n    pass\n", "fixture tiny_gpt2_dir"),
    ("def test_x(capsys):\n    run_cli(capsys, 'run', '--models', 'gpt2')\n", "cudagraph-bench run starts"),
    ("def test_x(capsys):\n    cli.main(['selftest', '-o', 'x'])\n", "cudagraph-bench selftest starts"),
])
def test_the_rule_sees_each_way_into_transformers(source, says):
    assert any(says in v for v in violations(source)), violations(source)


@pytest.mark.parametrize("source", [
    "from cudagraph_bench.results import gate\nimport numpy\n",
    "def test_x(capsys):\n    run_cli(capsys, 'selftest', '--from', 'runs')\n",
    "def test_x(capsys):\n    run_bad_input(capsys, ['run', '--cpus', 'abc'])\n",
    "def test_x(capsys):\n    run_cli(capsys, 'run', '--help')\n",
])
def test_the_rule_lets_through_what_reads_runs(source):
    assert violations(source) == []
