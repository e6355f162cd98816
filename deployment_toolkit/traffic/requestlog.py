"""A request log: one row per request with its time and its model, as a gateway or an application writes it, in
CSV (a header row names the columns) or JSON Lines (one object per line).

A time is an ISO-8601 timestamp (without a zone: UTC) or epoch seconds. The time column is `time_column` where
given, else the first of TIME_COLUMNS the log has; the model is any other column (`model` by default). Rows of a
log written by several workers are not quite in order: a row may be up to ORDER_TOLERANCE_S earlier than the
latest row above it; beyond that the log is refused (the rows are shuffled, or two logs were concatenated).
A model's rate is its requests counted per slice of `slice_s` seconds, the slices aligned on multiples of the
width since the epoch, so every model of one log (and of several logs) shares one grid."""
from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from ..errors import UserInputError
from .ratecsv import csv_rows
from .series import Series, TimeKind, parse_time, time_label

TIME_COLUMNS = ("time", "timestamp", "ts")
ORDER_TOLERANCE_S = 1.0  # how much earlier than the latest row above a row may be (concurrent writers)
MAX_SLICES = 1_000_000  # a rate series longer than this asks for a wider slice


@dataclass(frozen=True)
class RequestLog:
    """Every request's time (epoch seconds) and the other columns' values, rows in file order."""

    times: np.ndarray
    columns: Mapping[str, list[str]]  # column -> each row's value ('' where a row has none)
    lines: np.ndarray  # each row's line in the file, for messages
    source: str
    time_column: str

    @property
    def span(self) -> tuple[float, float]:
        return float(self.times.min()), float(self.times.max())

    def column(self, name: str, role: str) -> list[str]:
        """A column's values, or one line naming the columns the log has and how to name another."""
        if name not in self.columns:
            raise UserInputError(f"{self.source}: no column {name!r} for {role} (the log's columns: "
                                 f"{', '.join([self.time_column, *self.columns])}): name it (a deployment entry's "
                                 "series: {column: value}; traffic's --model-label)")
        return self.columns[name]

    def select(self, labels: Mapping[str, str]) -> np.ndarray:
        """The sorted times of the rows whose columns equal every one of `labels`."""
        keep = np.ones(len(self.times), dtype=bool)
        for name, value in labels.items():
            keep &= np.asarray(self.column(name, "the model's series"), dtype=object) == value
        return np.sort(self.times[keep])

    def models(self, column: str) -> dict[str, np.ndarray]:
        """Each model's sorted request times, by the value of `column` (a row without one is refused)."""
        values = np.asarray(self.column(column, "the model"), dtype=object)
        if (values == "").any():
            line = int(self.lines[int(np.argmax(values == ""))])
            raise UserInputError(f"{self.source} line {line}: no {column!r}: every request names its model")
        return {str(m): np.sort(self.times[values == m]) for m in dict.fromkeys(values.tolist())}


def _time(cell: Any, where: str, column: str) -> float:
    """One row's time as epoch seconds, or one line saying why it is none."""
    if cell is None or (isinstance(cell, str) and not cell.strip()):
        raise UserInputError(f"{where}: no time (column {column!r} is empty): every row is one request at its time")
    parsed = None if isinstance(cell, bool) else parse_time(str(cell).strip())
    if parsed is None or parsed[1] is TimeKind.CLOCK:
        raise UserInputError(f"{where}: time {cell!r} is not an ISO-8601 timestamp or epoch seconds")
    return parsed[0]


def _times(cells: Sequence[Any], lines: Sequence[int], source: str, column: str) -> np.ndarray:
    """Every row's time: epoch seconds read at once where they all are, else row by row (naming a bad row)."""
    if not any(isinstance(c, bool) for c in cells):
        try:
            times = np.asarray(cells, dtype=float)
        except (TypeError, ValueError):
            pass
        else:
            if np.isfinite(times).all():
                return times
    try:  # ISO-8601 timestamps, read at once (a zone-less one is UTC)
        stamps = [_dt.datetime.fromisoformat(c) for c in cells]
        return np.asarray([(s if s.tzinfo else s.replace(tzinfo=_dt.timezone.utc)).timestamp() for s in stamps])
    except (TypeError, ValueError):
        pass
    return np.asarray([_time(c, f"{source} line {n}", column) for c, n in zip(cells, lines)], dtype=float)


