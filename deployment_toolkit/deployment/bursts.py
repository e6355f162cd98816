"""Bursts the traffic showed, planned and confirmed (issue 57): a Poisson stream at the planned rate is kinder than
real traffic. Where a model's traffic is a request log whose per-second counts are over-dispersed (index of
dispersion above BURSTY: 1 is Poisson), its group is confirmed twice: first under Poisson arrivals (what a Poisson
plan gives), then with that model's recorded inter-arrival times, time-scaled to the planned rate (perf_analyzer's
`--request-intervals`, perf.analyzer.schedule "recorded"), derated where the bursts need more replicas. The plan
keeps the second; plan.md says both replica counts. Rates alone (a Prometheus export, a CSV) cannot show a second's
bursts: those models stay Poisson, and the docs say so."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..traffic.stats import burst_ratio, dispersion
from .file import Deployment
from .traffic import entry_traffic

BURSTY = 1.5  # a log's index of dispersion above which its model is confirmed with its recorded arrivals
MIN_REQUESTS = 100  # fewer requests than this say nothing of bursts
MAX_GAPS = 200_000  # the recorded inter-arrivals kept (a longer log's first ones: cycled at the planned rate)


@dataclass(frozen=True)
class Burst:
    """A model whose log shows bursts: how bursty, and its inter-arrival times (seconds) to replay."""

    model: str
    dispersion: float
    burst_ratio: float | None
    gaps: tuple[float, ...]

    def text(self) -> str:
        ratio = f", busiest 1 s / 10 s x{self.burst_ratio:.2f}" if self.burst_ratio is not None else ""
        return f"{self.model} (index of dispersion {self.dispersion:.1f}{ratio})"


def bursts_of(deployment: Deployment) -> dict[str, Burst]:
    """The models whose traffic is a request log with bursts beyond Poisson, each with its recorded gaps."""
    found = {}
    for entry in deployment.models:
        if entry.traffic is None:
            continue
        arrivals = entry_traffic(entry).arrivals
        if arrivals is None or len(arrivals) < MIN_REQUESTS:
            continue
        d = dispersion(arrivals)
        if d is not None and d > BURSTY:
            gaps = np.diff(np.sort(arrivals))[:MAX_GAPS]
            found[entry.name] = Burst(entry.name, d, burst_ratio(arrivals), tuple(float(g) for g in gaps))
    return found


def recorded(target: Any, burst: Burst) -> Any:
    """A model's target sent its recorded arrivals instead of Poisson ones (its points stored apart: the
    distribution is part of a point's key)."""
    return dataclasses.replace(target, distribution="recorded", gaps=burst.gaps)


def with_bursts(targets: Mapping[str, Any], bursts: Mapping[str, Burst]) -> dict[str, Any]:
    return {n: recorded(t, bursts[n]) if n in bursts else t for n, t in targets.items()}


__all__ = ["BURSTY", "Burst", "bursts_of", "recorded", "with_bursts"]
