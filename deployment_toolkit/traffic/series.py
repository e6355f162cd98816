"""Traffic that varies over time: one rate series per model, aligned on one grid of slices.

Packing by peaks alone pays for every model's peak at once; models whose peaks do not coincide (a day model and a
night model) need less together. A series is step-hold: each row's rate holds until the next row. Series sampled
differently are aligned on the union of their change points, which is exact for step-hold series: the summed rate
only changes at some model's change point, so the peak over the grid is the true peak of the sum.

Ends, as chosen here: HH:MM times are a daily profile and wrap around midnight (before the first row the last row's
rate holds, as on the previous day); seconds and ISO-8601 timestamps are not assumed periodic, so a series holds its
first rate before its first row and its last rate after its last row. A model given by `peak_rps` alone is a
constant series and fits any grid.
"""
from __future__ import annotations

import datetime as _dt
import math
import re
from dataclasses import dataclass
from enum import Enum
from typing import Mapping, Sequence

import numpy as np

from ..errors import UserInputError

DAY_S = 86_400.0
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d*)?))?$")


class TimeKind(str, Enum):
    """How a file writes its times; series of different kinds cannot be put on one clock."""

    SECONDS = "seconds"  # a number of seconds (from any origin the files share)
    TIMESTAMP = "ISO-8601 timestamp"  # absolute time; naive ones are read as UTC (epoch seconds of an export too)
    CLOCK = "HH:MM"  # time of day: a daily profile, periodic over 24 h


@dataclass(frozen=True)
class Series:
    """One model's rates (inferences/s), each holding from its time until the next one's."""

    times: tuple[float, ...]  # seconds: since the epoch (timestamps), since midnight (HH:MM), or as written
    rates: tuple[float, ...]
    kind: TimeKind | None = None  # None: a constant, which fits any grid
    source: str = ""  # the file it was read from, for messages

    @property
    def peak(self) -> float:
        return max(self.rates)

    def at(self, t: float) -> float:
        """The rate holding at time `t` (step-hold; the ends as the module docstring says)."""
        return float(self.on((t,))[0])

    def on(self, starts: Sequence[float]) -> np.ndarray:
        """The rates holding at each of `starts`."""
        if self.kind is None:
            return np.full(len(starts), self.rates[0])
        t = np.asarray(starts, dtype=float)
        if self.kind is TimeKind.CLOCK:
            t = t % DAY_S
        k = np.searchsorted(np.asarray(self.times), t, side="right") - 1
        k[k < 0] = len(self.rates) - 1 if self.kind is TimeKind.CLOCK else 0
        return np.asarray(self.rates, dtype=float)[k]

    def widths(self) -> np.ndarray:
        """How long each rate holds: until the next time; the last one as long as the usual step (the median
        step; a whole day less the span for HH:MM profiles; 1 s for a single row)."""
        t = np.asarray(self.times, dtype=float)
        if len(t) < 2:
            return np.ones(len(t))
        last = DAY_S - (t[-1] - t[0]) if self.kind is TimeKind.CLOCK else float(np.median(np.diff(t)))
        return np.append(np.diff(t), max(last, 0.0))


def constant(peak_rps: float, source: str = "peak_rps") -> Series:
    """A model given by its peak alone: that rate at every slice."""
    if not math.isfinite(peak_rps) or peak_rps < 0:
        raise UserInputError(f"{source} must be a finite rate >= 0 inferences/s, got {peak_rps!r}")
    return Series((0.0,), (float(peak_rps),), None, source)


def parse_time(cell: str) -> tuple[float, TimeKind] | None:
    """The cell as seconds and its kind, or None when it is none of the accepted forms (seconds, HH:MM, ISO-8601;
    a timestamp without a zone is UTC)."""
    try:
        value = float(cell)
    except ValueError:
        pass
    else:
        return (value, TimeKind.SECONDS) if math.isfinite(value) else None
    if m := _CLOCK.match(cell):
        h, mnt, sec = int(m.group(1)), int(m.group(2)), float(m.group(3) or 0)
        if h < 24 and mnt < 60 and sec < 60:
            return h * 3600 + mnt * 60 + sec, TimeKind.CLOCK
        return None
    text = cell[:-1] + "+00:00" if cell.endswith(("Z", "z")) else cell
    try:
        stamp = _dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=_dt.timezone.utc)
    return stamp.timestamp(), TimeKind.TIMESTAMP


