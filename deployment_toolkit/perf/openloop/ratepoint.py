"""One open-loop point: measure a request rate with perf_analyzer and judge whether the replica kept up.

Each rate is one perf_analyzer run of up to MAX_WINDOWS windows that ends when the last three agree within STABILITY
percent: the first window (channel setup, first batches: latency spikes of 100+ ms) then usually falls out of the
numbers. A rate at which the windows never settle has no p99 and fails.

A rate R passes when, over the measured windows:
- the server answered >= KEEP_UP (97%) of the offered inferences/s: of what perf_analyzer says it sent when it
  prints its send rate, else of R x batch less two standard deviations of a Poisson count over the three
  reported windows (a Poisson schedule over a few seconds sends a few percent more or less than R; with constant
  arrivals there is no allowance);
- the queue did not grow across windows: per-window average latency (after the first window) rising in most
  steps and ending more than QUEUE_GROWTH (and 5 ms) above where it started means requests pile up;
- p99 <= the SLO (a window in which no request finished, or a run perf_analyzer could not finish: no p99, fails).
If perf_analyzer could not send at R (send rate below KEEP_UP of R, most requests delayed by its own account), the
host's client is the limit and the search stops with ClientLimited: that rate says nothing about the server.

The arrivals are the toolkit's own: a seeded Poisson (or constant) schedule written as perf_analyzer's
`--request-intervals` file (perf/analyzer/schedule.py), with `--profile-export-file` beside it. perf_analyzer times a
request from when it was actually sent, so when its sender falls behind the wait before sending is missing from its
p99 (coordinated omission); the export says when each request went out, and the row keeps the latency from the
intended send time (sched_p50/p90/p99_ms) and how late requests went (late_pct, late_p99_ms) beside perf_analyzer's
own p50/p99; the SLO is checked against the schedule-relative p99 when it was measured. The export is summarised
beside the point (`<point>.profile.summary.json`) and dropped with the schedule file, or both kept with --keep-raw
(perf/analyzer/profile_summary.py): a run stays small enough to commit. The seed is derived from (rate, trial) and
recorded in the row: every configuration gets the same arrivals at the same rate, and a rerun the same ones.

Over 400 lines on purpose: measuring a point and judging it read and write the same row, field by field.
"""
from __future__ import annotations

import json
import logging
import math
import re
import statistics
import zlib
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ... import committed
from ...errors import UserError, UserInputError, reason_line
from .. import neighbours, telemetry
from ..analyzer import (ARRIVALS, PerfOptions, PerfTarget, Schedule, ScheduleLatency, run_point,
                             window_dispersion, write_schedule)
from ..analyzer.errors import EMPTY_WINDOW, PerfAnalyzerError, PerfAnalyzerTimeout
from ..analyzer.point import PointResult
from ..analyzer.schedule import schedule_length_s
from ..multistream_stats import poisson_band
from ..analyzer.profile_summary import drop_raw, finish_point, schedule_record, summary_path
from ...results.identity import key_fields
from .ratestore import RateKey, RateStore, options_key

