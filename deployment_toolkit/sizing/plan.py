"""Fleet sizing from measured perf curves: what one replica sustains under a p99 SLO, and how many it takes.

Everything here rests on measured points only (the online.csv / offline.csv a sweep wrote, times in ms):

- sustainable throughput of a run = the best `Inferences/second` among its points whose P99 Latency <= the
  SLO. Unstable points (stable=False) and points that fail the Little's-law check are left out (and listed);
  nothing is interpolated or extrapolated beyond the measured points.
- Little's law: in a closed-loop sweep, concurrency = request rate x average latency, and request rate =
  Inferences/second / client batch size. A point whose numbers disagree by more than 10% is unreliable
  (usually a window too short for the load, or a client that was starved of CPU).
- replicas = ceil(peak x (1 + headroom) / sustainable throughput); a replica is one Triton server with the
  run's instance_group on its GPU(s), or, on a CPU-only run, one server on one host.
- coverage of a geospatial model = throughput x (tile pixels x GSD m)^2 / 10^6 km^2/s.

`peak` counts inferences per second (requests x client batch size); for batch-1 online traffic that is the
request rate.
"""
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..config import check_numbers, setting
from ..config.fields import MAX_HEADROOM, MAX_LATENCY_MS, MAX_RATE
from .runs import Run, SizingError
from .sustainable import Sustainable, sustainable

EARTH_LAND_KM2 = 1.49e8
DEFAULT_GSD_M = (10.0,)


@dataclass(frozen=True)
class Prices:
    """$/hour: per device name (a YAML mapping; a key matches the exact name, else case-insensitively as a
    substring, the longest key winning), else the flat GPU or host price."""

    by_device: dict[str, float] = field(default_factory=dict)
    gpu_hour: float | None = None
    host_hour: float | None = None

    def price(self, run: Run) -> float | None:
        return self.price_for(run.device, run.gpu)

    def price_for(self, device: str, gpu: bool) -> float | None:
        if device in self.by_device:
            return float(self.by_device[device])
        low = device.lower()
        hits = sorted((k for k in self.by_device if k.lower() in low), key=len, reverse=True)
        if hits:
            return float(self.by_device[hits[0]])
        return self.gpu_hour if gpu else self.host_hour


def load_prices(path: str | Path) -> dict[str, float]:
    """A YAML mapping device name -> $/hour (a top-level `prices:` key is accepted too)."""
    import yaml

    data = yaml.safe_load(Path(path).read_text()) or {}
    if isinstance(data, dict) and isinstance(data.get("prices"), dict):
        data = data["prices"]
    if not isinstance(data, dict):
        raise SizingError(f"{path}: expected a mapping of device name to $/hour, e.g. 'NVIDIA H100 80GB HBM3: 4.5'")
    try:
        return {str(k): float(v) for k, v in data.items()}
    except (TypeError, ValueError) as err:
        raise SizingError(f"{path}: every price must be a number ($/hour): {err}") from None


@dataclass(frozen=True)
class Demand:
    peak_rps: float = setting(flag="--peak-rps", unit="inferences/s", low=0, low_open=True, high=MAX_RATE)
    slo_ms: float = setting(flag="--p99-ms", unit="ms", low=0, low_open=True, high=MAX_LATENCY_MS)
    headroom: float = setting(0.2, flag="--headroom", low=0, high=MAX_HEADROOM, help="0.2 = 20% spare capacity")
    gpus_per_node: int = setting(8, flag="--gpus-per-node", low=1, high=64)

    def __post_init__(self) -> None:
        check_numbers(self)  # NaN, inf and 1e308 included: one line naming the flag

    @property
    def planned_rate(self) -> float:
        """Inferences/s the fleet is built for: peak x (1 + headroom)."""
        return self.peak_rps * (1.0 + self.headroom)


