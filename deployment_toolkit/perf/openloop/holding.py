"""Capacity that holds (issue 36, item 3): the rate a plan rests on is re-tested before it is used.

A bisection ends on the highest rate that passed once; a rate at that edge passes and fails by turns, so a plan
built on it misses its SLO when re-tested (the committed single-model plan's "Predicted capacity check" showed
p99 767 ms against 50 ms at exactly that rate). Here the found rate is re-tested `k` times (independent arrival
schedules, longer windows); any failure steps it down and the re-test starts again, so the capacity returned
passed k of k at the rate itself.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

STEP = 0.9  # each failed re-test lowers the rate by 10 %
MAX_STEPS = 6  # 0.9^6 = 53 % of the found rate: past that the bisection itself was wrong, say so
STUCK = 0.9  # a failure at a lower rate whose p99 is above this share of the one before: the rate did not help


def no_better(before: Any, after: Any) -> bool:
    """Two failures, `after` at the lower rate: both answered all they were offered (no growing queue) and the p99
    fell by less than a tenth. The load is not why it misses (a slow neighbour, the host): a lower rate will not
    pass either. A point the client could not send says nothing of that (the host was the load). Points with `p99`
    and `kept_up` (a RatePoint, a shared group's MixPoint, Judged)."""
    p99, was = after.p99, before.p99
    sent = not getattr(before, "client_limited", False) and not getattr(after, "client_limited", False)
    return (sent and bool(before.kept_up) and bool(after.kept_up) and not math.isnan(p99) and not math.isnan(was)
            and p99 > STUCK * was)


def stuck(failures: list[Any]) -> bool:
    """The last two step-downs of `failures` (failed points, each at a lower rate than the one before) both
    no_better: stop stepping down (twice, so one noisy tail does not end it)."""
    return len(failures) >= 3 and no_better(failures[-3], failures[-2]) and no_better(failures[-2], failures[-1])


@dataclass
class Retest:
    rate: float
    trial: int
    passed: bool
    verdict: str


@dataclass
class Judged:
    """A single model's open-loop point judged against its own SLO: what `hold` asks of a point."""

    point: Any  # perf.openloop.ratepoint.RatePoint
    slo_ms: float

    def passes(self) -> bool:
        return self.point.passes(self.slo_ms)

    @property
    def p99(self) -> float:
        return self.point.p99

    @property
    def kept_up(self) -> bool:
        return self.point.kept_up

    def verdict(self) -> str:
        return self.point.verdict(self.slo_ms)


@dataclass
class Holding:
    found: float  # what the bisection found
    rate: float | None  # what held k of k (None: nothing within MAX_STEPS)
    k: int
    retests: list[Retest] = field(default_factory=list)
    stopped: str = ""  # why the step-down stopped before MAX_STEPS ('' when it did not)

    @property
    def derated(self) -> bool:
        return self.rate is not None and self.rate < self.found

    def text(self) -> str:
        if self.rate is None and self.stopped:
            return f"{self.found:,.1f} inf/s did not hold: {self.stopped}"
        if self.rate is None:
            return (f"{self.found:,.1f} inf/s did not hold: no rate down to {self.found * STEP ** MAX_STEPS:,.1f} "
                    f"passed {self.k} of {self.k} re-tests")
        tail = f" (found {self.found:,.1f}, derated after failed re-tests)" if self.derated else ""
        return f"{self.rate:,.1f} inf/s held {self.k} of {self.k} re-tests{tail}"


def hold(measure_at: Callable[[float, int], Any], found: float, k: int = 3, first_trial: int = 101,
         max_steps: int = MAX_STEPS, until_stuck: bool = False) -> Holding:
    """Re-test `found` (inferences/s) with `measure_at(rate, trial)` (a point with passes() and verdict()), trials
    numbered from `first_trial` so they are never the bisection's own stored points; `max_steps` 0: the rate itself
    only, no step down (a verdict at one rate). `until_stuck`: stop stepping down when `stuck` (a shared group's
    mix, whose points cost half a minute each; a model alone steps all the way, its points are cheap)."""
    result = Holding(found, None, k)
    rate, trial, failures = found, first_trial, []
    for _ in range(max_steps + 1):
        ok = True
        for _ in range(k):
            point = measure_at(rate, trial)
            passed = bool(point.passes())
            result.retests.append(Retest(rate, trial, passed, point.verdict()))
            trial += 1
            if not passed:
                ok = False
                failures.append(point)
                break
        if ok:
            result.rate = rate
            return result
        if until_stuck and stuck(failures):
            result.stopped = (f"no rate down to {rate:,.1f} passed {k} of {k} re-tests, and the last two steps "
                              "down left the p99 as it was though every request was answered: the load is not "
                              "why it misses; stopped stepping down")
            return result
        rate *= STEP
    return result


__all__ = ["Holding", "Judged", "MAX_STEPS", "Retest", "STEP", "STUCK", "hold", "no_better", "stuck"]
