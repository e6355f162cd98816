"""One open-loop point: measure a request rate with perf_analyzer and judge whether the replica kept up.

Each rate is one perf_analyzer run of up to MAX_WINDOWS windows that ends when the last three agree within
STABILITY percent: the first window (channel setup, first batches: latency spikes of 100+ ms) then usually falls
out of the numbers. A rate at which the windows never settle has no p99 and fails.

A rate R passes when, over the measured windows:
- the server answered >= KEEP_UP (97%) of the offered inferences/s: of what perf_analyzer says it sent when it
  prints its send rate, else of R x batch less two standard deviations of a Poisson count over the three
  reported windows (a Poisson schedule over a few seconds sends a few percent more or less than R; with constant
  arrivals there is no allowance);
- the queue did not grow across windows: per-window average latency (after the first window) rising in most
  steps and ending more than QUEUE_GROWTH (and 5 ms) above where it started means requests pile up;
- p99 <= the SLO.
If perf_analyzer itself could not send at R (its achieved send rate below KEEP_UP of R, with most requests
delayed by its own account), the host's client is the limit and the search stops with ClientLimited: that rate says
nothing about the server.
"""
from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import UserError, UserInputError
from ..perf.analyzer import PerfOptions, run_point
from .ratestore import RateKey, RateStore, options_key

KEEP_UP = 0.97
QUEUE_GROWTH = 0.5
QUEUE_GROWTH_MIN_MS = 5.0  # a rise smaller than this is noise, not a backlog (sub-ms latencies)
CLIENT_DELAYED_PCT = 50.0  # perf_analyzer's "x% of the requests were delayed" above which the client is the limit
STABILITY = 30.0
MAX_WINDOWS = 6
DISTRIBUTIONS = ("poisson", "constant")

_PASS = re.compile(r"Pass \[(\d+)\] throughput: ([\d.eE+-]+) infer/sec\. (?:Avg|p\d+) latency: (\d+) usec")
_SEND = re.compile(r"Avg send request rate: ([\d.eE+-]+) infer/sec")
_DELAYED = re.compile(r"not able to keep up with the desired request rate\. ([\d.]+)% of the requests were delayed")


class ClientLimited(UserError, ValueError):
    """perf_analyzer on this host could not send the offered rate: the client, not the server, is the limit."""


def round_rate(rate: float) -> float:
    """Four significant digits: the rate is part of a point's key and of perf_analyzer's CSV (%g)."""
    return float(f"{rate:.4g}")


# ---- one open-loop point ------------------------------------------------------------------------

@dataclass
class OutputWindows:
    throughput: list[float]
    latency_ms: list[float]
    send_rate: float | None
    delayed_pct: float | None


def parse_open_loop_output(text: str) -> OutputWindows:
    """Per-window throughput and average latency ("Pass [n]" lines of `-v`), the achieved send rate and the
    share of delayed requests (perf_analyzer's client-side warning), from the output of the last attempt."""
    last = text.rsplit("### attempt", 1)[-1] if "### attempt" in text else text
    passes = _PASS.findall(last)
    send = _SEND.findall(last)
    delayed = _DELAYED.findall(last)
    return OutputWindows([float(t) for _, t, _ in passes], [int(lat) / 1000.0 for _, _, lat in passes],
                         float(send[-1]) if send else None, float(delayed[-1]) if delayed else None)


def queue_growing(latency_ms: Sequence[float], growth: float = QUEUE_GROWTH, min_ms: float = QUEUE_GROWTH_MIN_MS) -> bool:
    """The backlog grows: after the first (warm-up) window, average latency rose in at least two thirds of the
    window-to-window steps and ends more than `growth` (and `min_ms`) above where it started."""
    lat = [x for x in latency_ms if not math.isnan(x)]
    if len(lat) >= 3:
        lat = lat[1:]
    if len(lat) < 2 or lat[0] <= 0:
        return False
    rises = sum(b > a for a, b in zip(lat, lat[1:]))
    return rises * 3 >= 2 * (len(lat) - 1) and lat[-1] > lat[0] * (1 + growth) and lat[-1] - lat[0] > min_ms


