"""THE store of a sweep's measured rows: `<run>/<kind>.csv`, a results.rows store of schema.STORE_SCHEMA (written
whole through a temp file and a rename after each point: never a repeated header or half a row; read back with
typed values)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from .identity import RunIdentity
from .rows import read_csv, to_csv
from .run_folder import RunFolder
from .schema import STORE_SCHEMA
from ..config import Reuse


class ResultsStore:
    """`<run_dir>/<kind>.csv` (ms, seed columns, and each row's `measured_at` and `identity`).

    Opening it reuses the rows measured under `identity` and sets the others aside (results.ledger.reconcile).
    """

    def __init__(self, run_dir: str | Path, kind: str, identity: RunIdentity, policy: Reuse | str = Reuse.AUTO):
        self.folder = RunFolder(run_dir, identity)
        self.run_dir = self.folder.path
        self.kind = kind
        self.identity = identity
        self.policy = policy
        self.table = self.folder.table(f"{kind}.csv", STORE_SCHEMA, label=kind)
        self.csv_path = self.table.path

    def open(self) -> "ResultsStore":
        """Load the rows that may be reused; nothing is created until the first point is added."""
        aside = [self.run_dir / f"{self.kind}.md", self.run_dir / f"{self.kind}.fingerprint.json"]
        self.table.open(self.policy, aside)
        return self

    def completed(self, include_unstable: bool = True) -> set[tuple[int, int]]:
        return {k for k, r in zip(self.table.keys(), self.table.rows()) if include_unstable or r.get("stable", True)}

    def add(self, row: dict[str, Any]) -> None:
        self.table.put(row)

    def rows(self) -> list[dict[str, Any]]:
        return self.table.file_rows()


def rows_to_csv(rows: Iterable[dict[str, Any]]) -> str:
    """A sweep CSV's text, rows in the order given (the store gives them sorted by batch and concurrency)."""
    return to_csv(STORE_SCHEMA, rows)


def read_store_csv(path: str | Path) -> list[dict[str, Any]]:
    """Rows of an online/offline CSV with typed values (ints, floats in ms, bools)."""
    return read_csv(STORE_SCHEMA, path)
