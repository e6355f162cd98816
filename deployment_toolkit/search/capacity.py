"""`--objective capacity`: the finalists ranked by open-loop capacity, the traffic the plan will really get.

The exploration stays closed-loop (cheap points that prune the space and seed the rates). Then the best
CAPACITY_FINALISTS non-dominated configs within the budget and the default each get their open-loop capacity under
the SLO measured with the sizing's machinery (perf.openloop.capacity: the highest Poisson arrival rate one replica
sustains, answered >= 97%, queue not growing, p99 from the intended send time within the budget), seeded at
their closed-loop throughput. The searches are taken in turns (trial 1 of every finalist, then trial 2, ...), so
a change in the host's load hits them alike; the capacity is the median of a config's searches and its spread
is theirs. The winner must beat the default by more than the spread of both (and the search's resolution), or the
default is declared as good. Measures through the measurer's `rate_point` (the real server in triton.py).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Protocol

from ..perf.openloop.capacity import OpenLoopCapacity, Search as RateSearch, search as rate_search
from ..perf.openloop.ratepoint import ClientLimited, RatePoint, auto_window_ms
from .bench import Bench
from .clock import SearchClock
from .decide import Standings, verdicts
from .judge import Judge
from .noise_rule import Outcome, name_winner
from .progress import Progress
from .space import Candidate
from .stats import Spread
from .sweep import score
from .store import Point
from .trials import CAPACITY_RESOLUTION, CandidateFailed, Decision, Trial, rate_point_estimate

CAPACITY_FINALISTS = 3  # challengers measured in open loop besides the default
MAX_POINTS = 8  # rates per capacity search at most
POINTS_PER_SEARCH = 7  # what the time reserve counts for one search (6.5 rates a search for resnet18 here, 7.5 for
# resnet50 full, which bisects further down from its seed); a search that would not fit gets fewer (points_that_fit)
MIN_POINTS = 4  # the fewest rates a search is given when time is short: bracket, then bisect twice
SEED_SHARE = 0.8  # the first search starts at this share of the closed-loop figure (open loop is lower: 50-90%)
CAPACITY_SHARE = 0.5  # of --max-minutes the capacity stage is planned for at most (the exploration keeps the rest)
TAIL_SPREAD = 2.0  # a config whose p99 at one rate varies by more than this factor has tails that jump: it is
# ranked below a steadier config of nearly the same capacity (within the spreads and the resolution)
SAME_RATE = 0.02  # rates this close are one rate when tails are compared


def expect_rates(clock: SearchClock, best: Point | None) -> None:
    """Tell the clock what a rate will take once the default's best closed-loop point is known (the slowest
    finalist as a rule, so the longest windows): its searches start at SEED_SHARE of that throughput, where a
    window sized to the rate (auto_window_ms) is known. The shortest-window estimate alone put a 60-inf/s model's
    capacity stage 0.2 min past its limit (its rates took 1-s windows)."""
    if best is not None:
        window = clock.settings.open_loop_window_ms or auto_window_ms(SEED_SHARE * best.throughput)
        clock.expected_rate_s = rate_point_estimate(window)


class RateMeasurer(Protocol):
    def rate_point(self, candidate: Candidate, rate: float, trial: int, store_key: str) -> RatePoint: ...


@dataclass
class CapacityMeasurement:
    """One config's open-loop capacity (perf.openloop.capacity.OpenLoopCapacity) and why it has none."""

    result: OpenLoopCapacity
    error: str = ""  # e.g. the client could not generate the rate

    @property
    def p99_spread(self) -> float | None:
        """How much the p99 varied between measurements at one rate (worst over best, rates within 2 % taken as
        one): a later search starts at the earlier ones' capacity, so repeats come with the searches. None: no rate
        was measured twice."""
        points = [p for s in self.result.trials for p in s.points if math.isfinite(p.p99) and p.p99 > 0]
        worst = None
        for p in points:
            same = [q.p99 for q in points if abs(q.rate - p.rate) <= SAME_RATE * p.rate]
            if len(same) > 1:
                worst = max(worst or 1.0, max(same) / min(same))
        return worst

    @property
    def steady(self) -> bool:
        spread = self.p99_spread
        return spread is None or spread <= TAIL_SPREAD

    def tail_text(self) -> str:
        spread = self.p99_spread
        return "p99 at one rate: not repeated" if spread is None else f"p99 at one rate varied x{spread:.2f}"

    @property
    def spread(self) -> Spread | None:
        """The searches' capacities (a search that found no rate counts as 0), as a Spread; None if unreachable."""
        if self.result.capacity is None:
            return None
        found = self.result.capacities
        return Spread.of([0.0] * (len(self.result.trials) - len(found)) + found)