def ceil_div(a: float, b: float) -> int:
    """ceil(a / b) without float noise (100 x 1.2 / 40 is 3.0000000000000004, which is 3 replicas, not 4)."""
    return max(1, math.ceil(round(a / b, 9)))


@dataclass
class Coverage:
    gsd_m: float
    km2_per_inference: float
    km2_per_s_replica: float
    km2_per_s_fleet: float
    area_km2: float

    @property
    def seconds_to_cover(self) -> float:
        return self.area_km2 / self.km2_per_s_fleet


def coverage_km2_per_s(throughput: float, tile_hw: tuple[int, int], gsd_m: float) -> float:
    """km^2/s = inferences/s x (H px x GSD m) x (W px x GSD m) / 10^6."""
    h, w = tile_hw
    return throughput * (h * gsd_m) * (w * gsd_m) / 1e6


@dataclass
class Plan:
    """The fleet one run's configuration needs for the demand."""

    sustainable: Sustainable
    demand: Demand
    replicas: int | None = None
    devices: int | None = None
    nodes: int | None = None
    price_per_device_h: float | None = None
    coverage: list[Coverage] = field(default_factory=list)
    rank: int | None = None
    open_loop: Any = None  # capacity.OpenLoopCapacity: what the plan rests on when measured
    derated_from: float | None = None  # the per-replica capacity before a failed confirmation derated it
    replica_override: float | None = None  # the confirmed per-replica capacity after a derate
    memory: Any = None  # memory.PlanMemory: the replica's memory at its point and its fit in the device
    rejected: str = ""  # why the plan is left out of the ranking (its memory does not fit the device)

    @property
    def run(self) -> Run:
        return self.sustainable.run

    @property
    def reachable(self) -> bool:
        return self.replicas is not None

    @property
    def cost_h(self) -> float | None:
        if self.devices is None or self.price_per_device_h is None:
            return None
        return self.devices * self.price_per_device_h

    @property
    def basis(self) -> str:
        """What one replica's capacity rests on: "confirmed" (derated), "open loop" or "closed loop"."""
        if self.replica_override is not None:
            return "confirmed"
        return "open loop" if self.open_loop is not None else "closed loop"

    @property
    def replica_capacity(self) -> float | None:
        """Inferences/s one replica is planned to carry: the confirmed rate after a derate, else the open-loop
        capacity when measured, else the closed-loop sustainable throughput."""
        if self.replica_override is not None:
            return self.replica_override
        if self.open_loop is not None:
            return self.open_loop.capacity
        return self.sustainable.throughput

    @property
    def capacity(self) -> float | None:
        """Inferences/s the fleet sustains under the SLO: replicas x per-replica capacity."""
        thr = self.replica_capacity
        return None if thr is None or self.replicas is None else self.replicas * thr

    @property
    def per_replica_rate(self) -> float | None:
        """Inferences/s each replica gets at the planned rate peak x (1 + headroom), spread evenly."""
        return None if self.replicas is None else self.demand.planned_rate / self.replicas

    @property
    def utilisation(self) -> float | None:
        cap = self.capacity
        return None if not cap else self.demand.planned_rate / cap

    @property
    def cost_per_million_peak(self) -> float | None:
        """$ per million inferences while serving the peak rate (the fleet's cost over peak x 3600 inferences)."""
        cost = self.cost_h
        return None if cost is None else cost / (self.demand.peak_rps * 3600.0) * 1e6

    @property
    def cost_per_million_capacity(self) -> float | None:
        """$ per million inferences with every replica at its sustainable throughput."""
        cost, cap = self.cost_h, self.capacity
        return None if cost is None or not cap else cost / (cap * 3600.0) * 1e6


def plan_for(s: Sustainable, demand: Demand, prices: Prices, gsd_m: Sequence[float] = (),
             area_km2: float = EARTH_LAND_KM2, open_loop: Any = None) -> Plan:
    plan = Plan(s, demand, price_per_device_h=prices.price(s.run), open_loop=open_loop)
    if not s.reachable or plan.replica_capacity is None:
        return plan
    _scale(plan, gsd_m, area_km2)
    return plan


