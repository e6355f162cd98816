"""Noise and gains with their spread: a gain smaller than the measured noise is no gain.

The noise is estimated from repeated measurements of the baseline: the relative spread
(max - min) / median of its throughput and p99, with a floor because three samples can agree by chance.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Sequence

MIN_NOISE = 0.02  # never trust a gain below 2%, whatever three samples say


@dataclass(frozen=True)
class Spread:
    """Median and range of repeated measurements of one quantity."""

    median: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> "Spread":
        vals = [float(v) for v in values]
        if not vals:
            raise ValueError("no values")
        return cls(statistics.median(vals), min(vals), max(vals), len(vals))

    @property
    def relative(self) -> float:
        """(max - min) / median; 0 for a single sample."""
        return (self.high - self.low) / self.median if self.median else 0.0

    def text(self, fmt: str = "{:.1f}") -> str:
        if self.n == 1:
            return fmt.format(self.median)
        return f"{fmt.format(self.median)} [{fmt.format(self.low)}..{fmt.format(self.high)}]"


@dataclass(frozen=True)
class Noise:
    """Relative noise of throughput and p99 measured on the baseline."""

    throughput: float
    p99: float
    samples: int
    measured_throughput: float = 0.0  # before the floor
    measured_p99: float = 0.0

    @classmethod
    def from_samples(cls, throughputs: Sequence[float], p99s: Sequence[float], floor: float = MIN_NOISE) -> "Noise":
        t = Spread.of(throughputs).relative if len(throughputs) > 1 else 0.0
        p = Spread.of(p99s).relative if len(p99s) > 1 else 0.0
        return cls(max(t, floor), max(p, floor), len(throughputs), t, p)

    def text(self) -> str:
        return (f"throughput {self.throughput * 100:.1f}%, p99 {self.p99 * 100:.1f}% "
                f"(from {self.samples} measurements of the baseline; measured {self.measured_throughput * 100:.1f}% / "
                f"{self.measured_p99 * 100:.1f}%, floor {MIN_NOISE * 100:.0f}%)")


def holds_budget(p99s: Sequence[float], budget_ms: float, p99_noise: float) -> bool:
    """A level holds the budget only with room for the p99 noise measured on this host: its worst sample is
    within it, and so is its median raised by that noise. One sample 14% under the budget at 17% noise does
    not hold: the next measurement of the same level is as likely to land over it."""
    vals = [float(v) for v in p99s]
    if not vals:
        return False
    return max(vals) <= budget_ms and statistics.median(vals) * (1.0 + p99_noise) <= budget_ms


def worst_p99(p99s: Sequence[float], p99_noise: float) -> float:
    """The p99 a level must be expected to reach: its worst sample or its median raised by the noise."""
    return max(max(p99s), statistics.median(p99s) * (1.0 + p99_noise))


def relative_gain(new: float, old: float, higher_is_better: bool = True) -> float:
    """+0.10 = 10% better. For latency (lower is better) the gain is the relative reduction."""
    if old == 0:
        return 0.0
    return (new - old) / old if higher_is_better else (old - new) / old


@dataclass(frozen=True)
class Gain:
    """Gain of a challenger over a reference with its spread from the two sets of samples."""

    median: float
    low: float
    high: float

    @classmethod
    def between(cls, challenger: Spread, reference: Spread, higher_is_better: bool = True) -> "Gain":
        if higher_is_better:
            return cls(relative_gain(challenger.median, reference.median),
                       relative_gain(challenger.low, reference.high), relative_gain(challenger.high, reference.low))
        return cls(relative_gain(challenger.median, reference.median, False),
                   relative_gain(challenger.high, reference.low, False),
                   relative_gain(challenger.low, reference.high, False))

    def real(self, noise: float) -> bool:
        """A real gain: its median beats the noise and even the worst pairing of samples is not a loss."""
        return self.median > noise and self.low > 0

    def text(self) -> str:
        return f"{self.median * 100:+.1f}% (spread {self.low * 100:+.1f}%..{self.high * 100:+.1f}%)"