def finalists(st: Standings, default: Trial, judge: Judge, limit: int = CAPACITY_FINALISTS) -> list[Trial]:
    """The best `limit` (CAPACITY_FINALISTS, fewer on a short --max-minutes: planned_finalists) non-dominated
    feasible configs by closed-loop throughput, and the default when it holds the budget: open-loop capacity can
    rank them otherwise, so more than two go into the final stage when there is time for them."""
    ranked = sorted((t for t in st.feasible if t.candidate.key not in st.dominated and t is not default),
                    key=lambda t: score(judge.best(t), "throughput"), reverse=True)
    out = ranked[:limit]
    if default in st.feasible:
        out.append(default)
    return out


def planned_finalists(clock: SearchClock) -> int:
    """Challengers the capacity stage takes besides the default: CAPACITY_FINALISTS when one search of each fits in
    CAPACITY_SHARE of --max-minutes, else as many as do (at least one), so that a short search still explores."""
    if clock.settings.max_minutes is None:
        return CAPACITY_FINALISTS
    share = CAPACITY_SHARE * clock.settings.max_minutes * 60.0
    one = POINTS_PER_SEARCH * clock.rate_point_s()
    return max(1, min(CAPACITY_FINALISTS, int(share // one) - 1 if one > 0 else CAPACITY_FINALISTS))


def planned_trials(clock: SearchClock, configs: int) -> int:
    """Searches per config the stage is planned for: --capacity-trials when they fit in CAPACITY_SHARE of
    --max-minutes, else as many as do (at least one: every finalist needs a capacity to be ranked). Reserving
    every trial up front regardless left a short search little room to explore (4 of 15 configs in 8 minutes);
    trials beyond the plan still run in measure() when the exploration leaves the time for them."""
    wanted = clock.settings.capacity_trials
    if clock.settings.max_minutes is None:
        return wanted
    share = CAPACITY_SHARE * clock.settings.max_minutes * 60.0
    one = configs * POINTS_PER_SEARCH * clock.rate_point_s()
    return max(1, min(wanted, int(share // one) if one > 0 else wanted))


def reserve_s(clock: SearchClock, configs: int) -> float:
    """The time of the capacity stage for `configs` configs: the planned searches (`planned_trials`) at their
    usual length, at the measured time of a rate (the settings' estimate before one is measured)."""
    return configs * planned_trials(clock, configs) * POINTS_PER_SEARCH * clock.rate_point_s()


def points_that_fit(clock: SearchClock, searches: int) -> int:
    """Rates each of the `searches` still to run in this round may take within --max-minutes (MIN_POINTS to
    MAX_POINTS): the stage keeps to the limit even where a rate takes longer than its reserve assumed."""
    if clock.settings.max_minutes is None or searches <= 0:
        return MAX_POINTS
    fit = int(clock.time_left_s() // (searches * clock.rate_point_s()))
    return max(MIN_POINTS, min(MAX_POINTS, fit))


def measure(configs: list[Trial], bench: Bench, judge: Judge, clock: SearchClock, progress: Progress) -> list[str]:
    """Every config's capacity searches, in turns; sets `trial.capacity`; returns notes (trials cut for time, a
    client limit)."""
    settings = judge.settings
    bests = {t.key: judge.best(t) for t in configs}
    searches: dict[str, list[RateSearch]] = {t.key: [] for t in configs}
    errors: dict[str, str] = {}
    notes: list[str] = []
    planned = planned_trials(clock, len(configs))
    progress.say(f"open-loop capacity of {len(configs)} configs, {planned} search(es) each"
                 + (f" (up to {settings.capacity_trials} as time allows)" if planned < settings.capacity_trials
                    else ""))
    bench.keep_loaded = True
    shortened = False
    try:
        for n in range(1, settings.capacity_trials + 1):
            if n > 1 and clock.time_left_s() < len(configs) * POINTS_PER_SEARCH * clock.rate_point_s():
                notes.append(f"--max-minutes: open-loop capacity from {n - 1} search(es) per config instead of "
                             f"{settings.capacity_trials}; the spread is from fewer searches")
                break
            for t in configs:
                if t.key in errors:
                    continue
                seed = _seed(searches[t.key], bests[t.key].throughput if bests[t.key] else judge_seed(t))
                progress.postfix(f"{t.candidate.slug} open loop #{n}")
                left = [u for u in configs if u.key not in errors and len(searches[u.key]) < n]
                points = points_that_fit(clock, len(left))
                if points < MAX_POINTS and not shortened:
                    shortened = True
                    notes.append(f"--max-minutes: open-loop searches from here on got as few as {points} rates "
                                 f"instead of {MAX_POINTS}, so their brackets may be wider than "
                                 f"{settings.capacity_resolution:.0%}")
                try:
                    searches[t.key].append(rate_search(lambda r, t=t, n=n: bench.rate_point(t, r, n), seed,
                                                       settings.budget_ms, 1, settings.capacity_resolution,
                                                       points))
                except (ClientLimited, CandidateFailed) as err:
                    errors[t.key] = str(err)
                    notes.append(f"{t.candidate.slug}: {err}")
                found = searches[t.key][-1].capacity if searches[t.key] and t.key not in errors else None
                progress.say(f"  {t.candidate.slug}: open-loop search {n}: "
                             + (f"{found:,.1f} inf/s within p99 {settings.budget_ms:g} ms" if found is not None
                                else errors.get(t.key) or "no rate met the budget"))
    finally:
        bench.keep_loaded = False
        bench.release()
    for t in configs:
        best = bests[t.key]
        t.capacity = CapacityMeasurement(OpenLoopCapacity(
            t.candidate.slug, "poisson", settings.budget_ms, searches[t.key],
            closed_loop=best.throughput if best else None,
            closed_loop_level=f"concurrency {best.concurrency}" if best else "",
            closed_loop_p99=best.p99_ms if best else None), errors.get(t.key, ""))
    return notes


def _seed(done: list[RateSearch], closed_loop: float) -> float:
    """Where a search starts: below the closed-loop figure the first time, then at the median capacity the
    earlier searches found (each search still brackets and bisects on its own points, so a wrong seed costs
    points, not accuracy)."""
    found = [s.capacity for s in done if s.capacity is not None]
    return statistics.median(found) if found else closed_loop * SEED_SHARE


def judge_seed(t: Trial) -> float:
    """A seed rate for a config without a best point (not expected: finalists hold the budget)."""
    pts = t.sweep.points if t.sweep else []
    return max((p.throughput for p in pts), default=1.0)


def decide(st: Standings, configs: list[Trial], default: Trial, judge: Judge) -> Decision:
    """The config with the highest median capacity, unless the default's is as high within the spreads."""
    decision = Decision(winner=None, default=default, best_p99_seen=st.best_p99)
    reached = [t for t in configs if t.capacity is not None and t.capacity.spread is not None]
    for t in configs:
        if t not in reached:
            t.detail = (t.capacity.error if t.capacity and t.capacity.error else
                        f"no open-loop rate met p99 <= {judge.settings.budget_ms:g} ms: "
                        + (t.capacity.result.unreachable_text() if t.capacity else "not measured"))
    reached.sort(key=lambda t: t.capacity.spread.median, reverse=True)
    steadier = _steadier_first(reached)
    if not reached:
        decision.message = _nothing(st, configs, judge)
    else:
        _name(decision, reached, default)
        if steadier:
            decision.message += f"; {steadier}"
    verdicts(decision, st, default, judge)
    for t in configs:  # the verdict lines speak of capacity where it was measured
        if t is decision.winner:
            continue
        if t not in reached:
            t.verdict = "over budget"
        elif t is not decision.runner_up:
            t.detail = f"open-loop capacity {t.capacity.spread.text()} inf/s; " + (t.detail or "")
        if t in reached:
            t.detail = (t.detail + "; " if t.detail else "") + t.capacity.tail_text()
    return decision


def _steadier_first(reached: list[Trial]) -> str:
    """Where the config of the most capacity has tails that jump (p99 at one rate varied more than TAIL_SPREAD) and
    a steady one holds nearly as much (within both configs' spreads and the resolution), the steady one goes first.
    Returns what was said ('' where the order stands)."""
    if not reached or reached[0].capacity.steady:
        return ""
    top = reached[0]
    for t in reached[1:]:
        noise = max(top.capacity.result.headroom, t.capacity.result.headroom)
        if t.capacity.steady and t.capacity.spread.median >= top.capacity.spread.median * (1 - noise):
            reached.remove(t)
            reached.insert(0, t)
            return (f"{t.candidate.slug} ranked above {top.candidate.slug} of nearly the same capacity: the latter's "
                    f"{top.capacity.tail_text()} (over x{TAIL_SPREAD:g}), the former's tails are steady")
    return ""


def _name(decision: Decision, reached: list[Trial], default: Trial) -> None:
    """The config of the highest median capacity, unless the default's is as high within both configs' spreads and
    the resolution (noise_rule); within them, a challenger with steady tails still wins over a jumpy default."""
    cap = lambda t: t.capacity.spread  # noqa: E731
    margin = lambda t: t.capacity.result.headroom  # noqa: E731  max(spread, the search's resolution)
    steadier = lambda top, d: top.capacity.steady and not d.capacity.steady  # noqa: E731
    named = name_winner(decision, reached, default, cap, margin, higher=True, tie_break=steadier)
    top, d, gain, noise = named.top, named.default, named.gain, named.noise
    if named.outcome is Outcome.DEFAULT_BEST:
        decision.message = (f"the default config has the highest open-loop capacity "
                            f"({cap(d).text()} inf/s); no other config beat it")
    elif named.outcome is Outcome.NO_DEFAULT:
        decision.message = (f"{top.candidate.slug} sustains {cap(top).text()} inf/s in open loop; the default "
                            f"config does not hold the budget in open loop ({default.detail or 'not measured'})")
    elif named.outcome is Outcome.BEATS:
        decision.message = (f"{top.candidate.slug} sustains {cap(top).text()} inf/s in open loop, {gain.text()} over "
                            f"the default's {cap(d).text()} (spread and resolution {noise * 100:.0f}%)")
    elif named.outcome is Outcome.TIE_BREAK:
        decision.message = (f"{top.candidate.slug} sustains {cap(top).text()} inf/s in open loop, within the spread "
                            f"of the default's {cap(d).text()}, and its tails are steady where the default's "
                            f"{d.capacity.tail_text()} (over x{TAIL_SPREAD:g})")
    else:
        decision.message = (f"the default is as good in open loop: the best config ({top.candidate.slug}, "
                            f"{cap(top).text()} inf/s) gains {gain.text()} over the default's {cap(d).text()}, "
                            f"within the spread ({noise * 100:.0f}%)")


def _nothing(st: Standings, configs: list[Trial], judge: Judge) -> str:
    """No config sustains any open-loop rate within the budget: the closest one and its p99 at the lowest rate
    tried."""
    budget = judge.settings.budget_ms
    if not configs:
        return f"no configuration meets p99 <= {budget:g} ms even in closed loop" if st.measured else \
            "nothing could be measured"
    points = [(t, p) for t in configs if t.capacity for s in t.capacity.result.trials for p in s.points]
    if not points:
        return f"no configuration could be measured in open loop: {configs[0].detail}"
    t, p = min(points, key=lambda tp: (tp[1].rate, tp[1].p99))
    return (f"no configuration sustains an open-loop rate with p99 <= {budget:g} ms: the closest, "
            f"{t.candidate.slug}, had p99 {p.p99:.1f} ms at {p.offered:,.1f} inf/s, the lowest rate tried "
            f"({statistics.median([q.p99 for u, q in points if u is t]):.1f} ms median over its rates). "
            "Raise --p99-ms, or use a smaller model/preset or a faster host")


__all__ = ["CAPACITY_FINALISTS", "CAPACITY_SHARE", "TAIL_SPREAD", "planned_finalists", "planned_trials", "points_that_fit",
           "CapacityMeasurement", "RateMeasurer", "decide", "finalists", "measure", "reserve_s"]
