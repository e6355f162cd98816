"""The MILP behind packing.py, solved by HiGHS: the model (columns w_i, x_gi, y_g; the module docstring of
packing.py says the formulation), its lazy slice rows, the best-fit greedy that starts it, the large-neighbourhood
search past `whole_models`, and the lower bounds. Works on arrays of the placeable models, strongest first."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Sequence

import numpy as np

from ..config import check_numbers, setting

TOL = 1e-7  # a load within this of an integer is that integer (sums of floats)


class BoundSource(str, Enum):
    SOLVER = "solver's dual bound"
    LOAD = "busiest slice's load"
    PLACES = "memory / models per server"


@dataclass(frozen=True)
class SolverSettings:
    time_limit_s: float = setting(8.0, unit="s", low=0, low_open=True, high=3600)  # every round together
    gap: float = setting(0.01, low=0, high=1)  # relative gap at which HiGHS stops
    max_rounds: int = setting(20, low=1, high=1000)  # solves, each with the slices the last one overflowed
    whole_models: int = setting(24, low=2, high=500)  # up to it one MILP takes every model; past it, neighbourhoods
    neighbourhood_models: int = setting(14, low=2, high=500)  # models one neighbourhood repacks
    neighbourhood_s: float = setting(2.0, unit="s", low=0, low_open=True, high=3600)  # one neighbourhood's solve
    stall: int = setting(60, low=1, high=100_000)  # neighbourhoods in a row that saved nothing: stop

    def __post_init__(self) -> None:
        check_numbers(self)


@dataclass
class Problem:
    """The placeable models as arrays, strongest first (the order the symmetry breaking leads groups by)."""

    names: list[str]
    rates: np.ndarray  # (n, T) inferences/s
    u: np.ndarray  # (n, T) load alone, replicas' worth
    v: np.ndarray  # (n, T) load when shared: u / s
    mem: np.ndarray
    room_gb: float | None  # memory per replica left by the server
    max_models: int | None
    apart: list[frozenset[int]]
    margin: np.ndarray | None = None  # (n,) each model's own headroom (None: the limits' one for all)

    @property
    def n(self) -> int:
        return len(self.names)

    def solo(self, i: int) -> int:
        return max(1, math.ceil(float(self.u[i].max()) - TOL))

    def replicas(self, members: Sequence[int]) -> int:
        if len(members) == 1:
            return self.solo(members[0])
        return max(1, math.ceil(float(self.v[list(members)].sum(axis=0).max()) - TOL))

    def may_share(self, members: Sequence[int]) -> bool:
        room, most = self.room_gb, self.max_models
        if most is not None and len(members) > most:
            return False
        if room is not None and float(self.mem[list(members)].sum()) > room + TOL:
            return False
        return not any(a <= set(members) for a in self.apart)

    def cost(self, groups: Sequence[Sequence[int]]) -> int:
        return sum(self.replicas(g) for g in groups)


def add_rows(h: Any, rows: Sequence[tuple[float, float, list[int], list[float]]]) -> None:
    """Rows (lower, upper, columns, values) added to a HiGHS model as one CSR block."""
    if not rows:
        return
    starts = np.cumsum([0] + [len(r[2]) for r in rows[:-1]]).astype(np.int32)
    index = np.fromiter((c for r in rows for c in r[2]), dtype=np.int32)
    value = np.fromiter((v for r in rows for v in r[3]), dtype=float)
    h.addRows(len(rows), np.array([r[0] for r in rows]), np.array([r[1] for r in rows]), len(index), starts,
              index, value)


def greedy(p: Problem) -> list[list[int]]:
    """Best fit, strongest model first: join the group it adds the fewest replicas to, when that is fewer than its
    own; the MILP's first incumbent."""
    groups: list[list[int]] = []
    loads: list[np.ndarray] = []
    for i in range(p.n):
        best, added = None, p.solo(i)
        for k, g in enumerate(groups):
            if not p.may_share(g + [i]):
                continue
            before = p.replicas(g)
            extra = max(1, math.ceil(float((loads[k] + p.v[i]).max()) - TOL)) - before
            if extra < added:
                best, added = k, extra
        if best is None:
            groups.append([i])
            loads.append(p.v[i].copy())
        else:
            groups[best].append(i)
            loads[best] += p.v[i]
    return groups


