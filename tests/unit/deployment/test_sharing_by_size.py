"""Sharing factors by group size (deployment.sharing, issue 55): a group that shared badly lowers the factors of
groups as large as it or larger, never of smaller ones (the planner's use of it: test_groups.py)."""
from __future__ import annotations

import pytest

from deployment_toolkit.deployment.sharing import SharingTable
from deployment_toolkit.deployment.sharing_fit import Observation


def test_a_factor_holds_for_its_size_and_larger_and_is_interpolated_between():
    table = SharingTable({"a": {4: 0.5, 6: 0.2}, "b": {4: 0.6}})
    approx = pytest.approx
    # below the smallest size measured, each co-runner costs the same: 1 / factor from 1 (alone) to 2 (at four)
    assert table.factor("a", 1) == 1.0 and table.factor("a", 2) == approx(1 / (1 + 1 / 3))
    assert table.factor("a", 3) == approx(1 / (1 + 2 / 3)) and table.factor("a", 4) == 0.5
    assert table.factor("a", 5) == approx(1 / 3.5)  # between 2 (four) and 5 (six)
    assert table.factor("a", 6) == 0.2 and table.factor("a", 8) == approx(1 / 8)  # past six, on from 2 to 5
    assert table.factor("b", 7) == approx(3 / 7) and table.factor("c", 12) == 1.0  # 1/f: 5/3 at four, 7/3 at seven
    table.measured["a"][3] = 0.9  # a smaller size that shared well does not raise a larger one's factor
    assert table.factor("a", 3) == 0.9 and table.factor("a", 4) == 0.5
    table.measured["b"][6] = 0.8  # a larger group never counts as sharing better than a smaller one did
    assert table.factor("b", 6) == 0.6 and table.factor("b", 5) == 0.6 and table.factor("b", 12) == 0.6


def _observe(table: SharingTable, held_of_perfect: float, **split: float) -> Observation:
    """Models of capacity 100 inf/s alone at `split`; the group held `held_of_perfect` of perfect time sharing."""
    seen = Observation.of(split, {n: 100.0 for n in split}, 100.0 * held_of_perfect)
    table.observe(seen)
    return seen


def test_one_group_alone_lowers_its_members_alike_to_what_it_held():
    table = SharingTable()
    seen = _observe(table, 0.5, a=30.0, b=10.0)
    assert table.factor("a", 2) == pytest.approx(0.5) and table.factor("b", 2) == pytest.approx(0.5)
    assert seen.predicted({n: table.factor(n, 2) for n in "ab"}) == pytest.approx(50.0)
    _observe(table, 3.0, c=20.0, d=20.0)  # above perfect time sharing: a factor is never above 1
    assert table.factor("c", 2) == 1.0 and table.factor("d", 2) == 1.0


def test_the_model_that_shared_badly_is_blamed_not_the_one_beside_it_that_shared_well_elsewhere():
    """Twelve models: fraud + reviews held x0.23 of time sharing; scaled alike, reviews' factor fell with fraud's,
    and ranker + reviews then held x4.05 of what it predicted. Fitted together, fraud carries the miss."""
    table = SharingTable()
    _observe(table, 0.25, fraud=20.0, reviews=20.0)
    _observe(table, 1.0, ranker=20.0, reviews=20.0)
    assert table.factor("reviews", 2) == pytest.approx(1.0) and table.factor("ranker", 2) == pytest.approx(1.0)
    fraud = table.factor("fraud", 2)
    assert fraud == pytest.approx(1 / 7)  # 1 / (0.5 w + 0.5) = 0.25: w = 7
    for seen in table.observations:  # every group's prediction is what it held, none above it
        assert seen.predicted({n: table.factor(n, 2) for n in seen.seconds}) == pytest.approx(seen.held_rps)


def test_no_group_is_predicted_above_what_it_held_and_a_larger_group_never_shares_better():
    table = SharingTable()
    first = _observe(table, 0.5, a=20.0, b=20.0)
    _observe(table, 0.8, a=20.0, b=20.0)  # the same pair, measured again, held more: the lower one counts
    assert first.predicted({n: table.factor(n, 2) for n in "ab"}) == pytest.approx(50.0)
    _observe(table, 0.9, a=10.0, b=10.0, c=10.0)  # three held more than the pair: a and b no better than at two
    assert table.factor("a", 3) <= table.factor("a", 2) + 1e-9 and table.factor("b", 3) <= table.factor("b", 2) + 1e-9
    with pytest.raises(ValueError, match="two models or more"):
        Observation.of({"a": 10.0}, {"a": 100.0}, 50.0)
    with pytest.raises(ValueError, match="held a rate > 0"):
        Observation.of({"a": 10.0, "b": 10.0}, {"a": 100.0, "b": 100.0}, 0.0)


def test_the_caps_are_each_size_measured_the_one_below_and_bands_where_estimated():
    table = SharingTable()
    assert table.caps(None, 12) == [12] and table.caps(4, 12) == [4]
    assert table.caps(None, 1) == [1] and table.caps(1, 12) == [1]  # one model, or one a server: no sharing
    table.measured["a"] = {4: 0.5}
    assert table.caps(None, 12) == [2, 3, 4, 6, 8, 12]
    table.measured["b"] = {6: 0.2}
    assert table.caps(None, 12) == [2, 3, 4, 5, 6, 8, 12]
    assert table.caps(5, 12) == [2, 3, 4, 5]
    table.measured["c"] = {10: 0.3}
    assert table.caps(None, 12) == [2, 3, 4, 5, 6, 8, 9, 10, 12]
    assert table.caps(1, 12) == [1]  # after a pair held nothing, no sharing at all


def test_the_text_says_each_factor_and_the_size_it_holds_from():
    table = SharingTable()
    assert table.text() == "none below 1"
    table.measured.update({"a": {4: 0.54, 5: 0.6, 6: 0.24}, "b": {4: 1.0}})  # 5's is no lower than 4's: not said
    assert table.text() == "a x0.54 (4 models or more), x0.24 (6 or more)"
    assert table.lowered() == {"a": {4: 0.54, 5: 0.6, 6: 0.24}}
