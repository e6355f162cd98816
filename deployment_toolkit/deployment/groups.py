"""Which models share a replica, settled on what was measured: the solver packs the models (packing.py) on their
held capacities, memory and traffic over time; only the shared groups of the packing are measured under their mixed
traffic (split as the packing planned it) and held k of k; what each group held is fitted, with every group
measured before it, into the models' sharing factors for groups of its size or larger (sharing.SharingTable,
sharing_fit.py; the packing is the cheapest over the size bands, `_pack`), one that holds nothing is kept apart
and later groups are smaller than it (groups of its size not measured yet are skipped), and the models are packed
again, until every shared group of the packing rests on a measurement. A group whose confirmation fails is split
with the models that missed apart (`Split`). Measurement grows with the groups chosen, never with the groupings
possible. `plan` is the planner's DeploymentPlan (plan.py imports this module, not the other way)."""
from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass
from typing import Any, Mapping

from ..perf import neighbours
from ..perf.openloop.holding import Holding, hold
from .bursts import Burst, with_bursts
from .errors import DeploymentPlanError
from .file import Deployment
from .groupconfig import SOLO, SPLIT_FIRST_AT, GroupSetting, SettingTried, apply, kept, oversubscription, \
    split_setting
from .mixed import Member, Mix, member_target
from .packing import (ModelLoad, PackedGroup, PackLimits, Packing, SharingFit, fit_sharing, lower_bound, pack,
                      time_shared)
from .sharing_fit import Observation
from .traffic import Traffic, align, entry_series

log = logging.getLogger(__name__)
MIX_FLOOR = 0.05  # a shared group's mix search goes down to this share of its predicted capacity
SLOW_NEIGHBOUR = 1.0  # a co-runner whose full batch takes this share of a model's SLO or more is kept apart from it
MAX_PACKINGS = 3  # packings in a row, each measuring the groups it chose that were not measured yet
SOLO_TRIALS = 201  # the solo winners' re-tests after the split (trials apart from the bisection's and the hold's)


@dataclass
class MeasuredGroup:
    """A shared group of a packing, measured under its mixed traffic (split as the packing planned it) and held."""

    models: tuple[str, ...]
    split: dict[str, float]  # each model's planned inferences/s per replica (the mix's shares)
    predicted: float  # what time sharing with the packing's factors predicted (total inferences/s per replica)
    holding: Holding | None  # None: no total rate kept every model within its SLO
    reason: str = ""
    fit: SharingFit | None = None  # what it changed in its members' sharing factors (None: it held the prediction)
    disturbed: bool = False  # not measured: other processes took the host in every window (perf.neighbours)
    setting: GroupSetting | None = None  # the serving setting kept for the group (None: each model's solo winner)
    tried: tuple[SettingTried, ...] = ()  # every setting measured for the group, the solo winners first

    @property
    def held(self) -> float | None:
        return self.holding.rate if self.holding else None

    def text(self) -> str:
        if self.held is None:
            what = "not measured" if self.disturbed else "held no rate"
            return f"{' + '.join(self.models)}: {what} ({self.reason}); kept apart"
        said = (f"{' + '.join(self.models)}: {self.held:,.1f} inf/s held (time sharing predicted "
                f"{self.predicted:,.1f})")
        said += f"; sharing factor x {self.fit.ratio:.2f} of the prediction, packed again" if self.fit else ""
        if len(self.tried) > 1:
            said += ("; settings tried: " + "; ".join(t.text() for t in self.tried) + "; kept: "
                     + (self.setting.text() if self.setting is not None else SOLO))
        return said


def traffic_of(deployment: Deployment) -> Traffic:
    """Every model's traffic on one grid: its traffic file's series (a Prometheus export, a request log or a CSV;
    scaled to its peak_rps where both are given), else its peak (traffic.entry_series)."""
    return align({m.name: entry_series(m) for m in deployment.models})


def _loads(plan: Any, size: int) -> tuple[ModelLoad, ...]:
    """Every model's load, each at its sharing factor in a group of `size` (sharing.SharingTable)."""
    prints = plan.memory
    return tuple(ModelLoad(n, m.capacity, plan.traffic.rates[n],
                           (prints.models.get(n, 0.0) / 1e9) if prints is not None else 0.0,
                           plan.sharing.factor(n, size), plan.margin(n)) for n, m in plan.models.items())


