"""The last packing's groups, as measured (deployment.groups): a shared group short of its plan gets the replicas
its measured capacity needs, one that held nothing is one line, the rest stand as packed."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from deployment_toolkit.deployment.errors import DeploymentPlanError
from deployment_toolkit.deployment.groups import MeasuredGroup, _as_measured
from deployment_toolkit.deployment.packing import PackedGroup, Packing, SolveStatus, time_shared
from deployment_toolkit.deployment.packing_milp import BoundSource
from deployment_toolkit.deployment.sharing import SharingTable
from deployment_toolkit.perf.openloop.holding import Holding


def _group(models, replicas, rates):
    return PackedGroup(models, replicas, rates, 0, 1.0, 1.0, sum(rates.values()), sum(rates.values()), 0.0)


def _packing(*groups):
    return Packing(groups, (), 1, BoundSource.LOAD, SolveStatus.OPTIMAL, 0.0, 1, 1, 1)


def test_a_group_short_of_its_plan_gets_the_replicas_it_was_measured_to_need():
    short = _group(("a", "b"), 2, {"a": 60.0, "b": 40.0})  # planned 100 inf/s per replica, 200 in all
    alone = _group(("c",), 1, {"c": 10.0})
    plan = SimpleNamespace(measured={("a", "b"): MeasuredGroup(("a", "b"), {}, 100.0, Holding(80.0, 80.0, 1))})
    done = _as_measured(plan, _packing(short, alone))
    assert done.groups[0].replicas == 3 and abs(sum(done.groups[0].rates.values()) - 200 / 3) < 1e-9
    assert done.groups[1] == alone


def test_a_group_that_held_nothing_in_the_last_packing_is_one_line():
    group = _group(("a", "b"), 1, {"a": 5.0, "b": 5.0})
    plan = SimpleNamespace(measured={("a", "b"): MeasuredGroup(("a", "b"), {}, 10.0, None, "no total rate held")})
    with pytest.raises(DeploymentPlanError, match="a \\+ b held no rate together .*limits.max_models"):
        _as_measured(plan, _packing(group))


def _only_pairs_hold(monkeypatch) -> list[tuple[str, ...]]:
    """Measuring a shared group, faked: one of more than two models holds nothing, a pair holds what was planned.
    Returns the groups measured, in order."""
    from deployment_toolkit.deployment import groups

    measured: list[tuple[str, ...]] = []

    def measure(plan, group, loads, server=None):
        measured.append(group.models)
        split = dict(group.rates)
        if len(group.models) > 2:
            return MeasuredGroup(group.models, split, 1.0, None, "no total rate kept every model within its SLO")
        return MeasuredGroup(group.models, split, 1.0, Holding(sum(split.values()), sum(split.values()), 1))

    monkeypatch.setattr(groups, "_measure_group", measure)
    return measured


def test_after_a_group_held_nothing_later_packings_share_a_replica_among_fewer_models(monkeypatch):
    """Twelve models on CPU: each 6-model group the solver chose held no rate, and keeping only that exact set apart
    let the next packing choose another six (six measured, none held, the last packing's two groups of six
    unmeasured). A group that held nothing now caps later groups below its size."""
    from deployment_toolkit.deployment import groups

    measured = _only_pairs_hold(monkeypatch)
    plan = _plan([f"m{i}" for i in range(6)])
    packing = groups.pack_measured(plan)
    sizes = [len(m) for m in measured]
    assert sizes[0] == 6 and plan.most_shared is not None and plan.most_shared < 6
    # three packings measured (6, 5, 4 models a group); the last packing, left to the confirmation, stays below them
    assert [s for s in sizes if s > 2] == [6, 5, 4] and plan.most_shared == 3 and len(plan.packings) == 4
    assert max(len(g.models) for g in packing.groups) <= 3


def _plan(names, capacity=1000.0, rate=10.0, **extra):
    from deployment_toolkit.deployment.packing import SolverSettings

    limits = SimpleNamespace(max_models=None, max_replicas=100, key=lambda name: f"limits.{name}")
    winner = SimpleNamespace(candidate=SimpleNamespace(max_batch_size=1))
    search = SimpleNamespace(outcome=SimpleNamespace(decision=SimpleNamespace(winner=winner)))
    return SimpleNamespace(
        memory=None, headroom=0.2, margin=lambda name: 0.2, price_per_replica=1.0,
        deployment=SimpleNamespace(limits=limits, model=lambda name: SimpleNamespace(p99_ms=1000.0)),
        models={n: SimpleNamespace(capacity=capacity, search=search) for n in names},
        traffic=SimpleNamespace(rates={n: (rate,) for n in names}), sharing=SharingTable(), packings=[], measured={},
        apart=[], most_shared=None, unmeasured=[],
        settings=SimpleNamespace(solver=SolverSettings(), checks=SimpleNamespace(retests=1)),
        steps=SimpleNamespace(call=lambda label, work: work()), **extra)


def test_a_group_as_large_as_one_that_held_nothing_is_not_measured(monkeypatch):
    """Twelve models: three groups of four in the first packing, the first held nothing, and the other two, which
    no later packing could use, were measured all the same (346 s). The largest group goes first; after it held
    nothing, the packing's groups of its size are skipped and said."""
    from deployment_toolkit.deployment import groups

    measured = _only_pairs_hold(monkeypatch)
    # at most 4 models a server: the solver packs 12 models into three groups of four
    plan = _plan([f"m{i:02d}" for i in range(12)])
    plan.deployment.limits.max_models = 4
    packing = groups.pack_measured(plan)
    first = [g.models for g in plan.packings[0].groups if g.shared]
    assert sorted(len(g) for g in first) == [4, 4, 4], first
    assert sum(m in first for m in measured) == 1, "a second group of four was measured after one held nothing"
    assert set(first) - set(measured) <= set(plan.unmeasured)
    assert [len(m) for m in measured if len(m) > 2] == [4, 3], measured  # one of each size, no more
    assert max(len(g.models) for g in packing.groups) <= 2


