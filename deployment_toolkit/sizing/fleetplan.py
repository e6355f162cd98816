"""The fleet plan on measured capacities, its confirmation and its Kubernetes manifests: the steps that `size`
(step.py) runs (issue 44: `plan` runs the one planner, deployment.plan, which packs and confirms groups).

The memory budget and the prices from their specs; headroom (given, or derived from the spread of the open-loop
searches), the demand with it, the plans ranked by cost within the memory budget, the SLO frontier beside them; the
chosen plan confirmed under open-loop traffic (derated on failure, the sizing's reason saying so); its manifests
built, validated against the Kubernetes schema and written.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from .frontier import FrontierStep, frontier
from .k8s import K8S_VERSION, FleetSpec, fleet_manifests, validate_all, write_manifests
from .memory import MemoryBudget
from .plan import EARTH_LAND_KM2, Demand, Plan, Prices, Sizing, load_prices, size
from .replicas import replica_set
from .request import ConfirmSpec, CostSpec, DemandSpec, K8sSpec, MemorySpec
from .runs import Run

if TYPE_CHECKING:  # the measuring modules load when a plan is confirmed
    from .confirm import Confirmation
    from .ratepoint import Target


def memory_budget(memory: MemorySpec, runs: Sequence[Run]) -> MemoryBudget:
    """The device's memory budget, checked against the runs (a budget for a device none of them ran on is refused
    before anything is measured)."""
    budget = MemoryBudget(memory.gpu_gb, memory.host_gb)
    budget.check(list(runs))
    return budget


def prices_of(costs: CostSpec) -> Prices:
    """$/hour per device: the prices file's, else the flat GPU-hour / host-hour costs."""
    return Prices(load_prices(costs.prices_file) if costs.prices_file else {}, costs.gpu_hour, costs.host_hour)


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
    documents = fleet_manifests(replica_set(plan), spec)
    checks = validate_all(documents, version)
    return Manifests(documents, write_manifests(documents, out_dir), checks)


def manifests_for(plan: Plan, spec: K8sSpec) -> Manifests:
    """The manifests `spec` asks for (into `spec.out_dir`), for `plan`."""
    fleet = FleetSpec(name=spec.name or f"triton-{plan.run.model}", pvc=spec.pvc,
                      repository_subpath=spec.repository_subpath, namespace=spec.namespace,
                      max_replicas=spec.max_replicas, memory=spec.memory, cpu=spec.cpu, autoscale=spec.autoscale_on,
                      **({"image": spec.image} if spec.image else {}))
    return emit_manifests(plan, fleet, spec.out_dir, spec.version)


def confirm_step(sizing: Sizing, plan: Plan, target: Target, out_dir: str | Path, spec: ConfirmSpec) -> Confirmation:
    """The plan in open loop at its per-replica rate against `target` (<out_dir>/confirm), derated and confirmed
    again on failure, then the burst check; a derating is said in the sizing's reason (the table and the manifests
    use the derated plan)."""
    from .confirm import confirm

    result = confirm(plan, target, Path(out_dir) / "confirm", spec.rounds, spec.burst_factor or None,
                     spec.burst_seconds, spec.trials)
    if result.derated:
        sizing.reason += (f" The open-loop confirmation derated {plan.run.name} to {plan.replicas} replicas of "
                          f"{plan.replica_capacity:.1f} inf/s (confirmed); the table and the manifests use that "
                          "(see the confirmation below; the ranking was not recomputed).")
    return result


__all__ = ["CapacityPlan", "Manifests", "confirm_step", "emit_manifests", "manifests_for", "memory_budget",
           "plan_on_capacities", "prices_of"]
