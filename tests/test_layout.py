"""The package layout is its architecture: every module belongs to one layer, imports only point down the
layers, and the layers that read and render results import no torch or transformers, so that a CPU-only
machine can gate, compare and report. Read from the source with ``ast`` (imports inside functions count),
so nothing is imported here."""

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.transformers_free

PKG = Path(__file__).resolve().parents[1] / "src" / "cudagraph_bench"

#: Top-level modules every layer may import; they import no layer.
SHARED = {"options", "defaults", "parsers", "cases", "variants", "journal", "errors", "envinfo", "fsio", "paths", "table",
          "zoo_keys"}
#: Top-level entry points: the console script (cli) and ``python -m`` (__main__).
ENTRY = {"cli", "__main__"}

#: layer -> the layers its modules may import (its own included). Two stacks share the bottom:
#: plugin > measure > capture > models for measuring (in the pytest process), entry > commands > runner / report >
#: results for launching and reading runs (no torch); measure may use the torch-free arithmetic of results.
ALLOWED = {
    "shared": {"shared"},
    "models": {"shared", "models"},
    "capture": {"shared", "models", "capture"},
    "results": {"shared", "results"},
    "measure": {"shared", "models", "capture", "results", "measure"},
    "plugin": {"shared", "models", "capture", "results", "measure", "plugin"},
    "report": {"shared", "results", "report"},
    "runner": {"shared", "results", "runner"},
    "commands": {"shared", "results", "report", "runner", "commands"},
    "entry": {"shared", "results", "report", "runner", "commands", "entry"},
}
#: The self-test's folder holds one feature across the layers: each of its modules keeps the layer of what it does.
SELFTEST_LAYERS = {"selftest": "shared", "selftest.faults": "measure", "selftest.eager_layer": "measure",
                   "selftest.planned_runs": "runner", "selftest.verdicts": "results",
                   "selftest.command": "commands"}
#: Layers that import no torch or transformers, not even inside a function, and import only modules that do not
#: either: the layers that read runs, launch pytest and front the commands, so a CPU-only machine gates a run.
NO_TORCH_LAYERS = {"results", "report", "runner", "commands", "entry"}
NO_TORCH_MODULES = SHARED - {"envinfo"}
HEAVY = ("torch", "transformers")


