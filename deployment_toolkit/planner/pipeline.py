"""From a model to a confirmed fleet plan in one run: each stage a function whose result goes to the next in memory,
run by the one step runner (steps.py), every stage resumable under its run identity.

1. search: convert and verify the formats asked for, then the config search ranked by open-loop capacity
   (search.cli.search_step with --objective capacity): the winner is written to the model repository with its
   capacity per replica and the spread of its searches;
2. the winner served alone on the embedded server and swept in closed loop (perf.online.run_online): the run folder
   the sizing reads (the curve, the device, the config the server loaded);
3. the fleet plan (sizing.size) on the winner's open-loop capacity: replicas, devices, cost; a peak that needs more
   than --max-replicas is refused;
4. the confirmation under open-loop traffic at the planned per-replica rate, derating the plan if it fails, and the
   burst check (sizing.confirm.confirm), on the same server;
5. the sizing report and the Kubernetes manifests of the confirmed plan (sizing.output, sizing.k8s);
6. plan.md / plan.html (report.py).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import check_numbers, setting
from ..config.fields import MAX_HEADROOM, MAX_HOUR_COST, MAX_LATENCY_MS, MAX_MEMORY_GB, MAX_RATE
from ..errors import UserError, UserInputError
from ..steps import StepRunner

if TYPE_CHECKING:
    from ..search.request import SearchRequest


class PlanError(UserError, RuntimeError):
    """The plan cannot be made: no config meets the SLO, or the peak needs more replicas than allowed."""


@dataclass
class Demand:
    """The load a plan serves and its limits; every number checked where it is given (config.check_numbers)."""

    peak_rps: float = setting(flag="--peak-rps", unit="inferences/s", low=0, low_open=True, high=MAX_RATE)
    p99_ms: float = setting(flag="--p99-ms", unit="ms", low=0, low_open=True, high=MAX_LATENCY_MS)
    # default: from the spread of the winner's capacity searches
    headroom: float | None = setting(None, flag="--headroom", low=0, high=MAX_HEADROOM)
    max_replicas: int | None = setting(None, flag="--max-replicas", low=1, high=100_000)
    gpus_per_node: int = setting(8, flag="--gpus-per-node", low=1, high=64)
    host_hour_cost: float | None = setting(None, flag="--host-hour-cost", unit="$/h", low=0, high=MAX_HOUR_COST)
    gpu_hour_cost: float | None = setting(None, flag="--gpu-hour-cost", unit="$/h", low=0, high=MAX_HOUR_COST)
    # the device's memory: how many instances fit, a plan that does not is refused
    gpu_memory_gb: float | None = setting(None, flag="--gpu-memory-gb", unit="GB", low=0, low_open=True,
                                          high=MAX_MEMORY_GB)
    host_memory_gb: float | None = setting(None, flag="--host-memory-gb", unit="GB", low=0, low_open=True,
                                           high=MAX_MEMORY_GB)

    def __post_init__(self) -> None:
        check_numbers(self)


@dataclass
class Checks:
    confirm: bool = True
    rounds: int = 3
    trials: int = 3
    burst_factor: float = 1.5
    burst_seconds: float = 6.0
    window_ms: int = 3000


@dataclass
class Deploy:
    k8s: bool = True
    pvc: str = "triton-model-repository"
    image: str | None = None
    namespace: str | None = None
    autoscale_on: str = "requests"


@dataclass
class PlanResult:
    out_dir: Path
    steps: StepRunner
    search: Any = None  # search.trials.SearchRun
    run: Any = None  # sizing.runs.Run of the winner's sweep
    sizing: Any = None  # sizing.plan.Sizing
    confirmation: Any = None  # sizing.confirm.Confirmation
    manifests: dict[str, Path] = field(default_factory=dict)
    sizing_files: dict[str, Path] = field(default_factory=dict)
    data: str = ""  # where the measuring inputs came from
    repository: Path | None = None  # the model repository the winner is written to
    code: int = 0

    @property
    def plan(self):
        return self.sizing.recommendation if self.sizing is not None else None


def sweep_levels(best: int) -> list[int]:
    """Concurrencies of the winner's closed-loop sweep: doubling up to its best level within the budget, and it."""
    levels, c = [], 1
    while c < best:
        levels.append(c)
        c *= 2
    return sorted(set(levels + [max(1, best)]))