def isolate(p: Problem, groups: list[list[int]]) -> list[list[int]]:
    """Take a member out of its group wherever running it alone costs nothing more: isolation is free then, and a
    shared replica risks interference the time-sharing model does not see."""
    out: list[list[int]] = []
    for g in groups:
        g = list(g)
        changed = True
        while changed and len(g) > 1:
            changed = False
            for i in sorted(g, key=lambda m: -float(p.v[m].max())):
                rest = [m for m in g if m != i]
                if p.replicas(rest) + p.solo(i) <= p.replicas(g):
                    out.append([i])
                    g, changed = rest, True
                    break
        out.append(g)
    return out


class Milp:
    """The HiGHS model: columns w_i, x_gi (g <= i, pairs that may share), y_g; rows added as numpy CSR blocks."""

    def __init__(self, p: Problem, settings: SolverSettings) -> None:
        import highspy

        self.p = p
        n = p.n
        pair_ok = self._pairs()
        self.pairs = [(g, i) for g in range(n) for i in range(g, n) if pair_ok[g, i]]
        self.col = {pair: n + k for k, pair in enumerate(self.pairs)}
        self.y0 = n + len(self.pairs)
        ncol = self.y0 + n
        top = [max(1, math.ceil(float(p.v[g:].max(axis=1).sum()) - TOL)) for g in range(n)]
        cost = np.array([p.solo(i) for i in range(n)] + [0.0] * len(self.pairs) + [1.0] * n)
        lower = np.zeros(ncol)
        upper = np.array([1.0] * (n + len(self.pairs)) + [float(t) for t in top])
        # highspy.Highs's constructor logs a banner before any option can be set; its base class does not
        self.h = highspy._Highs()  # noqa: SLF001
        self.h.setOptionValue("output_flag", False)
        self.h.setOptionValue("mip_rel_gap", settings.gap)
        self.h.setOptionValue("mip_abs_gap", 1 - 1e-6)  # replicas are whole: a gap under one is closed
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = ncol, 0
        lp.col_cost_, lp.col_lower_, lp.col_upper_ = cost, lower, upper
        lp.integrality_ = [highspy.HighsVarType.kInteger] * ncol
        self.h.passModel(lp)
        self.inf = highspy.kHighsInf
        self._static_rows()
        self.slices: set[int] = set()

    def _pairs(self) -> np.ndarray:
        p, n = self.p, self.p.n
        ok = np.ones((n, n), dtype=bool)
        if p.max_models is not None and p.max_models < 2:
            ok[:] = False
        if p.room_gb is not None:
            ok &= (p.mem[:, None] + p.mem[None, :]) <= p.room_gb + TOL
        for a in p.apart:
            if len(a) == 2:
                g, i = sorted(a)
                ok[g, i] = False
        ok = np.triu(ok, k=1)
        has_partner = ok.any(axis=1)
        ok[np.arange(n), np.arange(n)] = has_partner
        return ok

    def _add(self, rows: list[tuple[float, float, list[int], list[float]]]) -> None:
        add_rows(self.h, rows)

    def _static_rows(self) -> None:
        p, n, inf, col = self.p, self.p.n, self.inf, self.col
        members: dict[int, list[int]] = {g: [] for g in range(n)}
        leads: dict[int, list[int]] = {i: [] for i in range(n)}
        for g, i in self.pairs:
            members[g].append(i)
            leads[i].append(g)
        rows = [(1.0, 1.0, [i] + [col[(g, i)] for g in leads[i]], [1.0] * (1 + len(leads[i]))) for i in range(n)]
        peak = [max(0, math.ceil(float(p.v[i].max()) - TOL)) for i in range(n)]
        room, most = p.room_gb, p.max_models
        for g in range(n):
            if not members[g]:
                continue
            lead, others = col[(g, g)], [i for i in members[g] if i != g]
            rows += [(-inf, 0.0, [col[(g, i)], lead], [1.0, -1.0]) for i in others]
            rows.append((0.0, inf, [col[(g, i)] for i in others] + [lead], [1.0] * len(others) + [-1.0]))
            rows += [(0.0, inf, [self.y0 + g, col[(g, i)]], [1.0, -float(max(1 if i == g else 0, peak[i]))])
                     for i in members[g] if max(1 if i == g else 0, peak[i]) > 0]
            if room is not None and p.mem[members[g]].sum() > room + TOL:
                rows.append((-inf, 0.0, [col[(g, i)] for i in members[g]],
                             [float(p.mem[i]) - (room if i == g else 0.0) for i in members[g]]))
            if most is not None and len(members[g]) > most:
                rows.append((-inf, 0.0, [col[(g, i)] for i in members[g]],
                             [1.0 - (most if i == g else 0.0) for i in members[g]]))
            for a in p.apart:
                inside = [i for i in members[g] if i in a]
                if len(a) > 2 and len(inside) == len(a):
                    rows.append((-inf, len(a) - 1.0, [col[(g, i)] for i in inside], [1.0] * len(inside)))
        self._add(rows)

    def add_slices(self, slices: Sequence[int]) -> None:
        new = [t for t in sorted(set(slices)) if t not in self.slices]
        rows = []
        for t in new:
            for g in range(self.p.n):
                terms = [(self.col[(g, i)], float(self.p.v[i, t])) for i in range(g, self.p.n)
                         if (g, i) in self.col and self.p.v[i, t] > 0]
                if terms:
                    rows.append((-self.inf, 0.0, [c for c, _ in terms] + [self.y0 + g],
                                 [v for _, v in terms] + [-1.0]))
        self._add(rows)
        self.slices.update(new)

    def start_from(self, groups: Sequence[Sequence[int]]) -> None:
        x = np.zeros(self.y0 + self.p.n)
        for g in groups:
            if len(g) == 1:
                x[g[0]] = 1.0
            else:
                lead = min(g)
                for i in g:
                    x[self.col[(lead, i)]] = 1.0
                x[self.y0 + lead] = self.p.replicas(g)
        self.h.setSolution(len(x), np.arange(len(x), dtype=np.int32), x)

    def solve(self, seconds: float) -> tuple[list[list[int]] | None, float, bool]:
        """(the groups found, or None; the dual bound; whether HiGHS proved the gap)."""
        import highspy

        self.h.setOptionValue("time_limit", max(seconds, 0.05))
        self.h.run()
        info, status = self.h.getInfo(), self.h.getModelStatus()
        bound = info.mip_dual_bound if math.isfinite(info.mip_dual_bound) else 0.0
        if info.primal_solution_status != highspy.SolutionStatus.kSolutionStatusFeasible:
            return None, bound, False
        x = np.asarray(self.h.getSolution().col_value)
        groups = [[i] for i in range(self.p.n) if x[i] > 0.5]
        for g in range(self.p.n):
            if (g, g) in self.col and x[self.col[(g, g)]] > 0.5:
                groups.append([i for i in range(g, self.p.n) if (g, i) in self.col and x[self.col[(g, i)]] > 0.5])
        return groups, bound, status == highspy.HighsModelStatus.kOptimal


