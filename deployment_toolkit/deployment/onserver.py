"""Stages 3-5 of the plan (plan.py), on the one embedded server that holds every model's winner: each model's
memory, its pipeline verified against its steps in-process, its capacity alone held k of k, the packing of the held
models (groups.py) and each replica group's confirmation under its mixed traffic (confirm.py), split where a shared
group missed. A model whose verification or hold fails is unplanned with its reason and the others go on (in a
deployment of several; alone, its failure is the plan's). `plan` is the planner's DeploymentPlan (plan.py imports
this module, not the other way)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from .confirm import GroupConfirmation, burst_group, confirm_group
from .errors import DeploymentPlanError
from .groupconfig import apply
from .groups import mix_of, pack_measured, setting_of, split_missed
from .mixed import windowed
from .packing import PackedGroup
from ..perf.neighbours import HostDisturbed
from ..perf.openloop.holding import Holding, Judged, hold

log = logging.getLogger(__name__)


def _target(model: Any, url: str, metrics_url: str | None, window_ms: int):
    from ..perf.openloop.ratepoint import Target, open_loop_options

    fmt = model.search.outcome.decision.winner.candidate.format
    manifest = next(f.manifest for f in model.search.formats if f.format == fmt)
    from ..data.whole import samples_per_request

    options = open_loop_options(model.search.options, window_ms=window_ms)
    return Target(f"{model.entry.name}/{model.config}", model.search.model_name, url, 1, manifest.signature, options,
                  metrics_url=metrics_url, samples_per_request=samples_per_request(manifest, options.input_data))


def _held_alone(model: Any, out_dir: Path, retests: int, resolution: float) -> Holding:
    """The model's capacity alone, held k of k. A pipeline is searched as the pipeline: its slowest step decides,
    so its search starts from its own closed-loop measurements (never above its network's capacity), not from the
    network's capacity re-tested downward (a Python step in front of an 8,000 inf/s network held 600); a bare
    network starts from what its search found."""
    from ..perf.openloop.capacity import search
    from ..perf.openloop.ratepoint import measure
    from ..perf.openloop.seed import closed_loop_seed
    from ..perf.openloop.ratestore import RateStore

    store = RateStore(out_dir)
    slo = model.entry.p99_ms
    if model.pipeline is not None:
        seed = min(model.found, closed_loop_seed(model.target, slo, out_dir / "seed"))
        found = search(lambda rate: measure(windowed(model.target, rate), rate, store, out_dir, 1, "ensemble"),
                       seed, slo, resolution=resolution).capacity
        if found is None:
            return Holding(seed, None, retests)
        model.found = found
    if not retests:
        return Holding(model.found, model.found, 0)
    return hold(lambda rate, trial: Judged(measure(windowed(model.target, rate), rate, store, out_dir, trial, "hold"),
                                            slo), model.found, retests)


# ---- confirmation ----------------------------------------------------------------------------------

def _confirm(plan: Any, group: PackedGroup, server: Any) -> GroupConfirmation:
    """The group served with its kept setting (groupconfig.py), at its worst slice's rates (derated where it fails),
    then its burst check."""
    checks = plan.settings.checks
    apply(plan, server, group.models, setting_of(plan, group.models))
    load = {n: group.rates[n] * group.replicas for n in group.models}  # the fleet's, headroom in
    mix = mix_of(plan, group.models, dict(group.rates), "confirm", fresh=True)
    margins = {n: plan.margin(n) for n in group.models}
    confirmation = confirm_group(mix, load, group.replicas, checks.rounds, checks.trials, margins=margins)
    bursty = {n: plan.bursts[n] for n in group.models if n in plan.bursts}
    if bursty and confirmation.passed:  # then with the log's own arrivals, from the Poisson plan's replicas
        poisson = confirmation
        replayed = mix_of(plan, group.models, dict(poisson.rates), "confirm-bursts", fresh=True, bursts=bursty)
        confirmation = confirm_group(replayed, load, poisson.replicas, checks.rounds, checks.trials, margins=margins)
        confirmation.poisson_replicas = poisson.replicas
        confirmation.bursts = tuple(b.text() for b in bursty.values())
    if confirmation.passed and checks.burst_factor:
        peak = {n: r / (1 + plan.margin(n)) for n, r in load.items()}
        try:
            confirmation.burst = burst_group(mix, peak, confirmation.replicas, checks.burst_factor,
                                             checks.burst_seconds)
        except HostDisturbed as err:  # informative only: said, and the plan goes on
            log.warning(f"warning: {' + '.join(group.models)}: burst check not measured: {err}")
    return confirmation


def price(plan: Any) -> float | None:
    """$/h of one replica on the serving device (Costs.price_for)."""
    from ..repository.config import host_has_gpu

    return plan.deployment.costs.price_for(plan.device, host_has_gpu())


def headroom(plan: Any) -> None:
    """One rule: the headroom given (limits.headroom, --headroom) for every model, else each model's own from its
    capacity's spread (max(spread of its searches, the search's resolution)), so a steady model does not pay for a
    noisy one, in a group or alone; a shared group's margin is then its members' own, each on its own rate."""
    from ..perf.openloop.capacity import derived_headroom

    given = plan.deployment.limits.headroom
    if given is not None:
        plan.headroom, plan.headroom_note = given, f"Headroom {given:.1%} (given) for every model."
        plan.margins = {n: (given, "given") for n in plan.models}
        return
    capacities = {n: m.search.outcome.decision.winner.capacity.result for n, m in plan.models.items()}
    plan.headroom, _ = derived_headroom(capacities)
    plan.margins = {n: _own_margin(c, plan.headroom) for n, c in capacities.items()}
    plan.headroom_note = ("Each model's headroom is its own capacity's spread: max((max - min) / min of its "
                          "searches' capacities, the search's resolution); the table below gives each one and "
                          "where it came from.")


def _own_margin(capacity: Any, fallback: float) -> tuple[float, str]:
    """A model's headroom from its own capacity measurements, and how it was found."""
    if capacity is None or not capacity.reachable:
        return fallback, "no open-loop capacity to derive it from: the widest of the others"
    n = len(capacity.capacities)
    spread = f"spread {capacity.spread:.1%} of {n} searches" if capacity.spread is not None else "a single search"
    return capacity.headroom, f"{spread}, resolution {capacity.resolution:.0%}"


