"""No import cycle anywhere in deployment_toolkit (issue 19): the graph is read from the source (AST), function-level
imports included, so a cycle hidden behind a lazy `from ..report import ...` inside a function is still one.

An edge goes to the module named: `from ..report import tables` -> report.tables, `from ..report import build_report`
-> report (its __init__), as import-linter counts them; imports under `if TYPE_CHECKING:` never run and are left
out."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import deployment_toolkit

PACKAGE = "deployment_toolkit"
ROOT = Path(deployment_toolkit.__file__).resolve().parent


def module_files(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """Module name -> file, for every .py under the package (a package is named by its __init__)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every Import/ImportFrom node, at any depth, outside `if TYPE_CHECKING:` bodies."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    parts = parts[:len(parts) - (node.level - 1)]
    return ".".join([*parts, node.module] if node.module else parts)


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the package modules its code imports (anywhere in the file)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _base(name, is_package, node)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                if target == PACKAGE or target.startswith(PACKAGE + "."):
                    while target not in modules and "." in target:  # `import a.b.name` where name is not a module
                        target = target.rsplit(".", 1)[0]
                    if target != name:
                        edges.add(target)
        graph[name] = edges
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a -> ... -> a) for each strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = [0]

    def strongconnect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strongconnect(w)
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
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return [_one_cycle(graph, set(c), c[0]) for c in components]


def _one_cycle(graph: dict[str, set[str]], component: set[str], start: str) -> list[str]:
    """The shortest path start -> ... -> start inside the component (breadth first)."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, start]
                if w not in previous:
                    previous[w] = v
                    nxt.append(w)
        frontier = nxt
    return [start]


def test_the_package_has_no_import_cycle():
    modules = module_files()
    assert len(modules) > 50, "walked too few modules: is the package path right?"
    cycles = find_cycles(import_graph(modules))
    assert not cycles, "import cycles in deployment_toolkit:\n" + "\n".join(" -> ".join(c) for c in cycles)


@pytest.fixture()
def fake_package(tmp_path) -> Path:
    root = tmp_path / PACKAGE
    for sub in ("perf", "report"):
        (root / sub).mkdir(parents=True)
        (root / sub / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    return root


def test_a_function_level_import_cycle_is_found(fake_package):
    """The shape issue 19 found: the sweep builds the report inside a function, the report imports the sweep."""
    (fake_package / "perf" / "sweep.py").write_text(
        "def run():\n    from ..report.build import build_report\n    return build_report\n")
    (fake_package / "report" / "build.py").write_text("from ..perf.sweep import run\n")
    cycles = find_cycles(import_graph(module_files(fake_package)))
    assert cycles == [[f"{PACKAGE}.perf.sweep", f"{PACKAGE}.report.build", f"{PACKAGE}.perf.sweep"]]


def test_a_cycle_through_a_package_init_is_found(fake_package):
    """A name the package's __init__ re-exports: the edge goes to the __init__, which may import back."""
    (fake_package / "perf" / "sweep.py").write_text("from ..report import full_table\n")
    (fake_package / "report" / "__init__.py").write_text("from .tables import full_table\n")
    (fake_package / "report" / "tables.py").write_text("from ..perf.sweep import run\n")
    cycles = find_cycles(import_graph(module_files(fake_package)))
    assert cycles == [[f"{PACKAGE}.perf.sweep", f"{PACKAGE}.report", f"{PACKAGE}.report.tables", f"{PACKAGE}.perf.sweep"]]


def test_type_checking_imports_and_own_package_are_not_cycles(fake_package):
    (fake_package / "perf" / "__init__.py").write_text("from .sweep import run\n")
    (fake_package / "perf" / "sweep.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..report.build import X\ndef run(): pass\n")
    (fake_package / "report" / "build.py").write_text("from ..perf.sweep import run\n")
    assert find_cycles(import_graph(module_files(fake_package))) == []


# ---- docs/ARCHITECTURE.md stays true -------------------------------------------------------------------------

ARCHITECTURE = ROOT.parent / "docs" / "ARCHITECTURE.md"


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(root)"


