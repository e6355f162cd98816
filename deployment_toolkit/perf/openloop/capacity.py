"""Open-loop capacity: the highest offered request rate a replica keeps up with, p99 within the SLO.

A closed-loop sweep (fixed concurrency) never offers more work than the server finishes: when the server slows
down, so do its clients. Production traffic arrives on its own schedule, so what a replica sustains is measured
here in open loop: perf_analyzer `--request-intervals FILE` with a seeded Poisson (or constant) schedule at rate R
that the toolkit writes (ratepoint, perf/analyzer/schedule.py: p99 also from the intended send time),
`--async` so the sending threads never wait for answers (in sync mode its default 4 threads cap the offered rate
at 4 / latency: the client, not the server, becomes the limit).

The search (`search`) starts at the closed-loop sustainable rate (the seed), steps down (to below what the server
answered when it fell behind) or up until it brackets the boundary, then bisects to `resolution`. The capacity is
the highest passing offered rate, never an interpolation. Repeating the search (trials) measures its spread,
which sets the default headroom (`OpenLoopCapacity.headroom`).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ...errors import UserInputError
from .holding import stuck
from .ratepoint import KEEP_UP, ClientLimited, RatePoint, Target, measure, round_rate
from .ratestore import RateStore

DEFAULT_RESOLUTION = 0.03
STEP_DOWN = 0.8


# ---- the search ---------------------------------------------------------------------------------

@dataclass
class Search:
    """One capacity search: the points in the order measured, and what they show."""

    slo_ms: float
    batch: int
    points: list[RatePoint] = field(default_factory=list)
    resolution: float = DEFAULT_RESOLUTION
    stopped: str = ""  # why the step-down stopped above the floor, with no rate passed ('' when it did not)
    client_limit: RatePoint | None = None

    @property
    def passing(self) -> list[RatePoint]:
        return [p for p in self.points if p.passes(self.slo_ms)]

    @property
    def best(self) -> RatePoint | None:
        return max(self.passing, key=lambda p: p.rate, default=None)

    @property
    def capacity(self) -> float | None:
        """Inferences/s: the highest offered rate that passed (None: no rate met the SLO)."""
        b = self.best
        return b.offered if b else None

    @property
    def lowest_failing(self) -> RatePoint | None:
        lo = self.best.rate if self.best else 0.0
        fails = [p for p in self.points if not p.passes(self.slo_ms) and p.rate > lo]
        return min(fails, key=lambda p: p.rate, default=None)

    @property
    def bracket(self) -> tuple[float | None, float | None]:
        f = self.lowest_failing
        return (self.capacity, f.offered if f else None)

    def unreachable_text(self) -> str:
        if not self.points:
            return "nothing measured"
        best = min(self.points, key=lambda p: (p.p99 if not math.isnan(p.p99) else math.inf))
        lowest = min(self.points, key=lambda p: p.rate)
        return (f"no offered rate down to {lowest.offered:,.1f} inferences/s met p99 <= {self.slo_ms:g} ms "
                f"while keeping up (best p99 {best.p99:.1f} ms at {best.offered:,.1f} inferences/s offered, "
                f"{best.verdict(self.slo_ms)})")


def search(measure_at: Callable[[float], RatePoint], seed_rate: float, slo_ms: float, batch: int = 1,
           resolution: float = DEFAULT_RESOLUTION, max_points: int = 10, min_fraction: float = 0.05,
           mix: bool = False) -> Search:
    """Bracket and bisect the highest passing request rate (requests/s; capacities are in inferences/s).
    `mix`: a shared group's mix, driven on the server's own host, whose points cost half a minute each:
    - stop stepping down when a lower rate twice left the tail as it was (holding.stuck);
    - a rate the client could not send is a failing point, stepped down from, not the end of the search: past what
      the group serves, its runtimes' threads take the cores and the client falls behind at a few hundred
      requests/s (twelve models on 2 cores: a plan ended, exit 2, after 19 minutes on one such point).

    `measure_at(rate)` measures (or replays) one point. Deterministic given the points, so replaying a
    stored search takes the same path and measures nothing. Raises ClientLimited when the client could not
    send a rate (the result would describe the client, not the server), except for a mix (above).
    """
    if seed_rate <= 0:
        raise UserInputError("the seed rate must be positive")
    s = Search(slo_ms, batch, resolution=resolution)
    floor = seed_rate * min_fraction
    rate = round_rate(seed_rate)
    while len(s.points) < max_points:
        p = measure_at(rate)
        s.points.append(p)
        if p.client_limited:
            s.client_limit = p
            if not mix:
                raise ClientLimited(p.client_limit_text())
        lo = s.best.rate if s.best else None
        f = s.lowest_failing
        hi = f.rate if f else None
        if lo is None:  # only failures so far: step down, below what the server managed when it fell behind
            if mix and stuck(s.points):  # twice a lower rate, the same tail: no rate will pass
                s.stopped = "the p99 did not come down with the rate (twice) though every request was answered"
                break
            nxt = hi * STEP_DOWN
            if (not p.kept_up or p.client_limited) and not math.isnan(p.answered) and p.answered > 0:
                nxt = min(nxt, p.answered / batch * KEEP_UP)
            if nxt < floor:
                break
        elif hi is None:  # only passes: step up
            nxt = lo / STEP_DOWN
        else:
            if (hi - lo) / lo <= resolution:
                break
            nxt = (lo + hi) / 2
        nxt = round_rate(nxt)
        if any(q.rate == nxt for q in s.points):
            break  # the rounding left nothing between the bracket's ends
        rate = nxt
    return s


# ---- repeated searches and the headroom ------------------------------------------------------------

@dataclass
class OpenLoopCapacity:
    """A configuration's open-loop capacity from `trials` searches, next to its closed-loop figure."""

    config: str
    distribution: str
    slo_ms: float
    trials: list[Search]
    closed_loop: float | None = None  # closed-loop sustainable inferences/s (the seed)
    closed_loop_level: str = ""
    closed_loop_p99: float | None = None
    held: float | None = None  # the rate that then held k of k re-tests at itself (perf.openloop.holding): the cap

    @property
    def capacities(self) -> list[float]:
        return [t.capacity for t in self.trials if t.capacity is not None]

    @property
    def reachable(self) -> bool:
        """Most searches found a rate that holds. One search that found none (a stall of a shared host during
        it) does not make the configuration unreachable: it pulls the median down instead (`capacity`)."""
        return len(self.capacities) * 2 > len(self.trials)

    @property
    def capacity(self) -> float | None:
        """The median over the searches (inferences/s), a search that found no rate counting as 0: with one
        of three empty, the lower of the other two."""
        if not self.reachable:
            return None
        median = statistics.median([0.0] * (len(self.trials) - len(self.capacities)) + self.capacities)
        return median if self.held is None else min(median, self.held)

    @property
    def spread(self) -> float | None:
        """(max - min) / min of the capacities the searches found; None with fewer than two."""
        c = self.capacities
        return (max(c) - min(c)) / min(c) if len(c) >= 2 and self.reachable else None

    @property
    def resolution(self) -> float:
        return max((t.resolution for t in self.trials), default=DEFAULT_RESOLUTION)

    @property
    def headroom(self) -> float:
        """max(spread, search resolution): planning on the median with this headroom carries the peak even on
        the lowest capacity measured; two capacities closer than the search's resolution are indistinguishable."""
        return max(self.spread or 0.0, self.resolution)

    @property
    def ratio(self) -> float | None:
        return None if not self.capacity or not self.closed_loop else self.capacity / self.closed_loop

    def unreachable_text(self) -> str:
        bad = next((t for t in self.trials if t.capacity is None), None)
        return f"{self.config}: {bad.unreachable_text() if bad else 'not measured'}"

    def explain(self) -> str:
        """Why closed- and open-loop capacity differ, with this configuration's numbers."""
        if self.capacity is None or not self.closed_loop:
            return ""
        best = [t.best for t in self.trials if t.best]
        p99 = statistics.median([b.p99 for b in best]) if best else math.nan
        return (f"{self.config}: closed loop {self.closed_loop:,.1f} inf/s at {self.closed_loop_level} (p99 "
                f"{self.closed_loop_p99:.1f} ms), open loop {self.capacity:,.1f} inf/s ({self.distribution} "
                f"arrivals, p99 {p99:.1f} ms at that rate): {self.ratio:.0%} of the closed-loop figure. "
                + ("A closed loop never has more requests outstanding than its concurrency, so a slow moment slows "
                   "the clients instead of building a queue; open-loop arrivals keep coming, bursts queue, and the "
                   "rate a replica keeps up with at the SLO is lower." if self.ratio < 1 else
                   "Higher than the closed loop: the sweep's best point within the SLO was limited by the "
                   "concurrency levels it measured, not by the replica; the open-loop search is not."))