@dataclass
class RatePoint:
    """One open-loop measurement (a stored row of openloop.csv, typed)."""

    key: RateKey
    row: dict[str, Any]

    @property
    def rate(self) -> float:
        return self.key.request_rate

    @property
    def offered(self) -> float:
        return self.key.request_rate * self.key.batch

    @property
    def answered(self) -> float:
        return _f(self.row.get("answered"))

    @property
    def p99(self) -> float:
        return _f(self.row.get("p99_ms"))

    @property
    def avg(self) -> float:
        return _f(self.row.get("avg_ms"))

    @property
    def send_rate(self) -> float:
        return _f(self.row.get("send_rate"))

    @property
    def queue_growing(self) -> bool:
        return bool(self.row.get("queue_growing"))

    @property
    def client_limited(self) -> bool:
        return bool(self.row.get("client_limited"))

    @property
    def sent(self) -> float:
        """Inferences/s perf_analyzer actually offered (its send rate; the nominal rate when not printed)."""
        s = self.send_rate
        return self.offered if math.isnan(s) or s <= 0 else min(s, self.offered * 1.1)

    @property
    def required(self) -> float:
        """Answered inferences/s needed to count as keeping up (see the module docstring)."""
        if not math.isnan(self.send_rate) and self.send_rate > 0 or self.key.distribution != "poisson":
            return KEEP_UP * self.sent
        try:
            window_s = json.loads(self.key.options).get("measurement_interval_ms", 0) / 1000.0
        except ValueError:
            window_s = 0.0
        expected = self.key.request_rate * 3 * window_s  # requests in the three reported windows
        noise = 2.0 / math.sqrt(expected) if expected > 0 else 0.0
        return max(0.0, KEEP_UP - noise) * self.offered

    @property
    def kept_up(self) -> bool:
        return not math.isnan(self.answered) and self.answered >= self.required and not self.queue_growing

    def passes(self, slo_ms: float) -> bool:
        return self.kept_up and not math.isnan(self.p99) and self.p99 <= slo_ms and not self.client_limited

    def verdict(self, slo_ms: float) -> str:
        if self.client_limited:
            return "client limited"
        why = []
        if not math.isnan(self.answered) and self.answered < self.required:
            why.append(f"answered {self.answered / self.sent:.0%} of offered")
        if not self.row.get("stable", True):
            why.append("windows never settled")
        if self.queue_growing:
            why.append("queue growing")
        if math.isnan(self.p99) or self.p99 > slo_ms:
            why.append(f"p99 {self.p99:.1f} ms > {slo_ms:g} ms")
        return "pass" if not why else "fail: " + ", ".join(why)


