"""vs_model_analyzer.md and run.json of a deployment compared with Model Analyzer (versus_ma)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from deployment_toolkit.spec import atomic_write_text
from deployment_toolkit.results.run_folder import RunFolder
from deployment_toolkit.tables import markdown_table

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
    rates = ", ".join(f"{n} {r:,.1f}" for n, r in versus.rates.items())
    lines += [f"## Judged under the same mixed open-loop traffic ({rounds} rounds, the sides in turns)", "",
              f"Each side on a server of its own, every model at once (one seeded Poisson schedule each, p99 from the "
              f"intended send time), at the rates one replica of a {versus.replicas}-replica fleet gets at the peaks "
              f"with the plan's headroom ({plan.headroom:.0%}): {rates} inf/s.", ""]
    rows = []
    for side in versus.sides:
        for name, model in plan.models.items():
            p99s = [p.points[name].p99 for p in side.at_rates]
            rows.append([side.name, name, _ms(p99s), f"{model.entry.p99_ms:g}",
                         f"{side.held(name)} of {len(side.at_rates)}"])
    lines += [markdown_table(["side", "model", "p99 per round (ms)", "SLO (ms)", "SLO held"], rows,
                             ["l", "l", "r", "r", "r"]), ""]
    rows = []
    for side in versus.sides:
        replicas = side.replicas
        cost = f"{replicas * price:,.2f}" if replicas and price is not None else "-"
        rows.append([side.name, _ms(side.capacities), f"{side.capacity:,.1f}" if side.capacity else "-",
                     replicas or "-", cost] + ([side.error] if side.error else []))
    lines += ["Mix capacity: the highest total rate (split as the peaks) at which every model keeps its SLO, per "
              "replica; the replicas it needs for the peaks with the plan's headroom, and their cost.", "",
              markdown_table(["side", "mix capacity per round (inf/s)", "median", "replicas for the peaks", "$/h"],
                             [r[:5] for r in rows], ["l", "r", "r", "r", "r"]), ""]
    ours, theirs = versus.sides[0], versus.sides[1]
    if ours.capacity and theirs.capacity:
        lines += [f"**{ours.name} / {theirs.name}, median mix capacity: {ours.capacity / theirs.capacity:.2f}x**; SLOs held "
                  f"at the fleet's rates: {sum(ours.held(n) for n in plan.models)} vs "
                  f"{sum(theirs.held(n) for n in plan.models)} of {len(plan.models) * rounds} model-rounds.", ""]
    for side in versus.sides:
        if side.error:
            lines.append(f"{side.name}: {side.error}")
    lines += ["## Stages", "", markdown_table(["stage", "status", "seconds"],
                                              [[r.name, r.status.value, f"{r.seconds:.0f}"]
                                               for r in versus.steps.results], ["l", "l", "r"]), ""]
    return "\n".join(lines)


def write_versus(versus: "DeploymentVersus") -> None:
    atomic_write_text(versus.out_dir / "vs_model_analyzer.md", versus_markdown(versus))
    plan = versus.plan
    RunFolder(versus.out_dir).record({
        "kind": "deployment-vs-model-analyzer", "deployment": str(plan.deployment.source or plan.deployment.name),
        "rounds": versus.settings.rounds, "ma_minutes": versus.settings.ma_minutes, "rates": versus.rates,
        "replicas": versus.replicas, "headroom": plan.headroom,
        "model_analyzer": [{"asked": r.asked, "ran": r.result.ran, "wall_s": r.result.wall_s, "error": r.result.error,
                            "measurements": len(r.result.run_configs), "budgets": r.budgets,
                            "pick": r.pick.variants if r.pick is not None else None} for r in versus.ma_runs],
        "sides": {s.name: {"configs": s.configs, "capacities": s.capacities, "replicas": s.replicas,
                           "held": {n: s.held(n) for n in plan.models},
                           "p99_ms": {n: [p.points[n].p99 for p in s.at_rates] for n in plan.models},
                           "error": s.error} for s in versus.sides}})


__all__ = ["versus_markdown", "write_versus"]
