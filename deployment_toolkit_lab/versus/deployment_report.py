"""vs_model_analyzer.md and run.json of a deployment compared with Model Analyzer (versus_ma)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from deployment_toolkit.spec import atomic_write_text
from deployment_toolkit.results.run_folder import RunFolder
from deployment_toolkit.tables import markdown_table

from .deployment_types import group_replicas

if TYPE_CHECKING:
    from .deployment_types import DeploymentVersus


def _ms(values: list[float]) -> str:
    return ", ".join("-" if math.isnan(v) else f"{v:,.1f}" for v in values) or "-"


def versus_markdown(versus: "DeploymentVersus") -> str:
    plan, rounds = versus.plan, versus.settings.rounds
    price = plan.price_per_replica
    lines = [f"# Deployment `{plan.deployment.name}`: Model Analyzer and `plan --deployment`", "",
             "Models, each with its peak and p99 SLO: " + "; ".join(
                 f"**{n}** ({m.entry.model}{', with pre/post-processing' if m.pipeline is not None else ''}) "
                 f"{m.entry.peak_rps:g} inf/s, p99 <= {m.entry.p99_ms:g} ms" for n, m in plan.models.items()) + ".",
             "Our plan: " + "; ".join(f"{' + '.join(g.models)}: {g.replicas} replica(s)" for g in plan.groups)
             + " (plan.md in `plan/`).", "",
             "## Model Analyzer's runs", "",
             markdown_table(["asked", "answer"], [[r.asked, r.outcome] for r in versus.ma_runs], ["l", "l"]), "",
             "Its pick per model is the run config it ranks first among those within every model's budget; a model "
             "it picked nothing for keeps the config it was handed (its format's default, as `config` writes it).", "",
             "## What each side serves", ""]
    models = sorted({m for s in versus.sides for m in s.configs})
    lines += [markdown_table(["model", *[s.name for s in versus.sides]],
                             [[m, *[s.configs.get(m, "-") for s in versus.sides]] for m in models], ["l", "l", "l"]), ""]
    if len(versus.sides) == 2 and versus.sides[0].configs == versus.sides[1].configs:
        lines += ["**Both sides serve the same configs**: the judge below measures one deployment twice, so the gap "
                  "between the two sides' figures is the measurement's own noise (an A/A comparison), not a "
                  "difference between the picks.", ""]
    fleet = versus.replicas
    lines += [f"## Judged under the same mixed open-loop traffic ({rounds} rounds, the sides in turns)", "",
              f"Each side laid out as it deploys, on a fleet of our plan's size ({fleet} replicas): ours as its plan's "
              "replica groups, at the rates each group's confirmation drove; Model Analyzer's with every model on every "
              "replica, as its concurrent search measured them (it sizes no fleet), each model at its peak with the "
              f"plan's headroom ({plan.headroom:.0%}) over {fleet} replicas. Each group on a server of its own, its "
              "models at once (one seeded Poisson schedule each, p99 from the intended send time).", ""]
    rows = []
    for side in versus.sides:
        for group in side.groups:
            for name in group.models:
                p99s = [p.points[name].p99 for p in group.at_rates]
                rows.append([side.name, f"{group.name} ({group.replicas})", name, f"{group.rates[name]:,.1f}",
                             _ms(p99s), f"{plan.models[name].entry.p99_ms:g}",
                             f"{group.held(name)} of {len(group.at_rates)}"])
    lines += [markdown_table(["side", "group (replicas)", "model", "inf/s per replica", "p99 per round (ms)",
                              "SLO (ms)", "SLO held"], rows, ["l", "l", "l", "r", "r", "r", "r"]), ""]
    rows = []
    for side in versus.sides:
        for group in side.groups:
            rows.append([side.name, group.name, _ms(group.capacities),
                         f"{group.capacity:,.1f}" if group.capacity else "-", group_replicas(versus, group) or "-",
                         group.error or ""])
    lines += ["Mix capacity of each group: the highest total rate (split as its models' peaks) at which every model "
              "of it keeps its SLO, per replica; the replicas the group needs for its models' peaks with the plan's "
              "headroom.", "",
              markdown_table(["side", "group", "mix capacity per round (inf/s)", "median", "replicas for its peaks",
                              "note"], rows, ["l", "l", "r", "r", "r", "l"]), ""]
    held = {s.name: sum(s.held(n) for n in plan.models) for s in versus.sides}
    rows = [[s.name, s.replicas or "-", f"{s.replicas * price:,.2f}" if s.replicas and price is not None else "-",
             f"{held[s.name]} of {len(plan.models) * rounds}"] for s in versus.sides]
    lines += [markdown_table(["side", "replicas for the peaks", "$/h", "SLOs held at the fleet's rates (model-rounds)"],
                             rows, ["l", "r", "r", "r"]), ""]
    ours, theirs = versus.sides[0], versus.sides[1]
    if ours.replicas and theirs.replicas:
        lines += [f"**The fleet for the peaks, each side as the judge measured its layout: {ours.name} "
                  f"{ours.replicas} replica(s), {theirs.name} {theirs.replicas} ({theirs.replicas / ours.replicas:.2f}x "
                  f"ours)**; SLOs held at the fleet's rates: {held[ours.name]} vs {held[theirs.name]} of "
                  f"{len(plan.models) * rounds} model-rounds.", ""]
    else:
        lines += ["**No fleet size for " + " and ".join(s.name for s in versus.sides if not s.replicas)
                  + "**: a group of it held no rate within every SLO. SLOs held at the fleet's rates: "
                  + " vs ".join(f"{held[s.name]}" for s in versus.sides) + f" of {len(plan.models) * rounds} "
                  "model-rounds.", ""]
    lines += ["## Stages", "", markdown_table(["stage", "status", "seconds"],
                                              [[r.name, r.status.value, f"{r.seconds:.0f}"]
                                               for r in versus.steps.results], ["l", "l", "r"]), ""]
    return "\n".join(lines)


def write_versus(versus: "DeploymentVersus") -> None:
    atomic_write_text(versus.out_dir / "vs_model_analyzer.md", versus_markdown(versus))
    plan = versus.plan
    RunFolder(versus.out_dir).record({
        "kind": "deployment-vs-model-analyzer", "deployment": str(plan.deployment.source or plan.deployment.name),
        "rounds": versus.settings.rounds, "ma_minutes": versus.settings.ma_minutes,
        "replicas": versus.replicas, "headroom": plan.headroom,
        "model_analyzer": [{"asked": r.asked, "ran": r.result.ran, "wall_s": r.result.wall_s, "error": r.result.error,
                            "measurements": len(r.result.run_configs), "budgets": r.budgets,
                            "pick": r.pick.variants if r.pick is not None else None} for r in versus.ma_runs],
        "sides": {s.name: {"configs": s.configs, "replicas": s.replicas, "error": s.error,
                           "groups": [{"models": list(g.models), "replicas": g.replicas, "rates": g.rates,
                                       "capacities": g.capacities, "replicas_for_peaks": group_replicas(versus, g),
                                       "held": {n: g.held(n) for n in g.models},
                                       "p99_ms": {n: [p.points[n].p99 for p in g.at_rates] for n in g.models},
                                       "error": g.error} for g in s.groups]} for s in versus.sides}})


__all__ = ["versus_markdown", "write_versus"]
