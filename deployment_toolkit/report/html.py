"""A self-contained report.html: tables as HTML, plots embedded as base64 PNGs, no external files,
so it can be mailed or attached to a ticket as one file."""
from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any, Sequence

from ..tables import html_table
from .tables import (
    CLAMPED_NOTE,
    OFFLINE_COLUMNS,
    ONLINE_COLUMNS,
    RESIDUAL,
    UNSTABLE_NOTE,
    config_rows,
    fmt,
    hardware_lines,
    key_column,
    sort_rows,
)

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.8em 0;font-size:.88em}
th,td{border:1px solid #ccc;padding:.3em .6em}th{background:#f3f5f7}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.unstable td{background:#fdecea}
.note{color:#555;font-size:.88em;max-width:70em}
img{max-width:100%;border:1px solid #eee;margin:.6em 0}
"""


def results_table(kind: str, rows: Sequence[dict[str, Any]]) -> str:
    rows = sort_rows(kind, rows)
    columns = ONLINE_COLUMNS if kind == "online" else OFFLINE_COLUMNS
    key = key_column(kind)
    cells, classes = [], []
    for r in rows:
        line = []
        for col in columns:
            text = fmt(r.get(col), col)
            if col == key and r.get("stable") is False:
                text += " (unstable)"
            if col == RESIDUAL and r.get("residual_clamped"):
                text += " (clamped)"
            line.append(text)
        cells.append(line)
        classes.append("unstable" if r.get("stable") is False else "")
    out = html_table(columns, cells, [c != "Precision" for c in columns], classes)
    if any(r.get("stable") is False for r in rows):
        out += f'<p class="note">{html.escape(UNSTABLE_NOTE)}</p>'
    if any(r.get("residual_clamped") for r in rows) and kind == "online":
        out += f'<p class="note">{html.escape(CLAMPED_NOTE)}</p>'
    return out


def embed_png(path: str | Path, alt: str = "") -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def render(title: str, meta: dict[str, Any], sections: Sequence[dict[str, Any]]) -> str:
    """sections: {"kind", "rows", "plots": {name: path}} per sweep kind present in the run."""
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>"]
    rows = [r for section in sections for r in section["rows"]]
    parts.append("<p>Our results were obtained using the following configuration:</p><ul>"
                 + "".join(f"<li>{html.escape(line)}</li>" for line in hardware_lines(meta, rows)) + "</ul>")
    parts.append("<p class='note'>Command: <code>" + html.escape(str(meta.get("command", "n/a"))) + "</code></p>")
    for section in sections:
        kind = section["kind"]
        parts.append(f"<h2>{kind.capitalize()} scenario</h2>")
        parts.append(html_table(("Parameter Name", "Parameter Value"), config_rows(meta, kind), (False, False)))
        for name, path in section.get("plots", {}).items():
            parts.append(embed_png(path, name))
        parts.append("<h3>Full tabular data</h3>" + results_table(kind, section["rows"]))
        parts.append("<p class='note'>Times in milliseconds; throughput in inferences per second.</p>")
    parts.append("</body></html>")
    return "\n".join(parts)
