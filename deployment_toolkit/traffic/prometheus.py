"""A Prometheus HTTP API answer to /api/v1/query_range (`resultType: matrix`), as saved with curl or Grafana's
"Inspect > Data > JSON": every series with its labels and its [time, "value"] samples.

A series is a counter or a rate already taken, by one rule: a counter when its `__name__` label ends with one of
Triton's counters (COUNTERS) or `_total`, a rate otherwise (`rate(...)`, `sum by (model) (rate(...))` and
recording rules drop `__name__`); `kind: counter | rate` says it where the name does not. A counter becomes a
rate with Prometheus' own semantics: the increase between two samples is their difference, and where the value
drops the counter was reset (a restart) and the sample after the drop counts from zero, so the increase is the
value itself. Each rate holds from its sample until the next (step-hold, series.Series); several series of one
model (its versions, its pods) are summed on the union of their times, each counting 0 outside its own span.
Samples must increase in time (a range query's always do): the tolerance for disorder here is none."""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import UserInputError
from .ratecsv import rate_value
from .series import Series, TimeKind, time_label

COUNTERS = ("nv_inference_request_success", "nv_inference_count", "nv_inference_exec_count",
            "nv_inference_request_failure")


class SeriesKind(str, Enum):
    """What a series' values are: by its name (AUTO, the module docstring's rule), or as stated."""

    AUTO = "auto"
    COUNTER = "counter"
    RATE = "rate"


@dataclass(frozen=True)
class PromSeries:
    """One series of the answer: its labels and samples (epoch seconds, values as written)."""

    labels: Mapping[str, str]
    times: np.ndarray
    values: np.ndarray
    index: int  # its place in the answer's `result` list, for messages

    def describe(self) -> str:
        """The series as Prometheus writes it: name{label="value", ...}."""
        name = self.labels.get("__name__", "")
        inner = ", ".join(f'{k}="{v}"' for k, v in sorted(self.labels.items()) if k != "__name__")
        return f"{name}{{{inner}}}"

    def is_counter(self, kind: SeriesKind = SeriesKind.AUTO) -> bool:
        if kind is not SeriesKind.AUTO:
            return kind is SeriesKind.COUNTER
        name = self.labels.get("__name__", "")
        return name.endswith(COUNTERS) or name.endswith("_total")


def looks_like(doc: Any) -> bool:
    """Whether a parsed JSON document is a Prometheus API answer (not one row of a JSON Lines log)."""
    return isinstance(doc, Mapping) and ("status" in doc or "data" in doc) and "resultType" in (doc.get("data") or {})


def _samples(raw: Any, where: str) -> tuple[np.ndarray, list[Any]]:
    if not isinstance(raw, list) or not raw:
        raise UserInputError(f"{where}: no samples ('values' is empty or missing): export a range query "
                             "(/api/v1/query_range) that covers the traffic")
    times, values = [], []
    for pair in raw:
        if not isinstance(pair, list) or len(pair) != 2:
            raise UserInputError(f"{where}: sample {pair!r} is not [time, \"value\"]")
        try:
            t = float(pair[0])
        except (TypeError, ValueError):
            raise UserInputError(f"{where}: sample time {pair[0]!r} is not epoch seconds") from None
        if times and not t > times[-1]:
            raise UserInputError(f"{where}: sample time {time_label(t, TimeKind.TIMESTAMP)} is not after the "
                                 f"sample before ({time_label(times[-1], TimeKind.TIMESTAMP)}): samples must "
                                 "increase in time")
        times.append(t)
        values.append(pair[1])
    return np.asarray(times), values


def _counter_value(cell: Any, where: str) -> float:
    try:
        value = float(cell)
    except (TypeError, ValueError):
        raise UserInputError(f"{where}: value {cell!r} is not a number: a counter's value is a count") from None
    if not math.isfinite(value) or value < 0:
        raise UserInputError(f"{where}: value {cell!r} is not a count (finite, >= 0)")
    return value


