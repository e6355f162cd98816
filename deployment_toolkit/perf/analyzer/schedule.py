"""Latency from the intended send time (coordinated omission) for open-loop points.

perf_analyzer times a request from when it was actually sent. When its sender falls behind its schedule (a busy
client host, a stalled thread) the requests go out late and the wait before sending is missing from its latency,
so its p99 understates what a client arriving on schedule would see. Here the toolkit writes the schedule itself
(`--request-intervals`), reads back when each request really went out (`--profile-export-file`) and measures
latency from the intended send time as well.

Facts this module is built on (checked against the perf_analyzer of tritonclient 2.50.0 and the embedded server):
- `--request-intervals FILE`: one interval per line, integer microseconds; perf_analyzer loops around the file when
  the run outlasts it. It cannot be combined with `--request-rate-range` or `--concurrency-range` (its help says
  so), `--request-distribution` is ignored with it, and the CSV's "Request Rate" is the file's mean rate truncated
  to an integer. The "Pass [n]" lines print as with `--request-rate-range`, and so do "Avg send request rate" and the
  "not able to keep up ... % of the requests were delayed" warning (in both modes only when requests were delayed).
- `--profile-export-file FILE` (refused with exit 99 if FILE exists) writes JSON
  `{"experiments": [{"experiment": {"mode": "request_rate", "value": ...}, "requests": [{"timestamp": send_ns,
  "request_inputs": {...}, "response_timestamps": [ns, ...], "response_outputs": [...]}, ...],
  "window_boundaries": [ns, ...]}], "version": "", "service_kind": "triton", "endpoint": ""}`: every request of
  every measurement window of the run (not only the three reported), not sorted by send time, with the inputs and
  outputs as JSON numbers (with shared memory one number per tensor: then the file is small). Times are ns since
  the epoch.
- The schedule starts at the first window boundary: request i (0-based) goes out at boundary[0] + the sum of the
  first i + 1 intervals, about 0.1 ms later on an idle client, never earlier (the very first one can be a few ms
  late: connection set-up); a late request is not rescheduled (the schedule is absolute), so a stalled sender sends
  its backlog back to back and catches up.
- perf_analyzer's own statistics count the requests whose last response falls within the last three windows
  (the counts and average latencies here match its "Request count" and "Avg latency" exactly).
"""
from __future__ import annotations

import gzip
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...spec import atomic_write_text  # a leaf below perf: temp file + rename, the umask's mode

ARRIVALS = ("poisson", "constant", "recorded")  # recorded: a request log's own inter-arrivals, scaled to the rate
LATE_TOLERANCE_MS = 1.0  # a request sent up to this long after its time is on time (the client's own overhead)
REPORTED_WINDOWS = 3  # perf_analyzer reports (and stabilises on) the last three windows


@dataclass(frozen=True)
class Arrivals:
    """An arrival schedule as perf_analyzer reads it: intervals in integer microseconds, cycled when exhausted.
    (Named apart from config.Schedule, the load level that points perf_analyzer at such a file.)"""

    intervals_us: np.ndarray  # int64, one per request: the wait before it (the first one's from the start)
    seed: int  # what drew the Poisson gaps (recorded for constant arrivals too, where nothing is random)
    rate: float  # requests/s asked for
    distribution: str = "poisson"
    path: Path | None = None

    @property
    def duration_s(self) -> float:
        return float(self.intervals_us.sum()) / 1e6

    @property
    def mean_rate(self) -> float:
        """Requests/s the file really holds (what perf_analyzer sends while it keeps up)."""
        return len(self.intervals_us) / self.duration_s if self.duration_s > 0 else math.nan

    def offsets_ns(self, n: int) -> np.ndarray:
        """Intended send time of the first n requests from the schedule's start (ns), cycling as perf_analyzer
        does."""
        if n <= 0:
            return np.zeros(0, dtype=np.int64)
        return np.cumsum(np.resize(self.intervals_us.astype(np.int64), n)) * 1000


def schedule_length_s(measured_s: float) -> float:
    """How long a schedule to write for a run that may measure `measured_s` seconds: with slack, so a run that
    outlasts its windows rarely cycles the arrivals (perf_analyzer loops its file; the multistream driver too)."""
    return 1.5 * measured_s + 5.0