KEEP_UP = 0.97
MEASURED_BY = "perf.openloop.ratepoint.measure, when the point was measured"  # a summary's derived_by
QUEUE_GROWTH = 0.5
QUEUE_GROWTH_MIN_MS = 5.0  # a rise smaller than this is noise, not a backlog (sub-ms latencies)
CLIENT_DELAYED_PCT = 50.0  # perf_analyzer's "x% of the requests were delayed" above which the client is the limit
STABILITY = 30.0
MAX_WINDOWS = 6
DISTRIBUTIONS = tuple(a for a in ARRIVALS if a != "recorded")  # a flag's choices: recorded needs a log
# what drives an open-loop point, part of its stored key: rows measured with perf_analyzer's own
# --request-distribution (no such field in their key) are never mixed with these
DRIVING = "toolkit-request-intervals/1"
MULTISTREAM = "toolkit-multistream/1"  # ... and when one process drove several models (perf.openloop.together)
REQUESTS_PER_WINDOW = 100  # an automatic window holds about this many requests (closed-loop windows hold 40)
AUTO_WINDOW_MS = (300, 1000)  # ... within these bounds: 1 s at 100 requests/s or less, 300 ms from 333/s up
SETTLING_REQUESTS = 25  # a window whose count and average latency must agree with its neighbours holds this many
LONGEST_WINDOW_MS = 8000  # ... within this (3 requests/s: 8 s windows of 24 requests)
EXPORT_BUDGET_BYTES = 64 * 2**20  # a profile export estimated larger than this is not asked for (see export_wanted)

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
        """The p99 the SLO is checked against: from the intended send time when measured, else perf_analyzer's."""
        sched = _f(self.row.get("sched_p99_ms"))
        return sched if not math.isnan(sched) else self.perf_p99

    @property
    def perf_p99(self) -> float:
        """perf_analyzer's own p99 (from the actual send)."""
        return _f(self.row.get("p99_ms"))

    @property
    def late_pct(self) -> float:
        return _f(self.row.get("late_pct"))

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
        """Answered inferences/s needed to count as keeping up (see the module docstring). Recorded bursts: the
        three reported windows' count varies by their dispersion, so the allowance is 2 sqrt(dispersion / count)
        below KEEP_UP of what was sent (a server that keeps up with bursts must not fail on where they fell)."""
        try:
            options = json.loads(self.key.options)
        except ValueError:
            options = {}
        expected = self.key.request_rate * 3 * options.get("measurement_interval_ms", 0) / 1000.0
        if self.key.distribution == "recorded":
            spread = float(options.get("window_dispersion", 1.0))
            noise = 2.0 * math.sqrt(spread / expected) if expected > 0 else 0.0
            return max(0.0, KEEP_UP - noise) * self.sent
        if not math.isnan(self.send_rate) and self.send_rate > 0 or self.key.distribution != "poisson":
            return KEEP_UP * self.sent
        noise = 2.0 / math.sqrt(expected) if expected > 0 else 0.0
        return max(0.0, KEEP_UP - noise) * self.offered

    @property
    def kept_up(self) -> bool:
        return not math.isnan(self.answered) and self.answered >= self.required and not self.queue_growing

    def passes(self, slo_ms: float) -> bool:
        return self.kept_up and not math.isnan(self.p99) and self.p99 <= slo_ms and not self.client_limited

    def client_limit_text(self) -> str:
        return client_limit_message(self)

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
    client = "the toolkit's load-generator process" if MULTISTREAM in point.key.options else "perf_analyzer"
    return (f"{client} on this host could not generate {point.offered:,.1f} inferences/s: it sent "
            f"{point.send_rate:,.1f}/s ({point.row.get('delayed_pct') or 0:.0f}% of requests delayed), so the client, "
            "not the server, is the limit; lower the rate, free CPU for the client or run it on another host")


# ---- measuring ----------------------------------------------------------------------------------

def row_from_outputs(offered: float, values: dict[str, float], stable: bool, output: str,
                     latency: ScheduleLatency | None = None) -> dict[str, Any]:
    """A store row from what perf_analyzer wrote: its CSV values (ms, seed column names), whether a row was there
    (stable), its console output (windows, send rate, delayed share) and the latency from the intended send time
    (schedule.schedule_latency over its profile export; kept only for a stable run, which alone has a p99)."""
    win = parse_open_loop_output(output)
    sched = latency.row() if latency is not None and stable and latency.requests else {}
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
        **{k: sched.get(k) for k in ("sched_p50_ms", "sched_p90_ms", "sched_p99_ms", "late_pct", "late_p99_ms",
                                     "late_max_ms")},
    }


def open_loop_options(base: PerfOptions, distribution: str = "poisson", window_ms: int | None = None,
                      stability: float = STABILITY, max_windows: int = MAX_WINDOWS) -> PerfOptions:
    """One perf_analyzer run per rate (no retries: a rate that never settles fails), async sends. The arrival
    distribution is the Target's: measure() writes the schedule (`--request-intervals`), so no
    `--request-distribution` goes to perf_analyzer (it ignores one next to a schedule file)."""
    if distribution not in DISTRIBUTIONS:
        raise UserInputError(f"--distribution {distribution!r}: choose one of {', '.join(DISTRIBUTIONS)}")
    return replace(base, async_mode=True, measurement_mode="time_windows", stability_percentage=stability,
                   max_trials=max_windows, max_attempts=1, relaxed_fallback=False, percentile=None,
                   measurement_interval_ms=window_ms or base.measurement_interval_ms)


