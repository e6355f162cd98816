"""`plan --deployment FILE`: several models to one fleet plan confirmed under their mixed traffic.

1. each model, as `plan` takes one: converted, verified and searched under its own SLO, ranked by open-loop
   capacity; every winner written to one model repository (search.orchestration via `search_step`);
2. one embedded server holding every winner; each model's capacity alone re-tested until it holds k of k at the
   rate itself (holding.hold);
3. the layout: which models share a replica, priced over every grouping, a shared group's mix capacity measured
   (mixed.Mix: every model of the group at once, traffic split as the peaks) and held k of k before it is used
   (colocate.decide);
4. the confirmation: each group of the chosen layout driven at its planned per-replica rates, all its models at
   once, `trials` times, each model's p99 from the intended send time against its own SLO;
5. the Kubernetes manifests per group (report.py) and plan.md / plan.html.

Each stage's typed result goes to the next in memory (DeploymentPlan); measured points are stored in the run
folder, so a rerun of the same command replays what was measured and measures only what is missing.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import check_numbers, setting
from ..steps import StepRunner
from .errors import DeploymentPlanError
from .colocate import Decision, GroupCapacity, decide
from .file import Deployment, ModelEntry
from ..sizing.holding import Holding, Judged, hold
from .mixed import Member, Mix, MixPoint, member_target, windowed

if TYPE_CHECKING:
    from ..search.request import SearchRequest

DEFAULT_HEADROOM = 0.2


@dataclass(frozen=True)
class DeploymentSettings:
    """How hard a deployment plan re-tests and confirms (each model's search takes the search's own settings)."""

    retests: int = setting(3, low=0, high=20)  # k: a capacity is used once it held k of k re-tests (--retests)
    trials: int = setting(3, low=1, high=20)  # confirmation rounds of the chosen fleet (--confirm-trials)
    window_ms: int = setting(2000, unit="ms", low=50, high=60_000)  # perf_analyzer's window in re-tests and rounds
    k8s: bool = True

    def __post_init__(self) -> None:
        check_numbers(self)


def workspace_of(deployment: Deployment, template: "SearchRequest") -> Path:
    """Where the artifacts and the shared model repository go (--workspace; default workspace/plan-<name>): big
    files, kept out of the run folder so a committed plan stays small."""
    return Path(template.job.workspace or Path("workspace") / f"plan-{deployment.name}")


def search_request(entry: ModelEntry, template: "SearchRequest", out_dir: Path, workspace: Path,
                   repository: Path) -> "SearchRequest":
    """One model's search: the template's settings, job and perf options (the command's flags or the API's
    dataclasses), with the model, its SLO as the budget, its samples, and this plan's repository and folders."""
    from ..config import Objective
    from ..data.samples import DataSpec
    from ..sources import parse_reference

    source = parse_reference(entry.model, preset=template.job.preset,
                             checkpoint=str(entry.checkpoint) if entry.checkpoint else None,
                             kwargs=dict(entry.model_args))
    data = DataSpec(str(entry.data) if entry.data else (None if entry.dataloader else "synthetic"),
                    str(entry.dataloader) if entry.dataloader else None)
    job = dataclasses.replace(template.job, result_dir=out_dir / "models" / entry.name / "search",
                              model_repository=repository, model_name=entry.name, workspace=workspace / entry.name)
    settings = dataclasses.replace(template.settings, budget_ms=entry.p99_ms, objective=Objective.CAPACITY)
    return dataclasses.replace(template, source=source, settings=settings, job=job, data=data)


@dataclass
class ModelPlan:
    entry: ModelEntry
    search: Any  # search.trials.SearchRun
    found: float  # the search's open-loop capacity (inferences/s per replica)
    holding: Holding | None = None
    target: Any = None  # sizing.ratepoint.Target on the deployment's server (a pipeline's: its ensemble)
    pipeline: Any = None  # pipelines.ServedPipeline: pre/post-processing around the network

    @property
    def capacity(self) -> float | None:
        return self.holding.rate if self.holding else None

    @property
    def config(self) -> str:
        winner = self.search.outcome.decision.winner
        return winner.candidate.slug


@dataclass
class GroupConfirmation:
    models: tuple[str, ...]
    rates: dict[str, float]
    points: list[MixPoint] = field(default_factory=list)

    def passed(self, name: str) -> int:
        return sum(p.points[name].passes(p.slos[name]) for p in self.points)

    @property
    def held(self) -> bool:
        return all(self.passed(n) == len(self.points) for n in self.models)


@dataclass
class DeploymentPlan:
    deployment: Deployment
    out_dir: Path
    steps: StepRunner
    settings: DeploymentSettings
    resolution: float  # the searches' --capacity-resolution: the ensembles' and shared groups' bisections stop there
    models: dict[str, ModelPlan] = field(default_factory=dict)
    headroom: float = DEFAULT_HEADROOM
    price_per_replica: float | None = None
    device: str = ""
    decision: Decision | None = None
    groups: dict[tuple[str, ...], Holding] = field(default_factory=dict)  # shared groups' held mix capacity
    memory: Any = None  # memory.Footprints: each model's share of a replica's memory
    confirmations: list[GroupConfirmation] = field(default_factory=list)
    manifests: dict[str, Path] = field(default_factory=dict)
    repository: Path | None = None  # every model's winner (and pipeline), one repository for every replica group
    workspace: Path | None = None

    @property
    def confirmed(self) -> bool:
        return bool(self.confirmations) and all(c.held for c in self.confirmations)

    @property
    def code(self) -> int:
        return 0 if self.confirmed or not self.confirmations else 1