def _value(cell: Any, where: str, counter: bool) -> float:
    return _counter_value(cell, where) if counter else rate_value(cell, where, "value")


def parse(doc: Any, path: Path, kind: SeriesKind = SeriesKind.AUTO) -> list[PromSeries]:
    """Every series of an answer, each value checked (a rate as series.rate_value, a counter a count >= 0)."""
    if doc.get("status", "success") != "success":
        raise UserInputError(f"{path}: Prometheus answered status {doc.get('status')!r} ({doc.get('errorType', '')}"
                             f" {doc.get('error', '')}): save an answer whose status is 'success'")
    data = doc.get("data") or {}
    if data.get("resultType") != "matrix":
        raise UserInputError(f"{path}: resultType {data.get('resultType')!r} is not 'matrix': save the answer of a "
                             "range query (/api/v1/query_range), not an instant query")
    result = data.get("result")
    if not isinstance(result, list) or not result:
        raise UserInputError(f"{path}: the answer holds no series (data.result is empty): check the query")
    found = []
    for i, raw in enumerate(result):
        labels = raw.get("metric") if isinstance(raw, Mapping) else None
        if not isinstance(labels, Mapping):
            raise UserInputError(f"{path}: series {i} has no 'metric' labels: save the API's answer unchanged")
        series = PromSeries({str(k): str(v) for k, v in labels.items()}, np.zeros(0), np.zeros(0), i)
        where = f"{path}: series {i} {series.describe()}"
        times, cells = _samples(raw.get("values"), where)
        counter = series.is_counter(kind)
        values = [_value(cell, f"{where} at {time_label(t, TimeKind.TIMESTAMP)}", counter)
                  for t, cell in zip(times, cells)]
        found.append(PromSeries(series.labels, times, np.asarray(values, dtype=float), i))
    return found


def counter_rates(times: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per-interval rates of a counter (len - 1 of them): the increase over each interval's length, where a drop
    is a reset and the value after it is the increase (Prometheus' rate and increase)."""
    delta = np.diff(values)
    increase = np.where(delta >= 0, delta, values[1:])
    return increase / np.diff(times)


@dataclass(frozen=True)
class _Piece:
    """Rates holding from each start until the next, the last one until `end`; 0 outside."""

    starts: np.ndarray
    rates: np.ndarray
    end: float


def _piece(s: PromSeries, kind: SeriesKind, path: Path) -> _Piece:
    if s.is_counter(kind):
        if len(s.times) < 2:
            raise UserInputError(f"{path}: series {s.index} {s.describe()} is a counter with one sample: a rate "
                                 "needs two (export a longer range)")
        return _Piece(s.times[:-1], counter_rates(s.times, s.values), float(s.times[-1]))
    step = float(np.median(np.diff(s.times))) if len(s.times) > 1 else 1.0
    return _Piece(s.times, s.values, float(s.times[-1]) + step)


def summed(series: Sequence[PromSeries], path: Path, kind: SeriesKind = SeriesKind.AUTO) -> Series:
    """The series as one model's rate: each a rate (a counter turned into one), summed on the union of their
    times, each 0 outside its span; the series holds its last sum after the last start."""
    pieces = [_piece(s, kind, path) for s in series]
    ends = [p.end for p in pieces]
    grid = np.unique(np.concatenate([p.starts for p in pieces] + [np.asarray(ends)]))
    grid = grid[grid < max(ends)]
    total = np.zeros(len(grid))
    for p in pieces:
        k = np.searchsorted(p.starts, grid, side="right") - 1
        inside = (k >= 0) & (grid < p.end)
        total[inside] += p.rates[k[inside]]
    return Series(tuple(float(t) for t in grid), tuple(float(r) for r in total), TimeKind.TIMESTAMP, str(path))


__all__ = ["COUNTERS", "PromSeries", "SeriesKind", "counter_rates", "looks_like", "parse", "summed"]
