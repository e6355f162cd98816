"""The one planner: a deployment of one model or a hundred to one fleet plan, packed by a solver and confirmed under
each replica group's mixed open-loop traffic. `plan` for one model is a deployment of one entry.

1. each model, searched once: converted, verified and its config searched under its own SLO, ranked by open-loop
   capacity; every winner written to one model repository (search.orchestration via `search_step`). Each search
   writes only its own folder (`<plan>/models/<name>/search`), so `--search-only --index I` runs one of them (a
   Kubernetes Indexed Job: fanout.py) and the gathering run replays them;
2. pipelines written around their winners (pre/post-processing as an ensemble or fused);
3. one embedded server holding every winner: each model's resident memory, pipelines verified against their steps
   in-process, each capacity alone held k of k at the rate itself (perf.openloop.holding);
4. which models share a replica and how many replicas each group needs: a MILP (packing.py, HiGHS) on the held
   capacities, memory and each model's traffic over time; only the shared groups of the chosen packing are
   measured under their mixed traffic and held; a group that falls short lowers its members' sharing factors and
   the models are packed again with what it showed, never by measuring alternatives;
5. each group confirmed at its worst time slice's rates (derated and confirmed again where it fails) and its burst
   check (confirm.py); a shared group that still fails is packed again with the models that missed apart, and its
   parts are confirmed (groups.split_missed);
6. the Kubernetes manifests per group and plan.md / plan.html (report.py).

Each stage's typed result goes to the next in memory (DeploymentPlan); measured points are stored in the run
folder, so a rerun of the same command replays what was measured and measures only what is missing.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ..config import StepStatus
from ..perf import neighbours
from ..steps import StepRunner
from .bursts import bursts_of
from .confirm import GroupConfirmation
from .errors import DeploymentPlanError
from .fanout import search_dir, write_owner
from .file import Deployment, ModelEntry
from .groups import MeasuredGroup, Split, refuse_over_limit, traffic_of
from .onserver import headroom, on_server, price
from .packing import PackedGroup, Packing
from .settings import DeploymentSettings
from .sharing import SharingTable
from .traffic import Traffic
from ..perf.openloop.holding import Holding

if TYPE_CHECKING:
    from ..search.request import SearchRequest

log = logging.getLogger(__name__)
T = TypeVar("T")


def workspace_of(deployment: Deployment, template: "SearchRequest") -> Path:
    """Where the artifacts and the shared model repository go (--workspace; default workspace/plan-<name>): big
    files, kept out of the run folder so a committed plan stays small."""
    return Path(template.job.workspace or Path("workspace") / f"plan-{deployment.name}")


def search_request(entry: ModelEntry, template: "SearchRequest", out_dir: Path, workspace: Path,
                   repository: Path) -> "SearchRequest":
    """One model's search: the template's settings, job and perf options (the command's flags or the API's
    dataclasses), with the model, its SLO as the budget, its samples, and this plan's repository and folders. A
    template that carries its own source (a plan of one model: `plan --model`, dt.plan) keeps it and its data."""
    from ..config import Objective
    from ..data.samples import DataSpec
    from ..sources import parse_reference

    source, data = template.source, template.data
    if source is None:
        source = parse_reference(entry.model, preset=template.job.preset,
                                 checkpoint=str(entry.checkpoint) if entry.checkpoint else None,
                                 kwargs=dict(entry.model_args))
        data = DataSpec(str(entry.data) if entry.data else (None if entry.dataloader else "synthetic"),
                        str(entry.dataloader) if entry.dataloader else None)
    from .pipelines import search_inputs

    # a network behind a preprocess is fed what the preprocess gives on the raw samples (no get_signature needed)
    source, data = search_inputs(entry, source, data, out_dir / "models" / entry.name / "network_inputs")
    job = dataclasses.replace(template.job, result_dir=search_dir(out_dir, entry.name),
                              model_repository=repository, model_name=entry.name, workspace=workspace / entry.name)
    settings = dataclasses.replace(template.settings, budget_ms=entry.p99_ms, objective=Objective.CAPACITY)
    return dataclasses.replace(template, source=source, settings=settings, job=job, data=data)


@dataclass
class ModelPlan:
    entry: ModelEntry
    search: Any  # search.trials.SearchRun
    found: float  # the search's open-loop capacity (inferences/s per replica)
    holding: Holding | None = None
    target: Any = None  # perf.openloop.ratepoint.Target on the deployment's server (a pipeline's: its ensemble)
    pipeline: Any = None  # pipelines.ServedPipeline: pre/post-processing around the network
    data: str = ""  # where its measuring inputs came from (DataSpec.describe)

    @property
    def capacity(self) -> float | None:
        return self.holding.rate if self.holding else None

    @property
    def config(self) -> str:
        return self.search.outcome.decision.winner.candidate.slug


@dataclass
class DeploymentPlan:
    deployment: Deployment
    out_dir: Path
    steps: StepRunner
    settings: DeploymentSettings
    resolution: float  # the searches' --capacity-resolution: the ensembles' and shared groups' bisections stop there
    models: dict[str, ModelPlan] = field(default_factory=dict)
    headroom: float = 0.2  # the widest of the margins (or the one given)
    headroom_note: str = ""
    margins: dict[str, tuple[float, str]] = field(default_factory=dict)  # each model's headroom and where from
    price_per_replica: float | None = None
    device: str = ""
    traffic: Traffic | None = None
    packings: list[Packing] = field(default_factory=list)  # every packing, the first on capacities alone
    measured: dict[tuple[str, ...], MeasuredGroup] = field(default_factory=dict)
    apart: list[tuple[str, ...]] = field(default_factory=list)  # groups that held no rate together
    most_shared: int | None = None  # after a group held no rate: the most models a later packing puts on a replica
    unmeasured: list[tuple[str, ...]] = field(default_factory=list)  # groups skipped: as large as one that held none
    splits: list[Split] = field(default_factory=list)  # groups whose confirmation failed, packed again (groups.Split)
    sharing: SharingTable = field(default_factory=SharingTable)  # each model's sharing factors, by group size
    memory: Any = None  # memory.Footprints: each model's share of a replica's memory
    confirmations: list[GroupConfirmation] = field(default_factory=list)
    manifests: dict[str, Path] = field(default_factory=dict)
    repository: Path | None = None  # every model's winner (and pipeline), one repository for every replica group
    workspace: Path | None = None
    only: bool = False  # one index of a fan-out: its one search's failure is the pod's (exit 2)
    unplanned: dict[str, str] = field(default_factory=dict)  # models left out, each with its step's reason
    bursts: dict[str, Any] = field(default_factory=dict)  # models whose logs show bursts (bursts.Burst)
    windows: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # a step's windows: measured, disturbed
    # by other processes, measured again (perf.neighbours)

    def step(self, name: str, fn: Callable[[], T], model: str | None = None) -> T | None:
        """A stage through the plan's steps, with the measuring windows it took (perf.neighbours.LEDGER). `model`:
        the stage is that model's alone; in a deployment of several, its failure leaves the model unplanned (its
        step says failed, with the reason) and the plan goes on without it; alone, it is the plan's failure."""
        before = neighbours.LEDGER.totals()
        alone = model is None or len(self.deployment.models) == 1 or self.only
        try:
            value = self.steps.call(name, fn, stop=alone)
        finally:
            counted = tuple(a - b for a, b in zip(neighbours.LEDGER.totals(), before))
            if counted[0]:
                self.windows[name] = counted  # type: ignore[assignment]
        if value is None and not alone:
            self.drop(model, self.steps.results[-1].reason)
        return value

    def margin(self, name: str) -> float:
        """The spare capacity `name` is planned with on top of its rates: its own (onserver.headroom)."""
        return self.margins[name][0] if name in self.margins else self.headroom

    def drop(self, name: str, reason: str) -> None:
        """Leave `name` out of the plan with the reason (its search, its verification or its hold failed)."""
        self.unplanned[name] = reason
        self.models.pop(name, None)
        log.warning(f"warning: {name} is left out of the plan: {reason}")

    def check_some_planned(self) -> None:
        """Every model unplanned is no plan: one line with each model's reason (exit 2)."""
        if not self.models:
            raise DeploymentPlanError("no model could be planned: " + "; ".join(
                f"{n}: {why}" for n, why in self.unplanned.items()))

    @property
    def disturbed(self) -> tuple[int, int, int]:
        """Every step's windows together: measured, disturbed, measured again."""
        return tuple(sum(c[i] for c in self.windows.values()) for i in range(3))  # type: ignore[return-value]

    @property
    def packing(self) -> Packing | None:
        return self.packings[-1] if self.packings else None

    @property
    def groups(self) -> tuple[PackedGroup, ...]:
        """The final groups: the packing's, a split group replaced by its parts, with the replicas and rates their
        confirmation settled on."""
        if self.packing is None:
            return ()
        parts = {s.models: s.parts for s in self.splits}

        def final(g: PackedGroup) -> list[PackedGroup]:
            return [f for part in parts[g.models] for f in final(part)] if g.models in parts else [g]

        confirmed = {c.models: c for c in self.confirmations}
        return tuple(dataclasses.replace(g, replicas=confirmed[g.models].replicas, rates=confirmed[g.models].rates)
                     if g.models in confirmed else g for group in self.packing.groups for g in final(group))

    def split_of(self, models: tuple[str, ...]) -> Split | None:
        """How the group of `models` was packed again after its confirmation failed (None: it was not)."""
        return next((s for s in self.splits if s.models == models), None)

    @property
    def replicas(self) -> int:
        return sum(g.replicas for g in self.groups)

    @property
    def cost_per_hour(self) -> float | None:
        return None if self.price_per_replica is None else self.replicas * self.price_per_replica

    @property
    def confirmed(self) -> bool | None:
        """True: every group held (derated first where it had to be); False: a group did not; None: not confirmed
        (--no-confirm)."""
        if not self.confirmations:
            return None
        final = {g.models for g in self.groups}  # a split group's own failed confirmation is its parts' now
        return all(c.passed for c in self.confirmations if c.models in final)

    @property
    def code(self) -> int:
        """0: every model planned and confirmed; 1: a group not confirmed, or a model left out (unplanned)."""
        return 1 if self.confirmed is False or self.unplanned else 0

    @property
    def search(self) -> Any:
        """The search of a plan of one model (dt.plan)."""
        return next(iter(self.models.values())).search if len(self.models) == 1 else None

    def served(self) -> dict[str, tuple[str, ...]]:
        """Each entry's models on the server: the network, or its pipeline's steps, network and ensemble."""
        return {n: (m.pipeline.models if m.pipeline is not None else (m.search.model_name,))
                for n, m in self.models.items()}

    def stage(self, name: str) -> StepStatus | None:
        """How a stage ended (None: it did not run)."""
        status = self.steps.status(name)
        return None if status is None else StepStatus(status)