def repeat_search(measure_at: Callable[[float, int], RatePoint], seed_rate: float, slo_ms: float, batch: int = 1,
                  trials: int = 3, resolution: float = DEFAULT_RESOLUTION, max_points: int = 10) -> list[Search]:
    """`trials` searches, each from the closed-loop seed: independent measurements of the same boundary, so one
    thrown off by a stall of the host (a failure at a rate far below the boundary) does not drag the others
    down with it, as repeats started from its result did (resnet18_i2 in the sizing example: a first search
    that failed low, and repeats in small steps from there). They stop once most have found no rate.
    `measure_at(rate, trial)`."""
    out: list[Search] = []
    for trial in range(1, trials + 1):
        out.append(search(lambda r, t=trial: measure_at(r, t), seed_rate, slo_ms, batch, resolution, max_points))
        if sum(s.capacity is None for s in out) * 2 >= trials:
            break  # most searches found no rate that meets the SLO: the rest cannot make it reachable
    return out


def measure_capacity(target: Target, seed_rate: float, slo_ms: float, store: RateStore, out_dir: Path,
                     trials: int = 3, resolution: float = DEFAULT_RESOLUTION, max_points: int = 10) -> list[Search]:
    """repeat_search against a live target, every point stored (and resumed) in `store`."""
    return repeat_search(lambda r, t: measure(target, r, store, out_dir, t), seed_rate, slo_ms, target.batch,
                         trials, resolution, max_points)


