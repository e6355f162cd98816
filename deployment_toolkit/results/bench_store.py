"""The framework bench's store: `<result_dir>/<device_slug>.csv` (columns in schema.BENCH_COLUMNS), one row per
configuration, a results.rows store of schema.BENCH_SCHEMA rewritten whole under a lock so concurrent benches never
lose each other's rows."""
from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from .identity import RunIdentity
from .rows import RowStore, to_csv
from .run_folder import RunFolder
from .schema import BENCH_SCHEMA
from ..config import Reuse

log = logging.getLogger(__name__)


def row_key(row: dict[str, Any]) -> tuple[str, ...]:
    """A configuration's key: its BENCH_KEY_COLUMNS as strings (a stored row's and a new row's compare equal)."""
    return BENCH_SCHEMA.key_of(row)


def as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


class BenchCSV:
    """The per-device results CSV. Every write rewrites the whole file through a temp file and a rename
    under an exclusive lock: readers never see half a row, concurrent benches never lose each other's rows,
    and a rerun replaces a configuration's row instead of repeating it. Rows read back as the file holds them
    (strings), coverage columns included."""

    def __init__(self, path: str | Path):
        path = Path(path)
        self.folder = RunFolder(path.parent)
        self.table: RowStore = self.folder.table(path.name, BENCH_SCHEMA, lock=True)
        self.path = self.table.path

    def read(self) -> list[dict[str, str]]:
        return self.table.read()

    def upsert(self, rows: Iterable[dict[str, Any]]) -> None:
        self.table.put_many(rows)

    def reconcile(self, identity: RunIdentity, policy: Reuse | str, aside: Iterable[str | Path] = (),
                  say: Callable[[str], None] = log.info) -> list[dict[str, str]]:
        """The stored rows that may be reused under `identity`; the CSV and `aside` move to superseded/ when any
        row was measured under another identity (results.ledger.reconcile)."""
        return self.table.reconcile(policy, aside, say, identity=identity)


def rows_to_csv(rows: Sequence[dict[str, Any]]) -> str:
    """A bench CSV's text: BENCH_COLUMNS, then the rows' other columns (coverage ones first, by GSD)."""
    return to_csv(BENCH_SCHEMA, rows)
