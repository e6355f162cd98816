"""Which models share a replica, as one MILP solved by HiGHS: enumerating every grouping (colocate.partitions) grows
as the Bell numbers (10 models: 115,975 layouts), a MILP does not. This module holds the contracts, `pack` and the
sharing fit; packing_milp.py the HiGHS model, its warm start and search.

Model i's load in time slice t, in replicas' worth: u_it = rate_it x (1 + headroom) / capacity_i. A model runs alone
(w_i: ceil(max_t u_it) replicas, at least one) or in a shared group g whose y_g replicas hold, in every slice,
sum_i x_ig u_it / s_i <= y_g; s_i in (0, 1] is the model's sharing factor (1: pure time sharing; lower where a
measured mix held less than time sharing predicts, `fit_sharing`). A group is led by its lowest-index member
(x_ig = 0 for g > i, x_ig <= x_gg) and has two members at least (a group of one is a model alone); memory per
replica (sum_i mem_i x_ig <= M) and models per server (sum_i x_ig <= K) bound each group. Minimised: replicas (x the
price of one, which is the same packing). Time-varying traffic is why sharing pays: peaks that do not coincide
fill one replica's time instead of each buying their own.

A day at 5-minute slices is 288 slices: the slice rows are added lazily. The first solve has each model's peak slice
and the total's; its groups are checked on every slice, the worst slice of a group that overflowed is added, and it
is solved again from the best packing so far with each group's replicas raised to hold every slice (always a
feasible start, first from a best-fit greedy). Up to `whole_models` models one MILP takes them all (a 30-model MILP
already spends seconds in its root's cuts on 2 cores); past it, a large-neighbourhood search runs the same MILP over a
few whole groups at a time, the others fixed, and keeps what saves replicas.

The lower bound is the largest valid one: HiGHS's dual bound where one MILP took every model (on fewer slices it is
still a bound); the busiest slice's load, where each model counts the smaller of its replicas alone and its u / s
(ceil(max_t sum_i min(ceil(max u_i), u_it / s_i)), ceil(max_t sum_i u_it) at the least); and the groups memory and
models per server force.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Mapping, Sequence

import numpy as np

from ..config import check_numbers, setting
from ..errors import UserInputError
from .packing_milp import TOL, BoundSource, Problem, SolverSettings, bounds, greedy, improve, isolate, solve
from .traffic import Traffic

log = logging.getLogger(__name__)

MIN_SHARING = 1e-3  # the lowest sharing factor a fit may set: a factor is > 0


class SolveStatus(str, Enum):
    OPTIMAL = "optimal"  # within the gap asked, on every slice
    FEASIBLE = "feasible"  # the best packing found in the time given; the gap says how far it may be
    NOTHING_TO_PACK = "nothing to pack"  # no model could be placed


@dataclass(frozen=True)
class ModelLoad:
    """One model to place: its capacity alone, its load, its memory and how well it shares."""

    name: str
    capacity: float | None  # inferences/s one replica holds alone within its SLO (measured); None or 0: unplaceable
    rates: tuple[float, ...]  # inferences/s per time slice (one value: a constant, e.g. a peak)
    memory_gb: float = 0.0  # resident memory in a replica (0: unknown)
    sharing: float = 1.0  # s_i in (0, 1]: 1 is pure time sharing
    headroom: float | None = None  # its own spare capacity on top of its rates (None: PackLimits.headroom)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rates", tuple(float(r) for r in self.rates))
        if not self.rates or any(not math.isfinite(r) or r < 0 for r in self.rates):
            raise UserInputError(f"{self.name}: rates must be finite and >= 0 inferences/s, at least one")
        if not math.isfinite(self.memory_gb) or self.memory_gb < 0:
            raise UserInputError(f"{self.name}: memory_gb must be >= 0 GB, got {self.memory_gb!r}")
        if not 0 < self.sharing <= 1:
            raise UserInputError(f"{self.name}: sharing factor must be in (0, 1], got {self.sharing!r}")

    @classmethod
    def at_peak(cls, name: str, capacity: float | None, peak_rps: float, memory_gb: float = 0.0,
                sharing: float = 1.0) -> "ModelLoad":
        """A model known by its peak alone (a constant series)."""
        return cls(name, capacity, (peak_rps,), memory_gb, sharing)

    @property
    def peak(self) -> float:
        return max(self.rates)


@dataclass(frozen=True)
class PackLimits:
    """What bounds a replica and the fleet (the deployment file's limits and costs)."""

    memory_gb: float | None = setting(None, unit="GB", low=0, low_open=True)  # per replica
    server_gb: float = setting(0.0, unit="GB", low=0)  # the server's own memory in every replica
    max_models: int | None = setting(None, low=1)  # models per server
    max_replicas: int | None = setting(None, low=1)
    headroom: float = setting(0.2, low=0, high=10)  # fraction added on top of the load
    price_per_replica: float | None = setting(None, unit="$/h", low=0)  # None: minimise replicas
    max_replicas_key: str = "limits.max_replicas"  # how the user gave max_replicas (file.Limits.key), for messages

    def __post_init__(self) -> None:
        check_numbers(self)
        if self.memory_gb is not None and self.server_gb >= self.memory_gb:
            raise UserInputError(f"server_gb {self.server_gb:g} leaves no room in memory_gb {self.memory_gb:g}: "
                                 "give the replica's whole memory and the server's own share of it")

    @property
    def room_gb(self) -> float | None:
        return None if self.memory_gb is None else self.memory_gb - self.server_gb


@dataclass(frozen=True)
class PackedGroup:
    """Models on one kind of replica (one model: it runs alone) and what drives it."""

    models: tuple[str, ...]
    replicas: int
    rates: Mapping[str, float]  # each model's planned rate per replica at the worst slice (what a confirmation drives)
    worst_slice: int  # the slice where the group's load is highest
    load: float  # that load, in replicas' worth (the peak of the sum of u / s; a model alone: of its u)
    sum_of_peaks: float  # the members' own peak loads summed (what sizing by peaks pays for)
    peak_of_sum_rps: float  # the highest summed rate of the members in one slice
    sum_of_peaks_rps: float  # the members' peak rates summed
    memory_gb: float

    @property
    def shared(self) -> bool:
        return len(self.models) > 1

    @property
    def replicas_by_peaks(self) -> int:
        """The replicas the same group would need if its members' peaks coincided."""
        return max(1, math.ceil(self.sum_of_peaks - TOL))


@dataclass(frozen=True)
class Misfit:
    name: str
    reason: str


@dataclass(frozen=True)
class Packing:
    groups: tuple[PackedGroup, ...]
    misfits: tuple[Misfit, ...]
    lower_bound: int  # replicas no packing of these models can go under
    bound_source: BoundSource
    status: SolveStatus
    seconds: float
    slices: int  # time slices of the traffic
    slices_solved: int  # of them, the most one MILP needed as rows (the others were never binding)
    solves: int  # MILP solves, every round and neighbourhood
    limits: PackLimits = field(default_factory=PackLimits)

    @property
    def replicas(self) -> int:
        return sum(g.replicas for g in self.groups)

    @property
    def cost(self) -> float:
        """$/h where a price was given, else replicas."""
        price = self.limits.price_per_replica
        return self.replicas * price if price is not None else float(self.replicas)

    @property
    def cost_bound(self) -> float:
        price = self.limits.price_per_replica
        return self.lower_bound * price if price is not None else float(self.lower_bound)

    @property
    def gap(self) -> float:
        """(cost - lower bound) / cost: 0 is proven optimal."""
        return (self.replicas - self.lower_bound) / self.replicas if self.replicas else 0.0

    @property
    def replicas_by_peaks(self) -> int:
        """The same groups sized by the sum of their members' peaks (what non-coinciding peaks saved)."""
        return sum(g.replicas_by_peaks if g.shared else g.replicas for g in self.groups)

    @property
    def within_limit(self) -> bool:
        return self.limits.max_replicas is None or self.replicas <= self.limits.max_replicas

    @property
    def reason(self) -> str:
        """Why the packing cannot be deployed as it is ('' when it can)."""
        if not self.within_limit:
            return (f"the packing needs {self.replicas} replicas (no packing needs fewer than {self.lower_bound}), "
                    f"more than {self.limits.max_replicas_key} {self.limits.max_replicas}: raise it or lower the "
                    "peaks")
        if self.misfits:
            return "; ".join(f"{m.name}: {m.reason}" for m in self.misfits)
        return ""


def models_from_traffic(traffic: Traffic, capacity: Mapping[str, float | None],
                        memory_gb: Mapping[str, float] | None = None,
                        sharing: Mapping[str, float] | None = None) -> tuple[ModelLoad, ...]:
    """Every model of `traffic` with its capacity alone, memory (default 0: unknown) and sharing factor (default 1)."""
    memory_gb, sharing = memory_gb or {}, sharing or {}
    return tuple(ModelLoad(n, capacity.get(n), traffic.rates[n], memory_gb.get(n, 0.0), sharing.get(n, 1.0))
                 for n in traffic.names)


def _misfit(model: ModelLoad, limits: PackLimits) -> str:
    if model.capacity is None or not math.isfinite(model.capacity) or model.capacity <= 0:
        return f"no capacity alone (got {model.capacity!r}): it holds no rate within its SLO on one replica"
    room = limits.room_gb
    if room is not None and model.memory_gb > room:
        return (f"out of memory: {model.memory_gb:.2f} GB + the server {limits.server_gb:.2f} GB > the replica's "
                f"{limits.memory_gb:g} GB")
    return ""


def _group(p: Problem, members: Sequence[int], headroom: float) -> PackedGroup:
    members = sorted(members)
    replicas = p.replicas(members)
    load = (p.u if len(members) == 1 else p.v)[members]
    total = load.sum(axis=0)
    t = int(np.argmax(total))
    rates = p.rates[members]
    margin = [headroom if p.margin is None else float(p.margin[i]) for i in range(p.n)]
    return PackedGroup(tuple(p.names[i] for i in members), replicas,
                       {p.names[i]: float(p.rates[i, t]) * (1 + margin[i]) / replicas for i in members}, t,
                       float(total[t]), float(load.max(axis=1).sum()), float(rates.sum(axis=0).max()),
                       float(rates.max(axis=1).sum()), float(p.mem[members].sum()))


def _problem(models: Sequence[ModelLoad], limits: PackLimits, apart: Sequence[Sequence[str]]
             ) -> tuple[Problem, list[Misfit], int]:
    names = [m.name for m in models]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise UserInputError(f"models named twice: {', '.join(dup)}: each model needs its own name")
    slices = max(len(m.rates) for m in models)
    for m in models:
        if len(m.rates) not in (1, slices):
            raise UserInputError(f"{m.name}: {len(m.rates)} time slices, the others {slices}: align the traffic "
                                 "(traffic.align) or give a peak")
    misfits = [Misfit(m.name, why) for m in models if (why := _misfit(m, limits))]
    unplaced = {m.name for m in misfits}
    placed = [m for m in models if m.name not in unplaced]
    rates = np.array([m.rates * (slices // len(m.rates)) for m in placed], dtype=float).reshape(len(placed), slices)
    margin = np.array([limits.headroom if m.headroom is None else m.headroom for m in placed], dtype=float)
    u = rates * (1 + margin.reshape(-1, 1)) / np.array([m.capacity for m in placed], dtype=float).reshape(-1, 1)
    v = u / np.array([m.sharing for m in placed], dtype=float).reshape(-1, 1)
    order = sorted(range(len(placed)), key=lambda i: (-float(v[i].max()), placed[i].name))
    index = {placed[i].name: k for k, i in enumerate(order)}
    unknown = sorted({n for a in apart for n in a if n not in index and n not in unplaced})
    if unknown:
        raise UserInputError(f"apart names models not packed: {', '.join(unknown)}")
    kept = [frozenset(index[n] for n in a if n in index) for a in apart]
    p = Problem([placed[i].name for i in order], rates[order], u[order], v[order],
                np.array([placed[i].memory_gb for i in order], dtype=float), limits.room_gb, limits.max_models,
                [a for a in kept if len(a) > 1], margin[order])
    return p, misfits, slices


def pack(models: Sequence[ModelLoad], limits: PackLimits = PackLimits(), settings: SolverSettings = SolverSettings(),
         apart: Sequence[Sequence[str]] = ()) -> Packing:
    """The cheapest grouping of `models` (see the module docstring); `apart`: sets of models that must not all share
    one replica (a measured mix that held no rate within the SLOs). A model that fits nowhere is a misfit, the rest
    are still packed; more replicas than limits.max_replicas is said by the result (`within_limit`, `reason`)."""
    started = time.perf_counter()
    if not models:
        raise UserInputError("no models to pack")
    p, misfits, slices = _problem(models, limits, apart)
    if p.n == 0:
        return Packing((), tuple(misfits), 0, BoundSource.LOAD, SolveStatus.NOTHING_TO_PACK,
                       time.perf_counter() - started, slices, 0, 0, limits)
    floors = bounds(p)
    best = isolate(p, greedy(p))
    solves, slices_solved, proven = 0, 0, p.cost(best) <= max(floors.values())
    left = settings.time_limit_s - (time.perf_counter() - started)
    if not proven and p.n <= settings.whole_models:
        done = solve(p, best, settings, left)
        best, solves, slices_solved, proven = done.groups, done.solves, done.slices, done.proven
        floors[BoundSource.SOLVER] = done.bound
    elif not proven:
        best, solves, slices_solved = improve(p, best, settings, left, max(floors.values()))
    cost = p.cost(best)
    source = max(floors, key=lambda s: (floors[s], s is BoundSource.SOLVER))
    lower = min(floors[source], cost)
    optimal = proven or (cost - lower) <= settings.gap * cost + TOL
    log.debug("packed %d models on %d replicas (bound %d, %s) in %d solves", p.n, cost, lower, source.value, solves)
    order = {m.name: k for k, m in enumerate(models)}
    groups = sorted((_group(p, g, limits.headroom) for g in best), key=lambda g: min(order[n] for n in g.models))
    groups = [replace(g, models=tuple(sorted(g.models, key=order.get))) for g in groups]
    return Packing(tuple(groups), tuple(misfits), lower, source, SolveStatus.OPTIMAL if optimal else
                   SolveStatus.FEASIBLE, time.perf_counter() - started, slices, slices_solved, solves, limits)


def lower_bound(models: Sequence[ModelLoad], limits: PackLimits = PackLimits()) -> int:
    """Replicas no packing of `models` goes under, without a solver (load and places: `pack` reports this or the
    solver's tighter one); models that fit nowhere are left out, as `pack` leaves them."""
    p, _, _ = _problem(models, limits, ())
    return max(bounds(p).values()) if p.n else 0


@dataclass(frozen=True)
class SharingFit:
    """What a measured shared group says about its members' sharing factors."""

    models: tuple[str, ...]
    predicted_rps: float  # the total one replica holds by time sharing with the factors the packing used
    held_rps: float  # what the mix held, measured
    ratio: float  # held / predicted (at least MIN_SHARING)
    factors: Mapping[str, float]  # each member's new sharing factor

    def apply(self, models: Sequence[ModelLoad]) -> tuple[ModelLoad, ...]:
        """`models` with the members' factors replaced, to pack again."""
        return tuple(replace(m, sharing=self.factors[m.name]) if m.name in self.factors else m for m in models)


def time_shared(models: Sequence[ModelLoad], split: Mapping[str, float]) -> float:
    """The total inferences/s one replica holds at `split` (each member's rate) by time sharing with the models'
    sharing factors: 1 / sum_i (f_i / (c_i s_i)), f_i member i's share of the split."""
    by_name = {m.name: m for m in models}
    total = sum(split.values())
    return 1.0 / sum(rate / total / (by_name[n].capacity * by_name[n].sharing) for n, rate in split.items())


def fit_sharing(models: Sequence[ModelLoad], split: Mapping[str, float], held_rps: float) -> SharingFit:
    """A shared group measured under mixed traffic split as planned (`split`: each member's rate, e.g.
    PackedGroup.rates) held `held_rps` in total per replica. Time sharing with the current factors predicts
    1 / sum_i (f_i / (c_i s_i)) (f_i: member i's share of the split); each member's factor is scaled by
    held / predicted, so packing again predicts what was measured for this group; above the prediction (the factors
    were estimated: sharing.SharingTable) a factor is raised, never above 1."""
    by_name = {m.name: m for m in models}
    missing = sorted(set(split) - set(by_name))
    if missing or len(split) < 2:
        raise ValueError(f"a shared group's split names two models or more, all packed: {sorted(split)}")
    total = sum(split.values())
    if total <= 0 or not held_rps > 0:
        raise ValueError(f"a fit needs a planned split > 0 and a held rate > 0 (got {total!r}, {held_rps!r}); a "
                         "mix that held nothing is kept apart (pack's `apart`)")
    predicted = time_shared(models, split)
    ratio = max(MIN_SHARING, held_rps / predicted)
    factors = {n: min(1.0, max(MIN_SHARING, by_name[n].sharing * ratio)) for n in split}
    return SharingFit(tuple(split), predicted, held_rps, ratio, factors)


__all__ = ["BoundSource", "Misfit", "ModelLoad", "PackLimits", "PackedGroup", "Packing", "SharingFit",
           "SolveStatus", "SolverSettings", "fit_sharing", "lower_bound", "models_from_traffic", "pack",
           "time_shared"]
