"""A run folder made small enough to commit, losing no figure: `deployment-toolkit-lab compact-results RUN`.

A run measured before profile summaries existed (or with --keep-raw) holds perf_analyzer's per-request exports
(`*.profile.json`) and the schedules that drove them (`*.intervals`): tens of MB. Compacting it
- writes each export's summary beside it (`*.profile.summary.json`, perf/analyzer/profile_summary.py) from the
  export and its schedule file, with what the open-loop row that names it recorded (rate, distribution, seed);
  the summary's counted figures are the row's sched_* columns, recomputed;
- keeps the export gzip-compressed (`*.profile.json.gz`: every time in it; the request tensors, which measure()
  never kept, are not) instead of plain; the schedule files stay as they are (the summary's record draws them
  again: profile_summary.regenerate_schedule); both are git-ignored under results/;
- gzip-compresses the server's telemetry series (`telemetry/*_series.csv` -> `.csv.gz`, which the report reads).
Nothing else changes: the rows, reports and CSVs keep the figures they were written with. Running it again gives
the same files.
"""
from __future__ import annotations

import csv
import gzip
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deployment_toolkit.perf.analyzer import Arrivals, read_schedule
from deployment_toolkit.perf.analyzer.profile_summary import (GZ_SUFFIX, RAW_SUFFIX, finish_point, gzip_file,
                                                              schedule_record, stem, summarise, summary_path,
                                                              write_gzip, write_summary)
from deployment_toolkit.perf.openloop.ratestore import read_rows


@dataclass
class Compacted:
    """What compacting one run folder did (paths as found under the folder given)."""

    summaries: list[Path] = field(default_factory=list)
    compressed: list[Path] = field(default_factory=list)  # raw exports and telemetry series, now .gz
    no_schedule: list[Path] = field(default_factory=list)  # exports without their schedule file: not summarised
    unreadable: list[Path] = field(default_factory=list)  # empty or cut exports (their rows have no sched_*): as found


def _point_key(path: str | Path) -> tuple[str, str]:
    """(folder name, point name): how a row's `profile_export` (relative to wherever the run was started) is
    matched to a file found here."""
    p = Path(path)
    return p.parent.name, stem(p)


def rows_naming_exports(run_dir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """The open-loop rows of every store in the folder (a CSV of ratestore's schema, under whichever name the
    command gave it) by the point their export belongs to."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for table in sorted(run_dir.rglob("*.csv")):
        with open(table, newline="") as fh:
            header = next(csv.reader(fh), [])
        if "profile_export" in header and "request_rate" in header:
            found.update({_point_key(r["profile_export"]): r for r in read_rows(table) if r.get("profile_export")})
    return found


def _schedule_info(schedule: Arrivals, row: dict[str, Any] | None) -> dict[str, Any]:
    """The schedule's record, with the rate, distribution and seed its row says drew it."""
    if row is None:
        return schedule_record(schedule)
    return schedule_record(schedule, row.get("schedule_seed"), row.get("request_rate"), row.get("distribution"))


def compact_exports(run_dir: Path, derived_by: str, out: Compacted) -> None:
    """Summarise every export under `run_dir` (plain or already compressed) and keep it compressed."""
    rows = rows_naming_exports(run_dir)
    exports = sorted({*run_dir.rglob("*" + RAW_SUFFIX), *run_dir.rglob("*" + GZ_SUFFIX)})
    for raw in exports:
        if raw.name.endswith(RAW_SUFFIX) and raw.with_name(raw.name + ".gz").exists():
            raw.unlink()  # compressed already (an interrupted compaction): the .gz is the same times
            continue
        intervals = raw.with_name(stem(raw) + ".intervals")
        if not intervals.is_file():
            out.no_schedule.append(raw)
            continue
        schedule = read_schedule(intervals)
        info = _schedule_info(schedule, rows.get(_point_key(raw)))
        if raw.name.endswith(GZ_SUFFIX):  # kept with --keep-raw: summarise again, leave it
            out.summaries.append(write_summary(summarise(schedule, raw, derived_by, info), summary_path(raw)))
            continue
        try:
            finish_point(schedule, raw, True, derived_by, info)
        except (ValueError, KeyError):
            out.unreadable.append(raw)
            continue
        out.summaries.append(summary_path(raw))
        out.compressed.append(raw.with_name(stem(raw) + GZ_SUFFIX))


def compact_series(run_dir: Path, out: Compacted) -> None:
    """Every `telemetry/*_series.csv` into its `.csv.gz`; rows appended after an earlier compaction are added to
    the compressed file (without their header) in order."""
    for plain in sorted(run_dir.rglob("telemetry/*_series.csv")):
        gz = plain.with_name(plain.name + ".gz")
        if not gz.exists():
            out.compressed.append(gzip_file(plain))
            continue
        appended = plain.read_bytes().partition(b"\n")[2]  # the rows under the plain file's header
        out.compressed.append(write_gzip(gz, gzip.decompress(gz.read_bytes()) + appended))
        plain.unlink()


def compact_run(run_dir: str | Path, derived_by: str) -> Compacted:
    """Compact one run folder (see the module docstring); `derived_by` is recorded in every summary."""
    run_dir = Path(run_dir)
    out = Compacted()
    compact_exports(run_dir, derived_by, out)
    compact_series(run_dir, out)
    return out
