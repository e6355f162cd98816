"""Both searches' winners re-measured by one harness, in turns, on one server.

Each tool reports its best point as it measured it: Model Analyzer one sample with its own windows, our search
a median of re-measurements. Those figures are not comparable, so the comparison re-measures both winning
configs with the same perf_analyzer settings, alternating config by config for a few rounds (a change in the
host's load hits both alike), each at the concurrency its tool chose. With a budget, each round also measures
each config's open-loop capacity under it (the highest Poisson arrival rate it sustains, perf.openloop.capacity), the
figure a fleet plan uses: the closed-loop numbers say what each tool optimised, the capacity what each pick is worth.
"""
from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from deployment_toolkit.perf.analyzer import PerfOptions
from deployment_toolkit.tables import markdown_table
from deployment_toolkit.search.trials import CandidateFailed, CandidateRefused, FormatInfo
from deployment_toolkit.search.space import Candidate

log = logging.getLogger(__name__)
JUDGE_WINDOW_MS = 1000  # the open-loop window of the judge's capacity searches, the same for both picks


@dataclass
class Contender:
    side: str  # who chose it
    candidate: Candidate
    concurrency: int
    throughputs: list[float] = field(default_factory=list)
    p99s: list[float] = field(default_factory=list)
    error: str = ""
    capacities: list[float] = field(default_factory=list)  # open-loop, one per round (0: no rate met the budget)

    def within(self, budget_ms: float) -> int:
        return sum(p <= budget_ms for p in self.p99s)


def remeasured(contenders: list[Contender]) -> list[Contender]:
    """The contenders the head-to-head measured, or tried to (with their error)."""
    return [c for c in contenders if c.p99s or c.error]


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.1f} [{min(values):.1f}..{max(values):.1f}]"


def remeasure(contenders: list[Contender], formats: dict[str, FormatInfo], work_dir: Path, options: PerfOptions,
              rounds: int = 3, base_name: str = "h2h", budget_ms: float | None = None) -> list[Contender]:
    """Measure every contender `rounds` times in turns (A B A B ...); a contender that fails keeps its error. With
    `budget_ms`, also each one's open-loop capacity under it, in turns, measured afresh every round."""
    from deployment_toolkit.perf.openloop.ratestore import FreshStore, RateStore
    from deployment_toolkit.search.triton import TritonMeasurer

    rates = FreshStore(RateStore(work_dir, "head_to_head_openloop.csv"))
    # the judge's open-loop windows are the full second for both picks (the search sizes them to the rate)
    with TritonMeasurer(formats, base_name, work_dir, options, rate_store=rates,
                        open_loop_window_ms=JUDGE_WINDOW_MS) as measurer:
        live = []
        for c in contenders:
            try:
                measurer.load(c.candidate)
                live.append(c)
            except CandidateRefused as err:
                c.error = f"refused: {err}"
        for r in range(rounds):
            for c in live:
                if c.error:
                    continue
                try:
                    point = measurer.measure(c.candidate, c.concurrency, r, f"{c.side}/{c.candidate.key}")
                except CandidateFailed as err:
                    c.error = str(err)
                    continue
                c.throughputs.append(point.throughput)
                c.p99s.append(point.p99_ms)
                log.info(f"  round {r + 1}/{rounds}, {c.side}: {point.throughput:.1f} inf/s, p99 {point.p99_ms:.1f} "
                         f"ms at concurrency {c.concurrency}")
        if budget_ms is not None:
            _capacities(live, measurer, rounds, budget_ms)
    return contenders


def _capacities(live: list[Contender], measurer, rounds: int, budget_ms: float) -> None:
    """Each contender's open-loop capacity, `rounds` searches in turns, seeded below its closed-loop figure."""
    from deployment_toolkit.perf.openloop.capacity import search as rate_search
    from deployment_toolkit.perf.openloop.ratepoint import ClientLimited
    from deployment_toolkit.search.capacity import MAX_POINTS, SEED_SHARE
    from deployment_toolkit.search.trials import CAPACITY_RESOLUTION

    for r in range(1, rounds + 1):
        for c in live:
            if c.error or not c.throughputs:
                continue
            seed = statistics.median(c.capacities) if any(c.capacities) else \
                statistics.median(c.throughputs) * SEED_SHARE
            try:
                found = rate_search(lambda rate, c=c, r=r: measurer.rate_point(
                    c.candidate, rate, r, f"{c.side}/{c.candidate.key}"), seed, budget_ms, 1, CAPACITY_RESOLUTION,
                    MAX_POINTS).capacity
            except (ClientLimited, CandidateFailed) as err:
                c.error = str(err)
                continue
            c.capacities.append(found or 0.0)
            log.info(f"  open loop {r}/{rounds}, {c.side}: "
                     + (f"{found:,.1f} inf/s within p99 {budget_ms:g} ms" if found else "no rate met the budget"))


def table(contenders: list[Contender], budget_ms: float) -> list[str]:
    head = ["chosen by", "config", "concurrency", "inf/s median [min..max]", "p99 ms median [min..max]",
            f"rounds within p99 {budget_ms:g} ms", "open-loop capacity inf/s median [min..max]"]
    rows = []
    for c in contenders:
        within = f"{c.within(budget_ms)} of {len(c.p99s)}" if c.p99s else "-"
        rows.append([c.side, c.candidate.label(), c.concurrency, _spread(c.throughputs), _spread(c.p99s),
                     f"{within}{' (' + c.error + ')' if c.error else ''}", _spread(c.capacities)])
    return markdown_table(head, rows, ["l", "l", "r", "r", "r", "r", "r"]).splitlines()


def capacity_ratio(ours: Contender, theirs: Contender) -> float | None:
    """Median open-loop capacity of our pick over theirs (None when either has none)."""
    if not ours.capacities or not theirs.capacities or not statistics.median(theirs.capacities):
        return None
    return statistics.median(ours.capacities) / statistics.median(theirs.capacities)
