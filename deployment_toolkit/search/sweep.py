"""Drive one candidate's concurrency sweep point by point, and stop as soon as more load cannot help.

The baseline (`sweep_concurrency`): concurrency doubles (1, 2, 4, ...) until the first point whose p99 is
over the budget: that point is the last one measured (Model Analyzer keeps doubling to 512 and 1024 long
after). Then the gap between the last good and the first bad concurrency is bisected a few times, because
the best point under the budget is usually in between. Two more early stops: throughput has stopped growing
(saturated: more clients only queue), or the candidate is clearly worse than the incumbent at the same load
for two levels in a row.

A challenger (`sweep_near`) starts where the incumbent was best instead of at 1: a config that changes one
setting has its best point near there, and the levels far below it cannot win a throughput contest. From
there it steps down while p99 is over the budget, or up to the level Little's law predicts for the budget
(p99 grows in proportion to the clients once throughput is saturated) while throughput still grows. A
challenger already behind the incumbent where the incumbent was best is dropped there: fewer clients only
lower its throughput, and more cannot help it if its p99 is no better. Two or three points per challenger
instead of five to seven.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from .stats import MIN_NOISE
from .store import Point

OBJECTIVES = ("throughput", "latency")


@dataclass(frozen=True)
class SweepPolicy:
    budget_ms: float
    objective: str = "throughput"
    max_concurrency: int = 256
    refine_steps: int = 2
    saturation_patience: int = 2  # doublings without a gain beyond noise before calling it saturated
    noise: float = MIN_NOISE  # relative throughput noise
    p99_noise: float = MIN_NOISE

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
        if self.budget_ms <= 0:
            raise ValueError("the p99 budget must be > 0 ms")


@dataclass
class SweepResult:
    points: list[Point] = field(default_factory=list)  # sample 0 of each concurrency, in measuring order
    stop_reason: str = ""
    behind: bool = False  # dropped over the budget because it could not catch up with the incumbent anyway

    def by_concurrency(self) -> dict[int, Point]:
        return {p.concurrency: p for p in self.points}

    def feasible(self, budget_ms: float) -> list[Point]:
        return [p for p in self.points if p.p99_ms <= budget_ms]

    @property
    def min_p99(self) -> Point | None:
        return min(self.points, key=lambda p: p.p99_ms, default=None)


def best_point(points: list[Point], budget_ms: float, objective: str) -> Point | None:
    """Throughput: the most inferences/s with p99 within budget (ties: lower p99). Latency: the lowest p99."""
    ok = [p for p in points if p.p99_ms <= budget_ms]
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
    budget = policy.budget_ms
    if policy.objective == "latency":
        p = take(1)
        result.stop_reason = ("latency objective: concurrency 1 only (the lowest p99 is at the lightest load)"
                              if p.p99_ms <= budget else _over(p, budget))
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
        if p.p99_ms > budget:
            first_bad = p
            result.stop_reason = _over(p, budget)
            break
        last_good = p
        ref = (reference or {}).get(c)
        if ref is not None and p.throughput < ref.throughput * (1 - 2 * policy.noise) and p.p99_ms > ref.p99_ms:
            worse.append(c)
            if len(worse) >= 2 and worse[-2] == c // 2:
                result.stop_reason = (f"dominated: lower throughput and higher p99 than the incumbent at concurrency "
                                      f"{worse[-2]} and {c}")
                return result
        if prev is not None and p.throughput <= prev.throughput * (1 + policy.noise):
            flat += 1
        else:
            flat = 0
        if flat >= policy.saturation_patience:
            result.stop_reason = (f"saturated: throughput grew less than the noise ({policy.noise * 100:.1f}%) over "
                                  f"{flat} doublings up to concurrency {c}")
            return result
        if c * 2 > policy.max_concurrency:
            result.stop_reason = f"reached --max-concurrency {policy.max_concurrency}"
            return result
        prev = p
        c *= 2

    if last_good is None or policy.refine_steps <= 0:
        return result
    # Bisect between the last good and the first bad level, unless throughput had already stopped growing.
    below = result.by_concurrency().get(last_good.concurrency // 2)
    if below is not None and last_good.throughput <= below.throughput * (1 + policy.noise):
        return result
    _bisect(take, policy, last_good, first_bad, result, should_stop)
    return result


def sweep_near(measure: Callable[[int], Point], policy: SweepPolicy, start: int,
               reference: Mapping[int, Point] | None = None, should_stop: StopCheck | None = None) -> SweepResult:
    """A challenger's sweep for the throughput objective, starting at the incumbent's best concurrency `start`;
    see the module doc."""
    if policy.objective != "throughput" or start <= 1:
        return sweep_concurrency(measure, policy, reference, should_stop)
    should_stop = should_stop or (lambda: "")
    budget = policy.budget_ms
    result = SweepResult()
    take = _recorder(measure, result)
    first = take(start)
    ref = (reference or {}).get(start)
    behind = ref is not None and first.throughput < ref.throughput * (1 - 2 * policy.noise)
    if first.p99_ms > budget and behind:
        result.stop_reason = (f"cannot win: {_over(first, budget)}, where its throughput is already below the "
                              f"incumbent's ({first.throughput:.1f} vs {ref.throughput:.1f} inf/s) and fewer "
                              "clients only lower it")
        result.behind = True
        return result
    if first.p99_ms > budget:
        good, bad = None, first
        while bad.concurrency > 1 and good is None:
            if why := should_stop():
                result.stop_reason = why
                return result
            q = take(_down(bad, budget))
            good, bad = (q, bad) if q.p99_ms <= budget else (None, q)
        result.stop_reason = (f"started at the incumbent's best concurrency {start}: {_over(first, budget)}; "
                              + (f"stepped down to {good.concurrency}" if good else "over budget down to 1"))
        if good is not None:
            _bisect(take, policy, good, bad, result, should_stop)
        return result

    if behind and first.p99_ms >= ref.p99_ms * (1 - policy.p99_noise):
        result.stop_reason = (f"dominated at the incumbent's best concurrency {start}: {first.throughput:.1f} vs "
                              f"{ref.throughput:.1f} inf/s, p99 {first.p99_ms:.1f} vs {ref.p99_ms:.1f} ms")
        return result
    good = first
    while True:
        up = _up(good, budget, policy.max_concurrency)
        if up is None:
            result.stop_reason = f"reached --max-concurrency {policy.max_concurrency}"
            return result
        if why := should_stop():
            result.stop_reason = why
            return result
        q = take(up)
        grew = q.throughput > good.throughput * (1 + policy.noise)
        if q.p99_ms > budget:
            result.stop_reason = _over(q, budget)
            if grew:  # more throughput lies between the two levels
                _bisect(take, policy, good, q, result, should_stop)
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


def _up(p: Point, budget: float, cap: int) -> int | None:
    """The next level to try above a point within budget: its budget level, at least one more and at most
    twice as many."""
    c = p.concurrency
    if c >= cap:
        return None
    return min(cap, max(c + 1, min(2 * c, budget_level(c, p.p99_ms, budget))))


def _down(p: Point, budget: float) -> int:
    """The next level to try below a point over the budget: its budget level, at least halving."""
    c = p.concurrency
    return max(1, min(c // 2, budget_level(c, p.p99_ms, budget)))


def _bisect(take: Callable[[int], Point], policy: SweepPolicy, good: Point, bad: Point, result: SweepResult,
            should_stop: StopCheck) -> None:
    lo, hi = good.concurrency, bad.concurrency
    refined = []
    for _ in range(policy.refine_steps):
        mid = (lo + hi) // 2
        if mid in (lo, hi) or should_stop():
            break
        p = take(mid)
        refined.append(mid)
        lo, hi = (mid, hi) if p.p99_ms <= policy.budget_ms else (lo, mid)
    if refined:
        result.stop_reason += f"; bisected at {', '.join(map(str, refined))}"


def _over(p: Point, budget: float) -> str:
    return f"p99 {p.p99_ms:.1f} ms > budget {budget:g} ms at concurrency {p.concurrency}"