def test_a_group_that_missed_in_its_confirmation_is_packed_again_with_the_model_that_missed_apart():
    """The twelve-model plan: scorer_eu (10 ms) beside scorer_us missed at 990, 495 and 330 inf/s a replica:
    derating answers load, not interference. Packed again with it apart: the rest stay together where the solver
    keeps them, the one that missed runs on its own replicas, sized by its capacity alone."""
    from deployment_toolkit.deployment.groups import split_missed

    plan = _plan(["a", "b", "c"], capacity=100.0, rate=30.0)  # one replica holds all three by time sharing
    split = split_missed(plan, ("a", "b", "c"), ("b",))
    parts = {g.models: g for g in split.parts}
    assert set(parts) == {("a", "c"), ("b",)}, parts
    assert parts[("b",)].replicas == 1 and not parts[("b",)].shared
    assert "b missed the SLO in the last round" in split.text() and "b: 1 replica(s)" in split.text()
    with pytest.raises(ValueError):
        split_missed(plan, ("a",), ("a",))


def test_the_fleet_is_the_split_groups_parts_and_is_confirmed_by_them():
    """A split group's failed confirmation stays in the report; the plan's groups, replicas and verdict are its
    parts'."""
    from deployment_toolkit.deployment.groups import Split
    from deployment_toolkit.deployment.plan import DeploymentPlan

    ab, a, b, c = (_group(("a", "b"), 3, {"a": 1.0, "b": 1.0}), _group(("a",), 1, {"a": 2.0}),
                   _group(("b",), 1, {"b": 2.0}), _group(("c",), 2, {"c": 1.0}))
    verdicts = {("a", "b"): False, ("a",): True, ("b",): True, ("c",): True}
    plan = DeploymentPlan(None, None, None, None, 0.1)
    plan.packings.append(_packing(ab, c))
    plan.splits.append(Split(("a", "b"), ("a",), (a, b)))
    plan.confirmations.extend(SimpleNamespace(models=m, passed=v, replicas={("c",): 2}.get(m, 1),
                                              rates={n: 1.0 for n in m}) for m, v in verdicts.items())
    assert [g.models for g in plan.groups] == [("a",), ("b",), ("c",)] and plan.replicas == 4
    assert plan.confirmed is True and plan.code == 0
    assert plan.split_of(("a", "b")) is plan.splits[0] and plan.split_of(("c",)) is None
    plan.confirmations[-1].passed = False
    assert plan.confirmed is False