def auto_window_ms(rate: float) -> int:
    """The perf_analyzer window of an open-loop rate when none is asked for: about REQUESTS_PER_WINDOW requests at
    `rate` (requests/s), rounded up to 50 ms, within AUTO_WINDOW_MS. A fixed 1-s window made a fast model's
    capacity search (7 rates of 3 to 6 windows) most of a short search's time while a window of a few hundred
    requests says no more about its p99 than one of a hundred; a slow model keeps the full second."""
    return _window_holding(REQUESTS_PER_WINDOW, rate, *AUTO_WINDOW_MS)


def _window_holding(requests: int, rate: float, lo: int, hi: int) -> int:
    """The window (ms) that holds `requests` requests at `rate` requests/s, rounded up to 50 ms, within [lo, hi]
    (hi when the rate is unknown)."""
    if not rate > 0:
        return hi
    return max(lo, min(hi, math.ceil(requests * 1000.0 / rate / 50.0) * 50))


def settling_window_ms(rate: float) -> int:
    """The shortest window in which a low rate's windows can settle: SETTLING_REQUESTS requests at `rate`
    (requests/s), rounded up to 50 ms, at most LONGEST_WINDOW_MS. A 1-s window at 3 requests/s holds 3 requests;
    one slow request moves its average latency past any band, so a twelve-model plan's confirmation failed its
    low-rate models for windows that never settled, not for their latency."""
    return _window_holding(SETTLING_REQUESTS, rate, 0, LONGEST_WINDOW_MS)


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
    metrics_url: str | None = None  # the server's metrics endpoint, scraped during every point (perf.telemetry)
    schedule_seed: int = 0  # the base of every point's arrival schedule seed (point_seed)
    samples_per_request: float = 1.0  # a batch-coupled model's stacked samples: each request is that many inferences
    driving: str = DRIVING  # what sends the requests, part of a point's key (a mix may be driven by one process)
    remeasure: bool = True  # a disturbed window is measured again here; False: its mix re-measures it whole
    gaps: tuple[float, ...] | None = None  # distribution "recorded": a request log's inter-arrival times (s)


def arrival_band(target: Target, rate: float) -> Target:
    """The target with perf_analyzer's stability band widened to what Poisson arrivals alone put between windows
    at `rate` requests/s: a window of n requests differs from the next by about sqrt(n), so at 25 requests a window
    a 30 % band fails about one triple of windows in six on a perfectly steady server (a two-model mix's 24 to 41
    requests/s in 1-s windows failed 4 of 8 rates), and each such failure cost a search a step or a hold a
    derating. It is the rule our own load generator
    applies (perf.multistream_stats.poisson_band, POISSON_SIGMAS / sqrt(n)); a queue that grows is still caught
    (queue_growing), and so is a server that falls behind (answered against offered). Constant arrivals, count
    windows and the toolkit's own generator keep the band as given."""
    options, rate = target.options, round_rate(rate)
    if (target.driving != DRIVING or target.distribution not in ("poisson", "recorded")
            or options.measurement_mode != "time_windows" or not rate > 0):
        return target
    # recorded bursts: windows differ by sqrt(their counts' dispersion) more than Poisson arrivals' do
    requests = rate * options.measurement_interval_ms / 1000.0 / windows_dispersion(target, rate)
    band = math.ceil(1000.0 * poisson_band(requests)) / 10.0
    if band <= options.stability_percentage:
        return target
    return replace(target, options=replace(options, stability_percentage=band))


def windows_dispersion(target: Target, rate: float) -> float:
    """How much more than Poisson a measuring window's request count varies under the target's arrivals: 1 for
    Poisson and constant ones; for recorded ones, the dispersion of the replayed log's counts in windows of the
    measurement interval at `rate` (the log's own per-second figure overstates it where the scaling packs several
    bursts into a window)."""
    if target.distribution != "recorded" or not target.gaps:
        return 1.0
    return window_dispersion(np.asarray(target.gaps), rate, target.options.measurement_interval_ms / 1000.0)


