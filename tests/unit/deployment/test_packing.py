"""Which models share a replica as a MILP (issue 44, items 2 and 4): limits respected, misfits reported, a group that
fell short re-packed with what it showed, and the optimum equal to a brute force over every grouping."""
from __future__ import annotations

import math
import time

import numpy as np
import pytest

from deployment_toolkit.deployment.packing import (ModelLoad, PackLimits, SolverSettings, SolveStatus, fit_sharing,
                                                   lower_bound, pack)
from deployment_toolkit.errors import UserInputError

EXACT = SolverSettings(gap=0.0, time_limit_s=30)


def flat(name: str, load: float, memory_gb: float = 0.0, capacity: float = 100.0) -> ModelLoad:
    """A constant load of `load` replicas' worth (headroom 0)."""
    return ModelLoad.at_peak(name, capacity, load * capacity, memory_gb)


def together(packing, *names: str) -> bool:
    return any(set(names) <= set(g.models) for g in packing.groups)


def holds_every_slice(models, packing, headroom: float) -> bool:
    by_name = {m.name: m for m in models}
    for g in packing.groups:
        ms = [by_name[n] for n in g.models]
        slices = max(len(m.rates) for m in ms)
        load = sum(np.resize(np.asarray(m.rates), slices) * (1 + headroom) / m.capacity
                   / (m.sharing if g.shared else 1.0) for m in ms)
        if load.max() > g.replicas + 1e-9:
            return False
    return sorted(n for g in packing.groups for n in g.models) == sorted(by_name)


def test_small_models_share_and_isolation_wins_a_tie():
    shared = pack([flat("a", 0.4), flat("b", 0.5)], PackLimits(headroom=0.0))
    assert shared.replicas == 1 and together(shared, "a", "b") and shared.status is SolveStatus.OPTIMAL
    # 0.6 + 0.6 needs 2 shared replicas, as many as alone: alone wins (no interference for nothing)
    apart = pack([flat("a", 0.6), flat("b", 0.6)], PackLimits(headroom=0.0))
    assert apart.replicas == 2 and [g.models for g in apart.groups] == [("a",), ("b",)]


def test_memory_limits_force_models_apart():
    models = [flat("a", 0.2, memory_gb=3.0), flat("b", 0.2, memory_gb=3.0), flat("c", 0.2, memory_gb=0.5)]
    free = pack(models, PackLimits(headroom=0.0))
    assert free.replicas == 1
    tight = pack(models, PackLimits(memory_gb=5.0, headroom=0.0))
    assert not together(tight, "a", "b") and tight.replicas == 2
    assert all(g.memory_gb <= 5.0 for g in tight.groups)
    server = pack(models, PackLimits(memory_gb=5.0, server_gb=1.5, headroom=0.0))  # 3.5 GB left: c fits with a or b
    assert all(g.memory_gb <= 3.5 for g in server.groups) and server.replicas == 2


def test_max_models_per_server_bounds_a_group():
    models = [flat(n, 0.1) for n in "abcde"]
    assert pack(models, PackLimits(headroom=0.0)).replicas == 1
    two = pack(models, PackLimits(max_models=2, headroom=0.0))
    assert two.replicas == 3 and max(len(g.models) for g in two.groups) == 2


def test_a_model_that_fits_nowhere_is_reported_and_the_rest_are_packed():
    models = [flat("a", 0.3, 1.0), flat("big", 0.1, 12.0), ModelLoad.at_peak("dead", None, 5.0), flat("b", 0.3, 1.0)]
    packing = pack(models, PackLimits(memory_gb=8.0, headroom=0.0))
    assert {m.name for m in packing.misfits} == {"big", "dead"}
    reasons = {m.name: m.reason for m in packing.misfits}
    assert "out of memory" in reasons["big"] and "12.00 GB" in reasons["big"]
    assert "no capacity" in reasons["dead"]
    assert packing.replicas == 1 and together(packing, "a", "b")
    assert "big: out of memory" in packing.reason


def test_max_replicas_exceeded_says_so_with_the_replicas_needed():
    packing = pack([ModelLoad.at_peak("a", 100.0, 1000.0)], PackLimits(max_replicas=5, headroom=0.0))
    assert not packing.within_limit and packing.replicas == 10
    assert "needs 10 replicas" in packing.reason and "limits.max_replicas 5" in packing.reason
    assert pack([ModelLoad.at_peak("a", 100.0, 1000.0)], PackLimits(max_replicas=10, headroom=0.0)).within_limit
    # a plan of one model was given the limit as a flag: the message names the flag, not a file key
    flagged = pack([ModelLoad.at_peak("a", 100.0, 1000.0)],
                   PackLimits(max_replicas=5, headroom=0.0, max_replicas_key="--max-replicas"))
    assert "more than --max-replicas 5" in flagged.reason and "limits." not in flagged.reason


