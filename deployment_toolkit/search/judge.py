"""How a search reads its measured levels against the budget and the noise: which levels hold, each level at the
median of its samples, a trial's best level and frontier, gains between trials, and whether a finalist may have to
step down. Reads the checkpoint; measures nothing."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from typing import Iterable

from .stats import Noise, holds_budget, relative_gain, worst_p99
from .store import Point, SearchStore
from .sweep import best_point, score
from .trials import SearchSettings, Trial

NOISY = 0.20  # above this relative noise the search warns that the host is too busy to rank configs


@dataclass
class Judge:
    """The checkpoint, the settings and the noise measured so far (`noise_known` once the baseline's repeated
    samples have set it; until then it is the floor)."""

    store: SearchStore
    settings: SearchSettings
    noise: Noise
    noise_known: bool = False

    def noise_for_objective(self) -> float:
        return self.noise.p99 if self.settings.explore == "latency" else self.noise.throughput

    def holds(self, trial: Trial, concurrency: int) -> bool:
        """Every sample of a level within the budget, and their median with room for the p99 noise."""
        return holds_budget([p.p99_ms for p in self.store.samples(trial.key, concurrency)],
                            self.settings.budget_ms, self.noise.p99)

    def median_point(self, trial: Trial, point: Point) -> Point:
        samples = self.store.samples(trial.key, point.concurrency)
        if len(samples) < 2:
            return point
        return replace(point, sample=-1, throughput=statistics.median(p.throughput for p in samples),
                       p99_ms=statistics.median(p.p99_ms for p in samples),
                       note=f"median of {len(samples)} samples")

    def frontier(self, trial: Trial) -> list[Point]:
        """The trial's points within budget (`holds`), each level at the median of its samples."""
        return [self.median_point(trial, p) for p in trial.sweep.points if self.holds(trial, p.concurrency)]

    def best(self, trial: Trial) -> Point | None:
        """The best level that holds the budget (`holds`), at the medians of its samples."""
        if trial.status != "measured" or trial.sweep is None:
            return None
        return best_point(self.frontier(trial), self.settings.budget_ms, self.settings.explore)

    def gain(self, a: Trial, b: Trial) -> float | None:
        objective = self.settings.explore
        sa, sb = score(self.best(a), objective), score(self.best(b), objective)
        if sa is None or sb is None:
            return None
        return relative_gain(sa, sb, higher_is_better=objective == "throughput")

    def better(self, a: Trial, b: Trial) -> bool:
        """a beats b beyond noise; with neither within budget, by the lower p99 (it may lead somewhere)."""
        pa, pb = self.best(a), self.best(b)
        if pa is None and pb is None:
            ma, mb = a.sweep.min_p99 if a.sweep else None, b.sweep.min_p99 if b.sweep else None
            return ma is not None and mb is not None and ma.p99_ms < mb.p99_ms * (1 - self.noise.p99)
        if pa is None:
            return False
        if pb is None:
            return True
        return self.gain(a, b) > self.noise_for_objective()

    def gain_text(self, a: Trial, b: Trial) -> str:
        g = self.gain(a, b)
        what = "p99" if self.settings.explore == "latency" else "throughput"
        if g is not None:
            return f"{what} {g * 100:+.1f}% vs {b.candidate.slug}"
        if self.best(a) is not None:
            return f"within budget, unlike {b.candidate.slug}"
        low_a, low_b = a.sweep.min_p99, b.sweep.min_p99
        return f"neither within budget; lowest p99 {low_a.p99_ms:.1f} ms vs {low_b.p99_ms:.1f} ms"

    def step_down_possible(self, trials: Iterable[Trial]) -> bool:
        """Whether a finalist may break the budget when re-measured and have to step down. Not while every
        measured level that could be named is so far under the budget that even the next level a sweep may try
        (at most twice the clients, so at most twice the p99 by Little's law) keeps room for twice the p99 noise;
        until the noise is measured, it is taken as `NOISY`. Holding the step-down time back from the start cost
        the baseline its climb on fast models (resnet18 small stopped at concurrency 1 of a knee near 10)."""
        budget = self.settings.budget_ms
        noise = self.noise.p99 if self.noise_known else max(self.noise.p99, NOISY)
        highest = 0.0
        for t in trials:
            if t.status != "measured" or t.sweep is None:
                continue
            for p in t.sweep.points:  # the levels that hold (`holds`), each read from the store once
                p99s = [q.p99_ms for q in self.store.samples(t.key, p.concurrency)]
                if holds_budget(p99s, budget, self.noise.p99):
                    highest = max(highest, worst_p99(p99s, noise))
        if highest == 0.0:
            return True  # nothing within the budget yet: no grounds to drop it
        return 2.0 * highest * (1.0 + 2.0 * noise) > budget


__all__ = ["Judge", "NOISY"]