def point_key(target: Target, rate: float, trial: int = 1) -> RateKey:
    """The stored identity of a point: configuration, distribution, rate, batch, trial, and the perf options
    (with the band its arrivals need: arrival_band) together with how the arrivals are driven (DRIVING, the base
    seed)."""
    target = arrival_band(target, rate)
    fields = {**key_fields(target.options.measurement_fields()), "driving": target.driving,
              "schedule_seed": target.schedule_seed}
    if target.distribution == "recorded":  # the answered count's allowance (RatePoint.required) reads it back
        fields["window_dispersion"] = round(windows_dispersion(target, rate), 2)
    return RateKey(target.config, target.distribution, round_rate(rate), target.batch, options_key(fields), trial)


def point_seed(base: int, rate: float, trial: int) -> int:
    """The seed of one point's schedule: the same for every configuration at a rate and trial (configurations
    compared on identical arrivals), different between trials (repeats are independent samples)."""
    return zlib.crc32(f"{base}:{round_rate(rate):g}:{trial}".encode())


def schedule_seconds(options: PerfOptions, rate: float) -> float:
    """How long a schedule to write: every window perf_analyzer may measure, with slack (it cycles the file when
    a run outlasts it, so this is about not repeating arrivals, not correctness)."""
    if options.measurement_mode == "time_windows":
        measured = options.max_trials * options.measurement_interval_ms / 1000.0
    else:
        measured = options.max_trials * options.measurement_request_count / max(rate, 1e-9)
    return schedule_length_s(measured)


def export_wanted(target: Target, rate: float) -> bool:
    """perf_analyzer's profile export holds every request's inputs and outputs as JSON numbers (one number per
    tensor with shared memory): without shared memory, ask for it only when it stays under EXPORT_BUDGET_BYTES (an image
    model at hundreds of requests/s would write gigabytes). Without an export the row has perf_analyzer's p99 only."""
    if target.options.shared_memory != "none":
        return True
    try:
        elements = sum(int(math.prod(t.concrete_shape)) for t in (*target.signature.inputs, *target.signature.outputs))
    except (AttributeError, TypeError, ValueError):
        return False
    requests = rate * schedule_seconds(target.options, rate)
    return requests * (200 + 25 * elements * max(target.batch, 1)) <= EXPORT_BUDGET_BYTES


def measure(target: Target, rate: float, store: RateStore, out_dir: Path, trial: int = 1,
            tag: str = "") -> RatePoint:
    """The stored point for (config, distribution, rate, batch, options, trial), or measure and store it. The
    point's stability band is its options' or what its arrivals need (arrival_band), whichever is wider; its key
    holds the band used. A window other processes disturbed (perf.neighbours) is never the point: it is measured
    again once the host is quiet (at most MAX_REMEASURES times, then HostDisturbed); a stored disturbed row (a mix's
    window, which its mix re-measures whole: `target.remeasure` False) is measured again on replay."""
    rate = round_rate(rate)
    target = arrival_band(target, rate)
    key = point_key(target, rate, trial)
    rule = neighbours.policy()
    if (row := store.get(key)) is not None and not (row.get("disturbed") and rule is neighbours.Policy.REMEASURE):
        return RatePoint(key, row)
    row = neighbours.until_quiet(lambda: _measure_once(target, rate, key, out_dir, trial, tag),
                                 f"{target.config} at {rate:g} requests/s", tag or "point", target.remeasure,
                                 on_window=lambda r, disturbance: r.update(disturbance.row()))
    store.put(key, row)
    point = RatePoint(key, store.get(key) or row)
    point.row.update({k: row[k] for k in ("cpu", "wall_s") if k in row})  # CPU accounting lives for this run only
    return point


