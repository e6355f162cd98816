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
