"""A CSV of time,rate rows: the traffic file a person writes by hand (or a tool exports as a rate per step).

Times increase, in seconds, ISO-8601 timestamps or HH:MM (series.parse_time); every bad row is one line naming the
file and line, so a typo in a day's 288 rows is found at once."""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Iterable

from ..config.fields import MAX_RATE
from ..errors import UserInputError
from ..inputfile import read_text
from .series import Series, TimeKind, parse_time

HEADERS = (("time", "rate"), ("time", "rps"))
KEY = "traffic file"  # how inputfile names the file in its own messages (a pipe, a device, too large)


def rate_value(cell: str, where: str, what: str = "rate") -> float:
    """A rate cell as inferences/s: a finite number >= 0 and at most MAX_RATE, else one line saying which."""
    try:
        rate = float(cell)
    except (TypeError, ValueError):
        raise UserInputError(f"{where}: {what} {cell!r} is not a number: give inferences/s, e.g. 12.5") from None
    if not math.isfinite(rate):
        raise UserInputError(f"{where}: {what} {cell!r} is not finite: give inferences/s, e.g. 12.5")
    if rate < 0:
        raise UserInputError(f"{where}: {what} {cell!r} is negative: a rate is >= 0 inferences/s")
    if rate > MAX_RATE:
        raise UserInputError(f"{where}: {what} {cell!r} is above {MAX_RATE:g} inferences/s, the most a rate may "
                             "be: give inferences/s (not per hour or per day)")
    return rate


def csv_rows(text: str) -> Iterable[tuple[int, list[str]]]:
    """(line number, stripped cells) of every row that is neither blank nor a `#` comment."""
    for number, cells in enumerate(csv.reader(text.splitlines()), start=1):
        cells = [c.strip() for c in cells]
        if not any(cells) or cells[0].startswith("#"):
            continue
        yield number, cells


def parse_rates(text: str, path: Path) -> Series:
    """`time,rate` rows (an optional header `time,rate` or `time,rps`) as one series; `path` names it."""
    times: list[float] = []
    rates: list[float] = []
    kind: TimeKind | None = None
    first = True  # a header is only the first row
    for number, cells in csv_rows(text):
        where = f"{path} line {number}"
        if first and tuple(c.lower() for c in cells) in HEADERS:
            first = False
            continue
        first = False
        if len(cells) != 2:
            raise UserInputError(f"{where}: {len(cells)} columns; a row is `time,rate` (2 columns)")
        parsed = parse_time(cells[0])
        if parsed is None:
            raise UserInputError(f"{where}: time {cells[0]!r} is not seconds, an ISO-8601 timestamp or HH:MM")
        t, row_kind = parsed
        if kind is not None and row_kind is not kind:
            raise UserInputError(f"{where}: time {cells[0]!r} is {row_kind.value} but the rows above are "
                                 f"{kind.value}: write every time of a file the same way")
        kind = row_kind
        rate = rate_value(cells[1], where)
        if times and t <= times[-1]:
            raise UserInputError(f"{where}: time {cells[0]!r} is not after the row above: times must increase")
        times.append(t)
        rates.append(rate)
    if not times:
        raise UserInputError(f"{path}: no rows: give at least one `time,rate` row (inferences/s)")
    return Series(tuple(times), tuple(rates), kind, str(path))


def read_csv(path: str | Path) -> Series:
    """A traffic file: `time,rate` rows (an optional header `time,rate` or `time,rps`), times increasing, in
    seconds, ISO-8601 timestamps or HH:MM; every bad row is one line naming the file and line."""
    path = Path(path)
    return parse_rates(read_text(path, KEY, what="a CSV of time,rate rows"), path)


__all__ = ["HEADERS", "csv_rows", "parse_rates", "rate_value", "read_csv"]
