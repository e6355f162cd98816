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
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import check_numbers, setting
from ..errors import UserError
from ..steps import StepRunner
from .colocate import Decision, GroupCapacity, decide
from .file import Deployment, ModelEntry
from ..sizing.holding import Holding, hold
from .mixed import Member, Mix, MixPoint, member_target

DEFAULT_HEADROOM = 0.2


class DeploymentPlanError(UserError, RuntimeError):
    """The deployment cannot be planned: a model with no config under its SLO, no layout within --max-replicas."""


@dataclass(frozen=True)
class DeploymentSettings:
    """How hard a deployment plan measures; each number checked as the command line checks it."""

    max_minutes: float = setting(8.0, flag="--max-minutes", unit="min", low=0, low_open=True, high=600,
                                 help="each model's config search")
    retests: int = setting(3, flag="--retests", low=1, high=20,
                           help="k: a capacity is used only once it held k of k re-tests at the rate itself")
    trials: int = setting(3, flag="--trials", low=1, high=20, help="confirmation rounds of the chosen fleet")
    window_ms: int = setting(2000, flag="--window-ms", unit="ms", low=200, high=60_000,
                             help="perf_analyzer's window in re-tests and confirmations")
    preset: str = setting("small", flag="--preset", help="zoo models' size preset")
    formats: tuple[str, ...] = ("onnx",)
    k8s: bool = True
    fresh: bool = False

    def __post_init__(self) -> None:
        check_numbers(self)


@dataclass
class ModelPlan:
    entry: ModelEntry
    search: Any  # search.trials.SearchRun
    found: float  # the search's open-loop capacity (inferences/s per replica)
    holding: Holding | None = None
    target: Any = None  # sizing.ratepoint.Target on the deployment's server

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
    models: dict[str, ModelPlan] = field(default_factory=dict)
    headroom: float = DEFAULT_HEADROOM
    price_per_replica: float | None = None
    device: str = ""
    decision: Decision | None = None
    groups: dict[tuple[str, ...], Holding] = field(default_factory=dict)  # shared groups' held mix capacity
    confirmations: list[GroupConfirmation] = field(default_factory=list)
    manifests: dict[str, Path] = field(default_factory=dict)
    repository: Path | None = None

    @property
    def confirmed(self) -> bool:
        return bool(self.confirmations) and all(c.held for c in self.confirmations)

    @property
    def code(self) -> int:
        return 0 if self.confirmed or not self.confirmations else 1


def _search(entry: ModelEntry, plan: DeploymentPlan, request_for) -> ModelPlan:
    from ..search.cli import search_step

    run = search_step(request_for(entry))
    if run.outcome is None:
        raise DeploymentPlanError(f"{entry.name}: the search could not run: {run.error}")
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


def _held_alone(model: ModelPlan, out_dir: Path, retests: int) -> Holding:
    from ..sizing.ratepoint import measure
    from ..sizing.ratestore import RateStore

    store = RateStore(out_dir)
    return hold(lambda rate, trial: _Judged(measure(model.target, rate, store, out_dir, trial, "hold"),
                                            model.entry.p99_ms), model.found, retests)


@dataclass
class _Judged:
    """A single model's point judged against its own SLO (what holding.hold asks of a point)."""

    point: Any
    slo_ms: float

    def passes(self) -> bool:
        return self.point.passes(self.slo_ms)

    def verdict(self) -> str:
        return self.point.verdict(self.slo_ms)


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

    mix = _mix(plan, group)
    peaks = {n: plan.deployment.model(n).peak_rps for n in group}
    alone = {n: plan.models[n].capacity or 0.0 for n in group}
    seed = estimate(group, peaks, alone).rate or 1.0
    try:
        found = search(lambda total: mix.measure(total), seed, 1.0, 1).capacity
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
    from ..repository.config import host_has_gpu

    costs = plan.deployment.costs
    for device, price in costs.by_device.items():
        if device.lower() in plan.device.lower():
            return float(price)
    return costs.gpu_hour if host_has_gpu() else costs.host_hour


def plan_deployment(deployment: Deployment, out_dir: str | Path, settings: DeploymentSettings,
                    request_for) -> DeploymentPlan:
    """The whole deployment plan. `request_for(entry) -> search.request.SearchRequest` builds each model's search
    (the API builds it from the entry as it builds a single model's, with this plan's repository and folders)."""
    from ..results.runinfo import cpu_info
    from ..server.local import LocalTritonServer, ServerConfig

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plan = DeploymentPlan(deployment, out_dir, StepRunner(out_dir), settings, repository=out_dir / "model_repository")
    steps = plan.steps
    for entry in deployment.models:
        plan.models[entry.name] = steps.call(f"{entry.name}: convert, verify and search under p99 <= {entry.p99_ms:g} ms",
                                             lambda e=entry: _search(e, plan, request_for))
    spreads = [m.search.outcome.decision.winner.capacity.result.headroom for m in plan.models.values()]
    given = deployment.limits.headroom
    plan.headroom = given if given is not None else max([DEFAULT_HEADROOM, *[s for s in spreads if s is not None]])
    plan.device = str(cpu_info().get("model", ""))
    plan.price_per_replica = _price(plan)
    names = tuple(m.search.model_name for m in plan.models.values())
    with ExitStack() as stack:
        server = stack.enter_context(LocalTritonServer(ServerConfig(
            plan.repository, model_control_mode="explicit", load_models=names, log_dir=out_dir / "logs")))
        for model in plan.models.values():
            model.target = _target(model, server.grpc_url if model.search.options.protocol == "grpc" else server.http_url,
                                   server.metrics_url, settings.window_ms)
            model.holding = steps.call(f"{model.entry.name}: capacity alone, held {settings.retests} of {settings.retests}",
                                       lambda m=model: _held_alone(m, out_dir / "alone" / m.entry.name, settings.retests))
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
    from .report import write_manifests, write_report

    if settings.k8s:
        plan.manifests = steps.call("Kubernetes manifests per group", lambda: write_manifests(plan))
    steps.call("plan.md and plan.html", lambda: write_report(plan))
    return plan


__all__ = ["DeploymentPlan", "DeploymentPlanError", "DeploymentSettings", "GroupConfirmation", "ModelPlan",
           "plan_deployment"]
