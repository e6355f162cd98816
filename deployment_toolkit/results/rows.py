"""THE typed row store of a run folder: one CSV of rows keyed by some of its columns, read back with typed values,
a row put (or replaced by its key) rewritten whole through `spec.atomic_write_text` at once, so the file never holds
half a row or a repeated header. The sweep's `<kind>.csv`, the framework bench's `<device>.csv`, the open-loop
`openloop.csv` and the conversion matrix are schemas of it (search.csv and search_points.csv are written by its
`to_csv`); their number formats and column orders are the schema's, byte for byte.

Rows carry the run identity's id in the schema's identity column: opening a store under an identity reuses the
rows measured under it and sets the file aside when any row was measured under another (results.ledger.reconcile).
Writers in several processes share one file under an exclusive flock (`lock=True`): each put re-reads the file
under the lock, so no writer loses another's rows.
"""
from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Hashable, Iterable, Iterator, Mapping, Sequence

from ..spec import atomic_write_text
from .identity import RunIdentity
from .ledger import IDENTITY_COLUMN, ensure_registered, now_utc, reconcile
from ..config import Reuse

log = logging.getLogger(__name__)

Row = dict[str, Any]
TRUE_WORDS = ("true", "1", "yes")
# a column's type: int, float, bool, str, or list (floats joined by ";" in one cell)
COLUMN_TYPES = (int, float, bool, str, list)


def six_digits(value: float) -> str:
    """The stores' usual number format: 6 significant digits."""
    return f"{value:.6g}"


@dataclass(frozen=True)
class RowSchema:
    """What a row store holds: its columns in file order, the columns that key a row, and each column's type.

    `empty`: the value an empty cell reads back as, where not the type's own (int/None, float/NaN, bool/False,
    str/"", list/[]). `sort_by`: the columns the file is sorted by (None: rows stay in the order they were put, a
    replaced row moving to the end). `extra_order`: where set, the schema is open: columns beyond `columns` are kept,
    written after them in this order, and rows read back as the file holds them (strings); else they are dropped.
    `float_format`: how a float cell is written (NaN and None are always empty). `identity_column`: the column that
    names the identity a row was measured under; `stamp_column`: a column set to the UTC time of every put.
    """

    columns: tuple[str, ...]
    key: tuple[str, ...] = ()
    types: Mapping[str, type] = field(default_factory=dict)
    empty: Mapping[str, Any] = field(default_factory=dict)
    sort_by: tuple[str, ...] | None = None
    extra_order: Callable[[str], Any] | None = None
    float_format: Callable[[float], str] = six_digits
    identity_column: str | None = None
    stamp_column: str | None = None

    def __post_init__(self) -> None:
        unknown = [c for c in (*self.key, *(self.sort_by or ()), *self.types) if c not in self.columns]
        if unknown:
            raise ValueError(f"row schema names columns it does not have: {unknown}")
        bad = {c: t for c, t in self.types.items() if t not in COLUMN_TYPES}
        if bad:
            raise ValueError(f"row schema column types must be int, float, bool, str or list: {bad}")
        for col in (self.identity_column, self.stamp_column):
            if col is not None and col not in self.columns:
                raise ValueError(f"row schema has no column {col!r}")
        if self.identity_column not in (None, IDENTITY_COLUMN):
            raise ValueError(f"the ledger reads a row's identity from {IDENTITY_COLUMN!r}, not {self.identity_column!r}")

    def type_of(self, column: str) -> type:
        return self.types.get(column, str)

    # ---- reading ----
    def parse(self, column: str, text: str | None) -> Any:
        """A cell's typed value (an empty cell: `empty`, else the type's empty value)."""
        kind = self.type_of(column)
        text = text or ""
        if kind is bool:
            return text.strip().lower() in TRUE_WORDS
        if not text:
            if column in self.empty:
                return self.empty[column]
            return {int: None, float: math.nan, list: []}.get(kind, "")
        if kind is int:
            return int(float(text))
        if kind is float:
            return float(text)
        if kind is list:
            return [float(x) for x in text.split(";") if x]
        return text

    def is_row(self, raw: Mapping[str, Any]) -> bool:
        """A data line: its first key column is filled and is not a repeated header."""
        if not self.key:
            return any(v not in (None, "") for v in raw.values())
        first = raw.get(self.key[0])
        return first not in (None, "") and first != self.key[0]

    def from_file(self, raw: Mapping[str, Any]) -> Row:
        if self.extra_order is not None:
            return {c: (v if self.type_of(c) is str else self.parse(c, v)) for c, v in raw.items()}
        return {c: self.parse(c, raw.get(c)) for c in self.columns}

    # ---- keys ----
    def coerce(self, column: str, value: Any) -> Any:
        """A value as its column's type, for keys and sorting ("8", 8.0 and 8 key the same int row)."""
        kind = self.type_of(column)
        if kind is int:
            return int(float(value))
        if kind is float:
            return float(value)
        if kind is bool:
            return value if isinstance(value, bool) else str(value).strip().lower() in TRUE_WORDS
        return str(value)

    def key_of(self, row: Mapping[str, Any]) -> tuple:
        return tuple(self.coerce(c, row.get(c, "")) for c in self.key)

    def sort_key(self, row: Mapping[str, Any]) -> tuple:
        return tuple(self.coerce(c, row.get(c, "")) for c in self.sort_by or ())

    def ordered(self, rows: Iterable[Mapping[str, Any]]) -> list:
        """Rows in the file's order: sorted by `sort_by` where set, else as given."""
        return sorted(rows, key=self.sort_key) if self.sort_by else list(rows)

    # ---- writing ----
    def cell(self, column: str, value: Any) -> Any:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return ""
        if self.type_of(column) is list:
            return ";".join(six_digits(x) for x in value)
        if isinstance(value, float):
            return self.float_format(value)
        return value

    def fieldnames(self, rows: Sequence[Mapping[str, Any]]) -> list[str]:
        if self.extra_order is None:
            return list(self.columns)
        extra = sorted({c for r in rows for c in r if c not in self.columns}, key=self.extra_order)
        return [*self.columns, *extra]

    def project(self, row: Mapping[str, Any]) -> Row:
        """The row as stored: the schema's columns (and, in an open schema, the row's other columns too)."""
        if self.extra_order is not None:
            return dict(row)
        return {c: row.get(c) for c in self.columns}


