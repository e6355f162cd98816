"""From a model to a confirmed fleet plan in one run: each stage a function whose result goes to the next in memory,
run by the one step runner (steps.py), every stage resumable under its run identity.

1. search: convert and verify the formats asked for, then the config search ranked by open-loop capacity
   (search.orchestration.search_step with --objective capacity): the winner is written to the model repository
   with its capacity per replica and the spread of its searches;
2. the winner served alone on the embedded server and swept in closed loop (perf.online.run_online): the run folder
   the sizing reads (the curve, the device, the config the server loaded);
3. the fleet plan on the winner's open-loop capacity, with sizing's own steps (sizing.fleetplan: the memory budget,
   the prices, plan_on_capacities): replicas, devices, cost; a peak that needs more than --max-replicas is refused;
4. the confirmation under open-loop traffic at the planned per-replica rate, derating the plan if it fails, and the
   burst check (sizing.fleetplan.confirm_step), on the same server;
5. the sizing report and the Kubernetes manifests of the confirmed plan (sizing.output, sizing.fleetplan);
6. plan.md / plan.html and run.json (report.py).

Each stage's settings are typed dataclasses whose fields carry their flag, unit and range (config.setting): the
plan command builds its flags from them, and `dt.plan` takes the same ones.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import StepStatus, check_numbers, setting
from ..config.fields import MAX_HEADROOM, MAX_HOUR_COST, MAX_LATENCY_MS, MAX_MEMORY_GB, MAX_RATE
from ..errors import UserError, UserInputError
from ..sizing.request import (DEFAULT_BURST_FACTOR, DEFAULT_BURST_SECONDS, DEFAULT_ROUNDS, DEFAULT_TRIALS, ConfirmSpec,
                              CostSpec, DemandSpec, K8sSpec, MemorySpec)
from ..steps import StepRunner

if TYPE_CHECKING:
    from ..search.request import SearchRequest

log = logging.getLogger(__name__)


class PlanError(UserError, RuntimeError):
    """The plan cannot be made: no config meets the SLO, or the peak needs more replicas than allowed."""


@dataclass
class Demand:
    """The load a plan serves and its limits; every number checked where it is given (config.check_numbers)."""

    peak_rps: float = setting(flag="--peak-rps", unit="inferences/s", low=0, low_open=True, high=MAX_RATE,
                              help="peak inferences per second to serve")
    p99_ms: float = setting(flag="--p99-ms", unit="ms", low=0, low_open=True, high=MAX_LATENCY_MS)
    headroom: float | None = setting(None, flag="--headroom", low=0, high=MAX_HEADROOM,
                                     help="spare capacity on top of the peak (default: from the spread of the capacity "
                                          "searches)")
    max_replicas: int | None = setting(None, flag="--max-replicas", low=1, high=100_000,
                                       help="refuse a plan that needs more replicas than this")
    gpus_per_node: int = setting(8, flag="--gpus-per-node", low=1, high=64)
    host_hour_cost: float | None = setting(None, flag="--host-hour-cost", unit="$/h", low=0, high=MAX_HOUR_COST,
                                           help="$ per host-hour (CPU hosts)")
    gpu_hour_cost: float | None = setting(None, flag="--gpu-hour-cost", unit="$/h", low=0, high=MAX_HOUR_COST,
                                          help="$ per GPU-hour")
    # the device's memory: how many instances fit, a plan that does not is refused
    gpu_memory_gb: float | None = setting(
        None, flag="--gpu-memory-gb", unit="GB", low=0, low_open=True, high=MAX_MEMORY_GB, metavar="GB",
        help="memory of one GPU (10^9 bytes): the plan says how many instances fit and is refused if its config does "
             "not (the server's memory gauges, scraped during the winner's sweep)")
    host_memory_gb: float | None = setting(None, flag="--host-memory-gb", unit="GB", low=0, low_open=True,
                                           high=MAX_MEMORY_GB, metavar="GB", help="the same for a CPU host")

    def __post_init__(self) -> None:
        check_numbers(self)

    # ---- as sizing's specs (the plan runs sizing's own steps on them) ----
    def sizing_demand(self) -> DemandSpec:
        return DemandSpec(self.peak_rps, self.p99_ms, self.headroom, self.gpus_per_node)

    def costs(self) -> CostSpec:
        return CostSpec(gpu_hour=self.gpu_hour_cost, host_hour=self.host_hour_cost)

    def memory(self) -> MemorySpec:
        return MemorySpec(gpu_gb=self.gpu_memory_gb, host_gb=self.host_memory_gb)


@dataclass
class Checks:
    """The plan's confirmation under open-loop traffic and its burst check."""

    confirm: bool = setting(True, flag="--no-confirm", action="store_false",
                            help="skip the open-loop confirmation and the burst check")
    rounds: int = setting(DEFAULT_ROUNDS, flag="--confirm-rounds", low=1, high=20,
                          help="confirm, derate on failure, confirm again")
    trials: int = setting(DEFAULT_TRIALS, flag="--confirm-trials", low=1, high=20, help="open-loop runs per round")
    burst_factor: float = setting(DEFAULT_BURST_FACTOR, flag="--burst-factor", low=0, high=1000,
                                  help="burst at peak x this; 0 skips it")
    burst_seconds: float = setting(DEFAULT_BURST_SECONDS, flag="--burst-seconds", unit="s", low=0, low_open=True,
                                   high=3600)
    window_ms: int = setting(3000, flag="--confirm-window-ms", unit="ms", low=100, high=600_000)
    retests: int = setting(3, flag="--retests", low=0, high=20,
                           help="k: the capacity a plan uses must hold k of k re-tests at the rate itself (independent "
                                "arrivals, --confirm-window-ms windows), stepping down 10%% until it does; 0 skips it")

    def __post_init__(self) -> None:
        check_numbers(self)

    def spec(self) -> ConfirmSpec:
        """The confirmation as sizing's ConfirmSpec (the step both `size --confirm` and the plan run)."""
        return ConfirmSpec(interval_ms=self.window_ms, rounds=self.rounds, trials=self.trials,
                           burst_factor=self.burst_factor, burst_seconds=self.burst_seconds)