def make_schedule(rate: float, duration_s: float, distribution: str = "poisson", seed: int = 0,
                  gaps: np.ndarray | None = None) -> Arrivals:
    """`rate` requests/s for `duration_s`: Poisson (exponential gaps, seeded), constant, or recorded (`gaps`, a
    request log's inter-arrival times, scaled so their mean is 1 / rate and cycled from a place the seed picks: the
    log's bursts keep their shape at the planned rate). Arrival times are rounded to whole microseconds before
    differencing, so rounding never drifts the mean rate."""
    if distribution not in ARRIVALS:
        raise ValueError(f"distribution {distribution!r}: choose one of {', '.join(ARRIVALS)}")
    if not rate > 0 or not duration_s > 0:
        raise ValueError(f"rate ({rate}) and duration ({duration_s}) must be positive")
    n = max(1, int(math.ceil(rate * duration_s)))
    if distribution == "constant":
        arrivals = np.arange(1, n + 1) * (1e6 / rate)
    elif distribution == "recorded":
        arrivals = np.cumsum(_recorded(gaps, n, seed)) * (1e6 / rate)
    else:
        arrivals = np.cumsum(np.random.default_rng(seed).exponential(1e6 / rate, n))
    times = np.round(arrivals).astype(np.int64)
    intervals = np.diff(times, prepend=0)
    return Arrivals(np.maximum(intervals, 1), int(seed), float(rate), distribution)


def _recorded(gaps: np.ndarray | None, n: int, seed: int) -> np.ndarray:
    """`n` of the log's gaps scaled to a mean of 1, cycled from the place `seed` picks (trials replay different
    parts of the log)."""
    g = np.asarray(gaps if gaps is not None else [], dtype=float)
    g = g[np.isfinite(g) & (g >= 0)]
    if not len(g) or g.sum() <= 0:
        raise ValueError("recorded arrivals need the log's inter-arrival times (two requests at least)")
    g = g / g.mean()
    return np.resize(np.roll(g, -(int(seed) % len(g))), n)


