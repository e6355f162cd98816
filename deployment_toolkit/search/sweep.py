"""Drive one candidate's concurrency sweep point by point, and stop as soon as more load cannot help.

Concurrency doubles (1, 2, 4, ...) until the first point whose p99 is over the budget: that point is the
last one measured (Model Analyzer keeps doubling to 512 and 1024 long after). Then the gap between the last
good and the first bad concurrency is bisected a few times, because the best point under the budget is
usually in between. Two more early stops: throughput has stopped growing (saturated: more clients only
queue), or the candidate is clearly worse than the incumbent at the same load for two levels in a row.
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


def sweep_concurrency(measure: Callable[[int], Point], policy: SweepPolicy,
                      reference: Mapping[int, Point] | None = None) -> SweepResult:
    """Measure `measure(concurrency)` level by level; see the module doc for when it stops."""
    result = SweepResult()
    budget = policy.budget_ms
    if policy.objective == "latency":
        p = measure(1)
        result.points.append(p)
        result.stop_reason = ("latency objective: concurrency 1 only (the lowest p99 is at the lightest load)"
                              if p.p99_ms <= budget else _over(p, budget))
        return result

    c, flat, worse = 1, 0, []
    prev: Point | None = None
    last_good: Point | None = None
    first_bad: Point | None = None
    while True:
        p = measure(c)
        result.points.append(p)
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
    lo, hi = last_good.concurrency, first_bad.concurrency
    refined = []
    for _ in range(policy.refine_steps):
        mid = (lo + hi) // 2
        if mid in (lo, hi):
            break
        p = measure(mid)
        result.points.append(p)
        refined.append(mid)
        if p.p99_ms <= budget:
            lo = mid
        else:
            hi = mid
    if refined:
        result.stop_reason += f"; bisected at {', '.join(map(str, refined))}"
    return result


def _over(p: Point, budget: float) -> str:
    return f"p99 {p.p99_ms:.1f} ms > budget {budget:g} ms at concurrency {p.concurrency}"
