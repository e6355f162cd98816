"""A PNG of every model's rate over time with their sum, to be read at a glance: above, one step line per model
(the legend ordered by peak, each with its peak); below, on the same time axis, the fleet's summed rate in bold
against the sum of the peaks (dashed), the shaded band from the sum's peak up to the peaks' sum being what sharing
replicas saves (matplotlib, Agg backend: no display needed)."""
from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .series import DAY_S, Series, TimeKind, Traffic, align
from .stats import FleetStats, fleet_stats

WIDTH_IN, HEIGHT_IN, DPI = 12.0, 7.0, 110


def _x(starts: np.ndarray, kind: TimeKind | None) -> tuple[Any, str]:
    """The grid as the x axis takes it, and the axis' label."""
    if kind is TimeKind.TIMESTAMP:
        return [_dt.datetime.fromtimestamp(t, _dt.timezone.utc) for t in starts], "time (UTC)"
    if kind is TimeKind.CLOCK:
        return starts / 3600.0, "time of day (h)"
    return starts, "time (s)"


def _grid(starts: tuple[float, ...], kind: TimeKind | None) -> np.ndarray:
    """The slice starts and the last slice's end (the usual step; the end of the day for HH:MM)."""
    t = np.asarray(starts, dtype=float)
    if len(t) < 2:
        return np.append(t, t[-1] + 1.0)
    return np.append(t, DAY_S if kind is TimeKind.CLOCK else t[-1] + float(np.median(np.diff(t))))


def _models(ax: Any, x: Any, traffic: Traffic) -> None:
    import matplotlib.pyplot as plt

    colours = plt.get_cmap("tab20" if len(traffic.names) > 10 else "tab10")
    for i, name in enumerate(sorted(traffic.names, key=lambda n: -max(traffic.rates[n]))):
        rates = np.asarray(traffic.rates[name])
        ax.step(x, np.append(rates, rates[-1]), where="post", lw=1.4, color=colours(i % colours.N),
                label=f"{name} (peak {rates.max():,.0f})")
    ax.set_ylim(0, None)
    ax.set_ylabel("inferences/s")
    ax.set_title("each model's rate", loc="left", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)


def _fleet(ax: Any, x: Any, traffic: Traffic, fleet: FleetStats) -> None:
    total = traffic.matrix().sum(axis=0)
    total = np.append(total, total[-1])
    ax.step(x, total, where="post", lw=2.6, color="black", label=f"sum of the rates (peak {fleet.peak_of_sum:,.0f})")
    ax.axhline(fleet.sum_of_peaks, ls="--", lw=1.6, color="firebrick",
               label=f"sum of the peaks {fleet.sum_of_peaks:,.0f}")
    ax.axhspan(fleet.peak_of_sum, fleet.sum_of_peaks, color="firebrick", alpha=0.12,
               label=f"sharing saves {fleet.saving:.0%}")
    k = int(np.argmax(total))
    ax.plot([x[k]], [total[k]], "o", color="black", ms=6)
    ax.set_ylim(0, fleet.sum_of_peaks * 1.1 or 1)
    ax.set_ylabel("inferences/s")
    ax.set_title("the fleet: what it needs at once against the sum of every model's peak", loc="left", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)


def plot(series: Mapping[str, Series], path: str | Path, title: str = "traffic") -> Path:
    """Write the plot of `series` (every model's rate) and their sum to `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    traffic = align(series)
    x, xlabel = _x(_grid(traffic.starts, traffic.kind), traffic.kind)
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI,
                                      gridspec_kw={"height_ratios": [3, 2]})
    _models(top, x, traffic)
    _fleet(bottom, x, traffic, fleet_stats(series))
    for ax in (top, bottom):
        ax.grid(True, alpha=0.3)
    bottom.set_xlim(x[0], x[-1])
    bottom.set_xlabel(xlabel)
    if traffic.kind is TimeKind.TIMESTAMP:
        locator = mdates.AutoDateLocator(tz=_dt.timezone.utc)
        bottom.xaxis.set_major_locator(locator)
        bottom.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=_dt.timezone.utc))
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


__all__ = ["plot"]