def _search(entry: ModelEntry, plan: DeploymentPlan, template: "SearchRequest") -> ModelPlan:
    from ..search.orchestration import search_step
    from ..search.trials import SearchError

    try:
        run = search_step(search_request(entry, template, plan.out_dir, plan.workspace, plan.repository))
    except SearchError as err:
        raise DeploymentPlanError(f"{entry.name}: the search could not run: {err}") from None
    winner = run.outcome.decision.winner
    if winner is None or winner.capacity is None or winner.capacity.result.capacity is None:
        why = run.outcome.decision.message if winner is None else winner.detail
        raise DeploymentPlanError(f"{entry.name}: no config holds p99 <= {entry.p99_ms:g} ms: {why}")
    return ModelPlan(entry, run, float(winner.capacity.result.capacity))


def _target(model: ModelPlan, url: str, metrics_url: str | None, window_ms: int):
    from ..sizing.ratepoint import Target, open_loop_options

    fmt = model.search.outcome.decision.winner.candidate.format
    manifest = next(f.manifest for f in model.search.formats if f.format == fmt)
    options = open_loop_options(model.search.options, window_ms=window_ms)
    return Target(f"{model.entry.name}/{model.config}", model.search.model_name, url, 1, manifest.signature, options,
                  metrics_url=metrics_url)


def _held_alone(model: ModelPlan, out_dir: Path, retests: int, resolution: float) -> Holding:
    """The model's capacity alone, held k of k. A pipeline is searched as the pipeline: its slowest step decides,
    so its search starts from its own closed-loop measurements (never above its network's capacity), not from the
    network's capacity re-tested downward (a Python step in front of an 8,000 inf/s network held 600); a bare
    network starts from what its search found."""
    from ..sizing.capacity import search
    from ..sizing.ratepoint import closed_loop_seed, measure
    from ..sizing.ratestore import RateStore

    store = RateStore(out_dir)
    slo = model.entry.p99_ms
    if model.pipeline is not None:
        seed = min(model.found, closed_loop_seed(model.target, slo, out_dir / "seed"))
        found = search(lambda rate: measure(windowed(model.target, rate), rate, store, out_dir, 1, "ensemble"),
                       seed, slo, resolution=resolution).capacity
        if found is None:
            return Holding(model.found, None, retests)
        model.found = found
    return hold(lambda rate, trial: Judged(measure(windowed(model.target, rate), rate, store, out_dir, trial, "hold"),
                                            slo), model.found, retests)



def _mix(plan: DeploymentPlan, group: tuple[str, ...], fresh: bool = False, tag: str = "mix") -> Mix:
    label = "+".join(group)
    peaks = {n: plan.deployment.model(n).peak_rps for n in group}
    total = sum(peaks.values())
    members = [Member(n, member_target(plan.models[n].target, label), peaks[n] / total,
                      plan.deployment.model(n).p99_ms) for n in group]
    return Mix(members, plan.out_dir / tag / label, fresh=fresh)


def _measure_group(plan: DeploymentPlan, group: tuple[str, ...]) -> GroupCapacity:
    """A shared group's mix capacity: bisected, then held k of k (sizing.capacity.search on mix points)."""
    from ..sizing.capacity import search
    from ..sizing.ratepoint import ClientLimited
    from .colocate import estimate

    misfit = plan.memory.misfit(group) if plan.memory is not None else ""
    if misfit:
        return GroupCapacity(None, misfit)
    mix = _mix(plan, group)
    peaks = {n: plan.deployment.model(n).peak_rps for n in group}
    alone = {n: plan.models[n].capacity or 0.0 for n in group}
    seed = estimate(group, peaks, alone).rate or 1.0
    try:
        found = search(lambda total: mix.measure(total), seed, 1.0, 1, plan.resolution).capacity
    except ClientLimited as err:
        return GroupCapacity(None, f"the client could not send the mix: {err}")
    if found is None:
        return GroupCapacity(None, "no total rate kept every model within its SLO")
    held = hold(lambda total, trial: mix.measure(total, trial, "hold"), found, plan.settings.retests)
    plan.groups[group] = held
    return GroupCapacity(held.rate, "" if held.rate else held.text())


def _confirm(plan: DeploymentPlan) -> list[GroupConfirmation]:
    out = []
    for group in plan.decision.chosen.groups:
        mix = _mix(plan, group.models, fresh=True, tag="confirm")
        confirmation = GroupConfirmation(group.models, dict(group.rates))
        for trial in range(1, plan.settings.trials + 1):
            confirmation.points.append(mix.at_rates(group.rates, trial, "confirm"))
        out.append(confirmation)
    return out


