"""One kind of replica as its manifests need it: how many, what one carries, what it runs on and where the figures
came from. The planner makes one per replica group of a deployment; the manifests and their autoscaling read only
this."""
from __future__ import annotations

import math
from dataclasses import dataclass


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


__all__ = ["ReplicaSet"]