def test_a_group_the_neighbours_kept_from_measuring_is_kept_apart_and_says_nothing_of_its_size(monkeypatch):
    """Issue 54: a shared group whose mix got no quiet window (perf.neighbours.HostDisturbed) is kept apart, not
    measured, and, unlike a group that held nothing, does not cap how many models later packings put together."""
    from deployment_toolkit.deployment import groups
    from deployment_toolkit.perf import neighbours

    class Disturbed:
        def __init__(self, *a, **k):
            pass

        def measure(self, total, *a):
            raise neighbours.HostDisturbed("a + b at 10 requests/s: no quiet window in 4 tries")

    monkeypatch.setattr(groups, "mix_of", lambda *a, **k: Disturbed())
    plan = _plan(["a", "b"], capacity=100.0, rate=10.0, resolution=0.1)
    group = groups.pack(groups._loads(plan, 2), groups._limits(plan), plan.settings.solver).groups[0]
    assert group.shared
    measured = groups._measure_group(plan, group, groups._loads(plan, 2))
    assert measured.held is None and measured.disturbed
    assert measured.text().startswith("a + b: not measured (a + b at 10 requests/s: no quiet window")
    monkeypatch.setattr(groups, "_measure_group", lambda p, g, loads, server=None: measured)
    groups.pack_measured(plan)
    assert ("a", "b") in plan.apart and plan.most_shared is None


def test_the_bound_is_stated_with_perfect_sharing_and_with_the_factors_measured():
    """Issue 55: plan.md says how far the fleet is from perfect time sharing. Four models whose replica holds 100
    inf/s, each at 60 inf/s with 20 % headroom, load 2.88 replicas: 3 by perfect time sharing; with each sharing
    factor measured at 0.5 a shared replica carries less, so the bound with the factors is higher."""
    from deployment_toolkit.deployment import groups

    plan = _plan(["a", "b", "c", "d"], capacity=100.0, rate=60.0)
    perfect, measured = groups.bound_by_sharing(plan)
    assert perfect == measured == 3
    plan.sharing.measured.update({n: {2: 0.5} for n in "abcd"})
    perfect, measured = groups.bound_by_sharing(plan)
    assert perfect == 3 and measured > perfect


def _measured_by_size(monkeypatch, truth) -> list[tuple[str, ...]]:
    """Measuring a shared group, faked: it holds `truth(size)` of what perfect time sharing predicts (the host's
    real sharing), whatever factors the plan predicted with. Returns the groups measured, in order."""
    import dataclasses

    from deployment_toolkit.deployment import groups

    seen: list[tuple[str, ...]] = []

    def measure(plan, group, loads, server=None):
        seen.append(group.models)
        split = {n: group.rates[n] for n in group.models}
        perfect = time_shared([dataclasses.replace(m, sharing=1.0) for m in loads], split)
        held = perfect * truth(len(group.models))
        return MeasuredGroup(group.models, split, time_shared(loads, split), Holding(held, held, 1),
                             fit=groups._fit(loads, split, held))

    monkeypatch.setattr(groups, "_measure_group", measure)
    return seen


def test_a_large_group_that_shared_badly_does_not_rule_out_smaller_ones(monkeypatch):
    """The fleet of issue 55 in small: eight models of 0.12 replicas' worth each fit one replica by time sharing,
    but the group of eight holds x0.3 of it, groups of four x0.9. One factor per model fell to x0.3 for every group
    (4 replicas: 8 x 0.12 / 0.3, each model nearly alone); by size, the smaller groups are estimated from the eight
    (each co-runner costing the same), measured, and 2 replicas of four carry the eight."""
    from deployment_toolkit.deployment import groups

    seen = _measured_by_size(monkeypatch, lambda size: 0.9 if size <= 4 else 0.3)
    plan = _plan([f"m{i}" for i in range(8)], capacity=1000.0, rate=100.0)
    packing = groups.pack_measured(plan)
    assert len(seen[0]) == 8, seen
    assert abs(plan.sharing.factor("m0", 8) - 0.3) < 1e-9 and abs(plan.sharing.factor("m0", 4) - 0.9) < 1e-9
    assert packing.replicas == 2 and max(len(g.models) for g in packing.groups) == 4, packing.groups
    perfect, measured = groups.bound_by_sharing(plan)
    assert perfect == 1 and measured == 2


