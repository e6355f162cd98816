"""The toolkit's one table writer: every markdown table in a report, a summary or a README block comes from here,
so all of them share one layout and one place to change it. The layout is tabulate's GitHub "pipe" format (columns
padded, so the raw text reads as a table too); the HTML tables are built with ElementTree, which escapes the text.
It imports nothing from the toolkit, so any package may use it without an import cycle."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any, Sequence

from tabulate import tabulate

_ALIGN = {"l": "left", "r": "right", "c": "center"}


def _cell(value: Any) -> str:
    """One line of text; a '|' would end the cell, so it is escaped as GitHub markdown reads it."""
    return " ".join(str(value).splitlines()).replace("|", "\\|")


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: Sequence[str] | None = None) -> str:
    """A GitHub-flavoured markdown table; align: 'l', 'r' or 'c' per column (numbers right, the default).
    Cells are written as str() gives them: numbers are formatted by the caller, never re-parsed here."""
    align = align or ["r"] * len(headers)
    return tabulate([[_cell(c) for c in row] for row in rows], headers=[_cell(h) for h in headers],
                    tablefmt="pipe", colalign=[_ALIGN[a] for a in align], disable_numparse=True)


def html_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[bool] | None = None,
               row_classes: Sequence[str] | None = None) -> str:
    """An HTML <table>: numeric columns get class="num" (right-aligned by the report's CSS), a row a class
    (e.g. "unstable") where row_classes names one."""
    numeric = numeric or [False] * len(headers)
    table = ET.Element("table")
    head = ET.SubElement(ET.SubElement(table, "thead"), "tr")
    for h in headers:
        ET.SubElement(head, "th").text = str(h)
    body = ET.SubElement(table, "tbody")
    for i, row in enumerate(rows):
        tr = ET.SubElement(body, "tr")
        if row_classes and row_classes[i]:
            tr.set("class", row_classes[i])
        for c, n in zip(row, numeric):
            td = ET.SubElement(tr, "td")
            if n:
                td.set("class", "num")
            td.text = str(c)
    return ET.tostring(table, encoding="unicode", method="html")
