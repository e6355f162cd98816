"""One kind of replica as its manifests need it: how many, what one carries, what it runs on and where the figures
came from. `size` makes it from a measured run's plan (`replica_set`); the planner makes one per replica group of a
deployment; the manifests (k8s) and their autoscaling (autoscale) read only this."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .plan import Plan
from .runs import SizingError


@dataclass(frozen=True)
class ReplicaSet:
    label: str  # the configuration or the group (its models)
    source: str  # the run or plan folder the figures came from
    replicas: int
    capacity: float  # inferences/s one replica is planned to carry
    slo_ms: float
    headroom: float
    basis: str  # what the capacity rests on (open loop, confirmed, mix capacity held k of k, ...)
    batch: int = 1  # inferences per request at the planned point (requests/s = inferences/s / batch)
    gpu: bool = False
    device: str = ""
    gpus_per_replica: int = 1
    usable_cores: int | None = None  # of the measuring host: a CPU pod's request
    queue_ms: float = math.nan  # the server's queue and compute time at the planned point (queue-ratio scaling)
    compute_ms: float = math.nan
    level: str = ""  # the planned point's load level, in words


def replica_set(plan: Plan) -> ReplicaSet:
    """A measured run's plan as its replicas (refused where the SLO is unreachable: nothing to deploy)."""
    if not plan.reachable:
        raise SizingError(f"{plan.run.name}: no fleet to emit, the SLO is unreachable")
    run, point = plan.run, plan.sustainable.point
    cores = ((run.meta.get("hardware") or {}).get("cpu") or {}).get("usable_cores")
    return ReplicaSet(run.label, str(run.path), plan.replicas, plan.replica_capacity, plan.demand.slo_ms,
                      plan.demand.headroom, plan.basis, point.batch, run.gpu, run.device, run.gpus_per_replica,
                      cores, point.queue_ms, point.compute_ms, point.level)


__all__ = ["ReplicaSet", "replica_set"]