def package_imports(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Top-level package (or module) of deployment_toolkit -> the other top-level ones its modules import."""
    out: dict[str, set[str]] = {package_of(m): set() for m in graph}
    for module, targets in graph.items():
        out[package_of(module)] |= {package_of(t) for t in targets} - {package_of(module)}
    return out


def documented_layers(text: str) -> dict[str, int]:
    """ARCHITECTURE.md's ranked list of layers, from the bottom: `0. `a`, `b`: why` -> {a: 0, b: 0}."""
    section = text.split("## Layers, from the bottom", 1)[1].split("\n## ", 1)[0]
    layers: dict[str, int] = {}
    for line in section.splitlines():
        rank, dot, rest = line.partition(". ")
        if dot and rank.strip().isdigit():
            names = rest.split(":", 1)[0]
            for name in (n.strip().strip("`") for n in names.split(",")):
                if name:
                    layers[name] = int(rank)
    return layers


def layer_violations(imports: dict[str, set[str]], layers: dict[str, int]) -> list[str]:
    """Each import of a package in its own layer or one above it, in words."""
    return [f"{p} (layer {layers[p]}) imports {q} (layer {layers[q]})" for p in sorted(imports)
            for q in sorted(imports[p]) if p in layers and q in layers and layers[q] >= layers[p]]


def test_every_package_imports_only_the_layers_below_it():
    """The ranked list in docs/ARCHITECTURE.md is the rule: a package imports only packages of lower layers,
    imports inside functions included (issue 56)."""
    actual = package_imports(import_graph(module_files()))
    layers = documented_layers(ARCHITECTURE.read_text())
    assert sorted(layers) == sorted(actual), (f"docs/ARCHITECTURE.md's layers list other packages than exist: "
                                              f"missing {sorted(set(actual) - set(layers))}, "
                                              f"gone {sorted(set(layers) - set(actual))}")
    wrong = layer_violations(actual, layers)
    assert not wrong, "imports against the layers of docs/ARCHITECTURE.md:\n" + "\n".join(wrong)


def test_the_layer_check_fails_when_a_lower_package_imports_a_higher_one(fake_package):
    """perf (a measuring layer) reaching up into search inside a function is found, and so is a same-layer import."""
    (fake_package / "search").mkdir()
    (fake_package / "search" / "__init__.py").write_text("")
    (fake_package / "search" / "engine.py").write_text("from ..perf import sweep\n")
    (fake_package / "perf" / "sweep.py").write_text("def run():\n    from ..search.engine import x\n")
    (fake_package / "report" / "build.py").write_text("from ..perf import sweep\n")
    text = "## Layers, from the bottom\n\n0. `report`: tables\n1. `perf`: measuring\n2. `search`: the search\n"
    layers = documented_layers(text)
    assert layers == {"report": 0, "perf": 1, "search": 2}
    imports = package_imports(import_graph(module_files(fake_package)))
    assert layer_violations(imports, layers) == ["perf (layer 1) imports search (layer 2)",
                                                 "report (layer 0) imports perf (layer 1)"]
    del imports["perf"], imports["report"]
    assert layer_violations(imports, layers) == []


def test_no_package_imports_another_that_imports_it_back():
    """One direction between packages, not only between modules (issue 27): counting imports inside functions and
    a submodule's package __init__ (which Python runs first), no two top-level packages reach each other."""
    packages = package_imports(import_graph(module_files()))
    cycles = find_cycles(packages)
    assert not cycles, "package cycles in deployment_toolkit:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_package_check_sees_a_cycle_between_two_packages_through_different_modules(fake_package):
    """The shape the module-level check missed: perf.a -> report.b and report.c -> perf.d, no module cycle."""
    (fake_package / "perf" / "a.py").write_text("def f():\n    from ..report.b import x\n")
    (fake_package / "perf" / "d.py").write_text("")
    (fake_package / "report" / "b.py").write_text("x = 1\n")
    (fake_package / "report" / "c.py").write_text("from ..perf.d import *\n")
    graph = import_graph(module_files(fake_package))
    assert find_cycles(graph) == []
    assert find_cycles(package_imports(graph)) == [["perf", "report", "perf"]]
