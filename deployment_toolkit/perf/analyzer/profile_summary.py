"""What a run folder keeps of perf_analyzer's per-request profile export: a small summary beside the point.

An open-loop point's export (`--profile-export-file`, read by schedule.py) holds every request's send and response
times: hundreds of kB to several MB a point, tens of MB a run, which every clone of a committed run would carry.
What the toolkit reads from it is small: the latency from the intended send time over the requests perf_analyzer
counts (the open-loop row's sched_*/late_* columns), and per measurement window the same percentiles and counts.
So each export is summarised where it is written, into `<point>.profile.summary.json`, and the raw file is
dropped, or kept gzip-compressed (`<point>.profile.json.gz`, times only) with `--keep-raw`. The schedule file
(`<point>.intervals`) goes with it: the row's seed, the rate and the count recorded here regenerate it
(schedule.make_schedule), and its digest here says whether a regenerated one is the same.

The summary records where it came from: the size and SHA-256 of the export's times-only JSON (what the `.gz`
holds; trim_profile_export's text), the schedule's length and SHA-256 with its rate, distribution and seed, and
what derived it. Its name says which point: the row's `profile_export` names it (or, in runs measured before
summaries, the raw file beside it: summary_path maps one to the other).
"""
from __future__ import annotations

import gzip
import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...spec import atomic_write, atomic_write_text
from .schedule import (LATE_TOLERANCE_MS, REPORTED_WINDOWS, Arrivals, ProfileExport, ScheduleLatency,
                       intended_send_ns, load_export, make_schedule, profile_export_from, schedule_latency,
                       times_only)

RAW_SUFFIX = ".profile.json"
GZ_SUFFIX = ".profile.json.gz"
SUMMARY_SUFFIX = ".profile.summary.json"
FORMAT = "profile-summary/1"
WINDOW_FIELDS = ("requests", "sched_p50_ms", "sched_p90_ms", "sched_p99_ms", "p50_ms", "p90_ms", "p99_ms",
                 "late_pct", "late_max_ms")


def stem(path: str | Path) -> str:
    """The point's name: `<point>` of `<point>.profile.json`, `.profile.json.gz` or `.profile.summary.json`."""
    name = Path(path).name
    for suffix in (GZ_SUFFIX, SUMMARY_SUFFIX, RAW_SUFFIX):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    raise ValueError(f"{path}: not a profile export or its summary (*{RAW_SUFFIX}, *{GZ_SUFFIX}, *{SUMMARY_SUFFIX})")


def summary_path(path: str | Path) -> Path:
    """Where the summary of a point's export lives, given the export (raw or .gz), or the summary itself: the
    open-loop rows name the raw file in runs measured before summaries, the summary in later ones."""
    return Path(path).with_name(stem(path) + SUMMARY_SUFFIX)


def _r(x: float) -> float | None:
    """ms to the µs (the export's times are ns; finer digits are noise and bytes); NaN -> null."""
    return None if x is None or math.isnan(x) else round(float(x), 3)


@dataclass(frozen=True)
class ProfileSummary:
    """One point's export, summarised: the counted requests' latency (what the row stores) and each window's."""

    latency: ScheduleLatency  # over the last `reported_windows` windows: perf_analyzer's counted requests
    windows: dict[str, list[Any]]  # per window (len(boundaries_ns) - 1 of them): WINDOW_FIELDS, columnar
    boundaries_ns: list[int]
    requests: int  # every request in the export
    unanswered: int
    mode: str = ""
    value: float = math.nan
    reported_windows: int = REPORTED_WINDOWS
    source: dict[str, Any] = field(default_factory=dict)  # the export's times-only JSON: bytes, sha256
    schedule: dict[str, Any] = field(default_factory=dict)  # intervals, sha256 (+ rate, distribution, seed)
    derived_by: str = ""

    def as_json(self) -> dict[str, Any]:
        lat = {k: (_r(v) if isinstance(v, float) else v) for k, v in asdict(self.latency).items()}
        return {"format": FORMAT, "source": self.source, "schedule": self.schedule, "derived_by": self.derived_by,
                "experiment": {"mode": self.mode, "value": None if math.isnan(self.value) else self.value},
                "requests": self.requests, "unanswered": self.unanswered, "reported_windows": self.reported_windows,
                "latency": lat, "window_boundaries_ns": self.boundaries_ns, "windows": self.windows}

    @staticmethod
    def from_json(data: dict[str, Any]) -> "ProfileSummary":
        if data.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} summary (format {data.get('format')!r})")
        lat = {k: (math.nan if v is None else v) for k, v in data["latency"].items()}
        exp = data.get("experiment") or {}
        value = exp.get("value")
        return ProfileSummary(ScheduleLatency(**lat), data["windows"], list(data["window_boundaries_ns"]),
                              int(data["requests"]), int(data["unanswered"]), str(exp.get("mode", "")),
                              math.nan if value is None else float(value), int(data["reported_windows"]),
                              data.get("source") or {}, data.get("schedule") or {}, str(data.get("derived_by", "")))


