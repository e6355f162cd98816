"""Both searches' winners re-measured by one harness, in turns, on one server.

Each tool reports its best point as it measured it: Model Analyzer one sample with its own windows, our search
a median of re-measurements. Those figures are not comparable, so the comparison re-measures both winning
configs with the same perf_analyzer settings, alternating config by config for a few rounds (a change in the
host's load hits both alike), each at the concurrency its tool chose.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

from ..perf.analyzer import PerfOptions
from ..tables import markdown_table
from .trials import CandidateFailed, CandidateRefused, FormatInfo
from .space import Candidate


@dataclass
class Contender:
    side: str  # who chose it
    candidate: Candidate
    concurrency: int
    throughputs: list[float] = field(default_factory=list)
    p99s: list[float] = field(default_factory=list)
    error: str = ""

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
              rounds: int = 3, base_name: str = "h2h") -> list[Contender]:
    """Measure every contender `rounds` times in turns (A B A B ...); a contender that fails keeps its error."""
    from .triton import TritonMeasurer

    with TritonMeasurer(formats, base_name, work_dir, options) as measurer:
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
                print(f"  round {r + 1}/{rounds}, {c.side}: {point.throughput:.1f} inf/s, p99 {point.p99_ms:.1f} ms "
                      f"at concurrency {c.concurrency}", flush=True)
    return contenders


def table(contenders: list[Contender], budget_ms: float) -> list[str]:
    head = ["chosen by", "config", "concurrency", "inf/s median [min..max]", "p99 ms median [min..max]",
            f"rounds within p99 {budget_ms:g} ms"]
    rows = []
    for c in contenders:
        within = f"{c.within(budget_ms)} of {len(c.p99s)}" if c.p99s else "-"
        rows.append([c.side, c.candidate.label(), c.concurrency, _spread(c.throughputs), _spread(c.p99s),
                     f"{within}{' (' + c.error + ')' if c.error else ''}"])
    return markdown_table(head, rows, ["l", "l", "r", "r", "r", "r"]).splitlines()
