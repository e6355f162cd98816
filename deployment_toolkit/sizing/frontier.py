"""Views across plans: the cheapest plan for SLOs from tight to loose (the frontier) and the seed-003 scaling
tables (N instances, measured against perfect linear)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from .plan import Demand, Plan, Prices, size
from .runs import Run, SizingError, points_of


@dataclass
class FrontierStep:
    slo_ms: float
    plan: Plan | None


def frontier(runs: Sequence[Run], demand: Demand, prices: Prices = Prices(), include_unreliable: bool = False,
             slos: Sequence[float] | None = None, memory_budget: Any = None) -> list[FrontierStep]:
    """The cheapest plan for SLOs from tight to loose. The answer only changes at a measured p99, so those
    (plus the requested SLO) are the SLOs evaluated unless `slos` is given; with `memory_budget` only plans that
    fit the device count."""
    if slos is None:
        values = {demand.slo_ms}
        for r in runs:
            for p in points_of(r):
                if p.usable and (include_unreliable or p.reliable is not False):
                    values.add(round(p.p99, 6))
        slos = sorted(values)
    steps = []
    for slo in slos:
        d = Demand(demand.peak_rps, slo, demand.headroom, demand.gpus_per_node)
        try:
            result = size(runs, d, prices, include_unreliable=include_unreliable, memory_budget=memory_budget)
        except SizingError:
            result = None
        steps.append(FrontierStep(slo, result.recommendation if result else None))
    return steps


@dataclass
class ScalingTable:
    group: str
    counts: list[int]
    throughput: list[float | None]
    basis: str

    @property
    def perfect(self) -> list[float | None]:
        base, n0 = self.throughput[0], self.counts[0]
        return [None if base is None else base * n / n0 for n in self.counts]

    @property
    def speedup(self) -> list[float | None]:
        base = self.throughput[0]
        return [None if base is None or t is None else t / base for t in self.throughput]


def scaling_tables(plans: Sequence[Plan]) -> list[ScalingTable]:
    """Seed-003 tables (N, measured throughput, perfect linear, speedup) for runs that differ only in the
    number of model instances. Throughput is the sustainable one under the SLO; if some count cannot meet it,
    the best stable throughput at any latency is used instead (the caption says which)."""
    groups: dict[tuple, dict[int, Plan]] = {}
    for p in plans:
        r = p.run
        key = (r.base_model or r.model, r.format, r.precision, r.device, r.kind)
        groups.setdefault(key, {})[r.instances] = p
    tables = []
    for key, by_n in groups.items():
        if len(by_n) < 2:
            continue
        counts = sorted(by_n)
        slo = by_n[counts[0]].demand.slo_ms
        thr = [by_n[n].sustainable.throughput for n in counts]
        basis = f"best stable Inferences/second with p99 <= {slo:g} ms"
        if any(t is None for t in thr):
            thr = [max((q.throughput for q in by_n[n].sustainable.candidates), default=None) for n in counts]
            basis = f"best stable Inferences/second at any latency (not every count meets p99 <= {slo:g} ms)"
        model, fmt, precision, device, kind = key
        tables.append(ScalingTable(f"{model} {fmt} {precision} ({kind}, {by_n[counts[0]].run.device_short})",
                                   counts, thr, basis))
    return tables
