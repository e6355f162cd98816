"""The one table writer (deployment_toolkit/tables.py) and the rule that no other module writes a table by hand."""
from __future__ import annotations

import ast
from pathlib import Path

from deployment_toolkit.tables import html_table, markdown_table

ROOT = Path(__file__).resolve().parents[3]

# Modules that may still write table syntax by hand, each with the reason.
ALLOWED = {
    "deployment_toolkit/tables.py": "the table writer itself",
}
# `" | ".join` that is not a table: lines of an error message joined into one line.
JOIN_NOT_A_TABLE = {
    ("deployment_toolkit_lab/matrix.py", "one_line"): "an error's lines joined into one table cell",
    ("deployment_toolkit_lab/versus/model_analyzer.py", "explain_failure"):
        "the tail of Model Analyzer's output, one line",
    ("deployment_toolkit/search/triton.py", "_first_lines"): "the first lines of an error, one line",
    ("deployment_toolkit/cleanup.py", "perf_region_pattern"): "a regular expression's alternatives",
}
TABLE_MARKS = ("|---", "---|", "|:--", "--:|")


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def hand_written_tables(path: Path, rel: str) -> list[str]:
    """Where a module writes markdown table syntax itself: a string that starts or ends a row ('| ', ' |'),
    a rule ('|---', '---:|'), or a `" | ".join` / `"|".join` outside JOIN_NOT_A_TABLE."""
    tree = ast.parse(path.read_text(), str(path))
    docs, found = _docstrings(tree), []
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]

    def enclosing(node: ast.AST) -> str:
        names = [f.name for f in functions if f.lineno <= node.lineno <= (f.end_lineno or f.lineno)]
        return names[-1] if names else ""

    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            text = node.value.strip(" \n")
            if (node.value.lstrip("\n").startswith("| ") or node.value.rstrip("\n").endswith(" |")
                    or any(m in text for m in TABLE_MARKS)):
                found.append(f"{rel}:{node.lineno}: {node.value[:40]!r}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
                and isinstance(node.func.value, ast.Constant) and node.func.value.value in (" | ", "|")
                and (rel, enclosing(node)) not in JOIN_NOT_A_TABLE):
            found.append(f"{rel}:{node.lineno}: {node.func.value.value!r}.join in {enclosing(node) or 'module'}")
    return found


def test_no_module_writes_a_markdown_table_by_hand():
    found = []
    for folder in ("deployment_toolkit", "triton", "deployment_toolkit_lab"):  # the lab's files read, not imported
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in ALLOWED:
                found += hand_written_tables(path, rel)
    assert not found, "write tables with deployment_toolkit.tables.markdown_table:\n" + "\n".join(found)


def test_the_scan_finds_a_hand_written_table(tmp_path):
    """The scan above must be able to fail: each way of writing a row by hand is caught, docstrings are not."""
    src = tmp_path / "m.py"
    src.write_text('"""|x| is a norm."""\n'
                   'def f(cells):\n'
                   '    head = "| a | b |"\n'
                   '    rule = "|---|---:|"\n'
                   '    return [head, rule, " | ".join(cells), f"| {cells[0]} |"]\n')
    found = hand_written_tables(src, "m.py")
    assert [f.split(":")[1] for f in found] == ["3", "4", "5", "5", "5"], found


def test_markdown_table_layout_alignment_and_escaping():
    text = markdown_table(["name", "value"], [["a|b", "0.10"], ["line1\nline2", 12345]], ["l", "r"])
    assert text.splitlines() == [
        "| name        |   value |",
        "|:------------|--------:|",
        "| a\\|b        |    0.10 |",
        "| line1 line2 |   12345 |",
    ]


def test_markdown_table_defaults_to_right_aligned_and_keeps_the_callers_text():
    text = markdown_table(["x", "y"], [["1,234.5", None]])
    assert text.splitlines() == ["|       x |    y |", "|--------:|-----:|", "| 1,234.5 | None |"]


def test_html_table_escapes_and_marks_numbers_and_rows():
    text = html_table(["a<b", "n"], [["x & y", "1"], ["z", "2"]], [False, True], ["", "unstable"])
    assert text == ('<table><thead><tr><th>a&lt;b</th><th>n</th></tr></thead><tbody>'
                    '<tr><td>x &amp; y</td><td class="num">1</td></tr>'
                    '<tr class="unstable"><td>z</td><td class="num">2</td></tr></tbody></table>')