def _log(source: str, column: str, cells: Sequence[Any], lines: Sequence[int],
         columns: dict[str, list[str]]) -> RequestLog:
    """The log, its times checked to be in order within ORDER_TOLERANCE_S (the first row past it is named)."""
    if not lines:
        raise UserInputError(f"{source}: no requests: a request log holds one row per request")
    times = _times(cells, lines, source, column)
    latest = np.maximum.accumulate(times)
    late = np.nonzero(times < latest - ORDER_TOLERANCE_S)[0]
    if late.size:
        i = int(late[0])
        j = int(np.argmax(times[:i]))
        raise UserInputError(f"{source} line {lines[i]}: time {time_label(times[i], TimeKind.TIMESTAMP)} is "
                             f"{times[j] - times[i]:.3g} s before line {lines[j]}'s: rows must be in time order "
                             f"within {ORDER_TOLERANCE_S:g} s")
    return RequestLog(times, columns, np.asarray(lines), source, column)


def time_column_of(names: Iterable[str], given: str | None) -> str | None:
    """The log's time column: `given`, else the first of TIME_COLUMNS among `names` (any case)."""
    names = list(names)
    if given is not None:
        return given if given in names else None
    lower = {n.lower(): n for n in names}
    return next((lower[c] for c in TIME_COLUMNS if c in lower), None)


def parse_csv(text: str, path: Path, time_column: str | None = None) -> RequestLog:
    """A CSV request log: its first row names the columns."""
    rows: Iterator[tuple[int, list[str]]] = iter(csv_rows(text))
    _, header = next(rows, (0, []))
    column = time_column_of(header, time_column)
    if column is None:
        raise UserInputError(f"{path}: no time column ({time_column or ' or '.join(TIME_COLUMNS)}) in the header "
                             f"{', '.join(header)}: name it (time_column in a deployment entry, --time-column)")
    body = list(rows)
    for number, cells in body:
        if len(cells) != len(header):
            raise UserInputError(f"{path} line {number}: {len(cells)} columns, the header has {len(header)}")
    values = list(zip(*(cells for _, cells in body))) or [() for _ in header]
    columns = {h: list(v) for h, v in zip(header, values) if h != column}
    return _log(str(path), column, values[header.index(column)], [n for n, _ in body], columns)


def _jsonl_rows(text: str, path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise UserInputError(f"{path} line {number}: not JSON ({err.msg}): a JSON Lines log holds one object "
                                 "per line") from None
        if not isinstance(row, dict):
            raise UserInputError(f"{path} line {number}: {type(row).__name__}, not an object: one request per line")
        yield number, row


def parse_jsonl(text: str, path: Path, time_column: str | None = None) -> RequestLog:
    """A JSON Lines request log: one object per line, its keys the columns (a key a row lacks is '' there)."""
    body = list(_jsonl_rows(text, path))
    column = (time_column_of(body[0][1], time_column) if body else None) or time_column or TIME_COLUMNS[0]
    names = dict.fromkeys(k for _, row in body for k in row if k != column)
    columns = {k: ["" if row.get(k) is None else str(row.get(k)) for _, row in body] for k in names}
    return _log(str(path), column, [row.get(column) for _, row in body], [n for n, _ in body], columns)


def sliced(times: np.ndarray, slice_s: float, source: str) -> Series:
    """Requests counted per slice of `slice_s` seconds (slices on multiples of the width), as inferences/s."""
    k = np.floor(np.asarray(times) / slice_s).astype(np.int64)
    first, last = int(k.min()), int(k.max())
    if last - first + 1 > MAX_SLICES:
        raise UserInputError(f"{source}: {last - first + 1:,} slices of {slice_s:g} s, over {MAX_SLICES:,}: give a "
                             "wider slice (slice_s in a deployment entry, --slice-s)")
    counts = np.bincount(k - first, minlength=last - first + 1)
    starts = np.arange(first, last + 1) * slice_s
    return Series(tuple(starts.tolist()), tuple((counts / slice_s).tolist()), TimeKind.TIMESTAMP, source)


__all__ = ["MAX_SLICES", "ORDER_TOLERANCE_S", "RequestLog", "TIME_COLUMNS", "parse_csv", "parse_jsonl", "sliced",
           "time_column_of"]