def check_demand(demand: Demand) -> None:
    """Bad demand said in one line before anything is converted or measured (its numbers: Demand itself)."""
    from ..repository.config import host_has_gpu
    from ..sizing.memory import MemoryBudget

    MemoryBudget(demand.gpu_memory_gb, demand.host_memory_gb)  # the values, before anything is measured
    if demand.gpu_memory_gb is not None and demand.host_memory_gb is None and not host_has_gpu():
        raise UserInputError("--gpu-memory-gb: this host has no GPU, so the plan is for CPU hosts: pass "
                             "--host-memory-gb (the memory of one host) instead")


def make_plan(request: SearchRequest, demand: Demand, checks: Checks, deploy: Deploy, out_dir: Path, command: str = "") -> PlanResult:
    """The whole plan; `request` is the search's (search.request.SearchRequest: any model reference the toolkit
    takes, the data); its budget, result folder and (unless given) model repository are the plan's."""
    from ..search.cli import search_step

    out_dir = Path(out_dir)
    check_demand(demand)
    if request.settings.rank_by != "capacity":
        raise UserInputError(f"--objective {request.settings.objective_name}: a plan ranks configs by the open-loop "
                             "capacity it rests on; leave --objective out (deployment-toolkit search takes the other "
                             "objectives)")
    request = dataclasses.replace(
        request, settings=dataclasses.replace(request.settings, budget_ms=demand.p99_ms),
        result_dir=out_dir / "search", model_repository=request.model_repository or out_dir / "model_repository",
        command=request.command or command)
    result = PlanResult(out_dir, StepRunner(out_dir))
    result.data = request.data.describe()
    result.repository = Path(request.model_repository)
    steps = result.steps
    searched = steps.call("convert, verify and search the config under open-loop traffic",
                          lambda: search_step(request),
                          command="deployment-toolkit search ... --objective capacity (flags as given)")
    result.search = searched
    if searched.outcome is None:
        raise PlanError(f"the search could not run: {searched.error}")
    winner = searched.outcome.decision.winner
    if winner is None:
        raise PlanError(f"no config meets the SLO: {searched.outcome.decision.message}")
    if winner.capacity is None or winner.capacity.spread is None:
        raise PlanError(f"the winner {winner.candidate.slug} has no open-loop capacity within p99 <= "
                        f"{demand.p99_ms:g} ms: {winner.detail}")
    _serve_and_plan(result, demand, checks, winner, command, request.server.start_timeout_s)
    if deploy.k8s and result.plan is not None:
        steps.call("Kubernetes manifests of the confirmed plan", lambda: _manifests(result, deploy))
    from .report import write_report

    steps.call("plan.md and plan.html", lambda: write_report(result, demand, checks, deploy, command))
    return result


