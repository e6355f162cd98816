"""A deployment of several models through Model Analyzer, against `plan --deployment`, both picks judged under the
same mixed open-loop traffic in turns (issue 36, item 4).

Model Analyzer's side is what a user can get from it on a deployment:
- each model with pre/post-processing: its **ensemble profiling** (quick search over every composing model, the
  ensemble driven by perf_analyzer with the clients' raw bytes), the composing models kept on CPU where there is no
  GPU (its `cpu_only` does not reach composing models);
- the deployment as a whole: its **multi-model concurrent quick search**, asked first with the ensembles in it (Model
  Analyzer refuses: "profiling of multiple models is not supported for ensemble models", Triton issue #7064; the
  refusal is recorded as it said it), then on what it accepts: the plain models and the pipelines' networks at once,
  each under its own p99 SLO (per-model constraints, no global budget, which would overwrite them);
- its pick per model: the run config it ranks first within every budget (model_analyzer.best_run_config); a model it
  found nothing for keeps the config it was handed (the format's default, as `config` writes it).
Both picks are judged laid out as each side deploys them, on a fleet of our plan's size (the same cost): ours as
its plan's replica groups (a model the plan keeps apart runs on replicas of its own, at the rates its group's
confirmation drove), Model Analyzer's with every model on every replica, as its concurrent search measured them (it
sizes no fleet), each model at its peak x (1 + headroom) / our plan's replica count. Each group on a server of its own,
its models at once (mixed.Mix); then each group's mix capacity (the highest total rate at which every model of it
keeps its SLO), and the replicas and cost those capacities need for the peaks. Round by round, the order of the two
sides alternating (a drift of the host hits both alike). Judging both sides co-located, as this comparison first
did, measured our picks in a layout our plan does not deploy wherever it keeps models apart.
"""
from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path
from typing import Any

from deployment_toolkit.deployment.mixed import Member, Mix, member_target
from deployment_toolkit.deployment.packing import ModelLoad, time_shared
from deployment_toolkit.deployment.plan import DeploymentPlan
from .deployment_types import DeploymentVersus, Judged, MARun, Side, VersusSettings, group_replicas, replicas_for

log = logging.getLogger(__name__)
OURS, THEIRS = "plan --deployment", "Model Analyzer"


def _network(plan: DeploymentPlan, name: str) -> str:
    return plan.models[name].search.model_name


