"""Send times for a replay that keeps the traffic's bursts, and what came back counted as goodput.

A Poisson stream at the planned rate is kinder than real traffic, whose requests come in bursts; a plan must hold
those. Two ways to send what the traffic showed:
- `replay`: a request log's own inter-arrival times, scaled in time so their mean rate is the planned rate (the
  bursts keep their shape; a log shorter than the replay is sent again from its start);
- `bursts`: from rates alone (no per-request times), a gamma-modulated Poisson process: each slice's rate is drawn
  from a gamma distribution around the planned rate and requests arrive as Poisson at that rate, which gives the
  per-slice counts mean m and variance m x D, the index of dispersion D asked for (D = 1 is Poisson). Seeded.
`goodput` counts, per second of sending, the requests answered within the SLO: next to the throughput, it says how
much of a burst was served in time."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import UserInputError
from .series import Series


def replay(arrivals: np.ndarray, rate: float, duration_s: float | None = None) -> np.ndarray:
    """Send times from 0: the log's inter-arrivals scaled so their mean rate is `rate`; cycled to fill
    `duration_s` where given (else one pass of the log)."""
    gaps = np.diff(np.sort(np.asarray(arrivals, dtype=float)))
    if len(gaps) == 0 or gaps.sum() <= 0:
        raise UserInputError("a replay needs a log of at least two requests at different times")
    if not (math.isfinite(rate) and rate > 0):
        raise UserInputError(f"a replay's rate must be > 0 inferences/s, got {rate!r}")
    gaps = gaps * (len(gaps) / gaps.sum()) / rate  # mean gap 1 / rate
    if duration_s is None:
        return np.concatenate([[0.0], np.cumsum(gaps)])
    passes = int(math.ceil(duration_s / gaps.sum())) + 1
    sends = np.concatenate([[0.0], np.cumsum(np.tile(gaps, passes))])
    return sends[sends < duration_s]


def _rates(rate: float | Series, starts: np.ndarray) -> np.ndarray:
    return rate.on(starts) if isinstance(rate, Series) else np.full(len(starts), float(rate))


def bursts(rate: float | Series, duration_s: float, dispersion: float, seed: int = 0, start: float = 0.0,
           slice_s: float = 1.0) -> np.ndarray:
    """Send times in [start, start + duration_s) whose counts per `slice_s` have index of dispersion `dispersion`
    around `rate` (a constant, or a series read at each slice's start): the module docstring's process."""
    if not (math.isfinite(dispersion) and dispersion >= 1):
        raise UserInputError(f"a burst process's index of dispersion is >= 1 (1: Poisson), got {dispersion!r}")
    if not (duration_s > 0 and slice_s > 0):
        raise UserInputError(f"bursts need a duration and a slice > 0 s, got {duration_s!r} and {slice_s!r}")
    rng = np.random.default_rng(seed)
    starts = start + np.arange(0.0, duration_s, slice_s)
    widths = np.minimum(slice_s, start + duration_s - starts)
    means = _rates(rate, starts) * widths
    if dispersion > 1:
        shape = np.where(means > 0, means / (dispersion - 1), 1.0)
        means = np.where(means > 0, rng.gamma(shape, dispersion - 1), 0.0)
    n = rng.poisson(means)
    offsets = rng.random(int(n.sum())) * np.repeat(widths, n)
    return np.sort(np.repeat(starts, n) + offsets)


@dataclass(frozen=True)
class Goodput:
    """Per slice of sending: requests sent, answered, and answered within the SLO, and their rates overall."""

    sent: np.ndarray  # per slice, by send time
    answered: np.ndarray
    within: np.ndarray  # answered within the SLO: the goodput's counts
    slice_s: float

    @property
    def seconds(self) -> float:
        return len(self.sent) * self.slice_s

    @property
    def goodput(self) -> float:
        """Answers within the SLO per second, over the whole sending."""
        return float(self.within.sum() / self.seconds) if self.seconds else 0.0

    @property
    def throughput(self) -> float:
        """Answers per second (within the SLO or not)."""
        return float(self.answered.sum() / self.seconds) if self.seconds else 0.0

    @property
    def worst_slice(self) -> float:
        """The lowest share of a slice's requests answered within the SLO (1.0: every slice held)."""
        busy = self.sent > 0
        return float((self.within[busy] / self.sent[busy]).min()) if busy.any() else 1.0


def goodput(send_times: np.ndarray, latencies_s: np.ndarray, slo_s: float, slice_s: float = 1.0) -> Goodput:
    """Count each request in the slice it was sent in: answered where its latency is finite (NaN: an error or no
    answer), within the SLO where it is <= `slo_s` (latency from the intended send time)."""
    sends = np.asarray(send_times, dtype=float)
    latencies = np.asarray(latencies_s, dtype=float)
    if sends.shape != latencies.shape:
        raise UserInputError(f"{len(sends)} send times but {len(latencies)} latencies: one latency per request")
    if len(sends) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Goodput(empty, empty, empty, slice_s)
    k = np.floor((sends - sends.min()) / slice_s).astype(np.int64)
    size = int(k.max()) + 1
    answered = np.isfinite(latencies)
    within = answered & (latencies <= slo_s)
    return Goodput(np.bincount(k, minlength=size), np.bincount(k[answered], minlength=size),
                   np.bincount(k[within], minlength=size), slice_s)


__all__ = ["Goodput", "bursts", "goodput", "replay"]
