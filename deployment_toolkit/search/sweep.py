"""Drive one candidate's concurrency sweep point by point, and stop as soon as more load cannot help.

A point counts as within the budget only with room for the measured p99 noise (`stats.holds_budget`): a
p99 at 86% of the budget with 17% noise is as likely as not to land over it when measured again.

The baseline (`sweep_concurrency`): concurrency grows from 1 by Little's law (to the level where p99 would
reach the budget, at least one client more and at most twice as many: doubling while far from the budget)
until the first point over the budget: that point is the last one measured (Model Analyzer keeps doubling
to 512 and 1024 long after). Then the knee, between the last level within the budget and the first over
it, is narrowed to one client (`narrow_knee`), because the best throughput under the budget is at its edge and
Model Analyzer's powers of two miss it by up to half. Two more early stops: throughput has stopped growing
(saturated: more clients only queue), or the candidate is clearly worse than the incumbent at the same load
for two levels in a row.

A challenger (`sweep_near`) starts where the incumbent was best instead of at 1: a config that changes one
setting has its best point near there, and the levels far below it cannot win a throughput contest. From
there it steps down while p99 is over the budget, or up to the level Little's law predicts for the budget
(p99 grows in proportion to the clients once throughput is saturated) while throughput still grows. A
challenger already behind the incumbent where the incumbent was best is dropped there: fewer clients only
lower its throughput, and more cannot help it if its p99 is no better. Two or three points per challenger
instead of five to seven, then the knee to one client.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from .stats import MIN_NOISE, holds_budget
from .store import Point
from ..errors import UserInputError

OBJECTIVES = ("throughput", "latency")


@dataclass(frozen=True)
class SweepPolicy:
    budget_ms: float
    objective: str = "throughput"
    max_concurrency: int = 256
    refine_steps: int = 8  # at most this many probes to narrow the knee to one client
    saturation_patience: int = 2  # steps up without a gain beyond noise before calling it saturated
    noise: float = MIN_NOISE  # relative throughput noise
    p99_noise: float = MIN_NOISE  # relative p99 noise: a point within the budget keeps this much room

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise UserInputError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
        if self.budget_ms <= 0:
            raise UserInputError("the p99 budget must be > 0 ms")

    def within(self, p: Point) -> bool:
        """One sample within the budget with room for the p99 noise."""
        return holds_budget([p.p99_ms], self.budget_ms, self.p99_noise)

    @property
    def target_ms(self) -> float:
        """The p99 a single sample may reach and still count as within the budget."""
        return self.budget_ms / (1.0 + self.p99_noise)


@dataclass
class SweepResult:
    points: list[Point] = field(default_factory=list)  # sample 0 of each concurrency, in measuring order
    stop_reason: str = ""
    behind: bool = False  # dropped over the budget because it could not catch up with the incumbent anyway

    def by_concurrency(self) -> dict[int, Point]:
        return {p.concurrency: p for p in self.points}

    @property
    def min_p99(self) -> Point | None:
        return min(self.points, key=lambda p: p.p99_ms, default=None)


def best_point(points: list[Point], budget_ms: float, objective: str, p99_noise: float = 0.0) -> Point | None:
    """Throughput: the most inferences/s with p99 within budget (ties: lower p99). Latency: the lowest p99.
    With `p99_noise`, a point counts only when its p99 raised by that noise is within the budget."""
    ok = [p for p in points if holds_budget([p.p99_ms], budget_ms, p99_noise)]
    if not ok:
        return None
    if objective == "latency":
        return min(ok, key=lambda p: (p.p99_ms, -p.throughput))
    return max(ok, key=lambda p: (p.throughput, -p.p99_ms))


def score(point: Point | None, objective: str) -> float | None:
    if point is None:
        return None
    return point.p99_ms if objective == "latency" else point.throughput


StopCheck = Callable[[], str]  # "" to go on, else why the sweep must stop now (e.g. the time limit)


def sweep_concurrency(measure: Callable[[int], Point], policy: SweepPolicy,
                      reference: Mapping[int, Point] | None = None,
                      should_stop: StopCheck | None = None) -> SweepResult:
    """Measure `measure(concurrency)` level by level; see the module doc for when it stops. `should_stop` is
    asked before every level after the first."""
    result = SweepResult()
    take = _recorder(measure, result)
    should_stop = should_stop or (lambda: "")
    if policy.objective == "latency":
        p = take(1)
        result.stop_reason = ("latency objective: concurrency 1 only (the lowest p99 is at the lightest load)"
                              if policy.within(p) else _over(p, policy))
        return result

    c, flat, worse = 1, 0, []
    prev: Point | None = None
    last_good: Point | None = None
    first_bad: Point | None = None
    while True:
        if result.points and (why := should_stop()):
            result.stop_reason = why
            return result
        p = take(c)
        if not policy.within(p):
            first_bad = p
            result.stop_reason = _over(p, policy)
            break
        ref = (reference or {}).get(c)
        if ref is not None and p.throughput < ref.throughput * (1 - 2 * policy.noise) and p.p99_ms > ref.p99_ms:
            worse.append(c)
            if len(worse) >= 2 and last_good is not None and worse[-2] == last_good.concurrency:
                result.stop_reason = (f"dominated: lower throughput and higher p99 than the incumbent at concurrency "
                                      f"{worse[-2]} and {c}")
                return result
        last_good = p
        if prev is not None and p.throughput <= prev.throughput * (1 + policy.noise):
            flat += 1
        else:
            flat = 0
        if flat >= policy.saturation_patience:
            result.stop_reason = (f"saturated: throughput grew less than the noise ({policy.noise * 100:.1f}%) over "
                                  f"{flat} steps up to concurrency {c}")
            return result
        up = _up(p, policy)
        if up is None:
            result.stop_reason = f"reached --max-concurrency {policy.max_concurrency}"
            return result
        prev = p
        c = up

    if last_good is None or policy.refine_steps <= 0:
        return result
    # Narrow the knee between the last good and the first bad level, unless throughput had already stopped
    # growing below the last good one.
    goods = [q for q in result.points if q.concurrency < last_good.concurrency]
    below = max(goods, key=lambda q: q.concurrency, default=None)
    if below is not None and last_good.throughput <= below.throughput * (1 + policy.noise):
        return result
    narrow_knee(take, policy, last_good, first_bad, result, should_stop)
    return result


def sweep_near(measure: Callable[[int], Point], policy: SweepPolicy, start: int,
               reference: Mapping[int, Point] | None = None, should_stop: StopCheck | None = None) -> SweepResult:
    """A challenger's sweep for the throughput objective, starting at the incumbent's best concurrency `start`;
    see the module doc."""
    if policy.objective != "throughput" or start <= 1:
        return sweep_concurrency(measure, policy, reference, should_stop)
    should_stop = should_stop or (lambda: "")
    result = SweepResult()
    take = _recorder(measure, result)
    first = take(start)
    ref = (reference or {}).get(start)
    behind = ref is not None and first.throughput < ref.throughput * (1 - 2 * policy.noise)
    if not policy.within(first) and behind:
        result.stop_reason = (f"cannot win: {_over(first, policy)}, where its throughput is already below the "
                              f"incumbent's ({first.throughput:.1f} vs {ref.throughput:.1f} inf/s) and fewer "
                              "clients only lower it")
        result.behind = True
        return result
    if not policy.within(first):
        good, bad = None, first
        while bad.concurrency > 1 and good is None:
            if why := should_stop():
                result.stop_reason = why
                return result
            q = take(_down(bad, policy))
            good, bad = (q, bad) if policy.within(q) else (None, q)
        result.stop_reason = (f"started at the incumbent's best concurrency {start}: {_over(first, policy)}; "
                              + (f"stepped down to {good.concurrency}" if good else "over budget down to 1"))
        if good is not None:
            narrow_knee(take, policy, good, bad, result, should_stop)
        return result

    if behind and first.p99_ms >= ref.p99_ms * (1 - policy.p99_noise):
        result.stop_reason = (f"dominated at the incumbent's best concurrency {start}: {first.throughput:.1f} vs "
                              f"{ref.throughput:.1f} inf/s, p99 {first.p99_ms:.1f} vs {ref.p99_ms:.1f} ms")
        return result
    good = first
    while True:
        up = _up(good, policy)
        if up is None:
            result.stop_reason = f"reached --max-concurrency {policy.max_concurrency}"
            return result
        if why := should_stop():
            result.stop_reason = why
            return result
        q = take(up)
        grew = q.throughput > good.throughput * (1 + policy.noise)
        if not policy.within(q):
            result.stop_reason = _over(q, policy)
            if grew:  # more throughput lies between the two levels
                narrow_knee(take, policy, good, q, result, should_stop)
            return result
        if not grew:
            result.stop_reason = (f"saturated: throughput grew less than the noise ({policy.noise * 100:.1f}%) "
                                  f"from concurrency {good.concurrency} to {q.concurrency}")
            return result
        good = q


def _recorder(measure: Callable[[int], Point], result: SweepResult) -> Callable[[int], Point]:
    def take(c: int) -> Point:
        p = measure(c)
        result.points.append(p)
        return p
    return take


def budget_level(concurrency: int, p99_ms: float, budget_ms: float) -> int:
    """The concurrency where p99 would reach the budget if it grew in proportion to the clients, as it does
    once throughput is saturated (Little's law); unbounded (a large number) for a p99 of 0."""
    return int(concurrency * budget_ms / p99_ms) if p99_ms > 0 else 2 ** 31


def _up(p: Point, policy: SweepPolicy) -> int | None:
    """The next level to try above a point within budget: its budget level (with room for the p99 noise), at
    least one more and at most twice as many."""
    c, cap = p.concurrency, policy.max_concurrency
    if c >= cap:
        return None
    return min(cap, max(c + 1, min(2 * c, budget_level(c, p.p99_ms, policy.target_ms))))


def _down(p: Point, policy: SweepPolicy) -> int:
    """The next level to try below a point over the budget: its budget level, at least halving."""
    c = p.concurrency
    return max(1, min(c // 2, budget_level(c, p.p99_ms, policy.target_ms)))


def narrow_knee(take: Callable[[int], Point], policy: SweepPolicy, good: Point, bad: Point, result: SweepResult,
          should_stop: StopCheck) -> None:
    """Narrow the gap between a level within the budget and one over it to one client. Probes alternate
    between where the straight p99 line through the two ends crosses the budget (right at once when p99 grows
    in proportion to the clients) and the middle (so the gap at least halves every two probes)."""
    lo, hi = good, bad
    probes: list[int] = []
    while hi.concurrency - lo.concurrency > 1 and len(probes) < policy.refine_steps:
        if should_stop():
            break
        a, b = lo.concurrency, hi.concurrency
        c = (a + b) // 2
        if len(probes) % 2 == 0 and hi.p99_ms > lo.p99_ms:
            x = a + (policy.target_ms - lo.p99_ms) * (b - a) / (hi.p99_ms - lo.p99_ms)
            c = min(b - 1, max(a + 1, int(x)))
        p = take(c)
        probes.append(c)
        lo, hi = (p, hi) if policy.within(p) else (lo, p)
    if probes:
        probed = ", ".join(map(str, probes))
        result.stop_reason += (f"; knee at {lo.concurrency}..{hi.concurrency} (probed {probed})"
                               if hi.concurrency - lo.concurrency <= 1 else
                               f"; narrowed to {lo.concurrency}..{hi.concurrency} (probed {probed})")


def _over(p: Point, policy: SweepPolicy) -> str:
    if p.p99_ms > policy.budget_ms:
        return f"p99 {p.p99_ms:.1f} ms > budget {policy.budget_ms:g} ms at concurrency {p.concurrency}"
    return (f"p99 {p.p99_ms:.1f} ms at concurrency {p.concurrency} leaves less room under the budget "
            f"{policy.budget_ms:g} ms than the p99 noise ({policy.p99_noise * 100:.1f}%)")