def _handed(plan: DeploymentPlan, repository: Path) -> None:
    """Model Analyzer's starting point: our plan's repository with every network's config replaced by its format's
    default (what `config` writes; what a user hands Model Analyzer); the pipeline steps stay as written."""
    import warnings

    from deployment_toolkit.repository.layout import write_model
    from deployment_toolkit.search.space import default_candidate

    shutil.rmtree(repository, ignore_errors=True)
    shutil.copytree(plan.repository, repository, symlinks=True)
    for model in plan.models.values():
        winner = model.search.outcome.decision.winner.candidate
        info = next(f for f in model.search.formats if f.format == winner.format)
        shutil.rmtree(repository / model.search.model_name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            write_model(repository, info.artifact_dir,
                        default_candidate(info.format, info.manifest.max_batch_size).config_options(
                            model.search.model_name))


def _run(asked: str, request: Any, budgets: dict[str, float]) -> MARun:
    from .model_analyzer import best_run_config, read_run_configs, run_model_analyzer

    log.info(f"== Model Analyzer: {asked} ({request.max_minutes:g} min limit)")
    result = run_model_analyzer(request)
    result.run_configs = read_run_configs(request.work_dir / "checkpoints") if result.ran else []
    run = MARun(asked, result, budgets, best_run_config(result.run_configs, budgets))
    log.info(f"   {run.outcome}")
    return run


def model_analyzer_side(plan: DeploymentPlan, settings: VersusSettings, work: Path) -> tuple[list[MARun], Path]:
    """Every Model Analyzer run the deployment allows, and the repository of its picks (our converted artifacts,
    its configs)."""
    from deployment_toolkit.repository.config import host_has_gpu, read_config, to_text
    from .model_analyzer import MAModel, MARequest, apply_settings, find_model_analyzer

    handed = work / "ma_repository"
    _handed(plan, handed)
    binary = find_model_analyzer(settings.ma_binary)

    def request(label: str, models: tuple, concurrent: bool = False) -> MARequest:
        return MARequest(binary=binary, model_name=models[0].name, repository=handed, work_dir=work / label,
                         budget_ms=models[0].budget_ms, max_minutes=settings.ma_minutes, cpu_only=not host_has_gpu(),
                         models=models, concurrent=concurrent, output_repository=work / label / "output_repository")

    runs: list[MARun] = []
    pipelines = {n: m for n, m in plan.models.items() if m.pipeline is not None}
    ensembles = {}
    for name, model in pipelines.items():
        p = model.pipeline
        ensembles[name] = MAModel(p.ensemble, model.entry.p99_ms, input_data=Path(p.input_json).resolve(),
                                  composing=tuple(m for m in p.models if m != p.ensemble))
        runs.append(_run(f"ensemble profiling of {p.ensemble}", request(f"ensemble-{name}", (ensembles[name],)),
                         {p.ensemble: model.entry.p99_ms}))
    plain = tuple(MAModel(_network(plan, n), m.entry.p99_ms) for n, m in plan.models.items())
    if ensembles and len(plan.models) > 1:  # what a user asks first: the deployment as it ships
        asked = tuple(ensembles.get(n) or MAModel(_network(plan, n), m.entry.p99_ms) for n, m in plan.models.items())
        runs.append(_run("concurrent quick search of " + " + ".join(a.name for a in asked),
                         request("concurrent-as-shipped", asked, concurrent=True), {a.name: a.budget_ms for a in asked}))
    if len(plain) > 1 or not ensembles:
        runs.append(_run(("concurrent quick search of " if len(plain) > 1 else "quick search of ")
                         + " + ".join(a.name for a in plain),
                         request("concurrent", plain, concurrent=len(plain) > 1), {a.name: a.budget_ms for a in plain}))
    picked: dict[str, Any] = {}
    for run in runs:  # ensemble runs first: they set the networks inside pipelines; the plain search the rest
        for model, chosen in (run.pick.configs.items() if run.pick is not None else ()):
            network_of_pipeline = any(_network(plan, n) == model for n in pipelines)
            if model not in picked and not (network_of_pipeline and "ensemble" not in run.asked):
                picked[model] = chosen
    served = work / "ma_pick_repository"
    shutil.rmtree(served, ignore_errors=True)
    shutil.copytree(handed, served, symlinks=True)
    for model, chosen in picked.items():
        path = served / model / "config.pbtxt"
        if path.is_file():
            path.write_text(to_text(apply_settings(read_config(path), chosen)))
    return runs, served


THREAD_KEYS = ("intra_op_threads", "intra_op_thread_count", "INTRA_OP_THREAD_COUNT")  # python, onnxruntime, pytorch


def describe(path: Path) -> str:
    """A served model's config in a few words: instances, kind, intra-op threads, max batch, dynamic batching (two
    configs that differ only in their threads once read as the same, and the report called the judge an A/A run)."""
    from deployment_toolkit.repository.config import read_config

    cfg = read_config(path)
    instances = sum(g.count or 1 for g in cfg.instance_group) or 1
    kinds = {g.kind for g in cfg.instance_group}
    kind = "GPU" if 1 in kinds else "CPU"  # KIND_GPU = 1
    threads = next((cfg.parameters[k].string_value for k in THREAD_KEYS if k in cfg.parameters), "")
    plural = "" if threads == "1" else "s"
    text = (f"{instances} x {kind}, " + (f"{threads} intra-op thread{plural}, " if threads else "")
            + f"max batch {cfg.max_batch_size}")
    if cfg.HasField("dynamic_batching"):
        db = cfg.dynamic_batching
        text += ", dynamic batching" + (f" (delay {db.max_queue_delay_microseconds} us)"
                                        if db.max_queue_delay_microseconds else "")
    return text


def _configs(plan: DeploymentPlan, repository: Path) -> dict[str, str]:
    out = {}
    for name, models in plan.served().items():
        for model in models:
            if (repository / model / "config.pbtxt").is_file() and model != getattr(
                    plan.models[name].pipeline, "ensemble", None):
                out[model] = describe(repository / model / "config.pbtxt")
    return out


def _mix(plan: DeploymentPlan, models: tuple[str, ...], server: Any, out_dir: Path) -> Mix:
    """The group's `models` at once on `server`, traffic split as their peaks, each judged against its own SLO."""
    peaks = {n: plan.models[n].entry.peak_rps for n in models}
    total = sum(peaks.values())
    members = []
    for name in models:
        model = plan.models[name]
        url = server.grpc_url if model.target.options.protocol == "grpc" else server.http_url
        target = dataclasses.replace(model.target, url=url, metrics_url=server.metrics_url)
        members.append(Member(name, member_target(target, "judge"), peaks[name] / total, model.entry.p99_ms))
    return Mix(members, out_dir)


def _slug(side: Side, group: Judged) -> str:
    return ("ours" if side.name == OURS else "model_analyzer") + "-" + "-".join(group.models)


def _judge_group(versus: DeploymentVersus, side: Side, group: Judged, trial: int) -> None:
    """One group's round: its own server with its models, at its rates, then its mix capacity."""
    from deployment_toolkit.server.local import LocalTritonServer, ServerConfig
    from deployment_toolkit.perf.openloop.capacity import search
    from deployment_toolkit.perf.openloop.ratepoint import ClientLimited

    plan, slug = versus.plan, _slug(side, group)
    served = plan.served()
    names = tuple(m for n in group.models for m in served[n])
    with LocalTritonServer(ServerConfig(side.repository, model_control_mode="explicit", load_models=names,
                                        log_dir=versus.out_dir / "logs" / f"{slug}-{trial}")) as server:
        mix = _mix(plan, group.models, server, versus.out_dir / "judge" / slug)
        point = mix.at_rates(group.rates, trial, "fleet")
        group.at_rates.append(point)
        log.info(f"  round {trial}, {side.name}, {group.name}: at the fleet's rates {point.verdict()}")
        try:
            found = search(lambda total: mix.measure(total, trial, "capacity"), group.capacity or group.seed, 1.0,
                           1).capacity
        except ClientLimited as err:
            group.error = f"the client could not send the mix: {err}"
            return
        group.capacities.append(found or 0.0)
        log.info(f"  round {trial}, {side.name}, {group.name}: mix capacity "
                 + (f"{found:,.1f} inf/s per replica" if found else "none: no rate kept every SLO"))


def _seed(plan: DeploymentPlan, models: tuple[str, ...]) -> float:
    """Where a group's capacity search starts: what the plan measured of that group, else time sharing of its
    members' capacities."""
    measured = plan.measured.get(models)
    if measured is not None and measured.held:
        return measured.held
    peaks = {n: plan.models[n].entry.peak_rps for n in models}
    return time_shared([ModelLoad(n, plan.models[n].capacity, (p,)) for n, p in peaks.items()], peaks)


def layouts(plan: DeploymentPlan) -> tuple[list[Judged], list[Judged]]:
    """(our groups, Model Analyzer's) on a fleet of our plan's size: ours as the plan deploys them, at the rates its
    confirmations drove; Model Analyzer's every model on every replica, each at its peak x (1 + headroom) / the
    fleet's replicas."""
    ours = [Judged(g.models, g.replicas, dict(g.rates), _seed(plan, g.models)) for g in plan.groups]
    everything = tuple(plan.models)
    rates = {n: m.entry.peak_rps * (1 + plan.headroom) / plan.replicas for n, m in plan.models.items()}
    return ours, [Judged(everything, plan.replicas, rates, _seed(plan, everything))]


def compare_deployment(plan: DeploymentPlan, settings: VersusSettings, out_dir: str | Path,
                       work: str | Path) -> DeploymentVersus:
    """Model Analyzer's runs on the deployment, then both picks judged in turns; vs_model_analyzer.md and run.json
    in `out_dir`. `work` holds Model Analyzer's repositories and checkpoints (model copies: keep them out of results)."""
    from deployment_toolkit.steps import StepRunner
    from .deployment_report import write_versus

    out_dir, work = Path(out_dir), Path(work)
    out_dir.mkdir(parents=True, exist_ok=True)
    versus = DeploymentVersus(plan, settings, out_dir, steps=StepRunner(out_dir))
    versus.ma_runs, ma_repository = versus.steps.call("Model Analyzer on the deployment",
                                                    lambda: model_analyzer_side(plan, settings, work))
    versus.replicas = plan.replicas
    ours, theirs = layouts(plan)
    versus.sides = [Side(OURS, plan.repository, _configs(plan, plan.repository), ours),
                    Side(THEIRS, ma_repository, _configs(plan, ma_repository), theirs)]

    def judge() -> None:
        for trial in range(1, settings.rounds + 1):
            order = versus.sides if trial % 2 else versus.sides[::-1]
            for side in order:
                for group in side.groups:
                    if not group.error:
                        _judge_group(versus, side, group, trial)

    versus.steps.call(f"both picks judged under the same mixed traffic, {settings.rounds} rounds in turns", judge)
    for side in versus.sides:
        side.replicas = replicas_for(versus, side)
    versus.steps.call("vs_model_analyzer.md and run.json", lambda: write_versus(versus))
    return versus


__all__ = ["DeploymentVersus", "Judged", "MARun", "OURS", "Side", "THEIRS", "VersusSettings", "compare_deployment",
           "group_replicas", "layouts", "model_analyzer_side", "replicas_for"]