def test_the_bound_said_before_solving_never_passes_a_packing_and_only_rises_as_capacities_fall():
    """The plan refuses a fleet over max_replicas before a server starts, from this bound at the capacities the
    searches found: no packing may need fewer (pack's own bound is this or the solver's tighter one), and lower
    capacities (the holds) or sharing factors below 1 must never lower it."""
    rng = np.random.default_rng(7)
    for _ in range(20):
        models = [ModelLoad(f"m{i}", float(rng.uniform(20, 200)), tuple(rng.uniform(0, 300, 4)),
                            float(rng.uniform(0, 2))) for i in range(int(rng.integers(1, 7)))]
        limits = PackLimits(memory_gb=4.0, headroom=0.2)
        packing = pack(models, limits)
        assert lower_bound(models, limits) <= packing.lower_bound <= packing.replicas
        held = [ModelLoad(m.name, m.capacity * 0.8, m.rates, m.memory_gb, 0.7) for m in models]
        assert lower_bound(held, limits) >= lower_bound(models, limits)
    assert lower_bound([ModelLoad.at_peak("dead", None, 10.0)]) == 0  # nothing placeable, as pack leaves it


def test_a_group_that_fell_short_is_repacked_with_the_fitted_factor():
    models = [flat("a", 0.4), flat("b", 0.4)]
    first = pack(models, PackLimits(headroom=0.0))
    group = first.groups[0]
    assert group.models == ("a", "b") and first.replicas == 1
    assert group.rates == pytest.approx({"a": 40.0, "b": 40.0})  # what the confirmation drives
    fit = fit_sharing(models, group.rates, held_rps=60.0)  # time sharing predicted 100 inf/s in total
    assert fit.predicted_rps == pytest.approx(100.0) and fit.ratio == pytest.approx(0.6)
    assert fit.factors == pytest.approx({"a": 0.6, "b": 0.6})
    again = pack(fit.apply(models), PackLimits(headroom=0.0))
    assert not together(again, "a", "b") and again.replicas == 2  # 0.4/0.6 x 2 = 1.33: sharing no longer pays


def test_a_fit_never_raises_a_factor_above_one_and_a_third_model_changes_the_split():
    models = [flat("a", 0.3), flat("b", 0.3), flat("c", 0.3)]
    first = pack(models, PackLimits(headroom=0.0))
    assert first.replicas == 1 and len(first.groups) == 1
    better = fit_sharing(models, first.groups[0].rates, held_rps=500.0)
    assert better.ratio == pytest.approx(5.0) and better.factors == pytest.approx({"a": 1.0, "b": 1.0, "c": 1.0})
    short = fit_sharing(models, first.groups[0].rates, held_rps=75.0)  # predicted 100: 0.75
    again = pack(short.apply(models), PackLimits(headroom=0.0))
    assert again.replicas == 2 and len(again.groups) == 2  # 0.9 / 0.75 = 1.2 in one group: a pair shares, one alone
    with pytest.raises(ValueError, match="held rate > 0"):
        fit_sharing(models, first.groups[0].rates, held_rps=0.0)


def test_apart_keeps_a_measured_failure_from_sharing_again():
    models = [flat("a", 0.2), flat("b", 0.2), flat("c", 0.2)]
    packing = pack(models, PackLimits(headroom=0.0), apart=[("a", "b")])
    assert not together(packing, "a", "b") and packing.replicas == 2
    three = pack(models, PackLimits(headroom=0.0), apart=[("a", "b", "c")])
    assert len(three.groups) == 2 and three.replicas == 2


def test_bad_input_is_one_line_naming_the_model():
    with pytest.raises(UserInputError, match="a: rates must be finite"):
        ModelLoad("a", 10.0, (1.0, -2.0))
    with pytest.raises(UserInputError, match="a: sharing factor must be in"):
        ModelLoad("a", 10.0, (1.0,), sharing=0.0)
    with pytest.raises(UserInputError, match="a: 2 time slices, the others 3"):
        pack([ModelLoad("a", 10.0, (1.0, 2.0)), ModelLoad("b", 10.0, (1.0, 2.0, 3.0))])
    with pytest.raises(UserInputError, match="named twice: a"):
        pack([flat("a", 0.1), flat("a", 0.2)])
    with pytest.raises(UserInputError, match="server_gb 8 leaves no room"):
        PackLimits(memory_gb=8.0, server_gb=8.0)
    with pytest.raises(UserInputError, match="headroom must be"):
        PackLimits(headroom=-0.1)


def test_the_solver_prints_nothing(capfd):
    pack([flat("a", 0.4), flat("b", 0.5), flat("c", 1.7)], PackLimits(headroom=0.0))
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def _partitions(items: list[int]):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for smaller in _partitions(rest):
        yield [[first], *smaller]
        for k in range(len(smaller)):
            yield [*smaller[:k], [first, *smaller[k]], *smaller[k + 1:]]


