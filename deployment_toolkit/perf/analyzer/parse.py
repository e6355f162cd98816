"""What perf_analyzer writes, read back: its CSV (rows sorted by throughput, times in us) as seed-named rows in
ms, and its console output diagnosed (unstable level, connection failure, last pass)."""
from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...results.schema import BREAKDOWN_COLUMNS, MEASURE_COLUMNS, RESIDUAL, THROUGHPUT


# perf_analyzer CSV header -> the column names of the DLE "Full tabular data" tables
CSV_TO_SEED = {
    "Concurrency": "Concurrent client requests",
    "Request Rate": "Request rate",
    "Inferences/Second": "Inferences/second",
    "Client Send": "Client Send",
    "Network+Server Send/Recv": "Network+server Send/recv",
    "Server Queue": "Server Queue",
    "Server Compute Input": "Server Compute Input",
    "Server Compute Infer": "Server Compute Infer",
    "Server Compute Output": "Server Compute Output",
    "Client Recv": "Client Recv",
    "p50 latency": "P50 Latency",
    "p90 latency": "P90 Latency",
    "p95 latency": "P95 Latency",
    "p99 latency": "P99 Latency",
    "Avg latency": "Avg Latency",
}

_UNSTABLE = re.compile(
    r"Failed to obtain stable measurement(?: within (\d+) measurement windows for (concurrency|request rate) ([\d.]+))?"
)
_PASS = re.compile(r"Pass \[(\d+)\] throughput: ([\d.eE+-]+) infer/sec\. (?:Avg|p\d+) latency: (\d+) usec")
_CONNECTION = re.compile(
    r"failed to connect|couldn't connect|connection refused|socket closed|connection reset|broken pipe|"
    r"unavailable|empty reply from server|failed to get model metadata: .*(connect|unavailable)",
    re.I,
)

def parse_csv(source: str | Path) -> list[dict[str, Any]]:
    """Rows of a perf_analyzer CSV, sorted by load level, times converted from µs to ms.

    Keys are the seed's column names; a column perf_analyzer did not write is NaN. The residual
    "Network+server Send/recv" is clamped to 0 when negative and the row gets `residual_clamped=True`
    (also when perf_analyzer already clamped it but the parts add up to more than the average latency).
    Repeated header lines and blank or short lines (a file appended to, or cut off) are skipped.
    """
    text = Path(source).read_text() if isinstance(source, Path) or "\n" not in str(source) else str(source)
    reader = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    rows: list[dict[str, Any]] = []
    for record in reader:
        if not record or not any(cell.strip() for cell in record):
            continue
        cells = [c.strip() for c in record]
        if cells[0] in ("Concurrency", "Request Rate"):
            header = cells
            continue
        if header is None or len(cells) < len(header):
            continue
        raw = dict(zip(header, cells))
        try:
            rows.append(_convert_row(raw))
        except ValueError:
            continue
    key = "Concurrent client requests" if rows and "Concurrent client requests" in rows[0] else "Request rate"
    rows.sort(key=lambda r: r.get(key, 0))
    return rows


def _convert_row(raw: dict[str, str]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for csv_name, seed_name in CSV_TO_SEED.items():
        if csv_name not in raw:
            if seed_name in MEASURE_COLUMNS:
                row[seed_name] = math.nan
            continue
        value = float(raw[csv_name])
        if csv_name == "Concurrency":
            row[seed_name] = int(value)
        elif csv_name in ("Request Rate", "Inferences/Second"):
            row[seed_name] = value
        else:
            row[seed_name] = value / 1000.0  # µs -> ms
    clamped = False
    if row[RESIDUAL] < 0:
        row[RESIDUAL] = 0.0
        clamped = True
    avg = row.get("Avg Latency", math.nan)
    parts = sum(row[c] for c in BREAKDOWN_COLUMNS if c != RESIDUAL and not math.isnan(row[c]))
    if not math.isnan(avg) and row[RESIDUAL] == 0.0 and parts > avg * 1.001:
        clamped = True
    row["residual_clamped"] = clamped
    return row


@dataclass
class OutputDiagnosis:
    """What perf_analyzer's console output says besides the numbers."""

    unstable: bool = False
    unstable_levels: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    connection_error: bool = False
    last_pass: dict[str, float] | None = None  # from `-v` "Pass [n]" lines: throughput, latency (ms)


def diagnose_output(text: str) -> OutputDiagnosis:
    diag = OutputDiagnosis()
    for match in _UNSTABLE.finditer(text):
        diag.unstable = True
        if match.group(3):
            diag.unstable_levels.append(float(match.group(3)))
    for line in text.splitlines():
        s = line.strip()
        low = s.lower()
        if not s or s.startswith("Failed to obtain stable measurement"):
            continue
        if low.startswith("error") or "had error" in low or low.startswith("failed to") or "unrecognized option" in low:
            diag.errors.append(s)
    diag.connection_error = any(_CONNECTION.search(e) for e in diag.errors)
    passes = _PASS.findall(text)
    if passes:
        _, thr, lat = passes[-1]
        diag.last_pass = {THROUGHPUT: float(thr), "latency_ms": int(lat) / 1000.0}
    return diag
