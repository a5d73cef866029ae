"""The package is a clean stack: no import circle, and no layer imports one above it.

The layers, from the foundation up (docs/layout.md): _version, errors and config;
validation; kernels; models (with evaluate and synthetic); io; learn; engine;
persist; estimators; plotting; jobs; cli. Every import statement counts,
also those inside functions: a lazy import hides a circle, it does not remove it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lsdask"

#: each top-level entry of the package and its floor; an entry imports only
#: entries on lower floors (and modules of its own entry)
FLOORS = {
    "_version": 0,
    "errors": 0,
    "config": 0,
    "validation": 1,
    "kernels": 2,
    "models": 3,
    "evaluate": 3,
    "synthetic": 3,
    "io": 4,
    "learn": 5,
    "engine": 6,
    "persist": 7,
    "estimators": 8,
    "plotting": 9,
    "jobs": 10,
    "cli": 11,
    "__main__": 12,
    # the package itself, and the deprecated shims of moved modules
    "": 13,
    "checkpoint": 13,
    "persist_gmm": 13,
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("lsdask", *path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The lsdask modules that ``name`` imports (a package's __init__ where a
    name is not a module of its own), with the packages above them: importing
    ``lsdask.a.b.c`` runs ``lsdask/a/__init__`` and ``lsdask/a/b/__init__`` too
    (not counted for the packages ``name`` is inside, which run first, nor for
    ``lsdask`` itself, above every layer)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "lsdask")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            if origin.split(".")[0] != "lsdask":
                continue
            for alias in node.names:
                sub = f"{origin}.{alias.name}"
                found.add(sub if sub in modules else origin)
    return found | _parent_packages(name, found, modules)


def _parent_packages(name: str, imported: set[str], modules: dict[str, Path]) -> set[str]:
    """The packages between ``lsdask`` and each module of ``imported`` that
    ``name`` is not inside (``lsdask.a`` and ``lsdask.a.b`` for ``lsdask.a.b.c``)."""
    parents = set()
    for module in imported:
        parts = module.split(".")
        for end in range(2, len(parts)):
            package = ".".join(parts[:end])
            inside = name == package or name.startswith(package + ".")
            if package in modules and not inside:
                parents.add(package)
    return parents


def _entry(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_every_entry_has_a_floor(graph) -> None:
    assert {_entry(m) for m in graph} <= set(FLOORS), (
        "a new top-level module or package: give it a floor in FLOORS and docs/layout.md"
    )


def test_no_layer_imports_one_above_it(graph) -> None:
    upward = sorted(
        f"{a} -> {b}"
        for a, deps in graph.items()
        for b in deps
        if _entry(a) != _entry(b) and FLOORS[_entry(b)] >= FLOORS[_entry(a)]
    )
    assert upward == []


def test_no_import_circle(graph) -> None:
    # Tarjan's strongly connected components; a component of more than one
    # module, or a module importing itself, is a circle
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert circles == []


def test_the_check_finds_a_circle_and_an_upward_import(tmp_path) -> None:
    """The checks above can fail: a planted circle and upward import are found."""
    pkg = tmp_path / "lsdask"
    (pkg / "models").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "models" / "__init__.py").write_text("")
    (pkg / "models" / "a.py").write_text("from lsdask.models import b\n")
    (pkg / "models" / "b.py").write_text("def f():\n    from lsdask.models.a import x\n")
    (pkg / "errors.py").write_text("from lsdask.models.a import y\n")
    modules = {
        "lsdask.models.a": pkg / "models" / "a.py",
        "lsdask.models.b": pkg / "models" / "b.py",
        "lsdask.errors": pkg / "errors.py",
        "lsdask.models": pkg / "models" / "__init__.py",
    }
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert graph["lsdask.models.a"] == {"lsdask.models.b"}
    assert graph["lsdask.models.b"] == {"lsdask.models.a"}
    assert graph["lsdask.errors"] == {"lsdask.models.a", "lsdask.models"}
    with pytest.raises(AssertionError):
        test_no_layer_imports_one_above_it(graph)
    with pytest.raises(AssertionError):
        test_no_import_circle(graph)


def test_the_check_finds_a_circle_through_a_package_init(tmp_path) -> None:
    """Importing ``lsdask.io.ingest.words`` runs ``lsdask/io/ingest/__init__``: a
    circle that only closes through that package is found all the same."""
    files = {
        "lsdask.io": "io/__init__.py",
        "lsdask.io.corpus": "io/corpus/__init__.py",
        "lsdask.io.corpus.store": "io/corpus/store.py",
        "lsdask.io.ingest": "io/ingest/__init__.py",
        "lsdask.io.ingest.words": "io/ingest/words.py",
    }
    code = {
        "lsdask.io.corpus.store": "from lsdask.io.ingest.words import Tokenizer\n",
        "lsdask.io.ingest": "from lsdask.io.corpus.store import Corpus\n",
    }
    modules = {}
    for name, relative in files.items():
        path = tmp_path / "lsdask" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code.get(name, ""))
        modules[name] = path
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    # the packages above the imported module, but not lsdask.io, which both are inside
    assert graph["lsdask.io.corpus.store"] == {"lsdask.io.ingest.words", "lsdask.io.ingest"}
    assert graph["lsdask.io.ingest"] == {"lsdask.io.corpus.store", "lsdask.io.corpus"}
    test_no_layer_imports_one_above_it(graph)  # one layer: nothing upward
    with pytest.raises(AssertionError):
        test_no_import_circle(graph)