def _search(entry: ModelEntry, plan: DeploymentPlan, template: "SearchRequest") -> ModelPlan:
    from ..search.orchestration import search_step
    from ..search.trials import SearchError

    request = search_request(entry, template, plan.out_dir, plan.workspace, plan.repository)
    try:
        run = search_step(request)
    except SearchError as err:
        raise DeploymentPlanError(f"{entry.name}: the search could not run: {err}") from None
    write_owner(plan.out_dir, plan.deployment.name, entry)  # whose search the folder holds (the gathering checks)
    winner = run.outcome.decision.winner
    if winner is None or winner.capacity is None or winner.capacity.result.capacity is None:
        why = run.outcome.decision.message if winner is None else winner.detail
        raise DeploymentPlanError(f"{entry.name}: no config holds p99 <= {entry.p99_ms:g} ms: {why}")
    return ModelPlan(entry, run, float(winner.capacity.result.capacity), data=request.data.describe())


def estimate_minutes(deployment: Deployment, template: "SearchRequest", settings: DeploymentSettings) -> float:
    """What the plan will cost in time at most, said before it starts: each model's search budget, its hold, the
    shared groups a packing may measure (at most one per two models) and the confirmation of every group."""
    checks = settings.checks
    n = len(deployment.models)
    window_min = checks.window_ms / 60_000
    per_hold = (checks.retests + 2) * window_min * 3  # a few windows per point, a step down or two
    per_group = (8 + checks.retests) * window_min * 3  # a bisection of about eight rates, then its hold
    confirm = checks.rounds * checks.trials * window_min * 3 + (checks.burst_seconds * 2 / 60)
    searches = n * (template.settings.max_minutes or 0.0)
    return searches + n * per_hold + (n // 2) * per_group + n * confirm


def plan_deployment(deployment: Deployment, out_dir: str | Path, settings: DeploymentSettings,
                    template: "SearchRequest", only: int | None = None, gather: bool = False) -> DeploymentPlan:
    """The whole plan in `out_dir`; `template` is the search every model's is made from (search_request: its
    settings, job and perf options; the model, the budget and the folders are the entry's). `only`: run only that
    entry's search (an index of a fan-out job: fanout.py) and return; its steps are recorded in its own folder, as
    the indexes share `out_dir`. `gather`: every search must be in its folder already (said in one line if not)."""
    from ..repository.config import host_has_gpu
    from ..results.runinfo import serving_device
    from ..server.local import LocalTritonServer, ServerConfig
    from . import pipelines
    from .fanout import searches_done
    from .report import write_manifests, write_report

    out_dir = Path(out_dir)
    entries = deployment.models
    if only is not None and not 0 <= only < len(entries):
        raise DeploymentPlanError(f"--index {only}: the deployment has {len(entries)} models (0..{len(entries) - 1})")
    if gather:
        searches_done(out_dir, [e.name for e in entries], deployment).check()  # finished, and this deployment's
    out_dir.mkdir(parents=True, exist_ok=True)
    workspace = workspace_of(deployment, template)
    steps_dir = out_dir if only is None else search_dir(out_dir, entries[only].name).parent
    plan = DeploymentPlan(deployment, out_dir, StepRunner(steps_dir, log=log.info), settings,
                          template.settings.capacity_resolution, workspace=workspace,
                          repository=Path(template.job.model_repository or workspace / "model_repository"),
                          only=only is not None)
    steps = plan.steps
    if only is not None:
        entries = (entries[only],)
    else:
        plan.traffic = traffic_of(deployment)
        plan.bursts = bursts_of(deployment)
        if plan.bursts:
            log.info("bursts beyond Poisson in the traffic of " + ", ".join(b.text() for b in plan.bursts.values())
                     + ": their groups are confirmed with these arrivals too")
        log.info(f"plan of {len(entries)} model(s): at most about {estimate_minutes(deployment, template, settings):,.0f}"
                 " min (each model's search budget, its hold, the shared groups measured, each group's confirmation)")
    checked = plan.step("pipelines checked in process before any search", lambda: pipelines.check(
        deployment, template, only)) if not gather and any(e.has_pipeline for e in entries) else {}
    _searches(plan, entries, template, checked or {})
    if only is not None:
        return plan
    plan.check_some_planned()
    headroom(plan)
    plan.device = serving_device(host_has_gpu())  # prices are keyed on it: the GPU's name on a GPU host
    plan.price_per_replica = price(plan)
    limits = plan.deployment.limits
    if limits.max_replicas is not None:  # before a server starts: the bound at the capacities found, over the limit
        plan.step(f"the fleet's lower bound within {limits.key('max_replicas')} {limits.max_replicas}",
                  lambda: refuse_over_limit(plan))
    with LocalTritonServer(ServerConfig(plan.repository, model_control_mode="explicit",
                                        log_dir=out_dir / "logs",
                                        start_timeout_s=template.job.server.start_timeout_s)) as server:
        on_server(plan, server)
    if settings.deploy.k8s:
        plan.manifests = plan.step("Kubernetes manifests per replica group", lambda: write_manifests(plan))
    else:
        steps.skip("Kubernetes manifests per replica group", "--no-k8s")
    plan.step("plan.md and plan.html", lambda: write_report(plan))
    return plan


def _searches(plan: DeploymentPlan, entries: tuple[ModelEntry, ...], template: "SearchRequest",
              checked: dict[str, Any]) -> None:
    """Stage 1-2: each model searched, its pipeline written around its winner; one that fails is unplanned (in a
    deployment of several) and the others go on."""
    from . import pipelines

    for entry in entries:
        model = plan.step(f"{entry.name}: convert, verify and search under p99 <= {entry.p99_ms:g} ms",
                          lambda e=entry: _search(e, plan, template), model=entry.name)
        if model is None:
            continue
        plan.models[entry.name] = model
        if entry.has_pipeline and not plan.only:
            model.pipeline = plan.step(f"{entry.name}: pre/post-processing checked on its raw samples, as an "
                                       "ensemble", lambda e=entry, m=model: pipelines.write(
                                           e, m.search, plan.repository, plan.workspace / "pipelines" / e.name,
                                           checked.get(e.name)), model=entry.name)


PlanError = DeploymentPlanError  # the API's names since `plan` of one model had its own planner
PlanResult = DeploymentPlan

__all__ = ["DeploymentPlan", "DeploymentPlanError", "DeploymentSettings", "GroupConfirmation", "MeasuredGroup",
           "ModelPlan", "PlanError", "PlanResult", "estimate_minutes", "plan_deployment", "search_request"]