def modules() -> dict[str, Path]:
    """``"results.gate"`` -> its path, for every module of the package (``__init__`` as the package)."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = path.relative_to(PKG).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = modules()


def layer_of(name: str) -> str:
    if name in SELFTEST_LAYERS:
        return SELFTEST_LAYERS[name]
    head = name.split(".")[0]
    if "." not in name and head in SHARED | {""}:
        return "shared"
    if "." not in name and head in ENTRY:
        return "entry"
    if head in ALLOWED and head not in ("shared", "entry"):
        return head
    raise AssertionError(f"cudagraph_bench.{name} belongs to no layer: add it to the table of tests/test_layout.py")


def imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every import of the file, at module level or inside a function; imports of
    the package are given relative to it (``"results.gate"``), a name imported from a package resolves to
    its submodule when there is one."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "cudagraph_bench" or node.module.startswith("cudagraph_bench."):
                base = node.module[len("cudagraph_bench."):] if "." in node.module else ""
                for a in node.names:
                    sub = f"{base}.{a.name}" if base else a.name
                    out.append((node.lineno, "cudagraph_bench." + (sub if sub in MODULES else base)))
            else:
                out.append((node.lineno, node.module))
    return out


def package_imports(path: Path) -> list[tuple[int, str]]:
    return [(line, m[len("cudagraph_bench."):] if m != "cudagraph_bench" else "")
            for line, m in imports(path) if m == "cudagraph_bench" or m.startswith("cudagraph_bench.")]


def test_every_module_has_a_layer():
    for name in MODULES:
        if name:
            layer_of(name)


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n))
def test_imports_only_point_down_the_layers(name):
    layer = layer_of(name)
    wrong = [f"line {line}: cudagraph_bench.{target} ({layer_of(target)})"
             for line, target in package_imports(MODULES[name]) if layer_of(target) not in ALLOWED[layer]]
    assert not wrong, f"cudagraph_bench.{name} ({layer}) imports a higher layer: {wrong}"


def no_torch_module(name: str) -> bool:
    return layer_of(name) in NO_TORCH_LAYERS or name in NO_TORCH_MODULES or name == ""


@pytest.mark.parametrize("name", sorted(n for n in MODULES if no_torch_module(n)))
def test_results_report_and_the_command_front_ends_import_no_torch(name):
    found = imports(MODULES[name])
    heavy = [f"line {line}: {m}" for line, m in found if m.split(".")[0] in HEAVY]
    assert not heavy, f"cudagraph_bench.{name} imports {heavy}"
    via = [f"line {line}: cudagraph_bench.{m}" for line, m in package_imports(MODULES[name]) if not no_torch_module(m)]
    assert not via, f"cudagraph_bench.{name} imports modules that may import torch: {via}"


#: Most lines a module of the package may have: a longer one holds more than one concern; split it.
MAX_MODULE_LINES = 500


def test_no_module_is_longer_than_the_limit():
    lines = {name or "__init__": len(path.read_text(encoding="utf-8").splitlines()) for name, path in MODULES.items()}
    long = {name: n for name, n in lines.items() if n > MAX_MODULE_LINES}
    assert not long, f"modules longer than {MAX_MODULE_LINES} lines (split them): {long}"


def test_no_two_modules_share_a_basename():
    """A module's file name says what it is on its own (in a traceback, an editor tab, a ``-p`` option): no two
    modules of the package have the same one, ``__init__.py`` aside."""
    by_stem: dict[str, list[str]] = {}
    for path in sorted(PKG.rglob("*.py")):
        if path.name != "__init__.py":
            by_stem.setdefault(path.stem, []).append(path.relative_to(PKG).as_posix())
    shared = {stem: paths for stem, paths in by_stem.items() if len(paths) > 1}
    assert not shared, f"modules that share a file name (rename all but one): {shared}"


def test_the_checks_see_imports_inside_functions(tmp_path):
    """The walk finds a lazy import, and a name imported from a package resolves to its module."""
    src = tmp_path / "m.py"
    src.write_text("def f():\n    import torch\n    from cudagraph_bench.measure import forward_variants\n")
    assert imports(src) == [(2, "torch"), (3, "cudagraph_bench.measure.forward_variants")]
    assert layer_of("measure.forward_variants") == "measure" and "measure" not in ALLOWED["report"]


def _readme_layout_rows() -> dict[str, set[str]]:
    """docs/architecture.md's layout table: the first cell of each row -> the module names in backquotes of its
    second."""
    import re

    readme = (PKG.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = readme[readme.index("| layer | modules | may import |"):]
    table = table[:table.index("\n\n")]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0].strip("`").split("/")[0]] = set(re.findall(r"`([a-z_]+)`", cells[1]))
    return rows


@pytest.mark.parametrize("package", ["plugin", "runner", "commands", "report", "measure", "capture", "results",
                                     "models", "selftest"])
def test_architecture_layout_table_names_every_module_of_the_layer(package):
    modules = {p.stem for p in (PKG / package).glob("*.py") if p.stem != "__init__"}
    assert modules, package
    missing = modules - _readme_layout_rows()[package]
    assert not missing, f"docs/architecture.md's layout table, row {package}/, does not name {sorted(missing)}"


HAND_WRITTEN_DOCS = ["README.md", "docs/architecture.md", "docs/running.md", "docs/measurement.md", "docs/gate.md",
                     "docs/ci.md"]


def _names(node) -> list[str]:
    """The names a statement binds: a function, a class, an assignment's plain targets, an import's names."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [t.id for t in targets if isinstance(t, ast.Name)]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name for a in node.names]
    return []


def _defined(path: Path, names: list[str]) -> bool:
    """Whether ``names`` (``["Session", "measure"]``) is a top-level name of the module at ``path`` and, after the
    first, a member of the class it names (read with ``ast``)."""
    scope = ast.parse(path.read_text(encoding="utf-8")).body
    for name in names:
        found = next((node for node in scope if name in _names(node)), None)
        if found is None:
            return False
        scope = getattr(found, "body", [])
    return True


@pytest.mark.parametrize("doc", HAND_WRITTEN_DOCS)
def test_the_code_a_hand_written_page_names_exists(doc):
    """Every ``layer/module.name[.member]`` and ``layer/module.py`` in backquotes names a module of the package and,
    where given, a name defined in it: the pages say where things are, and a fold or a rename keeps them true."""
    import re

    text = (PKG.parents[1] / doc).read_text(encoding="utf-8")
    wrong = []
    for layer, module, rest in re.findall(r"`(?:cudagraph_bench/)?([a-z_]+)/([a-z_]+)(?:\.py|\.([A-Za-z_][\w.]*))?`",
                                          text):
        path = PKG / layer / f"{module}.py"
        if (PKG / layer).is_dir() and not (path.is_file() and (not rest or _defined(path, rest.split(".")))):
            wrong.append(f"{layer}/{module}{'.' + rest if rest else ''}")
    assert not wrong, f"{doc} names code that is not there: {wrong}"
