"""One reader for every traffic file, told apart by its content with no conversion step: a Prometheus range-query
answer (JSON with `data.resultType`), a request log (JSON Lines, or a CSV whose header names a time column such as
`time`/`timestamp`/`ts` and is not `time,rate`), or the CSV of time,rate rows a person writes.

One file may hold every model's traffic. Its models are told apart by the `model` label (Prometheus) or column
(a log), `model_label` to use another; a deployment entry picks its own series by label or column equality
(`series: {model: fraud, version: "2"}`; default: `model` equal to the entry's name), every series it picks summed
(a model's versions and pods add up). A CSV of time,rate is one model's."""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..config.fields import check_numbers, setting
from ..errors import UserInputError
from ..inputfile import check_path, read_text
from . import prometheus, requestlog
from .prometheus import PromSeries, SeriesKind
from .ratecsv import HEADERS, KEY, csv_rows, parse_rates
from .requestlog import RequestLog
from .series import DAY_S, Series


DEFAULT_SLICE_S = 60.0  # a log's rate per minute, as rate(...[1m]) would take it: the second's bursts are stats'


class Format(str, Enum):
    RATES = "a CSV of time,rate"
    PROMETHEUS = "a Prometheus range-query answer"
    LOG_CSV = "a request log (CSV)"
    LOG_JSONL = "a request log (JSON Lines)"


@dataclass(frozen=True)
class ReadOptions:
    """How a traffic file is read where its content does not say (the same in a deployment entry and as flags)."""

    traffic_kind: SeriesKind = setting(SeriesKind.AUTO, flag="--kind",
                               help="a Prometheus series is a counter or a rate already taken (auto: a counter when "
                                    "its __name__ is one of Triton's counters or ends in _total)")
    model_label: str = setting("model", flag="--model-label",
                               help="the label (Prometheus) or column (request log) that names each model")
    time_column: str | None = setting(None, flag="--time-column",
                                      help="a request log's time column (default: time, timestamp or ts)")
    slice_s: float = setting(DEFAULT_SLICE_S, flag="--slice-s", unit="s", low=0, low_open=True, high=DAY_S,
                             help="a request log's rate is its requests counted per slice of this width")

    def __post_init__(self) -> None:
        check_numbers(self)
        try:
            object.__setattr__(self, "traffic_kind", SeriesKind(self.traffic_kind))
        except ValueError:
            raise UserInputError(f"traffic_kind must be one of {', '.join(k.value for k in SeriesKind)}, got "
                                 f"{self.traffic_kind!r}") from None


@dataclass(frozen=True)
class ModelTraffic:
    """One model's traffic as the planner uses it, and the request times where a log gave them."""

    name: str
    series: Series
    arrivals: np.ndarray | None = None  # sorted request times (epoch seconds): a log's; None for rates
    span: tuple[float, float] | None = None  # the whole log's first and last request (its mean is over this)
    what: str = ""  # where it came from, said in the command's table
    scale: float = 1.0  # the series was scaled by this (a deployment's peak_rps); the arrivals are as recorded


@dataclass(frozen=True)
class TrafficFile:
    """A traffic file, read and checked, in its own form."""

    path: Path
    format: Format
    rates: Series | None = None
    series: tuple[PromSeries, ...] = ()
    log: RequestLog | None = None


def _is_log_header(cells: list[str], time_column: str | None) -> bool:
    if tuple(c.lower() for c in cells) in HEADERS or len(cells) < 2:
        return False
    has_rate = bool({"rate", "rps"} & {c.lower() for c in cells})
    return requestlog.time_column_of(cells, time_column) is not None and not has_rate


def _json(text: str, path: Path, options: ReadOptions) -> TrafficFile:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        if err.msg != "Extra data":
            raise UserInputError(f"{path}: not JSON (line {err.lineno} column {err.colno}: {err.msg}): give a "
                                 "Prometheus answer, a request log or a CSV of time,rate") from None
        return TrafficFile(path, Format.LOG_JSONL, log=requestlog.parse_jsonl(text, path, options.time_column))
    if prometheus.looks_like(doc):
        return TrafficFile(path, Format.PROMETHEUS, series=tuple(prometheus.parse(doc, path, options.traffic_kind)))
    if isinstance(doc, dict):
        return TrafficFile(path, Format.LOG_JSONL, log=requestlog.parse_jsonl(text, path, options.time_column))
    raise UserInputError(f"{path}: JSON {type(doc).__name__} is neither a Prometheus answer (an object with "
                         "data.resultType) nor a request log (one object per line)")


def load(path: str | Path, options: ReadOptions = ReadOptions()) -> TrafficFile:
    """Read a traffic file (inputfile: a regular file under its limit) and tell its form by its content; one file
    named by several entries of a deployment is read once while it is unchanged."""
    path = Path(path)
    try:
        st = check_path(path, KEY).stat()
    except OSError:
        return _load(path, options, 0, -1)
    return _load(path, options, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=2)