def derived_headroom(capacities: dict[str, OpenLoopCapacity | None]) -> tuple[float, str]:
    """The widest headroom among the configurations measured (each: max(spread, resolution)), and how."""
    parts = {name: c for name, c in capacities.items() if c is not None and c.reachable}
    if not parts:
        return 0.2, "Headroom 20% (fixed default: no open-loop capacity measured to derive it from)."
    name, worst = max(parts.items(), key=lambda kv: kv[1].headroom)
    detail = "; ".join(
        f"{n}: {len(c.capacities)} searches, "
        + (f"spread {c.spread:.1%}" if c.spread is not None else "a single search (no spread)")
        + f", resolution {c.resolution:.0%}" for n, c in parts.items())
    return worst.headroom, (
        f"Headroom {worst.headroom:.1%} derived from the repeated open-loop capacity measurements: for each "
        "configuration, max(spread = (max - min) / min of its searches' capacities, the search's resolution); the "
        f"widest ({name}) is used for all, so every plan carries the peak even at its lowest measured capacity. "
        f"({detail}.)")


def derated_capacity(point: RatePoint, slo_ms: float) -> float:
    """What a replica that failed at `point` did carry (inferences/s), always below the offered rate.

    A replica that fell behind carried what it answered. Its p99 says nothing more: the queue grew through the
    window, so the p99 measures the window's length, and scaling the rate by SLO / p99 derated the sizing example
    to half of what the replica answered. Only a replica that kept up but broke the SLO is derated by that ratio.
    """
    if not point.kept_up and not math.isnan(point.answered):
        cap = point.answered
    elif not math.isnan(point.p99) and point.p99 > slo_ms:
        cap = point.offered * slo_ms / point.p99
    else:
        cap = point.offered
    return min(cap, point.offered * 0.97)