def _brute_force(models: list[ModelLoad], limits: PackLimits) -> int:
    u = np.array([np.asarray(m.rates) * (1 + limits.headroom) / m.capacity for m in models])
    s = np.array([m.sharing for m in models])[:, None]
    mem = np.array([m.memory_gb for m in models])
    best = math.inf
    for split in _partitions(list(range(len(models)))):
        cost = 0
        for g in split:
            if len(g) == 1:
                cost += max(1, math.ceil(u[g[0]].max() - 1e-7))
                continue
            if limits.memory_gb is not None and mem[g].sum() > limits.memory_gb + 1e-9:
                break
            if limits.max_models is not None and len(g) > limits.max_models:
                break
            cost += max(1, math.ceil((u[g] / s[g]).sum(axis=0).max() - 1e-7))
        else:
            best = min(best, cost)
    return int(best)


def _random_models(rng: np.random.Generator, n: int, slices: int, memory_gb: tuple[float, float] = (0.5, 3.0)
                   ) -> list[ModelLoad]:
    models = []
    hours = np.arange(slices) / slices * 24
    for i in range(n):
        capacity = float(rng.choice([50.0, 190.0, 520.0, 1270.0]))
        load = float(rng.uniform(0.05, 1.6))
        phase = float(rng.uniform(0, 24))
        shape = 0.15 + 0.85 * ((1 + np.cos(2 * np.pi * (hours - phase) / 24)) / 2) ** 2
        models.append(ModelLoad(f"m{i}", capacity, tuple(load * capacity * shape / shape.max()),
                                float(rng.uniform(*memory_gb)), float(rng.choice([1.0, 1.0, 0.8]))))
    return models


def _case(seed: int) -> tuple[list[ModelLoad], PackLimits]:
    rng = np.random.default_rng(seed)
    models = _random_models(rng, 5 + seed % 2, 24)
    return models, PackLimits(memory_gb=float(rng.choice([4.0, 6.0, 100.0])), max_models=int(rng.choice([2, 3, 6])),
                              headroom=0.2)


@pytest.mark.parametrize("seed", range(12))
def test_the_optimum_equals_a_brute_force_over_every_grouping(seed):
    models, limits = _case(seed)
    packing = pack(models, limits, EXACT)
    assert packing.status is SolveStatus.OPTIMAL
    assert packing.replicas == _brute_force(models, limits)
    assert packing.lower_bound <= packing.replicas and holds_every_slice(models, packing, 0.2)


@pytest.mark.parametrize("seed", [38, 72])  # cases whose first solve groups models that overflow a slice left out
def test_slices_left_out_are_added_when_a_group_overflows_them_and_the_optimum_still_holds(seed):
    models, limits = _case(seed)
    packing = pack(models, limits, EXACT)
    assert packing.solves >= 2 and packing.slices_solved < packing.slices == 24
    assert packing.replicas == _brute_force(models, limits) and holds_every_slice(models, packing, 0.2)


def test_thirty_models_pack_within_a_loose_limit_and_the_bound_holds():
    rng = np.random.default_rng(42)
    models = _random_models(rng, 30, 288, memory_gb=(0.7, 1.5))  # as the recorded searches' host memory
    limits = PackLimits(memory_gb=8.0, max_models=8, headroom=0.2, price_per_replica=0.4)
    started = time.perf_counter()
    packing = pack(models, limits, SolverSettings(time_limit_s=20))  # room for a busy 2-core host
    assert time.perf_counter() - started < 30
    assert holds_every_slice(models, packing, 0.2)
    assert packing.lower_bound <= packing.replicas and packing.cost_bound <= packing.cost
    assert packing.cost == pytest.approx(0.4 * packing.replicas)
    assert packing.gap <= 0.10
    assert packing.replicas <= packing.replicas_by_peaks  # sized by peaks, the same groups never need fewer


def test_each_model_is_planned_with_its_own_headroom_not_the_noisiest_ones():
    """Issue 54 item 3: a steady model does not pay for a noisy one: each model's load carries its own headroom
    (ModelLoad.headroom), in a group or alone; the limits' headroom is only the default."""
    steady = ModelLoad("steady", 100.0, (90.0,), headroom=0.05)
    noisy = ModelLoad("noisy", 100.0, (90.0,), headroom=0.5)
    packing = pack([steady, noisy], PackLimits(headroom=0.2))
    rates = {n: r * g.replicas for g in packing.groups for n, r in g.rates.items()}
    assert math.isclose(rates["steady"], 90 * 1.05) and math.isclose(rates["noisy"], 90 * 1.5)
    by_model = {n: g.replicas for g in packing.groups for n in g.models}
    assert by_model["steady"] == 1 and by_model["noisy"] == 2  # 94.5 fits one replica, 135 needs two
    (alone,) = pack([ModelLoad("steady", 100.0, (90.0,))], PackLimits(headroom=0.2)).groups
    assert math.isclose(alone.rates["steady"] * alone.replicas, 90 * 1.2) and alone.replicas == 2