def window_dispersion(gaps: np.ndarray, rate: float, window_s: float) -> float:
    """The index of dispersion (variance over mean) of request counts in windows of `window_s` when the log's gaps
    are replayed at `rate` (make_schedule's scaling): how much more than Poisson arrivals (1) a measuring window's
    count varies. Bursts that the scaling packs several to a window average out; bursts longer than one do not.
    At least 1; 1 where the log is too short for three windows even cycled once."""
    if not rate > 0 or not window_s > 0:
        return 1.0
    try:  # the log twice over, scaled as make_schedule scales it
        times = np.cumsum(_recorded(gaps, 2 * len(gaps), 0)) / rate
    except ValueError:  # no usable gaps
        return 1.0
    windows = int(times[-1] // window_s)
    if windows < 3:
        return 1.0
    counts = np.bincount((times[times < windows * window_s] // window_s).astype(np.int64), minlength=windows)
    return max(1.0, float(counts.var() / counts.mean())) if counts.mean() > 0 else 1.0


def write_schedule(path: str | Path, rate: float, duration_s: float, distribution: str = "poisson",
                   seed: int = 0, gaps: np.ndarray | None = None) -> Arrivals:
    """make_schedule written as a `--request-intervals` file (one integer µs per line), atomically."""
    sched = make_schedule(rate, duration_s, distribution, seed, gaps)
    path = Path(path)
    atomic_write_text(path, "\n".join(map(str, sched.intervals_us.tolist())) + "\n")
    return Arrivals(sched.intervals_us, sched.seed, sched.rate, sched.distribution, path)


def read_schedule(path: str | Path, rate: float | None = None, seed: int = 0,
                  distribution: str = "poisson") -> Arrivals:
    """A `--request-intervals` file back as Arrivals (the rate defaults to the file's mean rate)."""
    values = [int(line) for line in Path(path).read_text().split() if line.strip()]
    if not values:
        raise ValueError(f"{path}: no intervals")
    intervals = np.asarray(values, dtype=np.int64)
    mean = len(intervals) / (intervals.sum() / 1e6)
    return Arrivals(intervals, seed, float(rate if rate is not None else mean), distribution, Path(path))


# ---- the profile export ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ProfileExport:
    """One experiment of a perf_analyzer profile export: per request, sorted by send time (ns since the epoch)."""

    send_ns: np.ndarray  # int64
    end_ns: np.ndarray  # int64, the last response; -1 when none came
    window_boundaries_ns: np.ndarray  # int64, len = windows + 1
    mode: str = ""
    value: float = math.nan


def load_export(path: str | Path) -> dict[str, Any]:
    """The export's JSON, plain or gzip-compressed (`.gz`: how a run folder keeps it with --keep-raw)."""
    path = Path(path)
    raw = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
    return json.loads(raw)


def profile_export_from(data: dict[str, Any], source: str | Path = "", experiment: int = -1) -> ProfileExport:
    """One experiment of a loaded export (read_profile_export without the file)."""
    experiments = data.get("experiments") or []
    if not experiments:
        raise ValueError(f"{source}: no experiments in the profile export")
    exp = experiments[experiment]
    send, end = [], []
    for req in exp.get("requests") or []:
        responses = req.get("response_timestamps") or []
        send.append(int(req["timestamp"]))
        end.append(int(responses[-1]) if responses else -1)
    order = np.argsort(np.asarray(send, dtype=np.int64), kind="stable")
    info = exp.get("experiment") or {}
    return ProfileExport(np.asarray(send, dtype=np.int64)[order], np.asarray(end, dtype=np.int64)[order],
                         np.asarray(exp.get("window_boundaries") or [], dtype=np.int64), str(info.get("mode", "")),
                         float(info.get("value", math.nan)))


def read_profile_export(path: str | Path, experiment: int = -1) -> ProfileExport:
    """The requests and window boundaries of one experiment (the last: a run here measures one level); the file
    may be gzip-compressed (`*.profile.json.gz`)."""
    return profile_export_from(load_export(path), path, experiment)


def times_only(data: dict[str, Any]) -> str:
    """A loaded export as JSON text without the request inputs and response outputs (timestamps and windows
    only): what trim_profile_export writes, and what a kept export's `.gz` holds."""
    data = {**data, "experiments": [
        {**exp, "requests": [{"timestamp": r["timestamp"], "response_timestamps": r.get("response_timestamps", [])}
                             for r in exp.get("requests") or []]}
        for exp in data.get("experiments") or []]}
    return json.dumps(data, separators=(",", ":")) + "\n"


def trim_profile_export(src: str | Path, dst: str | Path | None = None) -> Path:
    """The export without the request inputs and response outputs (timestamps and windows only): the numbers
    stay, the tensors (megabytes per request for images without shared memory) go. In place without `dst`."""
    out = Path(dst) if dst is not None else Path(src)
    atomic_write_text(out, times_only(load_export(src)))
    return out


# ---- latency from the intended send time -------------------------------------------------------------------

@dataclass(frozen=True)
class ScheduleLatency:
    """Latency of the counted requests from their intended and their actual send time, and how late they went."""

    requests: int  # counted: answered, last response within the reported windows (perf_analyzer's rule)
    sched_p50_ms: float
    sched_p90_ms: float
    sched_p99_ms: float
    p50_ms: float  # from the actual send (what perf_analyzer reports, within numpy's percentile method)
    p90_ms: float
    p99_ms: float
    late_pct: float  # share of counted requests sent more than tolerance_ms after their intended time
    late_p99_ms: float
    late_max_ms: float
    unanswered: int = 0  # requests in the export without a response
    tolerance_ms: float = LATE_TOLERANCE_MS

    def row(self) -> dict[str, Any]:
        """The fields an open-loop row stores."""
        d = asdict(self)
        return {k: d[k] for k in ("sched_p50_ms", "sched_p90_ms", "sched_p99_ms", "late_pct", "late_p99_ms",
                                  "late_max_ms")}


def intended_send_ns(schedule: Arrivals, export: ProfileExport) -> np.ndarray:
    """Each request's intended send time (ns since the epoch), requests matched to schedule slots in send order.

    Time zero is placed so that the most punctual request was exactly on time (perf_analyzer never sends early):
    that is "the first actual send minus the first interval" when the first request was on time, and not fooled
    when it was not (its connection set-up made it 3.4 ms late in one run here, which would have put every later
    request 3.4 ms early). On the runs recorded here time zero lands within 0.1 ms of the first window boundary,
    where perf_analyzer starts its schedule; it understates lateness only if every request of the run was late.
    """
    n = len(export.send_ns)
    offsets = schedule.offsets_ns(n)
    if n == 0:
        return offsets
    anchor = int(np.min(export.send_ns - offsets))
    return anchor + offsets


def schedule_latency(schedule: Arrivals, export: ProfileExport, windows: int = REPORTED_WINDOWS,
                     tolerance_ms: float = LATE_TOLERANCE_MS) -> ScheduleLatency:
    """Percentiles of latency from the intended and the actual send, over the requests perf_analyzer counts (last
    response within the last `windows` windows; all answered requests when the export has no boundaries)."""
    intended = intended_send_ns(schedule, export)
    answered = export.end_ns >= 0
    counted = answered.copy()
    wb = export.window_boundaries_ns
    if len(wb) >= 2:
        lo, hi = wb[max(0, len(wb) - 1 - windows)], wb[-1]
        counted &= (export.end_ns >= lo) & (export.end_ns <= hi)
    nan = math.nan
    if not counted.any():
        return ScheduleLatency(0, nan, nan, nan, nan, nan, nan, nan, nan, nan, int((~answered).sum()), tolerance_ms)
    end = export.end_ns[counted]
    sched_ms = (end - intended[counted]) / 1e6
    actual_ms = (end - export.send_ns[counted]) / 1e6
    late_ms = np.maximum((export.send_ns[counted] - intended[counted]) / 1e6, 0.0)
    sp = np.percentile(sched_ms, [50, 90, 99])
    ap = np.percentile(actual_ms, [50, 90, 99])
    return ScheduleLatency(int(counted.sum()), float(sp[0]), float(sp[1]), float(sp[2]), float(ap[0]),
                           float(ap[1]), float(ap[2]), float(100.0 * np.mean(late_ms > tolerance_ms)),
                           float(np.percentile(late_ms, 99)), float(late_ms.max()), int((~answered).sum()),
                           tolerance_ms)