def to_csv(schema: RowSchema, rows: Iterable[Mapping[str, Any]], header: bool = True) -> str:
    """THE writer of a row CSV: the schema's columns (and an open schema's extra ones) and cell formats, rows in
    the order given (a store gives them in its file order, `RowSchema.ordered`). `header=False`: the rows alone,
    for a file that rows are appended to (a sweep's telemetry series)."""
    rows = list(rows)
    fields = schema.fieldnames(rows)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    if header:
        writer.writeheader()
    for row in rows:
        writer.writerow({c: schema.cell(c, row.get(c)) for c in fields})
    return buf.getvalue()


def read_csv(schema: RowSchema, path: str | Path) -> list[Row]:
    """THE reader of a row CSV: every data line (repeated headers and blank lines skipped), typed by the schema;
    [] when there is no file."""
    path = Path(path)
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        return [schema.from_file(raw) for raw in csv.DictReader(fh) if schema.is_row(raw)]


def csv_header(path: str | Path) -> list[str]:
    """The column names of a CSV file's first line ([] for an empty file)."""
    with open(path, newline="") as fh:
        return next(csv.reader(fh), [])


@contextlib.contextmanager
def folder_lock(folder: str | Path) -> Iterator[None]:
    """An exclusive flock on the folder itself: no lock file is left among the committed results."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class RowStore:
    """`path`: rows of `schema`, keyed by its key columns. Nothing is read until `open()` (or the first put, which
    opens a store not yet opened) and nothing written until the first put.

    With an `identity`, every put stamps the schema's identity column and makes sure the folder's run.json resolves
    it (results.ledger.ensure_registered); `open` reuses only the rows measured under it. `lock`: several
    processes write this file (each put re-reads it under an exclusive flock of its folder)."""

    def __init__(self, path: str | Path, schema: RowSchema, identity: RunIdentity | None = None,
                 lock: bool = False, label: str | None = None):
        self.path = Path(path)
        self.schema = schema
        self.identity = identity
        self.lock = lock
        self.label = label or self.path.name
        self._rows: dict[Hashable, Row] = {}
        self._opened = False

    @property
    def folder(self) -> Path:
        return self.path.parent

    def read(self) -> list[Row]:
        """The rows the file holds now (typed; an open schema's as the file holds them)."""
        return read_csv(self.schema, self.path)

    def open(self, policy: Reuse | str = Reuse.AUTO, aside: Iterable[str | Path] = (),
             say: Callable[[str], None] = log.info,
             reconcile_rows: bool = True) -> "RowStore":
        """Load the file's rows; under an identity (for a schema with an identity column, and `reconcile_rows`),
        keep only those that may be reused (the file and `aside` are set aside when any may not:
        results.ledger.reconcile, `policy` auto|resume|fresh)."""
        rows = self.read()
        if reconcile_rows and self.identity is not None and self.schema.identity_column:
            rows = self.reconcile(policy, aside, say, rows)
        self._load(rows)
        self._opened = True
        return self

    def reconcile(self, policy: Reuse | str = Reuse.AUTO, aside: Iterable[str | Path] = (),
                  say: Callable[[str], None] = log.info,
                  rows: list[Row] | None = None, identity: RunIdentity | None = None) -> list[Row]:
        """results.ledger.reconcile on this file's rows (read now unless given) under `identity` (the store's by
        default): the rows that may be reused; moves the file and `aside` to superseded/ when any may not."""
        identity = identity or self.identity
        if identity is None:
            raise ValueError(f"{self.path}: reconciling needs a run identity")
        rows = self.read() if rows is None else rows
        return reconcile(self.folder, self.label, rows, identity, policy, [self.path, *aside], say=say)

    def _load(self, rows: Iterable[Row]) -> None:
        self._rows = {}
        for row in rows:
            self._place(row)

    def _place(self, row: Row) -> None:
        key = self.schema.key_of(row)
        if self.schema.sort_by is None:
            self._rows.pop(key, None)  # file order is put order: a replaced row moves to the end
        self._rows[key] = row

    # ---- reading what is held ----
    def get(self, key: tuple | Mapping[str, Any]) -> Row | None:
        """The row with this key (a tuple of the key columns' typed values, or a row-like mapping), or None."""
        return self._rows.get(self.schema.key_of(key) if isinstance(key, Mapping) else tuple(key))

    def keys(self) -> list[tuple]:
        return list(self._rows)

    def rows(self) -> list[Row]:
        """The rows held, in the order they were loaded and put."""
        return list(self._rows.values())

    def file_rows(self) -> list[Row]:
        """The rows in the file's order."""
        return self.schema.ordered(self.rows())

    # ---- writing ----
    def put(self, row: Mapping[str, Any]) -> Row:
        """Put one row (replacing the row of its key) and rewrite the file; returns the row as stored."""
        return self.put_many([row])[0]

    def put_many(self, rows: Iterable[Mapping[str, Any]]) -> list[Row]:
        """Put rows (each replacing the row of its key) and rewrite the file once. Nothing happens for none."""
        stored = [self._stamped(self.schema.project(r)) for r in rows]
        if not stored:
            return []
        if not self._opened and not self.lock:
            self.open()  # never write over rows the file holds but this store has not read
        if self.identity is not None:
            ensure_registered(self.folder, self.identity)
        with folder_lock(self.folder) if self.lock else contextlib.nullcontext():
            if self.lock:
                self._load(self.read())  # other writers' rows, as they are now
            for row in stored:
                self._place(row)
            atomic_write_text(self.path, to_csv(self.schema, self.file_rows()))
        return stored

    def _stamped(self, row: Row) -> Row:
        if self.schema.stamp_column:
            row[self.schema.stamp_column] = now_utc()
        if self.identity is not None and self.schema.identity_column:
            row[self.schema.identity_column] = self.identity.id
        return row


__all__ = ["IDENTITY_COLUMN", "Row", "RowSchema", "RowStore", "csv_header", "folder_lock", "read_csv", "six_digits",
           "to_csv"]
