"""What one replica of a run sustains under a p99 SLO: the best measured `Inferences/second` among its points
whose P99 Latency <= the SLO. Unstable points (stable=False) and points that fail the Little's-law check are
left out (and listed); nothing is interpolated or extrapolated beyond the measured points."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .runs import Point, Run, SizingError, points_of


@dataclass
class Sustainable:
    """What one replica of a run sustains at p99 <= slo_ms, on which measured point that rests."""

    run: Run
    slo_ms: float
    point: Point | None
    points: list[Point]
    unstable: list[Point]
    unreliable: list[Point]
    used_unreliable: bool = False

    @property
    def throughput(self) -> float | None:
        return self.point.throughput if self.point else None

    @property
    def reachable(self) -> bool:
        return self.point is not None

    @property
    def candidates(self) -> list[Point]:
        bad = {id(p) for p in self.unstable} | ({id(p) for p in self.unreliable} if not self.used_unreliable else set())
        return [p for p in self.points if id(p) not in bad and p.usable]

    @property
    def at_highest_load(self) -> bool:
        """The chosen point is the sweep's highest measured load: more may be sustainable, it was not measured."""
        return self.point is not None and self.point is self.points[-1]

    @property
    def excluded_within_slo(self) -> list[Point]:
        """Unstable or unreliable points above the chosen throughput whose p99 met the SLO (remeasure them)."""
        if self.point is None:
            return []
        cands = {id(p) for p in self.candidates}
        return [p for p in self.points if id(p) not in cands and not math.isnan(p.p99) and p.p99 <= self.slo_ms
                and p.throughput > self.point.throughput]

    def unreachable_text(self) -> str:
        """The clear answer for an SLO no measured point meets."""
        cands = self.candidates
        best = min(cands, key=lambda p: (p.p99, -p.throughput))
        text = (f"SLO p99 <= {self.slo_ms:g} ms is unreachable for {self.run.name} ({self.run.label}): the best p99 "
                f"measured is {best.p99:.3f} ms, at {best.throughput:.1f} inf/s ({best.level})")
        tighter = [p for p in self.unstable if not math.isnan(p.p99) and p.p99 < best.p99]
        if tighter:
            p = min(tighter, key=lambda q: q.p99)
            text += f"; an unstable point reached {p.p99:.3f} ms ({p.level}) but is not trusted"
        return text + "."


def sustainable(run: Run, slo_ms: float, include_unreliable: bool = False) -> Sustainable:
    """The best measured throughput with p99 <= slo_ms; raises SizingError if the run has no usable point."""
    pts = points_of(run)
    if not pts:
        raise SizingError(f"{run.path / (run.kind + '.csv')} has no measured points: the sweep did not finish any; "
                          "rerun the performance test (it resumes)")
    unstable = [p for p in pts if not p.stable]
    if len(unstable) == len(pts):
        raise SizingError(
            f"all {len(pts)} points of {run.path / (run.kind + '.csv')} are unstable (stable=False): none can carry a "
            "plan. Remeasure with longer windows (--measurement-interval, --max-attempts) or on a quieter host")
    unreliable = [p for p in pts if p.stable and p.reliable is False]
    usable = [p for p in pts if p.usable and (include_unreliable or p.reliable is not False)]
    if not usable:
        why = "fail the Little's-law check" if unreliable else "lack throughput or p99"
        raise SizingError(f"no usable point in {run.path / (run.kind + '.csv')}: the stable points {why}"
                          + ("; pass --include-unreliable to use them anyway" if unreliable else ""))
    within = [p for p in usable if p.p99 <= slo_ms]
    point = max(within, key=lambda p: (p.throughput, -p.p99)) if within else None
    return Sustainable(run, slo_ms, point, pts, unstable, unreliable, used_unreliable=include_unreliable)