def derate(plan: Plan, confirmed: float) -> Plan:
    """Re-plan on a lower confirmed per-replica capacity (inferences/s): more replicas, same demand."""
    if plan.derated_from is None:
        plan.derated_from = plan.replica_capacity
    plan.replica_override = confirmed
    gsd, area = [c.gsd_m for c in plan.coverage], (plan.coverage[0].area_km2 if plan.coverage else EARTH_LAND_KM2)
    plan.coverage = []
    _scale(plan, gsd, area)
    return plan


def _scale(plan: Plan, gsd_m: Sequence[float], area_km2: float) -> None:
    demand, run, thr = plan.demand, plan.run, plan.replica_capacity
    plan.replicas = ceil_div(demand.planned_rate, thr)
    plan.devices = plan.replicas * (run.gpus_per_replica if run.gpu else 1)
    plan.nodes = ceil_div(plan.devices, demand.gpus_per_node) if run.gpu else plan.devices
    if run.family == "geospatial" and run.tile_hw:
        for g in (gsd_m or DEFAULT_GSD_M):
            per = coverage_km2_per_s(1.0, run.tile_hw, g)
            plan.coverage.append(Coverage(g, per, thr * per, plan.capacity * per, area_km2))


@dataclass
class Sizing:
    demand: Demand
    plans: list[Plan]
    ranked_by: str
    recommendation: Plan | None
    reason: str
    unreachable: list[str]
    notes: list[str]
    rejected: list[str] = field(default_factory=list)  # plans left out: their memory does not fit the device
    budget: Any = None  # memory.MemoryBudget the plans were checked against

    @property
    def ranked(self) -> list[Plan]:
        return sorted((p for p in self.plans if p.reachable and not p.rejected), key=lambda p: p.rank or 0)


def _rank_key(by_cost: bool):
    def key(p: Plan):
        cost = p.cost_h if by_cost else 0.0
        return (cost, p.devices, -(p.replica_capacity or 0.0), p.run.name)
    return key


def size(runs: Iterable[Run], demand: Demand, prices: Prices = Prices(), gsd_m: Sequence[float] = (),
         area_km2: float = EARTH_LAND_KM2, include_unreliable: bool = False,
         open_loop: dict[str, Any] | None = None, memory_budget: Any = None) -> Sizing:
    """Plan every run, rank the reachable ones (by $/hour when every one has a price, else by device count)
    and recommend the first. `open_loop` maps a run's name to its measured OpenLoopCapacity: a run that has
    one is planned on it (the closed-loop figure then only seeded the search). With `memory_budget`
    (memory.MemoryBudget) a plan whose configuration does not fit the device is left out, with the reason."""
    from .memory import attach

    runs = list(runs)
    if not runs:
        raise SizingError("no runs given")
    open_loop = open_loop or {}
    plans = [plan_for(sustainable(r, demand.slo_ms, include_unreliable), demand, prices, gsd_m, area_km2,
                      open_loop.get(r.name)) for r in runs]
    rejected = attach(plans, memory_budget)
    reachable = [p for p in plans if p.reachable and not p.rejected]
    unreachable = [(p.open_loop.unreachable_text() if p.open_loop is not None and p.sustainable.reachable
                    else p.sustainable.unreachable_text()) for p in plans if not p.reachable]
    notes: list[str] = []
    by_cost = bool(reachable) and all(p.cost_h is not None for p in reachable)
    units = {p.run.unit for p in reachable}
    if by_cost:
        ranked_by = "cost per hour"
    else:
        ranked_by = "device count (no price for every configuration)"
        if reachable:
            notes.append("Not every configuration has a price: ranked by the number of "
                         + " / ".join(sorted(u + "s" for u in units))
                         + "; pass --gpu-hour-cost / --host-hour-cost or --prices to rank by cost.")
        if len(units) > 1:
            notes.append("GPU and CPU-host configurations are mixed without prices: their counts are not comparable.")
    for i, p in enumerate(sorted(reachable, key=_rank_key(by_cost)), start=1):
        p.rank = i
    best = min(reachable, key=_rank_key(by_cost)) if reachable else None
    reason = _reason(best, sorted(reachable, key=_rank_key(by_cost)), by_cost, demand) if best else (
        f"No configuration meets p99 <= {demand.slo_ms:g} ms at any measured point; see below for the best p99 of each.")
    if best is None and rejected:
        flags = " / ".join(sorted({memory_budget.flag(p.run) for p in plans if p.rejected}))
        reason = (f"No configuration that meets p99 <= {demand.slo_ms:g} ms fits the device: " + "; ".join(rejected)
                  + f". Pass a larger {flags}, or measure fewer instances per replica.")
    elif best is not None and best.memory is not None and (memory_budget or best.memory.reading is not None):
        reason += f" Memory: {best.memory.text()}."
        if rejected:
            reason += f" Left out, their memory does not fit: {'; '.join(rejected)}."
    return Sizing(demand, plans, ranked_by, best, reason, unreachable, notes, rejected, memory_budget)


