"""plan.md / plan.html of a deployment (per model and for the fleet: replicas, which models share, cost, each SLO
held or not) and the Kubernetes manifests of each replica group (one Deployment per group, its server loading only
the group's models from the shared repository)."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..report.sections import plan_page
from ..results.run_folder import RunFolder
from ..results.runinfo import hardware
from ..sizing.k8s import FleetSpec, dns_name, fleet_manifests, validate_all, write_manifests as write_k8s
from ..spec import atomic_write_text
from ..tables import markdown_table


def _ms(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:,.1f}"


def _memory(plan, name: str) -> str:
    prints = plan.memory
    return "-" if prints is None or name not in prints.models else f"{prints.models[name] / 1e9:.2f}"


def plan_markdown(plan) -> str:
    d, chosen = plan.deployment, plan.decision.chosen
    md = [f"# Fleet plan: deployment {d.name} ({len(d.models)} models)", ""]
    cost = f", **${chosen.cost_per_hour:,.2f}/h**" if chosen.cost_per_hour is not None else ""
    verdict = "**confirmed**: every model held its SLO in every round" if plan.confirmed else \
        "**not confirmed**: a model missed its SLO in a round (below)"
    md += ["## The fleet", "", f"**{chosen.replicas} replica(s)**{cost} on {plan.device or 'this host'}; "
           f"{verdict}.", ""]
    rows = []
    for g in chosen.groups:
        rows.append([" + ".join(g.models), "shared" if g.shared else "dedicated", g.replicas,
                     f"{g.capacity.rate:,.1f}", ", ".join(f"{m} {r:,.1f}" for m, r in g.rates.items())])
    md += [markdown_table(["models on a replica", "", "replicas", "capacity per replica (inf/s)",
                           "planned per replica (inf/s, peak x (1 + headroom))"], rows, "llrrl"), "",
           f"Headroom {plan.headroom:.0%}" + (" (given)" if d.limits.headroom is not None else
                                               " (from the spread of the models' capacity searches)") + ".", ""]
    md += ["## Per model", ""]
    rows = []
    confirmations = {n: c for c in plan.confirmations for n in c.models}
    for name, m in plan.models.items():
        c = confirmations.get(name)
        p99s = [p.points[name].p99 for p in c.points] if c else []
        rows.append([name + (f" (ensemble `{m.pipeline.ensemble}`)" if m.pipeline is not None else ""), f"`{m.config}`", f"{m.entry.peak_rps:,.6g}", f"{m.entry.p99_ms:g}",
                     f"{m.found:,.1f}", m.holding.text() if m.holding else "-",
                     " / ".join(_ms(p) for p in p99s) or "-",
                     f"{c.passed(name)} of {len(c.points)}" if c else "-", _memory(plan, name)])
    md += [markdown_table(["model", "config", "peak (inf/s)", "SLO p99 (ms)", "capacity found alone (inf/s)",
                           "re-tested at the rate itself", "confirmation p99 per round (ms)", "SLO held",
                           "memory (GB)"], rows, "llrrrlllr"), "",
           "The capacity a layout uses is the re-tested one: a rate passes k of k re-tests (independent arrivals, "
           f"{plan.settings.window_ms} ms windows) before it is used, else it steps down 10 % and is re-tested.", ""]
    if plan.memory is not None:
        budget = (f"; a replica has {plan.memory.budget_gb:g} GB (limits.host_memory_gb)" if plan.memory.budget_gb
                  else "; no memory limit given (limits.host_memory_gb), so no grouping was refused for memory")
        md += [f"Memory: each model's resident memory as it loaded, beside the server's own "
               f"{plan.memory.server / 1e9:.2f} GB{budget}.", ""]
    if any(m.pipeline is not None for m in plan.models.values()):
        md += ["A model with pre/post-processing is measured as its clients call it: its ensemble, fed the raw "
               "samples, so its capacity counts the steps around the network (its search found the network's alone). "
               + " ".join(f"{n}: served against in-process, {m.pipeline.verification.summary()}."
                          for n, m in plan.models.items() if m.pipeline is not None and m.pipeline.verification), ""]
    md += ["## Layouts compared", "",
           "Every grouping of the models, priced; a shared group's capacity is measured under its mixed traffic "
           "(every model at once, split as the peaks) only where it could win, else estimated by time sharing.", ""]
    rows = [[l.describe(), l.replicas if l.replicas is not None else "cannot",
             f"${l.cost_per_hour:,.2f}/h" if l.cost_per_hour is not None else "-",
             "estimated" if l.estimated else "measured",
             "; ".join(g.capacity.reason for g in l.groups if g.capacity.reason and g.capacity.measured)]
            for l in plan.decision.compared]
    md += [markdown_table(["layout", "replicas", "cost", "capacities", "note"], rows, "lrrll"), ""]
    if plan.groups:
        md += ["Shared groups measured: " + "; ".join(f"{' + '.join(g)}: {h.text()}" for g, h in plan.groups.items())
               + ".", ""]
    md += ["## Confirmation under mixed open-loop traffic", "",
           "Each replica group driven at its planned per-replica rates, all its models at once (one seeded Poisson "
           "schedule and one perf_analyzer per model, network transfer), p99 from the intended send time:", ""]
    rows = []
    for c in plan.confirmations:
        for i, p in enumerate(c.points, 1):
            for name in c.models:
                q = p.points[name]
                rows.append([" + ".join(c.models), i, name, f"{c.rates[name]:,.1f}", _ms(q.answered), _ms(q.p99),
                             f"{p.slos[name]:g}", q.verdict(p.slos[name])])
    md += [markdown_table(["group", "round", "model", "offered (inf/s)", "answered (inf/s)", "p99 (ms)", "SLO (ms)",
                           "verdict"], rows, "lrlrrrrl"), ""]
    if plan.manifests:
        md += ["## Kubernetes", ""] + [f"- `{Path(p).relative_to(plan.out_dir)}`" for p in plan.manifests.values()] + [""]
    md += ["## Stages", "", plan.steps.table(), ""]
    return "\n".join(md)


@dataclass
class _GroupRun:
    """What sizing.k8s reads of a measured run, for one replica group."""

    path: Path
    label: str
    meta: dict[str, Any]
    gpu: bool
    device: str
    gpus_per_replica: int = 1
    model: str = ""

    @property
    def name(self) -> str:
        return self.label


@dataclass
class _GroupPlan:
    """What sizing.k8s reads of a plan, for one replica group."""

    run: _GroupRun
    demand: Any
    replicas: int
    replica_capacity: float
    basis: str
    sustainable: Any  # what the autoscaler's per-pod target divides by: the point's client batch
    reachable: bool = True


@dataclass(frozen=True)
class _Batch:
    batch: int = 1


@dataclass(frozen=True)
class _Sustainable:
    point: _Batch = _Batch()


@dataclass(frozen=True)
class _Demand:
    slo_ms: float
    headroom: float


def _served_models(plan, name: str) -> tuple[str, ...]:
    """What a replica loads for a model: its network, or its pipeline's steps, network and ensemble."""
    model = plan.models[name]
    return model.pipeline.models if model.pipeline is not None else (model.search.model_name,)


