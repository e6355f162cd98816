"""Traffic that varies over time, as the planner reads it: one rate series per model (deployment_toolkit.traffic
reads a Prometheus range-query answer, a request log or a CSV of time,rate, by its content), aligned on one grid of
slices. The series, the grid and their peaks live in `traffic.series`; this module keeps the names the planner's
modules import, and reads a deployment entry's traffic as its keys say (`entry_series`)."""
from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any, Mapping

from ..config.fields import check_number, flag_of
from ..errors import UserInputError
from ..traffic.ratecsv import read_csv
from ..traffic.read import ModelTraffic, ReadOptions, read_model, selector
from ..traffic.series import (DAY_S, Series, TimeKind, Traffic, WorstSlice, align, constant, peak, peak_of_sum,
                              sum_of_peaks, worst_slice)

if TYPE_CHECKING:
    from .file import ModelEntry

log = logging.getLogger(__name__)


READING = ("traffic_kind", "time_column", "slice_s")  # an entry's keys that are ReadOptions' fields


def _number(value: Any, key: str) -> float:
    """A number as YAML gives it (`60`, `0.5`, or `1e3` read as text)."""
    try:
        if isinstance(value, bool):
            raise ValueError
        return float(value)
    except (TypeError, ValueError):
        raise UserInputError(f"{key} must be a number, got {value!r}") from None


def reading(raw: Mapping[str, Any], values: dict[str, Any], section: str) -> ReadOptions | None:
    """How an entry's traffic file is read (`series:` and READING, each checked under its key, put in `values`);
    None without `traffic:`, where those keys are refused."""
    given = [k for k in ("series", *READING) if raw.get(k) is not None]
    if "traffic" not in values:
        if given:
            raise UserInputError(f"{section}: {given[0]} says how its traffic file is read, but no 'traffic:' is given")
        return None
    if raw.get("series") is not None:
        values["series"] = selector(raw["series"], f"{section}: series")
    for key in READING:
        if raw.get(key) is not None:
            values[key] = _number(raw[key], f"{section}: {key}") if key == "slice_s" else str(raw[key])
    if "slice_s" in values:  # checked as the file names it, not as the flag --slice-s
        flag = flag_of(next(f for f in dataclasses.fields(ReadOptions) if f.name == "slice_s"))
        check_number(values["slice_s"], dataclasses.replace(flag, name=None), f"{section}: slice_s")
    try:
        options = ReadOptions(**{k: values[k] for k in READING if k in values})
    except UserInputError as err:
        raise UserInputError(f"{section}: {err}") from None
    if "traffic_kind" in values:
        values["traffic_kind"] = options.traffic_kind  # the entry holds the enum, as ReadOptions does
    return options


def read_options(entry: "ModelEntry") -> ReadOptions:
    """How an entry's traffic file is read where its content does not say (its keys traffic_kind, time_column,
    slice_s)."""
    return ReadOptions(traffic_kind=entry.traffic_kind, time_column=entry.time_column, slice_s=entry.slice_s)


def entry_traffic(entry: "ModelEntry") -> ModelTraffic:
    """An entry's traffic as the planner uses it: its traffic file's series (picked by `series:`, else by its
    name), scaled to its peak_rps where both are given (file.py's stated rule); its peak alone as a constant."""
    if entry.traffic is None:
        return ModelTraffic(entry.name, constant(entry.peak_rps), what="peak_rps")
    m = read_model(entry.traffic, entry.name, entry.series or None, read_options(entry))
    s = m.series
    if not (entry.peak_given and s.peak > 0):
        return m
    factor = entry.peak_rps / s.peak
    log.info(f"{entry.name}: traffic {entry.traffic.name} scaled to peak_rps {entry.peak_rps:g} (its own peak "
             f"{s.peak:g} inferences/s, x {factor:.3g})")
    return dataclasses.replace(m, series=dataclasses.replace(s, rates=tuple(r * factor for r in s.rates)),
                               scale=factor, what=f"{m.what}, x {factor:.3g} to peak_rps")


def entry_series(entry: "ModelEntry") -> Series:
    """An entry's rate series as the planner uses it (entry_traffic)."""
    return entry_traffic(entry).series


__all__ = ["DAY_S", "Series", "TimeKind", "Traffic", "WorstSlice", "align", "constant", "entry_series",
           "entry_traffic", "peak", "peak_of_sum", "read_csv", "read_options", "reading", "sum_of_peaks", "worst_slice"]
