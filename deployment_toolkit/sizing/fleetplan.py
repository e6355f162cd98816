"""The fleet plan on measured capacities, and its Kubernetes manifests: the one sequence that `size` and `plan`
both run (issue 37: the planner had its own copy of it, and of the manifest writing).

Headroom (given, or derived from the spread of the open-loop searches), the demand with it, the plans ranked by
cost within the memory budget, the SLO frontier beside them; then, for the chosen plan, the manifests built,
validated against the Kubernetes schema and written.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from .frontier import FrontierStep, frontier
from .k8s import K8S_VERSION, FleetSpec, fleet_manifests, validate_all, write_manifests
from .memory import MemoryBudget
from .plan import EARTH_LAND_KM2, Demand, Plan, Prices, Sizing, size
from .request import DemandSpec
from .runs import Run


@dataclass
class CapacityPlan:
    """What sizing on measured capacities gives: the ranked plans, the demand they were made for, where its
    headroom came from, and the cheapest plan per SLO."""

    sizing: Sizing
    demand: Demand
    headroom_note: str
    frontier: list[FrontierStep]


def plan_on_capacities(runs: Sequence[Run], spec: DemandSpec, prices: Prices, measured: dict[str, Any],
                       budget: MemoryBudget | None = None, gsd_m: Sequence[float] = (),
                       area_km2: float = EARTH_LAND_KM2) -> CapacityPlan:
    """Size `runs` for `spec` on their open-loop capacities `measured` (run name -> capacity); the headroom is
    the spec's, else derived from the capacities' spread."""
    from .openloop import derived_headroom  # it imports the client: only when a plan is made

    if spec.headroom is not None:
        headroom, note = spec.headroom, f"Headroom {spec.headroom:.1%} (given with --headroom)."
    else:
        headroom, note = derived_headroom(measured)
    demand = Demand(spec.peak_rps, spec.p99_ms, headroom, spec.gpus_per_node)
    sizing = size(runs, demand, prices, gsd_m or (), area_km2, spec.include_unreliable, measured,
                  memory_budget=budget or None)
    steps = frontier(runs, demand, prices, spec.include_unreliable, memory_budget=budget or None)
    return CapacityPlan(sizing, demand, note, steps)


@dataclass
class Manifests:
    documents: dict[str, dict[str, Any]]  # file name -> resource
    files: dict[str, Path]
    checks: list[str]  # what each file was validated against


def emit_manifests(plan: Plan, spec: FleetSpec, out_dir: str | Path, version: str = K8S_VERSION) -> Manifests:
    """The plan's Deployment, Service, HPA, KServe and prometheus-adapter manifests, validated, then written."""
    documents = fleet_manifests(plan, spec)
    checks = validate_all(documents, version)
    return Manifests(documents, write_manifests(documents, out_dir), checks)


__all__ = ["CapacityPlan", "Manifests", "emit_manifests", "plan_on_capacities"]
