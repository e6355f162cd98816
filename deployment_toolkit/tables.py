"""The toolkit's one table writer: every markdown table in a report, a summary or a README block comes from here,
so all of them share one layout and one place to change it. It imports nothing from the toolkit, so any package
may use it without an import cycle."""
from __future__ import annotations

from typing import Any, Sequence


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: Sequence[str] | None = None) -> str:
    """A GitHub-flavoured markdown table; align: 'l' or 'r' per column (numbers right)."""
    align = align or ["r"] * len(headers)
    rule = [(":" + "-" * max(len(h) + 1, 3)) if a == "l" else ("-" * max(len(h) + 1, 3) + ":")
            for h, a in zip(headers, align)]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(rule) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)
