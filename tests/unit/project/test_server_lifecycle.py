"""One server lifecycle (issue 37): an embedded server is started only by entering it, `with LocalTritonServer(...)
as server:` or `stack.enter_context(LocalTritonServer(...))`, so it stops however the block ends (an error, Ctrl-C,
SIGTERM through cli's handler). A bare `.start()` ... `.stop()` pair leaks the server when anything between them
raises before the `try`, and every call site wrote its own. Read from the source (AST), as test_code_shape does."""
from __future__ import annotations

import ast
from pathlib import Path

import deployment_toolkit

ROOT = Path(deployment_toolkit.__file__).resolve().parent
SERVER = "LocalTritonServer"


def _is_server_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == SERVER) or \
        (isinstance(func, ast.Attribute) and func.attr == SERVER)


def _entered(tree: ast.AST) -> set[int]:
    """ids of the LocalTritonServer(...) calls that are a `with` item or the argument of `*.enter_context(...)`."""
    ok: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.With, ast.AsyncWith)):
            ok.update(id(item.context_expr) for item in node.items if _is_server_call(item.context_expr))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "enter_context":
            ok.update(id(arg) for arg in node.args if _is_server_call(arg))
    return ok


def servers_not_entered(path: Path) -> list[str]:
    """`file:line` of every LocalTritonServer(...) in `path` that is not entered as a context manager."""
    tree = ast.parse(path.read_text(), str(path))
    entered = _entered(tree)
    return [f"{path.relative_to(ROOT.parent) if path.is_relative_to(ROOT.parent) else path.name}:{node.lineno}"
            for node in ast.walk(tree) if _is_server_call(node) and id(node) not in entered]


def test_every_embedded_server_is_entered_as_a_context_manager():
    found = [hit for path in sorted(ROOT.rglob("*.py")) for hit in servers_not_entered(path)]
    assert not found, ("start an embedded server only as `with LocalTritonServer(...) as server:` or "
                       f"`stack.enter_context(LocalTritonServer(...))`, never by .start()/.stop(): {found}")


def test_the_check_sees_a_bare_start(tmp_path):
    (tmp_path / "m.py").write_text(
        "import contextlib\n"
        "with LocalTritonServer(cfg) as s:\n    pass\n"
        "with contextlib.ExitStack() as stack:\n    s = stack.enter_context(local.LocalTritonServer(cfg))\n"
        "server = LocalTritonServer(cfg)\nserver.start()\n"
        "def make():\n    return LocalTritonServer(cfg)\n")
    assert servers_not_entered(tmp_path / "m.py") == ["m.py:6", "m.py:9"]