def write_manifests(plan) -> dict[str, Path]:
    """One Deployment (+ Service, autoscaler) per group, each server loading its group's models only."""
    from ..repository.config import host_has_gpu

    files: dict[str, Path] = {}
    meta = {"hardware": hardware()}
    for g in plan.decision.chosen.groups:
        label = "-".join(g.models)
        run = _GroupRun(plan.out_dir, label, meta, host_has_gpu(), plan.device, model=label)
        group_plan = _GroupPlan(run, _Demand(min(plan.deployment.model(m).p99_ms for m in g.models), plan.headroom),
                                g.replicas, g.capacity.rate, "mix capacity held k of k" if g.shared else
                                "capacity held k of k", _Sustainable())
        spec = FleetSpec(name=dns_name(f"triton-{plan.deployment.name}-{label}"),
                         extra_args=["--model-control-mode=explicit", *[f"--load-model={n}" for m in g.models
                                                                         for n in _served_models(plan, m)]])
        documents = {k: v for k, v in fleet_manifests(group_plan, spec).items()}
        validate_all(documents)
        for name, path in write_k8s(documents, plan.out_dir / "k8s" / label).items():
            files[f"{label}/{name}"] = path
    return files


def write_report(plan) -> dict[str, Path]:
    md = plan_markdown(plan)
    paths = {"plan.md": plan.out_dir / "plan.md", "plan.html": plan.out_dir / "plan.html"}
    atomic_write_text(paths["plan.md"], md)
    atomic_write_text(paths["plan.html"], plan_page(md, plan.out_dir))
    chosen = plan.decision.chosen
    RunFolder(plan.out_dir).record({
        "kind": "deployment-plan", "deployment": str(plan.deployment.source or plan.deployment.name),
        "settings": asdict(plan.settings), "headroom": plan.headroom,
        "models": {n: {"reference": m.entry.model, "peak_rps": m.entry.peak_rps, "p99_ms": m.entry.p99_ms,
                       "config": m.config, "capacity_found": m.found, "capacity_held": m.capacity}
                   for n, m in plan.models.items()},
        "layout": [{"models": list(g.models), "replicas": g.replicas, "capacity": g.capacity.rate,
                    "rates": dict(g.rates)} for g in chosen.groups],
        "cost_h": chosen.cost_per_hour, "confirmed": plan.confirmed,
        "steps": [r.to_dict() for r in plan.steps.results]})
    paths["run.json"] = plan.out_dir / "run.json"
    return paths


__all__ = ["plan_markdown", "write_manifests", "write_report"]
