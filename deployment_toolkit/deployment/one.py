"""`plan` for one model: a deployment of one entry, planned by the one planner (plan.py) with the same stages,
report and exit codes as a deployment of a hundred."""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .file import Costs, Deployment, Limits, ModelEntry
from .plan import DeploymentPlan, plan_deployment
from .settings import Demand, DeploymentSettings, check_demand

if TYPE_CHECKING:
    from ..search.request import SearchRequest

# the limits a plan of one takes from the command's flags (deployment_of_one): its messages name these flags
FLAGS_OF_LIMITS = {"max_replicas": "--max-replicas", "host_memory_gb": "--host-memory-gb",
                   "gpu_memory_gb": "--gpu-memory-gb", "headroom": "--headroom"}


def deployment_of_one(request: "SearchRequest", demand: Demand) -> Deployment:
    """A plan of one model is a deployment of one entry: its demand as the entry's peak and SLO, its costs and
    limits as the deployment's; the request keeps the model's source and data (search_request)."""
    from ..sources import slugify

    name = request.job.model_name or slugify(Path(request.source.ref).stem if request.source.kind not in
                                              ("zoo", "timm") else request.source.ref)
    entry = ModelEntry(name, request.source.ref, demand.peak_rps, demand.p99_ms)
    return Deployment(name, (entry,), Costs(host_hour=demand.host_hour_cost, gpu_hour=demand.gpu_hour_cost),
                      Limits(max_replicas=demand.max_replicas, headroom=demand.headroom,
                             host_memory_gb=demand.host_memory_gb, gpu_memory_gb=demand.gpu_memory_gb,
                             given_as=FLAGS_OF_LIMITS))


def default_out_dir(request: "SearchRequest") -> Path:
    """Where a plan of one model goes without --result-path: results/local/plan-<model>-<UTC time>."""
    label = Path(request.source.ref).stem if request.source.kind not in ("zoo", "timm") else request.source.ref
    return Path("results") / "local" / f"plan-{label}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"


def plan_model(request: "SearchRequest", demand: Demand, settings: DeploymentSettings) -> DeploymentPlan:
    """`plan` for one model: the same planner on a deployment of one (deployment_of_one). The request's job names
    the plan's folder (default results/local/plan-<model>-<time>) and repository (default <plan>/model_repository)."""
    from ..committed import refuse_committed
    from ..errors import UserInputError

    check_demand(demand)
    if request.settings.rank_by != "capacity":
        raise UserInputError(f"--objective {request.settings.objective_name}: a plan ranks configs by the open-loop "
                             "capacity it rests on; leave --objective out (deployment-toolkit search takes the other "
                             "objectives)")
    out_dir = Path(request.job.result_dir or default_out_dir(request))
    refuse_committed(out_dir, "--result-path")
    job = dataclasses.replace(request.job, model_repository=request.job.model_repository or out_dir / "model_repository")
    template = dataclasses.replace(request, job=job)
    return plan_deployment(deployment_of_one(request, demand), out_dir, settings, template)


__all__ = ["default_out_dir", "deployment_of_one", "plan_model"]