def batch_ms(plan: Any, name: str) -> float | None:
    """How long one full batch of the model holds the replica: its winner's max batch over its held capacity."""
    model = plan.models[name]
    winner = model.search.outcome.decision.winner if model.capacity else None
    return 1000.0 * winner.candidate.max_batch_size / model.capacity if winner is not None else None


def slow_neighbours(plan: Any) -> list[tuple[str, str]]:
    """Pairs kept from sharing a replica: one model's full batch takes the other's whole SLO or more
    (SLOW_NEIGHBOUR), so the other's requests wait behind it at any rate, which no sharing factor describes.
    (Twelve models on 2 cores: scorer_apac, 20 ms, beside photos, whose 8 images take 28 ms, missed in 3 of 3
    rounds of check-plan at 46-87 ms, though its confirmation's one trial passed.)"""
    took = {n: batch_ms(plan, n) for n in plan.models}
    slo = {n: plan.deployment.model(n).p99_ms for n in plan.models}
    names = list(plan.models)
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1:]
            if (took[b] or 0.0) >= SLOW_NEIGHBOUR * slo[a] or (took[a] or 0.0) >= SLOW_NEIGHBOUR * slo[b]]


def _pack(plan: Any, limits: PackLimits | None = None) -> Packing:
    """The cheapest packing over the size bands of the sharing factors (sharing.SharingTable.caps): each band
    packed with the factors of its largest group and no group larger; on a tie the larger band, whose factors are
    no higher: the same replicas on the more cautious figures."""
    limits = limits or _limits(plan)
    caps = plan.sharing.caps(limits.max_models, len(plan.models))
    solver = plan.settings.solver  # the solver's time, shared between the bands
    solver = dataclasses.replace(solver, time_limit_s=max(solver.time_limit_s / len(caps), 0.5))
    apart, best = [*plan.apart, *slow_neighbours(plan)], None
    for cap in caps:
        most = cap if cap < len(plan.models) or limits.max_models is not None else None
        packing = pack(_loads(plan, cap), dataclasses.replace(limits, max_models=most), solver, apart=apart)
        if best is None or packing.cost <= best.cost:
            best = packing
    assert best is not None  # caps lists one size at least
    return best


def _limits(plan: Any) -> PackLimits:
    limits = plan.deployment.limits
    budget = plan.memory.budget_gb if plan.memory is not None else None
    server = plan.memory.server / 1e9 if plan.memory is not None and budget is not None else 0.0
    if budget is not None and server >= budget:
        raise DeploymentPlanError(f"no model fits one replica: the server alone takes {server:.2f} GB of the "
                                  f"replica's {budget:g} GB ({limits.key('host_memory_gb')})")
    caps = [c for c in (limits.max_models, plan.most_shared) if c is not None]
    return PackLimits(memory_gb=budget, server_gb=server, max_models=min(caps) if caps else None,
                      max_replicas=limits.max_replicas, headroom=plan.headroom,
                      price_per_replica=plan.price_per_replica, max_replicas_key=limits.key("max_replicas"))


def bound_by_sharing(plan: Any) -> tuple[int, int]:
    """The replicas no packing goes under with perfect time sharing (every sharing factor 1), and with the factors
    measured (the lowest over the size bands the planner packs in, each at its largest group's factors): how far the
    fleet is from perfect time sharing, and how much of that the measured sharing explains."""
    limits = dataclasses.replace(_limits(plan), max_replicas=None)
    n = len(plan.models)
    perfect = tuple(dataclasses.replace(m, sharing=1.0) for m in _loads(plan, n))
    measured = min(lower_bound(_loads(plan, cap), dataclasses.replace(limits, max_models=cap))
                   for cap in plan.sharing.caps(limits.max_models, n))
    return lower_bound(perfect, limits), measured


def refuse_over_limit(plan: Any) -> None:
    """Before a server starts: a fleet over the replica limit even at the capacities the searches found is refused
    in one line (a hold only lowers a capacity and sharing a replica only adds load, so every later packing needs
    at least this bound), instead of after the memory, the holds and the shared groups are measured."""
    limits = _limits(plan)
    if limits.max_replicas is None:
        return
    loads = tuple(ModelLoad(n, m.found, plan.traffic.rates[n], headroom=plan.margin(n)) for n, m in plan.models.items())
    bound = lower_bound(loads, dataclasses.replace(limits, max_replicas=None))
    if bound > limits.max_replicas:
        raise DeploymentPlanError(
            f"no packing needs fewer than {bound} replicas even at the capacities the searches found (the holds can "
            f"only lower them), more than {limits.max_replicas_key} {limits.max_replicas}: raise it or lower the peaks")


