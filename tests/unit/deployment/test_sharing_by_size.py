"""Sharing factors by group size (deployment.sharing, issue 55): a group that shared badly lowers the factors of
groups as large as it or larger, never of smaller ones (the planner's use of it: test_groups.py)."""
from __future__ import annotations

import pytest

from deployment_toolkit.deployment.sharing import SharingTable


def test_a_factor_holds_for_its_size_and_larger_and_is_interpolated_between():
    table = SharingTable()
    table.record({"a": 0.5, "b": 0.6}, 4)
    table.record({"a": 0.2}, 6)
    approx = pytest.approx
    # below the smallest size measured, each co-runner costs the same: 1 / factor from 1 (alone) to 2 (at four)
    assert table.factor("a", 1) == 1.0 and table.factor("a", 2) == approx(1 / (1 + 1 / 3))
    assert table.factor("a", 3) == approx(1 / (1 + 2 / 3)) and table.factor("a", 4) == 0.5
    assert table.factor("a", 5) == approx(1 / 3.5)  # between 2 (four) and 5 (six)
    assert table.factor("a", 6) == 0.2 and table.factor("a", 8) == approx(1 / 8)  # past six, on from 2 to 5
    assert table.factor("b", 7) == approx(3 / 7) and table.factor("c", 12) == 1.0  # 1/f: 5/3 at four, 7/3 at seven
    table.record({"a": 0.9}, 3)  # a smaller group that shared well does not raise a larger one's factor
    assert table.factor("a", 3) == 0.9 and table.factor("a", 4) == 0.5
    table.record({"a": 0.95}, 4)  # nor does a second group of the same size that shared better
    assert table.factor("a", 4) == 0.5
    table.record({"b": 0.8}, 6)  # a larger group never counts as sharing better than a smaller one did
    assert table.factor("b", 6) == 0.6 and table.factor("b", 5) == 0.6 and table.factor("b", 12) == 0.6


def test_the_caps_are_each_size_measured_the_one_below_and_bands_where_estimated():
    table = SharingTable()
    assert table.caps(None, 12) == [12] and table.caps(4, 12) == [4]
    assert table.caps(None, 1) == [1] and table.caps(1, 12) == [1]  # one model, or one a server: no sharing
    table.record({"a": 0.5}, 4)
    assert table.caps(None, 12) == [2, 3, 4, 6, 8, 12]
    table.record({"b": 0.2}, 6)
    assert table.caps(None, 12) == [2, 3, 4, 5, 6, 8, 12]
    assert table.caps(5, 12) == [2, 3, 4, 5]
    table.record({"c": 0.3}, 10)
    assert table.caps(None, 12) == [2, 3, 4, 5, 6, 8, 9, 10, 12]
    assert table.caps(1, 12) == [1]  # after a pair held nothing, no sharing at all


def test_the_text_says_each_factor_and_the_size_it_holds_from():
    table = SharingTable()
    assert table.text() == "none below 1"
    table.record({"a": 0.54, "b": 1.0}, 4)
    table.record({"a": 0.24}, 6)
    table.record({"a": 0.6}, 5)  # no lower than size 4's: changes nothing, not said
    assert table.text() == "a x0.54 (4 models or more), x0.24 (6 or more)"
    assert table.lowered() == {"a": {4: 0.54, 5: 0.6, 6: 0.24}}