def _held(model: Any, plan: Any) -> Holding:
    """The model's capacity alone held k of k; a hold that found no rate fails its step (never "ok" and then the
    end of the plan)."""
    checks = plan.settings.checks
    holding = _held_alone(model, plan.out_dir / "alone" / model.entry.name, checks.retests, plan.resolution)
    if holding.rate is None:
        raise DeploymentPlanError(f"{model.entry.name}: {holding.text()}")
    return holding


def _each_model(plan: Any, server: Any) -> None:
    """Each model on the server: its target, its pipeline verified, its capacity held; one that fails is unplanned
    (DeploymentPlan.drop) and the rest go on."""
    from . import pipelines

    checks = plan.settings.checks
    for model in list(plan.models.values()):
        name = model.entry.name
        url = server.grpc_url if model.search.options.protocol == "grpc" else server.http_url
        model.target = _target(model, url, server.metrics_url, checks.window_ms)
        if model.pipeline is not None:
            if not plan.step(f"{name}: the served pipeline against its steps in-process",
                             lambda m=model: pipelines.verify(m.pipeline, server.grpc_url) or True, model=name):
                continue
            model.target = pipelines.target(model.pipeline, model.target)
        model.holding = plan.step(f"{name}: capacity alone, held {checks.retests} of {checks.retests}",
                                  lambda m=model: _held(m, plan), model=name)


def _confirm_groups(plan: Any, server: Any) -> None:
    """Each group of the packing confirmed; a shared group that missed is packed again with the models that missed
    apart, and its parts confirmed in its place."""
    checks = plan.settings.checks
    queue = list(plan.packing.groups)
    while queue:
        group = queue.pop(0)
        confirmation = plan.step(
            f"{' + '.join(group.models)}: confirmation of {group.replicas} replica(s) under its mixed traffic"
            + (" and the burst check" if checks.burst_factor else ""), lambda g=group: _confirm(plan, g, server))
        plan.confirmations.append(confirmation)
        if confirmation.unmeasured:  # not the rates' failure: nothing to split (the plan exits 1 and says so)
            continue
        missed = confirmation.missed()
        if group.shared and missed:  # each part has fewer models than its group: this ends
            split = plan.step(f"{' + '.join(group.models)}: packed again with {', '.join(missed)} apart",
                              lambda g=group, m=missed: split_missed(plan, g.models, m))
            plan.splits.append(split)
            queue[0:0] = split.parts


def on_server(plan: Any, server: Any) -> None:
    """Stages 3-5 on one server holding every model: memory, verification, capacities held, packing, confirmation."""
    from ..repository.config import host_has_gpu
    from .memory import measure_footprints

    checks, deployment = plan.settings.checks, plan.deployment
    budget = deployment.limits.host_memory_gb if not host_has_gpu() else None
    plan.memory = plan.step("each model's memory in a replica (loaded one at a time)",
                            lambda: measure_footprints(server, plan.served(), budget))
    _each_model(plan, server)
    plan.check_some_planned()
    plan.step("which models share a replica and how many replicas (the solver; shared groups measured)",
              lambda: pack_measured(plan, server))
    if not checks.confirm:
        plan.steps.skip("confirmation of each replica group under its mixed traffic", "--no-confirm")
        return
    _confirm_groups(plan, server)


__all__ = ["headroom", "on_server", "price"]
