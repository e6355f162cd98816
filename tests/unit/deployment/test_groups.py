"""The last packing's groups, as measured (deployment.groups): a shared group short of its plan gets the replicas
its measured capacity needs, one that held nothing is one line, the rest stand as packed."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from deployment_toolkit.deployment.errors import DeploymentPlanError
from deployment_toolkit.deployment.groups import MeasuredGroup, _as_measured
from deployment_toolkit.deployment.packing import PackedGroup, Packing, SolveStatus
from deployment_toolkit.deployment.packing_milp import BoundSource
from deployment_toolkit.sizing.holding import Holding


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


def test_after_a_group_held_nothing_later_packings_share_a_replica_among_fewer_models(monkeypatch):
    """Twelve models on CPU: each 6-model group the solver chose held no rate, and keeping only that exact set apart
    let the next packing choose another six (six measured, none held, the last packing's two groups of six
    unmeasured). A group that held nothing now caps later groups below its size."""
    from deployment_toolkit.deployment import groups
    from deployment_toolkit.deployment.packing import SolverSettings

    sizes: list[int] = []

    def measure(plan, group, loads):  # a group of more than two holds nothing; a pair holds what was planned
        sizes.append(len(group.models))
        split = dict(group.rates)
        if len(group.models) > 2:
            return MeasuredGroup(group.models, split, 1.0, None, "no total rate kept every model within its SLO")
        return MeasuredGroup(group.models, split, 1.0, Holding(sum(split.values()), sum(split.values()), 1))

    monkeypatch.setattr(groups, "_measure_group", measure)
    names = [f"m{i}" for i in range(6)]
    limits = SimpleNamespace(max_models=None, max_replicas=100, key=lambda name: f"limits.{name}")
    plan = SimpleNamespace(
        memory=None, headroom=0.2, price_per_replica=1.0, deployment=SimpleNamespace(limits=limits),
        models={n: SimpleNamespace(capacity=1000.0) for n in names},
        traffic=SimpleNamespace(rates={n: (10.0,) for n in names}), sharing={}, packings=[], measured={}, apart=[],
        most_shared=None, settings=SimpleNamespace(solver=SolverSettings(), checks=SimpleNamespace(retests=1)),
        steps=SimpleNamespace(call=lambda label, work: work()))
    packing = groups.pack_measured(plan)
    assert sizes[0] == 6 and plan.most_shared is not None and plan.most_shared < 6
    # three packings measured (6, 5, 4 models a group); the last packing, left to the confirmation, stays below them
    assert [s for s in sizes if s > 2] == [6, 5, 4] and plan.most_shared == 3 and len(plan.packings) == 4
    assert max(len(g.models) for g in packing.groups) <= 3
