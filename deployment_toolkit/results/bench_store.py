"""The framework bench's store: `<result_dir>/<device_slug>.csv` (columns in schema.BENCH_COLUMNS), one row per
configuration, rewritten whole under a lock so concurrent benches never lose each other's rows."""
from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import math
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from ..spec import atomic_write_text
from .schema import BENCH_COLUMNS, BENCH_COVERAGE_PREFIX, BENCH_KEY_COLUMNS


def row_key(row: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(row.get(c, "")) for c in BENCH_KEY_COLUMNS)


def as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _cell(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


class BenchCSV:
    """The per-device results CSV. Every write rewrites the whole file through a temp file and a rename
    under an exclusive lock: readers never see half a row, concurrent benches never lose each other's rows,
    and a rerun replaces a configuration's row instead of repeating it."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """An exclusive flock on the CSV's folder: no lock file is left among the committed results."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def read(self) -> list[dict[str, str]]:
        if not self.path.exists():
            return []
        with open(self.path, newline="") as fh:
            return [r for r in csv.DictReader(fh) if r.get("model") and r.get("model") != "model"]

    def upsert(self, rows: Iterable[dict[str, Any]]) -> None:
        new = list(rows)
        if not new:
            return
        with self._locked():
            existing = self.read()
            keys = {row_key(r) for r in new}
            merged = [r for r in existing if row_key(r) not in keys] + new
            atomic_write_text(self.path, rows_to_csv(merged))


def rows_to_csv(rows: Sequence[dict[str, Any]]) -> str:
    extra = sorted({c for r in rows for c in r if c not in BENCH_COLUMNS},
                   key=lambda c: (not c.startswith(BENCH_COVERAGE_PREFIX), as_float(c[len(BENCH_COVERAGE_PREFIX):-1]),
                                  c))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=[*BENCH_COLUMNS, *extra], lineterminator="\n", restval="")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: _cell(v) for k, v in r.items()})
    return buf.getvalue()