def mix_of(plan: Any, models: tuple[str, ...], split: dict[str, float], tag: str,
         fresh: bool = False, bursts: Mapping[str, Burst] | None = None) -> Mix:
    """The group's models driven at once; `bursts`: those models sent their recorded arrivals (bursts.py)."""
    label = "+".join(models)
    total = sum(split.values())
    targets = with_bursts({n: member_target(plan.models[n].target, label) for n in models}, bursts or {})
    members = [Member(n, targets[n], split[n] / total, plan.deployment.model(n).p99_ms) for n in models]
    return Mix(members, plan.out_dir / tag / label, fresh=fresh, generator=plan.settings.checks.load_generator)


def _measure_group(plan: Any, group: PackedGroup, loads: tuple[ModelLoad, ...], server: Any = None) -> MeasuredGroup:
    """A shared group measured with each model's solo winner, then with the threads split between its models
    (groupconfig.py), each as the group runs; the setting kept is the solo winners unless the split held more by
    more than the search's resolution. Where the solo winners oversubscribe the cores (SPLIT_FIRST_AT), the split
    is measured first and the solo winners only re-tested at the rate they would have to hold (_split_first)."""
    threads = split_setting(plan, group.models) if server is not None else None
    if threads is not None and oversubscription(plan, group.models) >= SPLIT_FIRST_AT:
        return _split_first(plan, group, loads, server, threads)
    solo = _measure_setting(plan, group, loads, "mix")
    if threads is None or solo.disturbed:
        return solo
    other = _with_setting(plan, group, loads, server, threads)
    return _chosen(plan, solo, other, threads)


def _with_setting(plan: Any, group: PackedGroup, loads: tuple[ModelLoad, ...], server: Any,
                  threads: GroupSetting) -> MeasuredGroup:
    """The group measured with `threads` applied, each model's own winner put back after."""
    apply(plan, server, group.models, threads)
    try:
        return _measure_setting(plan, group, loads, "mix-threads")
    finally:
        apply(plan, server, group.models, None)


def _chosen(plan: Any, solo: MeasuredGroup, other: MeasuredGroup, threads: GroupSetting,
            solo_tried: SettingTried | None = None) -> MeasuredGroup:
    """The setting kept (groupconfig.kept) with both settings' figures."""
    tried = (solo_tried or SettingTried(GroupSetting(SOLO), solo.predicted, solo.held, solo.reason),
             SettingTried(threads, other.predicted, other.held, other.reason))
    best = kept(list(tried), plan.resolution)
    chosen = other if best.setting is threads else solo
    return dataclasses.replace(chosen, tried=tried, setting=threads if chosen is other else None)


def _split_first(plan: Any, group: PackedGroup, loads: tuple[ModelLoad, ...], server: Any,
                 threads: GroupSetting) -> MeasuredGroup:
    """The split measured first; the solo winners then re-tested k of k at the split's held rate less the search's
    resolution, the least they must hold for the split not to gain by more than it: held, they are kept at that
    rate; not held, the split is (the rule of `kept`, one bisection instead of two). A split that held nothing, or
    that other processes kept from being measured, leaves the solo winners measured as usual."""
    split = _with_setting(plan, group, loads, server, threads)
    if split.held is None:
        return split if split.disturbed else _chosen(plan, _measure_setting(plan, group, loads, "mix"), split, threads)
    at = split.held / (1 + plan.resolution)
    k = max(plan.settings.checks.retests, 1)
    mix = mix_of(plan, group.models, split.split, "mix")
    ran = f"the split first: the solo winners run {oversubscription(plan, group.models):.1f}x the cores in threads"
    try:
        holding = hold(lambda total, trial: mix.measure(total, trial, "hold"), at, k, SOLO_TRIALS, max_steps=0)
    except neighbours.HostDisturbed as err:  # nothing concluded of the solo winners: the split, which held, is kept
        solo = SettingTried(GroupSetting(SOLO), split.predicted, None, f"{err}; {ran}", measured=False)
        return dataclasses.replace(split, tried=(solo, SettingTried(threads, split.predicted, split.held)),
                                   setting=threads)
    if holding.rate is None:
        last = holding.retests[-1]
        solo = SettingTried(GroupSetting(SOLO), split.predicted, None, f"re-test {len(holding.retests)} of {k} at "
                            f"the split's rate less the resolution: {last.verdict}; {ran}", below=at)
        return dataclasses.replace(split, tried=(solo, SettingTried(threads, split.predicted, split.held)),
                                   setting=threads)
    reason = f"held {k} of {k} re-tests at the split's rate less the resolution; {ran}"
    fit = _fit(loads, split.split, at)
    solo = MeasuredGroup(group.models, split.split, split.predicted, holding, fit=fit)
    return _chosen(plan, solo, split, threads, SettingTried(GroupSetting(SOLO), solo.predicted, at, reason))