def _serve_and_plan(result: PlanResult, demand: Demand, checks: Checks, winner, command: str,
                    start_timeout_s: float) -> None:
    """Stages 2-5 on one embedded server that serves the winner alone, measured with the search's perf_analyzer
    options (the user's flags and samples: the sweep and the confirmation send the data the search sent)."""
    from ..perf.online import run_online
    from ..server.local import LocalTritonServer, ServerConfig
    from ..sizing import Prices, load_runs
    from ..sizing.fleetplan import plan_on_capacities
    from ..sizing.memory import MemoryBudget
    from ..sizing.output import write_outputs
    from ..sizing.request import DemandSpec
    from ..spec import Manifest

    steps, out_dir = result.steps, result.out_dir
    model = result.search.model_name
    manifest_path = next(Path(f.artifact_dir) / "manifest.json" for f in result.search.formats
                         if f.format == winner.candidate.format)
    best_c = winner.best.concurrency if winner.best else 1
    server = LocalTritonServer(ServerConfig(result.repository, model_control_mode="explicit",
                                            load_models=(model,), log_dir=out_dir / "logs",
                                            start_timeout_s=start_timeout_s))
    try:
        steps.call("start the embedded tritonserver with the winner", server.start,
                   f"deployment-toolkit serve --model-repository {result.repository}")
        options = result.search.options
        url = server.grpc_url if options.protocol == "grpc" else server.http_url
        steps.call("closed-loop sweep of the winner (the curve the sizing reads)", lambda: run_online(
            model, url, Manifest.load(manifest_path), sweep_levels(best_c), options, out_dir / "winner",
            server=server, manifest_path=manifest_path, progress=False, metrics_url=server.metrics_url),
            f"deployment-toolkit perf-online --model-name {model} --concurrency "
            f"{','.join(map(str, sweep_levels(best_c)))} --result-path {out_dir / 'winner'}")
        result.run = next(r for r in load_runs(out_dir / "winner") if r.kind == "online")
        capacity = dataclasses.replace(winner.capacity.result, config=result.run.name)
        measured = {result.run.name: capacity}
        spec = DemandSpec(demand.peak_rps, demand.p99_ms, demand.headroom, demand.gpus_per_node)
        prices = Prices({}, demand.gpu_hour_cost, demand.host_hour_cost)
        budget = MemoryBudget(demand.gpu_memory_gb, demand.host_memory_gb)
        budget.check([result.run])
        planned = steps.call("fleet plan on the winner's open-loop capacity", lambda: _size(
            plan_on_capacities([result.run], spec, prices, measured, budget), demand))
        result.sizing = planned.sizing
        if checks.confirm:
            result.confirmation = steps.call("confirmation under open-loop traffic (and the burst check)",
                                             lambda: _confirm(result, url, server.metrics_url, model, checks))
            if not result.confirmation.passed:
                result.code = 1
        confirmation = result.confirmation.text() if result.confirmation is not None else None
        result.sizing_files = steps.call("sizing report", lambda: write_outputs(
            result.sizing, [result.run], planned.frontier, out_dir / "sizing", confirmation, command=command,
            headroom_note=planned.headroom_note))
    finally:
        server.stop()


def _size(planned, demand: Demand):
    """The capacity plan, refused when nothing meets the SLO or it needs more than --max-replicas."""
    sizing = planned.sizing
    plan = sizing.recommendation
    if plan is None:
        raise PlanError(sizing.reason)
    if demand.max_replicas is not None and plan.replicas > demand.max_replicas:
        per = plan.replica_capacity or 0.0
        raise PlanError(f"a peak of {demand.peak_rps:,.6g} inf/s needs {plan.replicas} replicas of "
                        f"{per:,.1f} inf/s (with {sizing.demand.headroom:.0%} headroom), more than --max-replicas "
                        f"{demand.max_replicas}: at most {math.floor(demand.max_replicas * per / (1 + sizing.demand.headroom)):,.0f}"
                        " inf/s fit; raise --max-replicas or lower --peak-rps")
    return planned


def _confirm(result: PlanResult, url: str, metrics_url: str | None, model: str, checks: Checks):
    from ..sizing.confirm import confirm, target_for
    from ..sizing.ratepoint import open_loop_options

    plan = result.plan
    options = open_loop_options(result.search.options, window_ms=checks.window_ms)
    target = target_for(result.run, url, options, "poisson", plan.sustainable.point.batch,
                        model_name=model, metrics_url=metrics_url)
    return confirm(plan, target, result.out_dir / "confirm", checks.rounds, checks.burst_factor or None,
                   checks.burst_seconds, checks.trials)


def _manifests(result: PlanResult, deploy: Deploy) -> dict[str, Path]:
    from ..sizing.fleetplan import emit_manifests
    from ..sizing.k8s import FleetSpec

    plan = result.plan
    spec = FleetSpec(name=f"triton-{plan.run.model}", pvc=deploy.pvc, namespace=deploy.namespace,
                     autoscale=deploy.autoscale_on, **({"image": deploy.image} if deploy.image else {}))
    result.manifests = emit_manifests(plan, spec, result.out_dir / "k8s").files
    return result.manifests


__all__ = ["Checks", "Demand", "Deploy", "PlanError", "PlanResult", "check_demand", "make_plan", "sweep_levels"]
