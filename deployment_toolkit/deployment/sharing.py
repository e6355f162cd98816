"""Sharing factors by group size: what a measured shared group says holds for groups as large as it or larger, not
for smaller ones.

Why: one factor per model, only ever lowered, let one large group that shared badly rule out every smaller one. On
2 cores, twelve models: groups of four scorers held x0.54 and x0.46 of time sharing, then a group of six held x0.24
of what those factors predicted, and every scorer's one factor fell to x0.11-0.13: the solver gave each scorer a
replica of its own (10 replicas) though the groups of four had held. Interference grows with the models on a
replica (threads, caches, the server's queues), so a factor is kept per model and group size: model i's factor in a
group of k is the lowest measured for it in a group of k or fewer (a larger group never shares better than a smaller
one did). The factors are fitted to every group measured at once (sharing_fit.py), so a model that shared well
in one group is not blamed for the one beside it that missed in another. Between the sizes it was measured at (and
one model alone, factor 1), each co-runner is taken to cost the same: 1 / factor interpolated linearly in the size,
and extrapolated past the largest size measured (a group of six is not taken to share as well as the four
measured), an estimate the next measurement replaces (up or down); 1 where it was never measured.

The packing stays one MILP with one factor per model: it is solved once per size band (`caps`), each band's models
at their factors for groups of the band's largest size and no group larger (a smaller group in it is counted at the
larger size's factor, never under what it costs), and the cheapest is kept. Estimated factors change at every size,
so the bands are the sizes measured, the ones below them and 2, 3, 4, 6, 8, 12, ... (a few solves, not one per
size)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from .sharing_fit import Observation, fit_factors

ESTIMATED_BANDS = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)  # the caps tried where factors are estimated


@dataclass
class SharingTable:
    """Each model's sharing factors, by the size of the group they were measured in."""

    measured: dict[str, dict[int, float]] = field(default_factory=dict)  # model -> {group size: factor}
    observations: list[Observation] = field(default_factory=list)  # every shared group measured, in order

    def factor(self, model: str, size: int) -> float:
        """The model's factor in a group of `size`: the lowest measured in a group of that size or smaller; between
        the sizes it was measured at (and 1 model, factor 1), each co-runner's cost interpolated (1 / factor
        linear in the size); past the largest, extrapolated on the last two."""
        by_size = self.measured.get(model, {})
        if size < 2 or not by_size:
            return 1.0
        if size in by_size:
            return self._lowest(by_size, size)
        points = [(1, 1.0)] + [(k, self._lowest(by_size, k)) for k in sorted(by_size)]
        pairs = list(zip(points, points[1:]))
        (k1, f1), (k2, f2) = next(((a, b) for a, b in pairs if size <= b[0]), pairs[-1])
        cost = 1 / f1 + (size - k1) * (1 / f2 - 1 / f1) / (k2 - k1)
        return min(f1, 1 / cost)

    @staticmethod
    def _lowest(by_size: Mapping[int, float], size: int) -> float:
        return min(f for k, f in by_size.items() if k <= size)

    def observe(self, observation: Observation) -> None:
        """A shared group measured: every model's factors fitted again to all the groups measured so far."""
        self.observations.append(observation)
        self.measured = fit_factors(self.observations)

    def caps(self, most: int | None, models: int) -> list[int]:
        """The group sizes to pack with, up to `most` (None: every model on one replica): each measured size and
        the one below it, and ESTIMATED_BANDS where the factors are estimated (each band's models at its top's
        factor: no group counted under what it costs); with nothing measured, or no two models that may share (one
        model, at most one a server), the top alone."""
        top = max(1, min(most or models, models))
        sizes = {k for by_size in self.measured.values() for k in by_size}
        wanted = {top} | ({k for s in sizes for k in (s - 1, s)} | set(ESTIMATED_BANDS) if sizes else set())
        return sorted(k for k in wanted if 2 <= k <= top) or [top]

    def lowered(self) -> dict[str, dict[int, float]]:
        """Each model's factors under 1, by group size, smallest size first."""
        return {n: {k: f for k, f in sorted(by_size.items()) if f < 1}
                for n, by_size in self.measured.items() if any(f < 1 for f in by_size.values())}

    def text(self, names: list[str] | None = None) -> str:
        """'scorer x0.54 (4 models or more), x0.24 (6 or more); ...', or that no measurement lowered one."""
        low = {n: s for n, s in self.lowered().items() if names is None or n in names}
        if not low:
            return "none below 1"
        parts = []
        for n, by_size in low.items():
            running, said = 1.0, []
            for k, f in by_size.items():
                if f < running:  # a size whose factor is no lower than a smaller size's changes nothing
                    said.append(f"x{f:.2f} ({k} models or more)" if not said else f"x{f:.2f} ({k} or more)")
                    running = f
            parts.append(f"{n} " + ", ".join(said))
        return "; ".join(parts)


__all__ = ["ESTIMATED_BANDS", "SharingTable"]
