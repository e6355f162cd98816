"""Server-side figures of a sweep's (or a search's) points, stored beside its rows: `<kind>_server.csv` (one
summary row per point, replaced when the point is measured again) and `telemetry/<kind>_series.csv` (every
scrape). Written by perf.telemetry, read by the report, the search and the sizing; here because all use it.

The series is the bulky part (a row per metric per scrape: hundreds of kB a sweep); a committed run keeps it
gzip-compressed (`<kind>_series.csv.gz`, `deployment-toolkit compact-results`), so it is read from either, the
compressed rows first (a point appended after compaction goes to the plain file)."""
from __future__ import annotations

import csv
import gzip
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..spec import atomic_write_text
from .rows import RowSchema, to_csv

SUMMARY_COLUMNS = ("samples", "seconds", "server_infer_per_s", "client_vs_server_pct", "avg_batch",
                   "queue_us_per_request", "compute_infer_us_per_request", "compute_infer_us_per_exec",
                   "pending_requests", "cpu_util_pct", "cpu_memory_gib", "gpu_util_pct", "gpu_memory_gib",
                   "gpu_power_w")


SERIES_COLUMNS = ("t_s", "metric", "series", "value")


def _text(value: Any) -> str:
    """A cell as Python's csv module writes it (a float in full, None empty): these files keep their bytes."""
    return "" if value is None else str(value)


def _series_schema(point: Mapping[str, Any]) -> RowSchema:
    return RowSchema(columns=(*point.keys(), *SERIES_COLUMNS))


def series_csv(samples: Sequence[Any], point: Mapping[str, Any]) -> str:
    """The time series as CSV rows (no header): the point's key columns, t (s from the first sample), metric,
    series, value."""
    t0 = samples[0].t if samples else 0.0
    rows = [{**{k: _text(v) for k, v in point.items()}, "t_s": f"{s.t - t0:.3f}", "metric": name, "series": key,
             "value": _text(value)}
            for s in samples for name, series in sorted(s.values.items()) for key, value in sorted(series.items())]
    return to_csv(_series_schema(point), rows, header=False)


def append_series(path: Path, samples: Sequence[Any], point: Mapping[str, Any]) -> None:
    """Add a point's samples to `path` (header on creation); one file per sweep, every point in it."""
    new = not path.exists()
    with open(path, "a", newline="") as fh:
        if new:
            fh.write(to_csv(_series_schema(point), []))
        fh.write(series_csv(samples, point))


def series_path(result_dir: Path, kind: str) -> Path:
    """`telemetry/<kind>_series.csv`, where the points' samples are appended."""
    return Path(result_dir) / "telemetry" / f"{kind}_series.csv"


def read_series(result_dir: Path, kind: str) -> list[dict[str, str]]:
    """Every sample row of `<kind>_series.csv.gz` and then `<kind>_series.csv` ([] without either)."""
    plain = series_path(result_dir, kind)
    rows: list[dict[str, str]] = []
    for path, opener in ((plain.with_name(plain.name + ".gz"), gzip.open), (plain, open)):
        if path.is_file():
            with opener(path, "rt", newline="") as fh:
                rows += list(csv.DictReader(fh))
    return rows


def server_csv(result_dir: Path, kind: str) -> Path:
    return Path(result_dir) / f"{kind}_server.csv"


KEY_COLUMNS = ("Client Batch Size", "Concurrent client requests", "client_infer_per_s")


def read_summaries(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _order(value: str | None) -> tuple[int, float | str]:
    """Sort key of one key cell: numbers by value, before text (a config name)."""
    try:
        return (0, float(value or 0))
    except ValueError:
        return (1, str(value))


def record_point(result_dir: Path, kind: str, key: Mapping[str, Any], summary: Mapping[str, Any],
                 samples: Sequence[Any], identity: Sequence[str] = KEY_COLUMNS[:2]) -> None:
    """The point's summary into `<kind>_server.csv` (one row per point, replaced when the point is measured
    again) and its samples into `telemetry/<kind>_series.csv`. `identity` names the key columns that make a point
    (a sweep's batch and concurrency; the search's config, concurrency and sample); `key` also carries the
    client's throughput (`client_infer_per_s`)."""
    path = server_csv(result_dir, kind)
    ids = list(identity)
    columns = [*ids, KEY_COLUMNS[2], *SUMMARY_COLUMNS]
    mine = tuple(str(key[k]) for k in ids)
    rows = [r for r in read_summaries(path) if tuple(r.get(k) for k in ids) != mine]
    rows.append({**{k: key.get(k) for k in columns[:len(ids) + 1]}, **summary})
    rows.sort(key=lambda r: tuple(_order(None if r.get(k) is None else str(r.get(k))) for k in ids))
    schema = RowSchema(columns=tuple(columns))
    atomic_write_text(path, to_csv(schema, [{c: _text(r.get(c)) for c in columns} for r in rows]))
    series = Path(result_dir) / "telemetry" / f"{kind}_series.csv"
    series.parent.mkdir(parents=True, exist_ok=True)
    append_series(series, samples, {k: key[k] for k in ids})