def time_label(t: float, kind: TimeKind | None) -> str:
    """A time as the files wrote it: HH:MM, an ISO-8601 UTC timestamp, or seconds."""
    if kind is TimeKind.CLOCK:
        t = t % DAY_S
        return f"{int(t // 3600):02d}:{int(t % 3600 // 60):02d}"
    if kind is TimeKind.TIMESTAMP:
        return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).isoformat(timespec="seconds")
    return f"{t:g} s"


@dataclass(frozen=True)
class Traffic:
    """Every model's rate on one grid of slices: slice k runs from starts[k] to starts[k + 1] (the last one to the
    end of the day for HH:MM, open-ended otherwise)."""

    starts: tuple[float, ...]
    rates: Mapping[str, tuple[float, ...]]
    kind: TimeKind | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.rates)

    @property
    def slices(self) -> int:
        return len(self.starts)

    def matrix(self, names: Sequence[str] | None = None) -> np.ndarray:
        """Rates as a (models, slices) array, in the order of `names` (default: every model)."""
        names = self.names if names is None else names
        return np.array([self.rates[n] for n in names], dtype=float).reshape(len(names), self.slices)

    def label(self, k: int) -> str:
        """Slice k's start as the files wrote times."""
        return time_label(self.starts[k], self.kind)


def align(series: Mapping[str, Series]) -> Traffic:
    """Every series on the union of their change points (step-hold; the ends as the module docstring says)."""
    if not series:
        raise UserInputError("no traffic: give each model a traffic file or a peak_rps")
    kinds = {s.kind for s in series.values() if s.kind is not None}
    if len(kinds) > 1:
        shown = ", ".join(f"{s.source or n} ({s.kind.value})" for n, s in series.items() if s.kind is not None)
        raise UserInputError(f"traffic files mix kinds of time: {shown}: write every file's times the same way")
    kind = kinds.pop() if kinds else None
    points = {t for s in series.values() if s.kind is not None for t in s.times}
    if kind is TimeKind.CLOCK:
        points.add(0.0)
    starts = tuple(sorted(points)) or (0.0,)
    rates = {name: tuple(float(r) for r in s.on(starts)) for name, s in series.items()}
    return Traffic(starts, rates, kind)


def peak(rates: Sequence[float] | Series) -> float:
    """The highest rate of one series."""
    return rates.peak if isinstance(rates, Series) else max(rates)


def peak_of_sum(traffic: Traffic, names: Sequence[str]) -> float:
    """The highest summed rate of `names` in any one slice (what they need together when they share)."""
    return float(traffic.matrix(names).sum(axis=0).max())


def sum_of_peaks(traffic: Traffic, names: Sequence[str]) -> float:
    """The sum of each model's own peak (what sizing by peaks pays for)."""
    return float(traffic.matrix(names).max(axis=1).sum())


@dataclass(frozen=True)
class WorstSlice:
    """The slice where a group's weighted load is highest, and each member's rate there."""

    index: int
    load: float  # sum of weight x rate at that slice
    rates: Mapping[str, float]


def worst_slice(traffic: Traffic, weights: Mapping[str, float]) -> WorstSlice:
    """The slice maximising sum_i weights[i] x rate_i (weights: e.g. (1 + headroom) / capacity, so the load is in
    replicas' worth) and each member's rate there; the earliest slice on a tie."""
    names = tuple(weights)
    m = traffic.matrix(names)
    load = np.asarray([weights[n] for n in names]) @ m
    k = int(np.argmax(load))
    return WorstSlice(k, float(load[k]), {n: float(m[i, k]) for i, n in enumerate(names)})


__all__ = ["DAY_S", "Series", "TimeKind", "Traffic", "WorstSlice", "align", "constant", "parse_time", "peak",
           "peak_of_sum", "sum_of_peaks", "time_label", "worst_slice"]