def _measure_once(target: Target, rate: float, key: RateKey, out_dir: Path, trial: int, tag: str) -> dict[str, Any]:
    """One run of perf_analyzer at `rate` on its seeded schedule: the row (not stored)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{target.config}_{tag}t{trial}_{target.distribution}_r{rate:g}")
    seed = point_seed(target.schedule_seed, rate, trial)
    schedule = write_schedule(out_dir / f"{safe}.intervals", rate, schedule_seconds(target.options, rate),
                              target.distribution, seed, None if target.gaps is None else np.asarray(target.gaps))
    export = out_dir / f"{safe}.profile.json" if export_wanted(target, rate) else None
    before = target.cpu_probe() if target.cpu_probe else None
    started = datetime.now(timezone.utc)
    with telemetry.scrape_during(target.metrics_url, target.model_name, log=_warn) as scraper:
        try:
            result = run_point(PerfTarget(target.model_name, target.url, target.signature, target.model_version,
                                          binary=target.binary, samples_per_request=target.samples_per_request),
                               target.batch, Schedule(schedule.path, rate),
                               target.options, out_dir / f"{safe}.csv", profile_export=export)
        except PerfAnalyzerError as err:  # open loop: nothing finished in a window, or perf_analyzer not at all
            if EMPTY_WINDOW not in str(err) and not isinstance(err, PerfAnalyzerTimeout):  # (overload, a hung step):
                raise  # a failing rate, not the end of the plan
            result = PointResult(target.batch, None, {}, False, 1, request_rate=rate, note=reason_line(err),
                                 log_path=out_dir / f"{safe}.log")
    wall = (datetime.now(timezone.utc) - started).total_seconds()
    after = target.cpu_probe() if target.cpu_probe else None
    text = result.log_path.read_text() if result.log_path and result.log_path.exists() else ""
    latency = _schedule_latency(result, schedule, seed, rate, target.distribution)
    row = row_from_outputs(rate * target.batch * target.samples_per_request, result.values, result.stable, text,
                           latency)
    row.update(_server_view(scraper, out_dir, key, row.get("answered")))
    row.update({"timestamp": started.isoformat(timespec="seconds"), "url": target.url,
                "command": " ".join(result.command), "log": str(result.log_path or ""), "schedule_seed": seed,
                "profile_export": str(result.profile_export or "")})
    if before is not None and after is not None:
        row["cpu"] = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
        row["wall_s"] = wall
    return row


def _schedule_latency(result: PointResult, schedule: Any, seed: int, rate: float, distribution: str) -> Any:
    """Latency from the intended send times (the profile export against the schedule); the summary stays beside the
    point, the raw export is dropped or kept compressed (--keep-raw); None where the export is empty or cut."""
    latency, keep = None, committed.keeping_raw()
    if result.profile_export is not None:
        try:
            info = schedule_record(schedule, seed, rate, distribution)
            latency = finish_point(schedule, result.profile_export, keep, MEASURED_BY, info).latency
            result.profile_export = summary_path(result.profile_export)
        except (ValueError, KeyError, OSError):
            # an empty or cut export (seen on a short burst run): the row keeps perf_analyzer's own p99
            drop_raw(result.profile_export, keep_raw=keep)
            result.profile_export = None
    if distribution != "recorded":  # a recorded one is the log's: the seed alone does not draw it again
        drop_raw(schedule.path, keep_raw=keep)  # the row's seed regenerates it (make_schedule)
    return latency


def _warn(message: str) -> None:
    logging.getLogger(__name__).warning(f"warning: {message}")


def _server_view(scraper, out_dir: Path, key: RateKey, answered: Any) -> dict[str, Any]:
    """The point's server-side figures for its row, and its summary and time series beside the point's files
    (openloop_server.csv, telemetry/openloop_series.csv); {} where the endpoint was not scraped."""
    if scraper is None or len(scraper.samples) < 2:
        return {}
    client = _f(answered)
    summary = telemetry.summarise(scraper.samples, None if math.isnan(client) else client)
    point = {"config": key.config, "request_rate": key.request_rate, "trial": key.trial,
             "client_infer_per_s": None if math.isnan(client) else client}
    telemetry.record_point(out_dir, "openloop", point, summary, scraper.samples,
                           identity=("config", "request_rate", "trial"))
    return {"server_infer_per_s": summary.get("server_infer_per_s"), "server_avg_batch": summary.get("avg_batch"),
            "server_queue_us": summary.get("queue_us_per_request"),
            "server_compute_us": summary.get("compute_infer_us_per_request"),
            "server_pending": summary.get("pending_requests"), "server_cpu_util_pct": summary.get("cpu_util_pct"),
            "server_cpu_memory_gib": summary.get("cpu_memory_gib"), "server_gpu_util_pct": summary.get("gpu_util_pct"),
            "server_gpu_memory_gib": summary.get("gpu_memory_gib")}