@dataclass
class Deploy:
    """The Kubernetes manifests of the confirmed plan."""

    k8s: bool = setting(True, flag="--no-k8s", action="store_false", help="no manifests")
    pvc: str = setting(K8sSpec.pvc, flag="--pvc", help="PVC holding the model repository")
    image: str | None = setting(None, flag="--image", help="default: the NGC tritonserver image")
    namespace: str | None = setting(None, flag="--namespace")
    autoscale_on: str = setting(K8sSpec.autoscale_on, flag="--autoscale-on", choices=("requests", "queue-ratio"),
                                help="what the HPA scales on: requests/s per pod, or Triton's queue-to-compute time "
                                     "ratio per pod")

    def spec(self, out_dir: Path) -> K8sSpec:
        """The manifests as sizing's K8sSpec, into `out_dir`."""
        return K8sSpec(out_dir=out_dir, pvc=self.pvc, image=self.image, namespace=self.namespace,
                       autoscale_on=self.autoscale_on)


@dataclass
class PlanResult:
    out_dir: Path
    steps: StepRunner
    search: Any = None  # search.trials.SearchRun
    run: Any = None  # sizing.runs.Run of the winner's sweep
    sizing: Any = None  # sizing.plan.Sizing
    confirmation: Any = None  # sizing.confirm.Confirmation
    holding: Any = None  # sizing.holding.Holding: the capacity re-tested k of k at the rate itself
    manifests: dict[str, Path] = field(default_factory=dict)
    sizing_files: dict[str, Path] = field(default_factory=dict)
    data: str = ""  # where the measuring inputs came from
    repository: Path | None = None  # the model repository the winner is written to

    @property
    def plan(self):
        return self.sizing.recommendation if self.sizing is not None else None

    @property
    def confirmed(self) -> bool | None:
        """True: the plan held under open-loop traffic (derated first where it had to be); False: no round of the
        confirmation held (the last derated plan is written); None: not confirmed (--no-confirm)."""
        return None if self.confirmation is None else bool(self.confirmation.passed)

    def stage(self, name: str) -> StepStatus | None:
        """How a stage ended (None: it did not run)."""
        status = self.steps.status(name)
        return None if status is None else StepStatus(status)


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


def default_out_dir(request: SearchRequest) -> Path:
    """Where a plan goes without --result-path: results/local/plan-<model>-<UTC time>."""
    label = Path(request.source.ref).stem if request.source.kind not in ("zoo", "timm") else request.source.ref
    return Path("results") / "local" / f"plan-{label}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"