def overflowed(p: Problem, groups: Sequence[Sequence[int]], solved: set[int]) -> list[int]:
    """The worst slice of each shared group whose worst slice was not among the rows solved."""
    out = []
    for g in groups:
        if len(g) > 1:
            t = int(np.argmax(p.v[list(g)].sum(axis=0)))
            if t not in solved:
                out.append(t)
    return out


@dataclass
class Solved:
    groups: list[list[int]]
    bound: int  # HiGHS's dual bound on this problem (0: none)
    proven: bool  # within the gap, on every slice
    solves: int = 0
    slices: int = 0


def solve(p: Problem, start: list[list[int]], settings: SolverSettings, seconds: float) -> Solved:
    """The MILP over every model of `p`, slice rows added lazily, from `start` (a packing that holds every slice)."""
    deadline = time.perf_counter() + seconds
    best, cost = start, p.cost(start)
    out = Solved(best, 0, False)
    milp = Milp(p, settings)
    milp.add_slices(sorted({int(np.argmax(p.v[i])) for i in range(p.n)} | {int(np.argmax(p.u.sum(axis=0)))}))
    while out.solves < settings.max_rounds and (left := deadline - time.perf_counter()) > 0:
        milp.start_from(out.groups)
        groups, dual, optimal = milp.solve(left)
        out.solves += 1
        out.bound = max(out.bound, math.ceil(dual - 1e-6))
        if groups is None:
            break
        found = isolate(p, groups)
        if p.cost(found) < cost:
            out.groups, cost = found, p.cost(found)
        more = overflowed(p, groups, milp.slices)
        if not more or cost <= out.bound:
            out.proven = optimal or cost <= out.bound
            break
        milp.add_slices(more)
    out.slices = len(milp.slices)
    return out


