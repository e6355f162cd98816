"""Sharing factors fitted to every shared group measured, all at once: one linear program (HiGHS).

Why: scaling each member of a group that fell short by the group's ratio blames the model that missed and the one
beside it alike. Twelve models on 2 cores: fraud + reviews held x0.23 of time sharing (fraud, 20 ms, missed);
reviews' factor fell with fraud's, and ranker + reviews then held x4.05 of what that factor predicted. Each group
measured says something of all its members at once, so the factors are fitted to all of them together.

A model's cost when shared is w = 1 / factor (>= 1). A group g measured to hold h_g inferences/s in total at its
split predicts 1 / sum_i a_gi w_i by time sharing (a_gi: member i's share of the split over its capacity alone), so
each group is one row, linear in the w: h_g * sum_i a_gi w_i + d_g - e_g = 1. The program chooses every w:
- d_g, the group's prediction above what it held, costs most (OVER): a plan must not count on more than was measured;
- e_g, its prediction under what it held, costs less (UNDER): that costs replicas, not SLOs;
- t_g, the group's largest w, costs a little (SPREAD): one group alone lowers its members alike (what the ratio did),
  and a member that shared well in another group is not blamed for one that shared badly;
- a model's cost never falls as its group grows (w at size k >= w at each smaller size measured)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from .packing import MIN_SHARING
from .packing_milp import add_rows

OVER = 100.0  # the cost of a group's prediction above what it held, per unit of 1 / held
UNDER = 1.0  # the cost of a prediction under what it held
SPREAD = 0.01  # the cost of a group's largest member cost: blame goes where the other groups point
EACH = 1e-4  # the cost of each w above 1: nothing is raised that no group asks for


@dataclass(frozen=True)
class Observation:
    """One shared group measured: each member's seconds per inference alone at the planned split (its share of the
    split over its capacity alone) and the total inferences/s the group held."""

    seconds: Mapping[str, float]
    held_rps: float

    def __post_init__(self) -> None:
        if len(self.seconds) < 2 or not self.held_rps > 0 or not all(s > 0 for s in self.seconds.values()):
            raise ValueError(f"an observation is a shared group (two models or more, each share > 0) that held a "
                             f"rate > 0: {dict(self.seconds)}, {self.held_rps!r}")

    @property
    def size(self) -> int:
        return len(self.seconds)

    @classmethod
    def of(cls, split: Mapping[str, float], capacity: Mapping[str, float], held_rps: float) -> "Observation":
        """From the planned split (each member's inferences/s) and each member's capacity alone."""
        total = sum(split.values())
        return cls({n: r / total / capacity[n] for n, r in split.items()}, held_rps)

    def predicted(self, factor: Mapping[str, float]) -> float:
        """What time sharing predicts the group holds with each member's `factor`."""
        return 1.0 / sum(s / factor[n] for n, s in self.seconds.items())


def fit_factors(observations: Sequence[Observation]) -> dict[str, dict[int, float]]:
    """Each model's sharing factor at each group size it was measured in, fitted to every observation at once."""
    import highspy

    keys = sorted({(n, o.size) for o in observations for n in o.seconds})
    col = {k: i for i, k in enumerate(keys)}
    m, nw = len(observations), len(keys)
    t0, d0, e0 = nw, nw + m, nw + 2 * m  # columns: w, then t, d and e per observation
    cost = np.concatenate([np.full(nw, EACH), np.full(m, SPREAD), np.full(m, OVER), np.full(m, UNDER)])
    lower = np.concatenate([np.ones(nw), np.zeros(3 * m)])
    upper = np.concatenate([np.full(nw, 1 / MIN_SHARING), np.full(3 * m, highspy.kHighsInf)])
    rows: list[tuple[float, float, list[int], list[float]]] = []
    for g, o in enumerate(observations):
        ws = [col[(n, o.size)] for n in o.seconds]
        rows.append((1.0, 1.0, ws + [d0 + g, e0 + g], [o.held_rps * s for s in o.seconds.values()] + [1.0, -1.0]))
        rows += [(0.0, highspy.kHighsInf, [t0 + g, w], [1.0, -1.0]) for w in ws]
    for (n, k), w in col.items():  # w at size k >= w at the next smaller size measured for the model
        smaller = [j for (name, j) in keys if name == n and j < k]
        if smaller:
            rows.append((0.0, highspy.kHighsInf, [w, col[(n, max(smaller))]], [1.0, -1.0]))
    h = highspy._Highs()  # noqa: SLF001  (highspy.Highs logs a banner before any option can be set)
    h.setOptionValue("output_flag", False)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = nw + 3 * m, 0
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = cost, lower, upper
    h.passModel(lp)
    add_rows(h, rows)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise RuntimeError(f"the sharing fit did not solve: {h.modelStatusToString(h.getModelStatus())}")
    w = np.asarray(h.getSolution().col_value)[:nw]
    out: dict[str, dict[int, float]] = {}
    for (n, k), i in col.items():
        out.setdefault(n, {})[k] = min(1.0, 1.0 / float(w[i]))
    return out


__all__ = ["EACH", "OVER", "Observation", "SPREAD", "UNDER", "fit_factors"]