def _fit(loads: tuple[ModelLoad, ...], split: dict[str, float], held: float) -> SharingFit | None:
    """What the held rate changes in the members' factors (None: nothing, it held what was predicted)."""
    fit = fit_sharing(loads, split, held)
    by_name = {m.name: m.sharing for m in loads}
    return fit if any(abs(f - by_name[n]) > 1e-9 for n, f in fit.factors.items()) else None


def _measure_setting(plan: Any, group: PackedGroup, loads: tuple[ModelLoad, ...], tag: str) -> MeasuredGroup:
    """A shared group's mix capacity at the packing's split, as its models are served now: bisected from the
    time-sharing prediction, then held k of k (perf.openloop.capacity.search on mix points)."""
    from ..perf.openloop.capacity import search

    split = {n: group.rates[n] for n in group.models}
    predicted = time_shared(loads, split)
    mix = mix_of(plan, group.models, split, tag)
    try:
        searched = search(lambda total: mix.measure(total), predicted, 1.0, 1, plan.resolution,
                          min_fraction=MIX_FLOOR, mix=True)
    except neighbours.HostDisturbed as err:  # nothing is concluded of the group: it is kept apart, unmeasured
        return MeasuredGroup(group.models, split, predicted, None, str(err), disturbed=True)
    found = searched.capacity
    if found is None:
        limited = searched.client_limit
        return MeasuredGroup(group.models, split, predicted, None, "no total rate kept every model within its SLO"
                             + (f" ({searched.stopped})" if searched.stopped else "")
                             + (f"; the client fell behind at {limited.rate:,.1f} inf/s" if limited else ""))
    retests = plan.settings.checks.retests
    held = (hold(lambda total, trial: mix.measure(total, trial, "hold"), found, retests, until_stuck=True)
            if retests else Holding(found, found, 0))
    if held.rate is None:
        return MeasuredGroup(group.models, split, predicted, held, held.text())
    fit = _fit(loads, split, held.rate)
    return MeasuredGroup(group.models, split, predicted, held, fit=fit)


def setting_of(plan: Any, models: tuple[str, ...]) -> GroupSetting | None:
    """The serving setting kept for the group `models` (None: each model's solo winner)."""
    measured = plan.measured.get(models)
    return measured.setting if measured is not None and len(models) > 1 else None


def pack_measured(plan: Any, server: Any = None) -> Packing:
    """Pack, measure the shared groups the packing chose that were not measured yet, fold what they showed into
    the sharing factors (or keep a group that held nothing apart) and pack again, until every shared group of the
    packing was measured, for at most MAX_PACKINGS packings: the last one's groups are measured and a group short of
    its plan gets the replicas its measured capacity needs (where one held nothing, or packing once more on what
    they showed costs less, the models are packed once more and the new groups left to the confirmation, which
    measures and derates each: `_last`), so the measurements stay within
    MAX_PACKINGS x the groups, never every grouping."""
    for round_ in range(1, MAX_PACKINGS + 1):
        packing = _pack(plan)
        plan.packings.append(packing)
        if packing.misfits:
            raise DeploymentPlanError("; ".join(f"{m.name} does not fit one replica alone: {m.reason}"
                                                + (f" ({plan.deployment.limits.key('host_memory_gb')})"
                                                   if "out of memory" in m.reason else "")
                                                for m in packing.misfits))
        if not packing.within_limit:
            raise DeploymentPlanError(packing.reason)
        todo = sorted((g for g in packing.groups if g.shared and g.models not in plan.measured),
                      key=lambda g: -len(g.models))  # the largest first: the most a failure can rule out
        if not todo:
            return packing
        for group in todo:
            if plan.most_shared is not None and len(group.models) > plan.most_shared:
                plan.unmeasured.append(group.models)  # as large as one that held nothing: no later packing uses it
                continue  # (twelve models: two more groups of four and one of three were measured so, 346 s)
            measured = plan.steps.call(
                f"{' + '.join(group.models)}: mix capacity under their mixed traffic, held "
                f"{plan.settings.checks.retests} of {plan.settings.checks.retests}",
                lambda g=group: _measure_group(plan, g, _loads(plan, len(g.models)), server))
            plan.measured[group.models] = measured
            if measured.held is None:  # kept apart, and no later group as large: another set of that size was
                plan.apart.append(group.models)  # as likely to fail (twelve models: six groups of six held nothing)
                if not measured.disturbed:  # (a group the neighbours kept from measuring says nothing of its size)
                    plan.most_shared = min(plan.most_shared or len(group.models), len(group.models) - 1)
            else:
                capacity = {n: plan.models[n].capacity for n in group.models}
                plan.sharing.observe(Observation.of(measured.split, capacity, measured.held))
        if round_ == MAX_PACKINGS:
            return _last(plan, packing, todo)
    raise AssertionError("not reached")


