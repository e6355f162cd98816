"""The product never imports the lab (issue 45, item 1): the toolkit's own benchmarks, the corpus, the comparisons
with Model Analyzer and the result housekeeping live in deployment_toolkit_lab/, which imports deployment_toolkit;
no module of deployment_toolkit imports deployment_toolkit_lab, not even inside a function or by name at run time,
so a user's install works without the lab. Read from the source (AST): this test imports nothing of the lab."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PRODUCT = ROOT / "deployment_toolkit"
LAB = "deployment_toolkit_lab"
# calls that import a module named by a string
DYNAMIC = {"import_module", "__import__", "run_module", "find_spec"}


def _is_lab(name: str | None) -> bool:
    return bool(name) and (name == LAB or name.startswith(LAB + "."))


def lab_imports(path: Path) -> list[str]:
    """file:line of every import of the lab in one module: import statements anywhere (functions, TYPE_CHECKING
    blocks included) and import_module / __import__ / run_module / find_spec of a string naming it."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str | None] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in DYNAMIC and isinstance(node.args[0].value, str):
                names = [node.args[0].value]
        if any(_is_lab(n) for n in names):
            found.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{node.lineno}")
    return found


def test_no_module_of_the_product_imports_the_lab():
    files = sorted(PRODUCT.rglob("*.py"))
    assert len(files) > 50, "walked too few modules: is the package path right?"
    found = [hit for path in files for hit in lab_imports(path)]
    assert not found, f"deployment_toolkit imports the lab (it must not; move the code or invert the import): {found}"


def test_the_triton_scripts_are_the_product_s():
    """The seed's scripts run product subcommands only; the lab's scripts live in deployment_toolkit_lab/scripts/."""
    found = [hit for path in sorted((ROOT / "triton").glob("*.py")) for hit in lab_imports(path)]
    assert not found, found


def test_the_check_sees_every_way_in(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import importlib\n"
                      "from typing import TYPE_CHECKING\n"
                      "if TYPE_CHECKING:\n    from deployment_toolkit_lab.corpus import run\n"
                      "def f():\n    import deployment_toolkit_lab.versus\n"
                      "    from deployment_toolkit_lab import matrix\n"
                      "    return importlib.import_module('deployment_toolkit_lab.commands.footprint')\n"
                      "def g():\n    return __import__('deployment_toolkit_lab')\n"
                      "import deployment_toolkit.labels  # not the lab\n"
                      "'deployment_toolkit_lab in a string is not an import'\n")
    assert [hit.split(":")[1] for hit in lab_imports(module)] == ["4", "6", "7", "8", "10"]