def _price(plan: DeploymentPlan) -> float | None:
    """$/h of one replica: sizing's price rule (a device named in by_device, else the GPU or host price)."""
    from ..repository.config import host_has_gpu
    from ..sizing.plan import Prices

    costs = plan.deployment.costs
    return Prices(dict(costs.by_device), costs.gpu_hour, costs.host_hour).price_for(plan.device, host_has_gpu())


def models_of(plan: DeploymentPlan) -> dict[str, tuple[str, ...]]:
    """Each entry's models on the server: the network, or its pipeline's steps, network and ensemble."""
    return {n: (m.pipeline.models if m.pipeline is not None else (m.search.model_name,)) for n, m in plan.models.items()}


def _on_server(plan: DeploymentPlan, server) -> None:
    """Stages 2-4 on one server holding every model: memory, verification, capacities held, layout, confirmation."""
    from ..repository.config import host_has_gpu
    from . import pipelines
    from .memory import measure_footprints

    steps, settings, deployment = plan.steps, plan.settings, plan.deployment
    budget = deployment.limits.host_memory_gb if not host_has_gpu() else None
    plan.memory = steps.call("each model's memory in a replica (loaded one at a time)",
                             lambda: measure_footprints(server, models_of(plan), budget))
    for name in plan.models:
        if misfit := plan.memory.misfit((name,)):
            raise DeploymentPlanError(f"{name} does not fit one replica alone: {misfit}")
    for model in plan.models.values():
        url = server.grpc_url if model.search.options.protocol == "grpc" else server.http_url
        model.target = _target(model, url, server.metrics_url, settings.window_ms)
        if model.pipeline is not None:
            steps.call(f"{model.entry.name}: the served pipeline against its steps in-process",
                       lambda m=model: pipelines.verify(m.pipeline, server.grpc_url))
            model.target = pipelines.target(model.pipeline, model.target)
        model.holding = steps.call(f"{model.entry.name}: capacity alone, held {settings.retests} of {settings.retests}",
                                   lambda m=model: _held_alone(m, plan.out_dir / "alone" / m.entry.name,
                                                               settings.retests, plan.resolution))
        if model.capacity is None:
            raise DeploymentPlanError(f"{model.entry.name}: {model.holding.text()}")
    peaks = {n: deployment.model(n).peak_rps for n in plan.models}
    alone = {n: m.capacity for n, m in plan.models.items()}
    plan.decision = steps.call("which models share a replica (shared groups measured under their mixed traffic)",
                               lambda: decide(peaks, alone, plan.headroom, plan.price_per_replica,
                                              lambda g: _measure_group(plan, g), deployment.limits.max_replicas))
    if plan.decision.chosen is None:
        raise DeploymentPlanError(plan.decision.reason)
    plan.confirmations = steps.call("confirmation of the chosen fleet under each replica's mixed traffic",
                                    lambda: _confirm(plan))


def plan_deployment(deployment: Deployment, out_dir: str | Path, settings: DeploymentSettings,
                    template: "SearchRequest") -> DeploymentPlan:
    """The whole deployment plan in `out_dir`; `template` is the search every model's is made from
    (search_request: its settings, job and perf options; the model, the budget and the folders are the entry's)."""
    from ..results.runinfo import cpu_info
    from ..server.local import LocalTritonServer, ServerConfig
    from . import pipelines
    from .report import write_manifests, write_report

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    workspace = workspace_of(deployment, template)
    plan = DeploymentPlan(deployment, out_dir, StepRunner(out_dir), settings,
                          template.settings.capacity_resolution, workspace=workspace,
                          repository=Path(template.job.model_repository or workspace / "model_repository"))
    steps = plan.steps
    for entry in deployment.models:
        model = plan.models[entry.name] = steps.call(
            f"{entry.name}: convert, verify and search under p99 <= {entry.p99_ms:g} ms",
            lambda e=entry: _search(e, plan, template))
        if entry.has_pipeline:
            model.pipeline = steps.call(f"{entry.name}: pre/post-processing checked on its raw samples, as an ensemble",
                                        lambda e=entry, m=model: pipelines.write(e, m.search, plan.repository,
                                                                                 workspace / "pipelines" / e.name))
    spreads = [m.search.outcome.decision.winner.capacity.result.headroom for m in plan.models.values()]
    given = deployment.limits.headroom
    plan.headroom = given if given is not None else max([DEFAULT_HEADROOM, *[s for s in spreads if s is not None]])
    plan.device = str(cpu_info().get("model", ""))
    plan.price_per_replica = _price(plan)
    with LocalTritonServer(ServerConfig(plan.repository, model_control_mode="explicit",
                                        log_dir=out_dir / "logs")) as server:
        _on_server(plan, server)
    if settings.k8s:
        plan.manifests = steps.call("Kubernetes manifests per group", lambda: write_manifests(plan))
    steps.call("plan.md and plan.html", lambda: write_report(plan))
    return plan


__all__ = ["DeploymentPlan", "DeploymentPlanError", "DeploymentSettings", "GroupConfirmation", "ModelPlan",
           "plan_deployment"]