def test_a_measured_group_holding_more_than_its_estimate_raises_the_factor_never_above_one():
    from deployment_toolkit.deployment import groups

    plan = _plan(["a", "b"], capacity=100.0, rate=10.0)
    loads = tuple(dataclasses.replace(m, sharing=0.5) for m in groups._loads(plan, 2))
    fit = groups._fit(loads, {"a": 12.0, "b": 12.0}, 80.0)  # predicted 50 at x0.5: held 1.6 x the prediction
    assert fit is not None and abs(fit.ratio - 1.6) < 1e-9 and fit.factors == {"a": 0.8, "b": 0.8}
    assert groups._fit(loads, {"a": 12.0, "b": 12.0}, 200.0).factors == {"a": 1.0, "b": 1.0}
    assert groups._fit(loads, {"a": 12.0, "b": 12.0}, 50.0) is None  # held the prediction: nothing changes


def test_the_last_packing_is_packed_once_more_where_what_it_showed_costs_less(monkeypatch):
    """Twelve models: the third packing's group of three held x0.17 of its estimate and took 3 replicas as measured.
    Packed once more on what it showed, the models cost fewer: that packing is kept, its new groups left to the
    confirmation (which measures and derates each)."""
    from deployment_toolkit.deployment import groups

    # pairs share at x0.9, larger groups at x0.2: whatever the first packings chose, the last one as measured
    # must not cost more than packing once more on the factors it showed
    seen = _measured_by_size(monkeypatch, lambda size: 0.9 if size <= 2 else 0.2)
    plan = _plan([f"m{i}" for i in range(6)], capacity=1000.0, rate=120.0)  # 0.144 replicas' worth each
    monkeypatch.setattr(groups, "MAX_PACKINGS", 1)
    packing = groups.pack_measured(plan)
    assert len(seen) == 1 and len(seen[0]) == 6, seen  # one packing measured: all six on one replica, x0.2
    assert len(plan.packings) == 2, "not packed once more after the last packing's group fell short"
    as_measured = groups._as_measured(plan, plan.packings[0]).replicas
    assert packing.replicas < as_measured and max(len(g.models) for g in packing.groups) < 6


def test_a_model_whose_full_batch_takes_anothers_whole_slo_is_kept_from_sharing_with_it():
    """Twelve models: scorer_apac (20 ms) beside photos (8 images in 28 ms) missed in 3 of 3 rounds of check-plan
    at 46-87 ms, at any rate. Here: a tight model and a slow one that time sharing would put on one replica."""
    from deployment_toolkit.deployment import groups

    plan = _plan(["tight", "slow", "other"], capacity=1000.0, rate=10.0)
    slos = {"tight": 20.0, "slow": 500.0, "other": 500.0}
    plan.deployment.model = lambda name: SimpleNamespace(p99_ms=slos[name])
    plan.models["slow"] = SimpleNamespace(capacity=250.0, search=plan.models["tight"].search)  # batch of 1: 4 ms
    assert groups.slow_neighbours(plan) == [] and len(groups._pack(plan).groups) == 1
    plan.models["slow"] = SimpleNamespace(
        capacity=40.0, search=plan.models["tight"].search)  # batch of 1: 25 ms >= 20 ms
    assert groups.batch_ms(plan, "slow") == pytest.approx(25.0)
    assert groups.slow_neighbours(plan) == [("tight", "slow")]
    packing = groups._pack(plan)
    assert not any({"tight", "slow"} <= set(g.models) for g in packing.groups), packing.groups