def _reason(best: Plan, ranked: list[Plan], by_cost: bool, demand: Demand) -> str:
    s = best.sustainable
    unit = best.run.unit
    what = (f"{best.devices} {unit}{'s' if best.devices != 1 else ''}"
            + (f" at ${best.cost_h:,.2f}/h" if best.cost_h is not None else ""))
    if best.open_loop is not None:
        basis = (f"open-loop capacity, {best.open_loop.distribution} arrivals; the closed-loop sweep gave "
                 f"{s.throughput:.1f} inf/s at {s.point.level}, p99 {s.point.p99:.3f} ms")
    else:
        basis = f"closed loop, measured at {s.point.level}, p99 {s.point.p99:.3f} ms"
    text = (f"{best.run.label} is the {'cheapest' if by_cost else 'smallest'} fleet that meets p99 <= "
            f"{demand.slo_ms:g} ms: {what} ({best.replicas} replica{'s' if best.replicas != 1 else ''} x "
            f"{best.replica_capacity:.1f} inf/s each, {basis}).")
    if len(ranked) > 1:
        nxt = ranked[1]
        if by_cost and best.cost_h and math.isclose(nxt.cost_h, best.cost_h):
            text += (f" {nxt.run.label} costs the same (${nxt.cost_h:,.2f}/h); this one sustains more per replica "
                     f"({best.replica_capacity:.1f} vs {nxt.replica_capacity:.1f} inf/s), so it has more spare capacity.")
        elif by_cost and best.cost_h:
            extra = (nxt.cost_h - best.cost_h) / best.cost_h * 100
            text += f" The next, {nxt.run.label}, costs {extra:+.0f}% (${nxt.cost_h:,.2f}/h, {nxt.devices} {nxt.run.unit}s)."
        else:
            text += f" The next, {nxt.run.label}, needs {nxt.devices} {nxt.run.unit}s."
    if s.at_highest_load and best.open_loop is None:
        text += (" Its point is the highest load measured and still within the SLO, so one replica may sustain "
                 "more: measure higher concurrency (or batch) before buying fewer devices.")
    hidden = s.excluded_within_slo
    if hidden:
        text += (" Higher loads within the SLO were measured but not trusted ("
                 + "; ".join(f"{p.level}: {p.throughput:.1f} inf/s, {'unstable' if not p.stable else 'fails Little'}"
                             + ("" if not p.stable else "'s law") for p in hidden)
                 + "); remeasuring them with longer windows may allow fewer replicas.")
    if s.point.reliable is None:
        text += " (Little's-law check not possible: the run has no average latency.)"
    return text