def make_plan(request: SearchRequest, demand: Demand, checks: Checks, deploy: Deploy) -> PlanResult:
    """The whole plan; `request` is the search's (search.request.SearchRequest: any model reference the toolkit
    takes, the data, the job); its budget is the demand's p99, its results go under the plan's folder (the job's
    result_dir, default results/local/plan-<model>-<time>), its winner into <plan>/model_repository unless the job
    names a repository."""
    from ..committed import refuse_committed
    from ..search.orchestration import search_step

    check_demand(demand)
    if request.settings.rank_by != "capacity":
        raise UserInputError(f"--objective {request.settings.objective_name}: a plan ranks configs by the open-loop "
                             "capacity it rests on; leave --objective out (deployment-toolkit search takes the other "
                             "objectives)")
    out_dir = Path(request.job.result_dir or default_out_dir(request))
    refuse_committed(out_dir, "--result-path")
    command = request.job.command
    request = dataclasses.replace(
        request, settings=dataclasses.replace(request.settings, budget_ms=demand.p99_ms),
        job=dataclasses.replace(request.job, result_dir=out_dir / "search",
                                model_repository=request.job.model_repository or out_dir / "model_repository"))
    result = PlanResult(out_dir, StepRunner(out_dir, log=log.info))
    result.data = request.data.describe()
    result.repository = Path(request.job.model_repository)
    steps = result.steps
    searched = steps.call("convert, verify and search the config under open-loop traffic",
                          lambda: search_step(request),
                          command="deployment-toolkit search ... --objective capacity (flags as given)")
    result.search = searched
    winner = searched.outcome.decision.winner
    if winner is None:
        raise PlanError(f"no config meets the SLO: {searched.outcome.decision.message}")
    if winner.capacity is None or winner.capacity.spread is None:
        raise PlanError(f"the winner {winner.candidate.slug} has no open-loop capacity within p99 <= "
                        f"{demand.p99_ms:g} ms: {winner.detail}")
    _serve_and_plan(result, demand, checks, winner, command, request.job.server.start_timeout_s)
    if not deploy.k8s:
        steps.skip("Kubernetes manifests of the confirmed plan", "--no-k8s")
    elif result.plan is not None:
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
    from ..sizing import load_runs
    from ..sizing.fleetplan import memory_budget, plan_on_capacities, prices_of
    from ..sizing.output import write_outputs
    from ..spec import Manifest

    steps, out_dir = result.steps, result.out_dir
    model = result.search.model_name
    manifest_path = next(Path(f.artifact_dir) / "manifest.json" for f in result.search.formats
                         if f.format == winner.candidate.format)
    best_c = winner.best.concurrency if winner.best else 1
    config = ServerConfig(result.repository, model_control_mode="explicit", load_models=(model,),
                          log_dir=out_dir / "logs", start_timeout_s=start_timeout_s)
    with ExitStack() as stack:
        server = steps.call("start the embedded tritonserver with the winner",
                            lambda: stack.enter_context(LocalTritonServer(config)),
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
        if checks.retests:
            result.holding = steps.call(
                f"the capacity re-tested at the rate itself, {checks.retests} of {checks.retests}",
                lambda: _hold(result, url, server.metrics_url, model, checks, capacity.capacity))
            if result.holding.rate is None:
                raise PlanError(f"{winner.candidate.slug}: {result.holding.text()}")
            capacity = dataclasses.replace(capacity, held=result.holding.rate)
        else:
            steps.skip("the capacity re-tested at the rate itself", "--retests 0")
        measured = {result.run.name: capacity}
        budget = memory_budget(demand.memory(), [result.run])
        planned = steps.call("fleet plan on the winner's open-loop capacity", lambda: _size(
            plan_on_capacities([result.run], demand.sizing_demand(), prices_of(demand.costs()), measured, budget),
            demand))
        result.sizing = planned.sizing
        if checks.confirm:
            result.confirmation = steps.call("confirmation under open-loop traffic (and the burst check)",
                                             lambda: _confirm(result, url, server.metrics_url, model, checks))
        else:
            steps.skip("confirmation under open-loop traffic (and the burst check)", "--no-confirm")
        confirmation = result.confirmation.text() if result.confirmation is not None else None
        result.sizing_files = steps.call("sizing report", lambda: write_outputs(
            result.sizing, [result.run], planned.frontier, out_dir / "sizing", confirmation, command=command,
            headroom_note=planned.headroom_note))


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


def _hold(result: PlanResult, url: str, metrics_url: str | None, model: str, checks: Checks, found: float):
    """The search's capacity re-tested until it holds k of k at the rate itself (sizing.holding), batch-1 traffic."""
    from ..sizing.confirm import target_for
    from ..sizing.holding import Judged, hold
    from ..sizing.ratepoint import measure, open_loop_options
    from ..sizing.ratestore import RateStore

    options = open_loop_options(result.search.options, window_ms=checks.window_ms)
    target = target_for(result.run, url, options, "poisson", 1, model_name=model, metrics_url=metrics_url)
    folder = result.out_dir / "holding"
    store, slo = RateStore(folder), result.search.outcome.decision.winner.capacity.result.slo_ms

    def at(rate: float, trial: int):
        point = measure(target, rate, store, folder, trial, "hold")
        return Judged(point, slo)

    return hold(at, found, checks.retests)



def _confirm(result: PlanResult, url: str, metrics_url: str | None, model: str, checks: Checks):
    """sizing's confirmation step on the winner's server, with the search's perf_analyzer options."""
    from ..sizing.confirm import target_for
    from ..sizing.fleetplan import confirm_step
    from ..sizing.ratepoint import open_loop_options

    plan = result.plan
    options = open_loop_options(result.search.options, window_ms=checks.window_ms)
    target = target_for(result.run, url, options, "poisson", plan.sustainable.point.batch,
                        model_name=model, metrics_url=metrics_url)
    return confirm_step(result.sizing, plan, target, result.out_dir, checks.spec())


def _manifests(result: PlanResult, deploy: Deploy) -> dict[str, Path]:
    from ..sizing.fleetplan import manifests_for

    result.manifests = manifests_for(result.plan, deploy.spec(result.out_dir / "k8s")).files
    return result.manifests


__all__ = ["Checks", "Demand", "Deploy", "PlanError", "PlanResult", "check_demand", "default_out_dir", "make_plan",
           "sweep_levels"]
