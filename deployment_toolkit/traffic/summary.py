"""The traffic command's table: one row per model, its name first and its peak (inferences/s) the first number,
then the fleet's peak of the sum against the sum of peaks (tables: the toolkit's one table writer)."""
from __future__ import annotations

from typing import Sequence

from ..tables import markdown_table
from .stats import FleetStats, ModelStats

HEADERS = ("model", "peak inf/s", "mean inf/s", "busiest slice", "dispersion (1 s counts)", "busiest 1 s / 10 s",
           "read from")


def _figure(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def rows(models: Sequence[ModelStats]) -> list[list[str]]:
    return [[m.name, f"{m.peak:.1f}", f"{m.mean:.1f}", m.busiest, _figure(m.dispersion), _figure(m.burst_ratio),
             m.what] for m in models]


def fleet_line(fleet: FleetStats, models: int) -> str:
    """What sharing saves: the summed rate's peak against the sum of every model's own peak."""
    return (f"fleet of {models} models: peak of the sum {fleet.peak_of_sum:,.1f} inf/s (at {fleet.at}) against a sum "
            f"of peaks {fleet.sum_of_peaks:,.1f} inf/s: sharing replicas saves {fleet.saving:.0%} of what sizing each "
            "model by its own peak pays for")


def markdown(models: Sequence[ModelStats], fleet: FleetStats) -> str:
    """The table, the fleet's line and, where a model has no per-request times, why it has no burstiness."""
    text = markdown_table(HEADERS, rows(models), align=["l", "r", "r", "l", "r", "r", "l"]) + "\n\n"
    text += fleet_line(fleet, len(models)) + "\n"
    if any(m.dispersion is None for m in models):
        text += ("\nBurstiness (dispersion, busiest 1 s / 10 s) needs every request's time: a request log gives it; "
                 "rates sampled every few seconds or more cannot show a second (shown as -).\n")
    return text


__all__ = ["HEADERS", "fleet_line", "markdown", "rows"]