def _last(plan: Any, packing: Packing, todo: list[PackedGroup]) -> Packing:
    """The last packing as measured, or the models packed once more on what its groups showed where that is
    cheaper, or where one of them held nothing (kept apart); the new groups are left to the confirmation, which
    measures each under its mixed traffic and derates it where it falls short. (Twelve models: the last packing's
    group of three held x0.17 of its estimate and took 3 replicas as measured, where pairs cost fewer.)"""
    done = None
    if not any(g.models not in plan.measured or plan.measured[g.models].held is None for g in todo):
        done = _as_measured(plan, packing)
    again = _pack(plan)
    if done is not None and (again.groups == packing.groups or _as_measured(plan, again).cost >= done.cost):
        return done
    plan.packings.append(again)
    return _as_measured(plan, again)


@dataclass(frozen=True)
class Split:
    """A shared group that missed an SLO in its confirmation's last round, derated as far as it went: its models
    packed again (the solver on them alone) with each model that missed kept from sharing with the others.
    Derating answers load; a model that misses at every rate it is given beside others is interfered with, and
    on its own replicas it is sized by the capacity it held alone."""

    models: tuple[str, ...]
    missed: tuple[str, ...]
    parts: tuple[PackedGroup, ...]

    def text(self) -> str:
        parts = "; ".join(f"{' + '.join(g.models)}: {g.replicas} replica(s)" for g in self.parts)
        return (f"{' + '.join(self.models)}: {', '.join(self.missed)} missed the SLO in the last round, derated as "
                f"it was; packed again with {', '.join(self.missed)} apart from the others ({parts}) and confirmed "
                "again (below)")


def split_missed(plan: Any, models: tuple[str, ...], missed: tuple[str, ...]) -> Split:
    """`models`, a shared group whose confirmation failed, packed again with every model in `missed` apart."""
    if len(models) < 2 or not missed or not set(missed) <= set(models):
        raise ValueError(f"a split needs a shared group and the models of it that missed: {models}, {missed}")
    loads = tuple(m for m in _loads(plan, len(models)) if m.name in models)
    apart = [(a, b) for i, a in enumerate(models) for b in models[i + 1:] if a in missed or b in missed]
    limits = dataclasses.replace(_limits(plan), max_replicas=None)  # the fleet's limit is checked on the whole
    packing = pack(loads, limits, plan.settings.solver, apart=apart)
    return Split(models, tuple(m for m in models if m in missed), packing.groups)


def _as_measured(plan: Any, packing: Packing) -> Packing:
    """The last packing with each shared group's replicas for the capacity it was measured to hold."""
    groups = []
    for g in packing.groups:
        measured = plan.measured.get(g.models) if g.shared else None
        if measured is not None and measured.held is None:
            raise DeploymentPlanError(f"{' + '.join(g.models)} held no rate together ({measured.reason}) in the "
                                      f"last of {MAX_PACKINGS} packings: give limits.max_models to keep fewer "
                                      "models on one server")
        if measured is not None and measured.held < sum(g.rates.values()):
            load = sum(g.rates.values()) * g.replicas
            replicas = max(g.replicas, math.ceil(load / measured.held - 1e-9))
            g = dataclasses.replace(g, replicas=replicas,
                                    rates={n: r * g.replicas / replicas for n, r in g.rates.items()})
        groups.append(g)
    return dataclasses.replace(packing, groups=tuple(groups))


__all__ = ["MAX_PACKINGS", "MIX_FLOOR", "SLOW_NEIGHBOUR", "MeasuredGroup", "Split", "batch_ms", "bound_by_sharing",
           "mix_of", "pack_measured", "refuse_over_limit", "setting_of", "slow_neighbours", "split_missed",
           "traffic_of"]
