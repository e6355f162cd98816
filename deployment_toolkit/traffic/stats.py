"""What the planner will use of each model's traffic, said before anything is measured: its peak (what a replica
group is sized for), its mean, when its busiest slice was, and how bursty it is within a second where a request log
gives every request's time; and for the fleet, the peak of the summed rate against the sum of the peaks, which is
what sharing replicas saves.

Burstiness, two figures (both need per-request times; rates sampled every 15 s or more cannot show a second):
- the index of dispersion of per-second counts (variance over mean), taken within each minute and averaged over the
  minutes weighted by their requests, so a rate that changes over the day does not read as bursts: 1 for Poisson
  arrivals at any slowly varying rate, above 1 where requests come in bursts;
- the busiest 1-s rate over the busiest 10-s rate: about 1.2 for Poisson arrivals at a few hundred a second, far more
  where one second holds a burst."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from .read import ModelTraffic
from .series import Series, align, peak_of_sum, sum_of_peaks, time_label

DISPERSION_WINDOW_S = 60.0  # the per-second counts of each minute are compared with that minute's own mean


@dataclass(frozen=True)
class ModelStats:
    """One model's figures: rates in inferences/s."""

    name: str
    peak: float
    mean: float
    busiest: str  # the busiest slice's start, as the file writes times
    dispersion: float | None  # of per-second counts within each minute; None without per-request times
    burst_ratio: float | None  # busiest 1-s rate / busiest 10-s rate; None without per-request times
    what: str = ""


@dataclass(frozen=True)
class FleetStats:
    """The fleet's summed rate at its peak against what sizing every model by its own peak pays for."""

    peak_of_sum: float
    sum_of_peaks: float
    at: str  # when the summed rate peaks

    @property
    def saving(self) -> float:
        """The share of the sum of peaks that sharing replicas need not pay for."""
        return 1 - self.peak_of_sum / self.sum_of_peaks if self.sum_of_peaks > 0 else 0.0


def counts(arrivals: np.ndarray, width_s: float) -> np.ndarray:
    """Requests per slice of `width_s` seconds, from the first request's slice to the last's."""
    k = np.floor(np.asarray(arrivals, dtype=float) / width_s).astype(np.int64)
    return np.bincount(k - k.min()) if len(k) else np.zeros(0, dtype=np.int64)


def dispersion(arrivals: np.ndarray, window_s: float = DISPERSION_WINDOW_S) -> float | None:
    """Index of dispersion of per-second counts within each window, averaged weighted by requests (the module
    docstring); None under 10 s of requests."""
    per_s = counts(arrivals, 1.0)
    size = int(window_s)
    if len(per_s) < 10:
        return None
    if len(per_s) < size:
        size = len(per_s)
    windows = per_s[: len(per_s) // size * size].reshape(-1, size).astype(float)
    totals = windows.sum(axis=1)
    busy = totals > 0
    if not busy.any():
        return None
    ratio = windows[busy].var(axis=1, ddof=1) / windows[busy].mean(axis=1)
    return float(np.average(ratio, weights=totals[busy]))


def burst_ratio(arrivals: np.ndarray) -> float | None:
    """The busiest 1-s rate over the busiest 10-s rate; None under 10 s of requests."""
    if len(arrivals) == 0 or np.ptp(arrivals) < 10:
        return None
    return float(counts(arrivals, 1.0).max() / (counts(arrivals, 10.0).max() / 10.0))


def mean_rate(series: Series) -> float:
    """The time-weighted mean of a step-hold series (the last rate held for the usual step)."""
    if series.kind is None:
        return float(series.rates[0])
    widths = series.widths()
    return float(np.average(series.rates, weights=widths)) if widths.sum() > 0 else float(np.mean(series.rates))


def model_stats(model: ModelTraffic) -> ModelStats:
    """One model's figures; a log's mean is its requests over the whole log's span."""
    s = model.series
    busiest = "-" if s.kind is None else time_label(s.times[int(np.argmax(s.rates))], s.kind)
    if model.arrivals is None:
        return ModelStats(model.name, s.peak, mean_rate(s), busiest, None, None, model.what)
    first, last = model.span or (float(model.arrivals[0]), float(model.arrivals[-1]))
    mean = len(model.arrivals) / max(last - first, 1e-9) * model.scale
    return ModelStats(model.name, s.peak, mean, busiest, dispersion(model.arrivals), burst_ratio(model.arrivals),
                      model.what)


def fleet_stats(series: Mapping[str, Series]) -> FleetStats:
    """The peak of the summed rate, when it is, and the sum of every model's peak, on one grid (series.align)."""
    traffic = align(series)
    names = traffic.names
    k = int(np.argmax(traffic.matrix(names).sum(axis=0)))
    at = traffic.label(k) if traffic.kind is not None else "-"
    return FleetStats(peak_of_sum(traffic, names), sum_of_peaks(traffic, names), at)


__all__ = ["DISPERSION_WINDOW_S", "FleetStats", "ModelStats", "burst_ratio", "counts", "dispersion", "fleet_stats",
           "mean_rate", "model_stats"]
