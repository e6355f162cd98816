"""What a multistream run measured (perf/multistream.py): per-request times in, per-window figures and one StreamResult
per stream out. Pure functions over timestamps, apart from the driver so that the counting rules can be checked on
hand-made times: a request counts in the window its answer came in (perf_analyzer counts by last response); the first
window is warm-up; the last three windows are reported and settle under perf_analyzer's rule (max / min of their
throughput and of their average latency within 1 + stability / 100, none empty); latency is taken from the actual and
from the intended send, and a request sent more than LATE_TOLERANCE_MS after its intended time is late.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .analyzer.schedule import LATE_TOLERANCE_MS, REPORTED_WINDOWS

if TYPE_CHECKING:
    from .multistream import Stream

WARMUP_WINDOWS = 1  # never reported nor judged for stability (perf_analyzer's first window usually falls out too)


@dataclass
class Trace:
    """One stream's requests in schedule order, times in ns from the shared start (-1: did not happen)."""

    intended_ns: np.ndarray
    send_ns: np.ndarray
    end_ns: np.ndarray
    ok: np.ndarray  # answered without error

    @classmethod
    def planned(cls, intended_ns: np.ndarray) -> "Trace":
        n = len(intended_ns)
        return cls(np.asarray(intended_ns, dtype=np.int64), np.full(n, -1, np.int64), np.full(n, -1, np.int64),
                   np.zeros(n, bool))

    def head(self, n: int) -> "Trace":
        return Trace(self.intended_ns[:n], self.send_ns[:n], self.end_ns[:n], self.ok[:n])

    def to_json(self) -> dict[str, list]:
        return {"intended_ns": self.intended_ns.tolist(), "send_ns": self.send_ns.tolist(),
                "end_ns": self.end_ns.tolist(), "ok": self.ok.tolist()}


@dataclass(frozen=True)
class WindowFigures:
    """Per window: answered inferences/s, average and p99 latency (ms, from the actual send; None: no answer)."""

    throughput: list[float]
    avg_ms: list[float | None]
    p99_ms: list[float | None]
    counts: list[int]  # requests answered in each window


