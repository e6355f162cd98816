"""THE store of a sweep's measured rows: `<run>/<kind>.csv`, written whole through a temp file and a rename after
each point (never a repeated header or half a row), read back with typed values."""
from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any, Iterable

from ..spec import atomic_write_text
from .identity import RunIdentity
from .ledger import IDENTITY_COLUMN, MEASURED_AT_COLUMN, ensure_registered, now_utc, reconcile
from .schema import BOOL_COLUMNS, INT_COLUMNS, MEASURE_COLUMNS, STORE_COLUMNS


class ResultsStore:
    """`<run_dir>/<kind>.csv` (ms, seed columns, and each row's `measured_at` and `identity`).

    Opening it reuses the rows measured under `identity` and sets the others aside (results.ledger.reconcile).
    """

    def __init__(self, run_dir: str | Path, kind: str, identity: RunIdentity, policy: str = "auto"):
        self.run_dir = Path(run_dir)
        self.kind = kind
        self.identity = identity
        self.policy = policy
        self.csv_path = self.run_dir / f"{kind}.csv"
        self._rows: dict[tuple[int, int], dict[str, Any]] = {}
        self._registered = False

    def open(self) -> "ResultsStore":
        """Load the rows that may be reused; nothing is created until the first point is added."""
        stored = read_store_csv(self.csv_path) if self.csv_path.exists() else []
        aside = [self.csv_path, self.run_dir / f"{self.kind}.md", self.run_dir / f"{self.kind}.fingerprint.json"]
        for row in reconcile(self.run_dir, self.kind, stored, self.identity, self.policy, aside):
            self._rows[(int(row["Client Batch Size"]), int(row["Concurrent client requests"]))] = row
        return self

    def completed(self, include_unstable: bool = True) -> set[tuple[int, int]]:
        return {k for k, r in self._rows.items() if include_unstable or r.get("stable", True)}

    def add(self, row: dict[str, Any]) -> None:
        if not self._registered:
            ensure_registered(self.run_dir, self.identity)
            self._registered = True
        key = (int(row["Client Batch Size"]), int(row["Concurrent client requests"]))
        row = {**row, MEASURED_AT_COLUMN: now_utc(), IDENTITY_COLUMN: self.identity.id}
        self._rows[key] = {c: row.get(c) for c in STORE_COLUMNS}
        self._write()

    def rows(self) -> list[dict[str, Any]]:
        return [self._rows[k] for k in sorted(self._rows)]

    def _write(self) -> None:
        atomic_write_text(self.csv_path, rows_to_csv(self.rows()))


def rows_to_csv(rows: Iterable[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(STORE_COLUMNS), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: _fmt(row.get(c)) for c in STORE_COLUMNS})
    return buf.getvalue()


def _fmt(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3e}"
    return value


def read_store_csv(path: str | Path) -> list[dict[str, Any]]:
    """Rows of an online/offline CSV with typed values (ints, floats in ms, bools)."""
    rows = []
    with open(path, newline="") as fh:
        for raw in csv.DictReader(fh):
            if raw.get("Client Batch Size") in (None, "", "Client Batch Size"):
                continue
            row: dict[str, Any] = {}
            for col in STORE_COLUMNS:
                val = raw.get(col, "")
                if col in INT_COLUMNS:
                    row[col] = int(float(val)) if val not in ("", None) else None
                elif col in BOOL_COLUMNS:
                    row[col] = str(val).strip().lower() in ("true", "1", "yes")
                elif col in MEASURE_COLUMNS:
                    row[col] = float(val) if val not in ("", None) else math.nan
                else:
                    row[col] = val or ""
            rows.append(row)
    return rows
