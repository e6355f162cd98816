"""The shape issues 37 and 56 ask of the code, as checks that can fail: no function takes more than 8 parameters
(past that, its settings are a config dataclass), no product function is longer than 60 lines (def line to last
line: past that, it does several jobs, each a helper with a name), and library code never prints: it logs
(`logging.getLogger(__name__)`) or raises, and only the command layer (`commands/`, `__main__`, `cli`, `demo`,
`doctor`) writes to the console."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import deployment_toolkit

ROOT = Path(deployment_toolkit.__file__).resolve().parent
MAX_PARAMETERS = 8
MAX_FUNCTION_LINES = 60
COMMAND_LAYER = ("commands", "__main__.py", "cli.py", "demo.py", "doctor.py")
PACKAGES = sorted(p.name for p in ROOT.iterdir() if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py")


def _files(part: str, root: Path = ROOT) -> list[Path]:
    path = root / part
    return sorted(path.rglob("*.py")) if path.is_dir() else [path]


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT.parent)) if path.is_relative_to(ROOT.parent) else path.name


def too_many_parameters(path: Path, limit: int = MAX_PARAMETERS) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
            if len(names) > limit:
                found.append(f"{_shown(path)}:{node.lineno} {node.name} ({len(names)})")
    return found


def too_long(path: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """Functions (methods and nested ones too) whose def line to last line (ast's lineno..end_lineno) is over
    `limit` lines."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                found.append(f"{_shown(path)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def prints(path: Path) -> list[str]:
    return [f"{_shown(path)}:{node.lineno}" for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"]


@pytest.mark.parametrize("part", PACKAGES)
def test_no_function_takes_more_than_8_parameters(part):
    found = [f for path in _files(part) for f in too_many_parameters(path)]
    assert not found, f"pass a config dataclass instead of more than {MAX_PARAMETERS} parameters: {found}"


@pytest.mark.parametrize("part", PACKAGES)
def test_no_product_function_is_longer_than_60_lines(part):
    found = [f for path in _files(part) for f in too_long(path)]
    assert not found, (f"split these along their jobs into named helpers of at most {MAX_FUNCTION_LINES} lines: "
                       f"{found}")


@pytest.mark.parametrize("part", [p for p in PACKAGES if p not in COMMAND_LAYER])
def test_library_code_logs_instead_of_printing(part):
    found = [f for path in _files(part) for f in prints(path)]
    assert not found, f"library code logs (logging.getLogger(__name__)) and the command layer prints: {found}"


def test_the_checks_see_what_they_look_for(tmp_path):
    (tmp_path / "m.py").write_text("def f(a, b, c, d, e, f, g, h, i):\n    print(a)\n"
                                   "def g(self, a, b, c, d, e, f, g, h):\n    pass\n")
    assert [x.split(" ", 1)[1] for x in too_many_parameters(tmp_path / "m.py")] == ["f (9)"]
    assert len(prints(tmp_path / "m.py")) == 1
    body = "".join(f"    x{i} = {i}\n" for i in range(58))
    (tmp_path / "n.py").write_text(f"def short():\n{body}    return x0\n"  # 60 lines: allowed
                                   "class C:\n    def long(self):\n" + body.replace("    ", "        ")
                                   + "        pass\n        return x0\n")  # 61 lines, a method: too long
    assert [x.split(" ", 1)[1] for x in too_long(tmp_path / "n.py")] == ["long (61 lines)"]