def window_latency(schedule: Arrivals, export: ProfileExport) -> dict[str, list[Any]]:
    """Per measurement window (requests whose last response falls within it, perf_analyzer's rule; the last
    window's end inclusive): the count and the percentiles from the intended and the actual send, and how late."""
    intended = intended_send_ns(schedule, export)
    wb = export.window_boundaries_ns
    out: dict[str, list[Any]] = {k: [] for k in WINDOW_FIELDS}
    for i in range(max(0, len(wb) - 1)):
        lo, hi = wb[i], wb[i + 1]
        inside = (export.end_ns >= lo) & ((export.end_ns < hi) if i < len(wb) - 2 else (export.end_ns <= hi))
        out["requests"].append(int(inside.sum()))
        if not inside.any():
            for k in WINDOW_FIELDS[1:]:
                out[k].append(None)
            continue
        end = export.end_ns[inside]
        sched = np.percentile((end - intended[inside]) / 1e6, [50, 90, 99])
        actual = np.percentile((end - export.send_ns[inside]) / 1e6, [50, 90, 99])
        late = np.maximum((export.send_ns[inside] - intended[inside]) / 1e6, 0.0)
        for k, v in zip(WINDOW_FIELDS[1:], (*sched, *actual, 100.0 * np.mean(late > LATE_TOLERANCE_MS), late.max())):
            out[k].append(_r(float(v)))
    return out


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def schedule_record(schedule: Arrivals, seed: int | None = None, rate: float | None = None,
                    distribution: str | None = None) -> dict[str, Any]:
    """What identifies the arrivals (`<point>.intervals`): its length and digest, and what drew it where known
    (a run measured before summaries records its seed in the row, not in the schedule file)."""
    text = "\n".join(map(str, schedule.intervals_us.tolist())) + "\n"  # the file write_schedule writes
    rec: dict[str, Any] = {"intervals": len(schedule.intervals_us), "sha256": _sha256(text.encode())}
    for k, v in (("rate", rate), ("distribution", distribution), ("seed", seed)):
        if v is not None:
            rec[k] = v
    return rec


def regenerate_schedule(record: dict[str, Any]) -> Arrivals:
    """The schedule a summary's record describes, drawn again (make_schedule with its rate, distribution and seed,
    cut to its length: the draws of a longer schedule start with those of a shorter one). ValueError when the
    record lacks what drew it or the result's digest is not the recorded one."""
    try:
        n, rate, distribution, seed = (record["intervals"], float(record["rate"]), str(record["distribution"]),
                                       int(record["seed"]))
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"the schedule record {record} does not say what drew it (rate, distribution, seed)")
    drawn = make_schedule(rate, (n + 1) / rate, distribution, seed).intervals_us[:n]
    schedule = Arrivals(drawn, seed, rate, distribution)
    if len(drawn) < n or schedule_record(schedule)["sha256"] != record.get("sha256"):
        raise ValueError(f"the schedule drawn again from {record} is not the one recorded (its digest differs)")
    return schedule


