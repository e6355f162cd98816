"""The bench's markdown: the summary table (terminal and `<device>.md` beside the CSV), by the toolkit's one
table writer."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from deployment_toolkit.results.bench_store import as_float
from deployment_toolkit.spec import atomic_write_text
from deployment_toolkit.tables import markdown_table


def _coverage_text(row: dict[str, Any]) -> str:
    """`km2/s at 10 m: 1.2e+03; at 30 m: ...` for geospatial rows (the columns add_coverage wrote)."""
    parts = []
    for key, value in row.items():
        if key.startswith("km2_per_s_at_") and not math.isnan(as_float(value)):
            parts.append(f"{as_float(value):.3g} at {key[len('km2_per_s_at_'):]}")
    return "; ".join(parts)


def summary_table(rows: Sequence[dict[str, Any]]) -> str:
    """A compact markdown table of rows (the terminal, and <device>.md beside the CSV)."""
    headers = ["model", "runtime", "precision", "compile", "batch", "throughput", "p50 ms", "p99 ms", "peak MB",
               "km²/s", "status"]
    table = []
    for r in rows:
        tp = as_float(r.get("throughput"))
        table.append([r.get("model"), r.get("runtime"), r.get("precision"), r.get("compile_mode"),
                      r.get("batch_size") or r.get("requested_batch_size"),
                      "" if math.isnan(tp) else f"{tp:.2f} {r.get('unit', '')}",
                      *(("" if math.isnan(as_float(r.get(k))) else f"{as_float(r.get(k)):.1f}")
                        for k in ("p50_ms", "p99_ms", "peak_mem_mb")),
                      _coverage_text(r), r.get("status") + (f": {r.get('reason')}" if r.get("reason") else "")])
    return markdown_table(headers, table, align=["l"] * 4 + ["r"] * 5 + ["l"] * 2)


def write_summary(csv_path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    """`<device>.md` beside `<device>.csv`: every configuration measured on the device, as a table to read."""
    path = Path(csv_path).with_suffix(".md")
    text = (f"# Framework bench: {Path(csv_path).stem}\n\nIn-process throughput per configuration (all rows of "
            f"`{Path(csv_path).name}`; machine in `{Path(csv_path).stem}_hardware.json`). Throughput = batch / "
            "mean seconds per call; km²/s: coverage at each ground sample distance (geospatial models).\n\n"
            + summary_table(rows) + "\n")
    atomic_write_text(path, text)
    return path
