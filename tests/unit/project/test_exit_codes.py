"""The README's exit-code table is true for every command (issue 30): every literal code a command returns or
exits with is a row of the table, and 3 (the format cannot be built on this host) is convert_model.py's alone."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "deployment_toolkit"
ENTRY_POINTS = [*sorted((PACKAGE / "commands").glob("*.py")),
                PACKAGE / "demo.py", PACKAGE / "doctor.py", PACKAGE / "cli.py"]
NAMED = {"EXIT_NOT_MET": 1, "EXIT_USER_ERROR": 2, "EXIT_NO_CONFIG": 1, "EXIT_SIGTERM": 143}


def readme_codes() -> set[int]:
    table = (ROOT / "README.md").read_text().split("### Exit codes", 1)[1].split("\n\n", 2)[1]
    codes = set()
    for line in table.splitlines():
        cell = line.strip("|").split("|")[0].strip()
        codes |= {int(c) for c in re.findall(r"\d+", cell)}
    return codes


def returned_codes(path: Path) -> set[int]:
    """Integer codes a module's functions return, pass to sys.exit/exit, or name through an EXIT_ constant."""
    codes = set()
    for node in ast.walk(ast.parse(path.read_text())):
        value = None
        if isinstance(node, ast.Return):
            value = node.value
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("exit", "_exit"):
            value = node.args[0] if node.args else None
        if isinstance(value, ast.Constant) and isinstance(value.value, int) and not isinstance(value.value, bool):
            codes.add(value.value)
        elif isinstance(value, (ast.Name, ast.Attribute)):
            name = value.id if isinstance(value, ast.Name) else value.attr
            if name in NAMED:
                codes.add(NAMED[name])
    return codes


def test_every_code_a_command_returns_is_in_the_readme_table():
    table = readme_codes()
    assert {0, 1, 2, 3, 130, 143} <= table, table
    stray = {str(p.relative_to(ROOT)): sorted(returned_codes(p) - table) for p in ENTRY_POINTS
             if returned_codes(p) - table}
    assert not stray, f"codes the README's table does not list: {stray}"


def test_3_is_convert_model_s_alone():
    users = [p.name for p in ENTRY_POINTS if 3 in returned_codes(p)]
    assert users == ["convert_model.py"], users


def test_the_scan_sees_returns_and_named_codes(tmp_path):
    f = tmp_path / "c.py"
    f.write_text("import sys\nfrom x import cli\ndef main():\n    if a:\n        return 7\n    sys.exit(cli.EXIT_NOT_MET)\n")
    assert returned_codes(f) == {7, 1}