def _read(raw: Path) -> tuple[ProfileExport, bytes]:
    """The export and its times-only JSON (what a kept `.gz` holds, and what the summary's digest is of)."""
    data = load_export(raw)
    return profile_export_from(data, raw), times_only(data).encode()


def summary_of(schedule: Arrivals, export: ProfileExport, times: bytes, derived_by: str,
               schedule_info: dict[str, Any] | None = None, windows: int = REPORTED_WINDOWS) -> ProfileSummary:
    """The summary of a read export against the schedule that drove it; `times`: its times-only JSON."""
    return ProfileSummary(schedule_latency(schedule, export, windows), window_latency(schedule, export),
                          [int(x) for x in export.window_boundaries_ns], len(export.send_ns),
                          int((export.end_ns < 0).sum()), export.mode, export.value, windows,
                          {"bytes": len(times), "sha256": _sha256(times)},
                          schedule_info if schedule_info is not None else schedule_record(schedule), derived_by)


def summarise(schedule: Arrivals, raw: Path, derived_by: str, schedule_info: dict[str, Any] | None = None,
              windows: int = REPORTED_WINDOWS) -> ProfileSummary:
    """The summary of the export at `raw` (plain or .gz) against the schedule that drove it."""
    export, times = _read(raw)
    return summary_of(schedule, export, times, derived_by, schedule_info, windows)


def write_summary(summary: ProfileSummary, path: Path) -> Path:
    """One JSON object, a line per section: small, and a diff shows which figure moved."""
    data = summary.as_json()
    text = "{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}" for k, v in data.items())
    atomic_write_text(path, text + "\n}\n")
    return path


def read_summary(path: str | Path) -> ProfileSummary:
    """A point's summary, given the summary or its export's path (the row's `profile_export`)."""
    return ProfileSummary.from_json(json.loads(summary_path(path).read_text()))


def compress_raw(raw: Path, times: bytes | None = None) -> Path:
    """The export as `<point>.profile.json.gz`, times only (the tensors dropped, as trim_profile_export does);
    the plain file is removed."""
    out = write_gzip(raw.with_name(stem(raw) + GZ_SUFFIX), times if times is not None else _read(raw)[1])
    raw.unlink()
    return out


def finish_point(schedule: Arrivals, raw: Path, keep_raw: bool, derived_by: str,
                 schedule_info: dict[str, Any] | None = None) -> ProfileSummary:
    """Summarise a point's export beside it, then keep the raw file compressed (keep_raw) or drop it. Raises
    ValueError/KeyError/OSError for an export that cannot be read (empty, cut): the raw file is left as it is and
    no summary of an earlier measurement under the same name stays behind."""
    try:
        export, times = _read(raw)
    except (ValueError, KeyError, OSError):
        summary_path(raw).unlink(missing_ok=True)
        raise
    summary = summary_of(schedule, export, times, derived_by, schedule_info)
    write_summary(summary, summary_path(raw))
    if keep_raw:
        compress_raw(raw, times)
    else:
        raw.unlink()
        raw.with_name(stem(raw) + GZ_SUFFIX).unlink(missing_ok=True)  # one kept from an earlier measurement
    return summary


def drop_raw(*paths: Path | None, keep_raw: bool = False) -> None:
    """Remove a point's raw files (its unreadable export, its schedule file) unless they are to be kept."""
    if keep_raw:
        return
    for p in paths:
        if p is not None:
            p.unlink(missing_ok=True)


def write_gzip(path: Path, data: bytes) -> Path:
    """`data` gzip-compressed into `path`, atomically and reproducibly (no name or time in the gzip header, so
    compressing the same bytes twice gives the same file)."""
    def write(fh: Any) -> None:
        with gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0, compresslevel=9) as gz:
            gz.write(data)

    atomic_write(path, write)
    return path


def gzip_file(path: Path) -> Path:
    """`path` compressed to `path.gz`, the original removed (what `gzip FILE` does)."""
    out = write_gzip(path.with_name(path.name + ".gz"), path.read_bytes())
    path.unlink()
    return out