def _f(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def client_limited(offered: float, send_rate: float | None, delayed_pct: float | None) -> bool:
    """perf_analyzer sent clearly less than asked and says it fell behind (its own warning)."""
    return send_rate is not None and send_rate < KEEP_UP * offered and (delayed_pct or 0.0) >= CLIENT_DELAYED_PCT


def client_limit_message(point: RatePoint) -> str:
    return (f"perf_analyzer on this host could not generate {point.offered:,.1f} inferences/s: it sent "
            f"{point.send_rate:,.1f}/s ({point.row.get('delayed_pct') or 0:.0f}% of requests delayed), so the client, "
            "not the server, is the limit; lower the rate, free CPU for the client or run it on another host")


# ---- measuring ----------------------------------------------------------------------------------

def row_from_outputs(offered: float, values: dict[str, float], stable: bool, output: str) -> dict[str, Any]:
    """A store row from what perf_analyzer wrote: its CSV values (ms, seed column names), whether a row was there
    (stable), and its console output (windows, send rate, delayed share)."""
    win = parse_open_loop_output(output)
    answered = values.get("Inferences/second", math.nan)
    if (not stable or math.isnan(answered)) and win.throughput:  # no CSV row: the last three windows' mean
        answered = statistics.fmean(win.throughput[-3:])
    return {
        "offered": offered, "answered": answered, "send_rate": win.send_rate,
        "delayed_pct": win.delayed_pct, "p50_ms": values.get("P50 Latency"), "p99_ms": values.get("P99 Latency"),
        "avg_ms": values.get("Avg Latency"), "server_queue_ms": values.get("Server Queue"),
        "window_throughput": win.throughput, "window_latency_ms": win.latency_ms,
        "queue_growing": queue_growing(win.latency_ms),
        "client_limited": client_limited(offered, win.send_rate, win.delayed_pct), "stable": stable,
    }


def open_loop_options(base: PerfOptions, distribution: str = "poisson", window_ms: int | None = None,
                      stability: float = STABILITY, max_windows: int = MAX_WINDOWS) -> PerfOptions:
    """One perf_analyzer run per rate (no retries: a rate that never settles fails), async sends, the chosen
    arrival distribution."""
    if distribution not in DISTRIBUTIONS:
        raise UserInputError(f"--distribution {distribution!r}: choose one of {', '.join(DISTRIBUTIONS)}")
    extra = tuple(a for a in base.extra_args)
    if "--request-distribution" not in extra:
        extra += ("--request-distribution", distribution)
    return replace(base, async_mode=True, measurement_mode="time_windows", stability_percentage=stability,
                   max_trials=max_windows, max_attempts=1, relaxed_fallback=False, percentile=None,
                   measurement_interval_ms=window_ms or base.measurement_interval_ms, extra_args=extra)


@dataclass
class Target:
    """A server (or a balancer) serving one configuration, and how to drive it."""

    config: str  # the stored identity of the configuration
    model_name: str
    url: str
    batch: int
    signature: Any  # HasSignature
    options: PerfOptions  # already open_loop_options()
    distribution: str = "poisson"
    model_version: str = ""
    binary: str | Path | None = None
    cpu_probe: Callable[[], dict[str, float]] | None = None  # CPU seconds by part, read before and after a point


def measure(target: Target, rate: float, store: RateStore, out_dir: Path, trial: int = 1,
            tag: str = "") -> RatePoint:
    """The stored point for (config, distribution, rate, batch, options, trial), or measure and store it."""
    rate = round_rate(rate)
    key = RateKey(target.config, target.distribution, rate, target.batch,
                  options_key(target.options.measurement_fields()), trial)
    row = store.get(key)
    if row is not None:
        return RatePoint(key, row)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{target.config}_{tag}t{trial}_{target.distribution}_r{rate:g}")
    before = target.cpu_probe() if target.cpu_probe else None
    started = datetime.now(timezone.utc)
    result = run_point(target.model_name, target.url, target.batch, None, target.signature, target.options,
                       out_dir / f"{safe}.csv", request_rate=rate, model_version=target.model_version,
                       binary=target.binary)
    wall = (datetime.now(timezone.utc) - started).total_seconds()
    after = target.cpu_probe() if target.cpu_probe else None
    text = result.log_path.read_text() if result.log_path and result.log_path.exists() else ""
    row = row_from_outputs(rate * target.batch, result.values, result.stable, text)
    row.update({"timestamp": started.isoformat(timespec="seconds"), "url": target.url,
                "command": " ".join(result.command), "log": str(result.log_path or "")})
    if before is not None and after is not None:
        row["cpu"] = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
        row["wall_s"] = wall
    store.put(key, row)
    point = RatePoint(key, store.get(key) or row)
    point.row.update({k: row[k] for k in ("cpu", "wall_s") if k in row})  # CPU accounting lives for this run only
    return point


