"""The lab's code is held to the toolkit's rules (the checks of tests/unit/project/, run on deployment_toolkit_lab/):
modules under 600 lines (over 400 saying why), no function over 8 parameters, library code that logs instead of
printing (the commands, the entry point and pack_bench print), only the README's exit codes, no import cycle."""
from __future__ import annotations

from pathlib import Path

from conftest import toolkit_test

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "deployment_toolkit_lab"
COMMAND_LAYER = (LAB / "commands", LAB / "__main__.py", LAB / "pack_bench.py", LAB / "scripts")
size = toolkit_test("unit/project/test_module_size.py")
shape = toolkit_test("unit/project/test_code_shape.py")
exits = toolkit_test("unit/project/test_exit_codes.py")
cycles = toolkit_test("unit/project/test_import_cycles.py")


def _files() -> list[Path]:
    return sorted(LAB.rglob("*.py"))


def _command_layer(path: Path) -> bool:
    return any(path == part or part in path.parents for part in COMMAND_LAYER)


def test_modules_are_short_or_say_why():
    assert not size.oversized_without_reason(LAB), size.oversized_without_reason(LAB)
    assert not size.too_long(LAB), size.too_long(LAB)


def test_no_function_takes_more_than_8_parameters():
    found = [f for path in _files() for f in shape.too_many_parameters(path)]
    assert not found, f"pass a config dataclass instead: {found}"


def test_library_code_logs_instead_of_printing():
    found = [f for path in _files() if not _command_layer(path) for f in shape.prints(path)]
    assert not found, f"library code logs (logging.getLogger(__name__)) and the command layer prints: {found}"


def test_every_code_a_command_returns_is_in_the_readme_table():
    table = exits.readme_codes()
    commands = [p for p in _files() if _command_layer(p) and "scripts" not in p.parts]
    stray = {str(p.relative_to(ROOT)): sorted(exits.returned_codes(p) - table) for p in commands
             if exits.returned_codes(p) - table}
    assert not stray, f"exit codes the README's table does not list: {stray}"


def test_the_lab_has_no_import_cycle(monkeypatch):
    monkeypatch.setattr(cycles, "PACKAGE", "deployment_toolkit_lab")
    modules = cycles.module_files(LAB, "deployment_toolkit_lab")
    assert len(modules) > 20, "walked too few modules"
    graph = cycles.import_graph(modules)
    assert not cycles.find_cycles(graph), cycles.find_cycles(graph)
    assert not cycles.find_cycles(cycles.package_imports(graph))