def window_figures(trace: Trace, window_ns: int, windows: int, inferences_per_request: float) -> WindowFigures:
    """The first `windows` windows, each counting the requests answered within it (by completion time)."""
    answered = trace.ok & (trace.end_ns >= 0)
    index = np.where(answered, trace.end_ns // window_ns, -1)
    latency_ms = (trace.end_ns - trace.send_ns) / 1e6
    throughput, avg, p99, counts = [], [], [], []
    for k in range(windows):
        lat = latency_ms[index == k]
        throughput.append(len(lat) * inferences_per_request / (window_ns / 1e9))
        avg.append(float(lat.mean()) if len(lat) else None)
        p99.append(float(np.percentile(lat, 99)) if len(lat) else None)
        counts.append(int(len(lat)))
    return WindowFigures(throughput, avg, p99, counts)


def reported(windows: int) -> range:
    """The windows a run of `windows` reports: the last three after the warm-up (fewer when the run was shorter;
    a run of one window reports it)."""
    return range(max(min(WARMUP_WINDOWS, windows - 1), windows - REPORTED_WINDOWS, 0), windows)


POISSON_SIGMAS = 3.0  # a window of n requests may differ from the next by this many sqrt(n) and still agree


def poisson_band(requests: float) -> float:
    """The relative band within which windows of `requests` Poisson arrivals each agree: POISSON_SIGMAS / sqrt(n)
    (0 for no requests). Our generator's settling rule and perf_analyzer's widened band (perf.openloop.ratepoint) use
    it."""
    return POISSON_SIGMAS / math.sqrt(requests) if requests > 0 else 0.0


def settled(throughput: Sequence[float], latency_ms: Sequence[float | None], stability: float,
            counts: Sequence[int] | None = None) -> bool:
    """perf_analyzer's stability over the last three windows after the warm-up: none empty, and max / min of their
    throughput and of their average latency within 1 + stability / 100 (perf_analyzer compares the average unless
    given --percentile, which open-loop points never are: a p99 over a window of 30 requests is its slowest one or
    two, and would never settle at low rates). Given each window's request `counts`, the bound widens to what
    a Poisson count of the fewest carries (POISSON_SIGMAS / sqrt(n)): five requests a window never agree within
    30 % however steady the model, and a stream of a mix at a few requests/s would never be judged."""
    if len(throughput) < WARMUP_WINDOWS + REPORTED_WINDOWS:
        return False
    tp, lat = list(throughput[-REPORTED_WINDOWS:]), list(latency_ms[-REPORTED_WINDOWS:])
    if min(tp) <= 0 or any(v is None for v in lat):
        return False
    fewest = min(counts[-REPORTED_WINDOWS:]) if counts is not None else 0
    bound = 1.0 + max(stability / 100.0, poisson_band(fewest))
    return max(tp) / min(tp) <= bound and max(lat) / max(min(lat), 1e-9) <= bound


@dataclass
class StreamResult:
    """One stream's run, JSON-serialisable (None where nothing was measured). Latencies are ms; rates are
    inferences/s (requests x batch x samples_per_request) over the reported windows."""

    model_name: str
    rate: float  # requests/s asked for
    batch: int
    distribution: str
    seed: int
    window_ms: int
    windows: int  # windows run, the warm-up included
    reported_windows: int
    window_throughput: list[float]  # answered inferences/s, every window (the warm-up first)
    window_latency_ms: list[float | None]  # average latency from the actual send, every window
    window_p99_ms: list[float | None]
    answered: float | None  # mean of the reported windows' throughput
    send_rate: float | None  # inferences/s sent (actual send time) within the reported windows
    # inferences/s the schedule meant to send within them: a Poisson schedule's count over a few windows is a few
    # percent off its nominal rate, so whether the client kept up is sent against this, never against the rate
    intended_rate: float | None
    delayed_pct: float | None  # of the requests sent within the reported windows: sent late
    p50_ms: float | None  # from the actual send, over the counted requests
    p90_ms: float | None
    p99_ms: float | None
    avg_ms: float | None
    sched_p50_ms: float | None  # from the intended send
    sched_p90_ms: float | None
    sched_p99_ms: float | None
    late_pct: float | None  # counted requests sent more than LATE_TOLERANCE_MS after their intended time
    late_p99_ms: float | None
    late_max_ms: float | None
    stable: bool
    errors: int  # requests that failed or were not answered within timeout_s, over the whole run
    first_error: str
    requests: int  # sent over the whole run
    counted: int  # answered within the reported windows
    unanswered: int  # sent but never answered (in the run's final wait)
    samples_per_request: float = 1.0
    tolerance_ms: float = LATE_TOLERANCE_MS
    trace: str = ""  # the per-request trace file, when the spec asked for one

    def to_dict(self) -> dict[str, Any]:
        return _clean(asdict(self))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "StreamResult":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def _clean(value: Any) -> Any:
    """NaN and numpy scalars out, so the JSON is strict."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return None if not math.isfinite(float(value)) else float(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def summarise(stream: "Stream", trace: Trace, window_ms: int, windows: int, stability: float, errors: int = 0,
              first_error: str = "", unanswered: int = 0) -> StreamResult:
    """A stream's result from its requests: per-window figures, then the reported windows' rates and latency
    percentiles over the requests answered within them (from the actual and the intended send), how late they
    went out, and whether the last three windows settled."""
    window_ns = int(window_ms) * 1_000_000
    per_request = stream.inferences_per_request
    fig = window_figures(trace, window_ns, windows, per_request)
    span = reported(windows)
    lo, hi = span.start * window_ns, span.stop * window_ns
    seconds = len(span) * window_ns / 1e9
    sent = trace.send_ns >= 0
    in_span = sent & (trace.send_ns >= lo) & (trace.send_ns < hi)
    late_ms = np.maximum(trace.send_ns - trace.intended_ns, 0) / 1e6
    counted = trace.ok & (trace.end_ns >= lo) & (trace.end_ns < hi)
    none = None
    p50 = p90 = p99 = avg = s50 = s90 = s99 = late_pct = late_p99 = late_max = none
    if counted.any():
        actual = (trace.end_ns[counted] - trace.send_ns[counted]) / 1e6
        sched = (trace.end_ns[counted] - trace.intended_ns[counted]) / 1e6
        late = late_ms[counted]
        p50, p90, p99 = (float(v) for v in np.percentile(actual, [50, 90, 99]))
        s50, s90, s99 = (float(v) for v in np.percentile(sched, [50, 90, 99]))
        avg = float(actual.mean())
        late_pct = float(100.0 * np.mean(late > LATE_TOLERANCE_MS))
        late_p99, late_max = float(np.percentile(late, 99)), float(late.max())
    return StreamResult(
        model_name=stream.model_name, rate=stream.rate, batch=int(stream.batch), distribution=stream.distribution,
        seed=int(stream.seed), window_ms=int(window_ms), windows=windows, reported_windows=len(span),
        window_throughput=fig.throughput, window_latency_ms=fig.avg_ms, window_p99_ms=fig.p99_ms,
        answered=float(np.mean([fig.throughput[k] for k in span])) if len(span) else None,
        send_rate=float(in_span.sum() * per_request / seconds) if seconds > 0 else None,
        intended_rate=float(np.sum((trace.intended_ns >= lo) & (trace.intended_ns < hi)) * per_request / seconds)
        if seconds > 0 else None,
        delayed_pct=float(100.0 * np.mean(late_ms[in_span] > LATE_TOLERANCE_MS)) if in_span.any() else None,
        p50_ms=p50, p90_ms=p90, p99_ms=p99, avg_ms=avg, sched_p50_ms=s50, sched_p90_ms=s90, sched_p99_ms=s99,
        late_pct=late_pct, late_p99_ms=late_p99, late_max_ms=late_max,
        stable=settled(fig.throughput, fig.avg_ms, stability, fig.counts), errors=int(errors), first_error=first_error,
        requests=int(sent.sum()), counted=int(counted.sum()), unanswered=int(unanswered),
        samples_per_request=float(stream.samples_per_request))


__all__ = ["StreamResult", "Trace", "WindowFigures", "WARMUP_WINDOWS", "reported", "settled", "summarise",
           "window_figures"]