def _load(path: Path, options: ReadOptions, mtime_ns: int, size: int) -> TrafficFile:
    text = read_text(path, KEY, what="a Prometheus answer, a request log or a CSV of time,rate")
    if text.lstrip().startswith(("{", "[")):
        return _json(text, path, options)
    _, header = next(iter(csv_rows(text)), (0, []))
    if _is_log_header(header, options.time_column):
        return TrafficFile(path, Format.LOG_CSV, log=requestlog.parse_csv(text, path, options.time_column))
    return TrafficFile(path, Format.RATES, rates=parse_rates(text, path))


def _from_log(log: RequestLog, name: str, times: np.ndarray, options: ReadOptions) -> ModelTraffic:
    series = requestlog.sliced(times, options.slice_s, log.source)
    return ModelTraffic(name, series, times, log.span, f"{len(times):,} requests, {options.slice_s:g} s slices")


def _from_prometheus(file: TrafficFile, name: str, chosen: list[PromSeries], options: ReadOptions) -> ModelTraffic:
    counters = sum(s.is_counter(options.traffic_kind) for s in chosen)
    what = f"{len(chosen)} series" + (f" ({counters} counter{'s' if counters > 1 else ''})" if counters else "")
    return ModelTraffic(name, prometheus.summed(chosen, file.path, options.traffic_kind), what=what)


def models(file: TrafficFile, options: ReadOptions = ReadOptions()) -> dict[str, ModelTraffic]:
    """Every model a file holds, by `options.model_label` (a CSV of time,rate: one model, named by the file)."""
    if file.rates is not None:
        return {file.path.stem: ModelTraffic(file.path.stem, file.rates, what="time,rate rows")}
    if file.log is not None:
        by_model = file.log.models(options.model_label)
        return {m: _from_log(file.log, m, times, options) for m, times in by_model.items()}
    groups: dict[str, list[PromSeries]] = {}
    for s in file.series:
        if options.model_label not in s.labels:
            raise UserInputError(f"{file.path}: series {s.index} {s.describe()} has no {options.model_label!r} label: "
                                 "keep it in the query (sum by (model, version)), or name the label (--model-label)")
        groups.setdefault(s.labels[options.model_label], []).append(s)
    return {m: _from_prometheus(file, m, chosen, options) for m, chosen in groups.items()}


def _shown(labels: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in labels.items())


def selector(value: Any, where: str, label: str = "model") -> dict[str, str]:
    """A `series:` selector as label -> value text: a mapping (`{model: fraud, version: 2}`), or a text naming the
    `label` alone (`series: fraud`)."""
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return {label: str(value)}
    if not isinstance(value, Mapping) or not value:
        raise UserInputError(f"{where} must name labels and their values ({{model: fraud, version: \"2\"}}) or a "
                             f"model, got {value!r}")
    return {str(k): str(v) for k, v in value.items()}


def select(file: TrafficFile, name: str, labels: Mapping[str, str] | None = None,
           options: ReadOptions = ReadOptions()) -> ModelTraffic:
    """Model `name`'s traffic in a file: the series (or rows) whose labels (or columns) equal `labels`, default
    `model_label` equal to `name`, summed; none is one line naming what the file holds."""
    if file.rates is not None:
        if labels:
            raise UserInputError(f"{file.path}: series {{{_shown(labels)}}} picks a series, but the file is "
                                 f"{file.format.value} (one model's rates): drop 'series:'")
        return ModelTraffic(name, file.rates, what="time,rate rows")
    labels = dict(labels) if labels else {options.model_label: name}
    if file.log is not None:
        times = file.log.select(labels)
        if len(times) == 0:
            held = sorted(set(file.log.columns.get(options.model_label, [])) - {""})
            raise UserInputError(f"{file.path}: no request with {_shown(labels)} (its {options.model_label!r} values: "
                                 f"{', '.join(held[:10]) or 'none'}): name the model's series (series: {{...}})")
        return _from_log(file.log, name, times, options)
    chosen = [s for s in file.series if all(s.labels.get(k) == v for k, v in labels.items())]
    if not chosen:
        held = sorted({s.labels.get(options.model_label, "") for s in file.series} - {""})
        raise UserInputError(f"{file.path}: no series with {_shown(labels)} (its {options.model_label!r} labels: "
                             f"{', '.join(held[:10]) or 'none'}): name the model's series (series: {{...}})")
    return _from_prometheus(file, name, chosen, options)


def read_model(path: str | Path, name: str, labels: Mapping[str, str] | None = None,
               options: ReadOptions = ReadOptions()) -> ModelTraffic:
    """One model's traffic from a file (a deployment entry's `traffic:`)."""
    return select(load(path, options), name, labels, options)


__all__ = ["DEFAULT_SLICE_S", "Format", "ModelTraffic", "ReadOptions", "TrafficFile", "load", "models", "read_model",
           "select", "selector"]