def sub_problem(p: Problem, keep: Sequence[int]) -> Problem:
    """The problem of the models `keep` (indices of `p`, ascending: the order stays strongest first)."""
    at = {i: k for k, i in enumerate(keep)}
    apart = [frozenset(at[i] for i in a) for a in p.apart if a <= set(at)]
    return Problem([p.names[i] for i in keep], p.rates[keep], p.u[keep], p.v[keep], p.mem[keep], p.room_gb,
                   p.max_models, apart, None if p.margin is None else p.margin[keep])


def neighbourhood(p: Problem, groups: list[list[int]], rng: np.random.Generator, size: int) -> list[int]:
    """Whole groups for a sub-MILP to repack while every other group stays: a group drawn by how little of its last
    replica it uses at its busiest slices (a little load moved away saves that replica), then partners drawn by
    the replica time they leave idle at those slices (where the load can go), until about `size` models."""
    loads = np.array([(p.u if len(g) == 1 else p.v)[g].sum(axis=0) for g in groups])
    replicas = np.array([p.replicas(g) for g in groups], dtype=float)
    last = loads.max(axis=1) - (replicas - 1)  # the share of the last replica used at the worst slice
    seed_weight = np.clip(1 - last, 0, None) + 0.05
    seed = int(rng.choice(len(groups), p=seed_weight / seed_weight.sum()))
    busy = loads[seed] > replicas[seed] - 1 - TOL
    idle = np.clip((replicas[:, None] - loads[:, busy]).min(axis=1), 0, None) + 0.05
    idle[seed] = 0.0
    chosen, count = [seed], len(groups[seed])
    for k in rng.choice(len(groups), size=len(groups) - 1, replace=False, p=idle / idle.sum()):
        if count + len(groups[k]) <= size:
            chosen.append(int(k))
            count += len(groups[k])
        if count >= size:
            break
    return chosen


def improve(p: Problem, start: list[list[int]], settings: SolverSettings, seconds: float, floor: int
             ) -> tuple[list[list[int]], int, int]:
    """Large-neighbourhood search: the MILP over a few groups at a time, the rest fixed, kept when it saves replicas;
    until `floor` (a lower bound) is reached, the time is up, or many neighbourhoods in a row saved nothing."""
    deadline = time.perf_counter() + seconds
    rng = np.random.default_rng(0)
    groups, solves, slices, stall = [list(g) for g in start], 0, 0, 0
    while stall < settings.stall and p.cost(groups) > floor and (left := deadline - time.perf_counter()) > 0:
        size = min(settings.whole_models, settings.neighbourhood_models + 4 * (stall // 10))  # wider when stuck
        picked = neighbourhood(p, groups, rng, size)
        keep = sorted(i for k in picked for i in groups[k])
        sub = sub_problem(p, keep)
        at = {i: k for k, i in enumerate(keep)}
        before = [[at[i] for i in groups[k]] for k in picked]
        done = solve(sub, before, replace(settings, gap=0.0), min(left, settings.neighbourhood_s))
        solves, slices = solves + done.solves, max(slices, done.slices)
        if sub.cost(done.groups) < sub.cost(before):
            rest = [g for k, g in enumerate(groups) if k not in set(picked)]
            groups, stall = rest + [[keep[i] for i in g] for g in done.groups], 0
        else:
            stall += 1
    return groups, solves, slices


def bounds(p: Problem) -> dict[BoundSource, int]:
    """Replicas no packing goes under, without a solver: in every slice a model takes its own replicas alone, or
    u / s of a shared group's (at least the smaller of the two); and the groups memory and models per server force."""
    solo = np.array([p.solo(i) for i in range(p.n)], dtype=float)[:, None]
    load = max(0, math.ceil(float(np.minimum(solo, p.v).sum(axis=0).max()) - TOL))
    places = 1 if p.n else 0
    if p.room_gb is not None and p.n:
        places = max(places, math.ceil(float(p.mem.sum()) / p.room_gb - TOL))
    if p.max_models is not None:
        places = max(places, math.ceil(p.n / p.max_models))
    return {BoundSource.LOAD: max(load, 1 if p.n else 0), BoundSource.PLACES: places}


__all__ = ["BoundSource", "Problem", "SolverSettings", "TOL", "add_rows", "bounds", "greedy", "improve", "isolate", "solve"]
