"""Which models share a replica (issue 36): every grouping priced, shared groups measured only where they could
win, the cheapest layout chosen."""
from __future__ import annotations

import pytest

from deployment_toolkit.deployment.colocate import GroupCapacity, decide, estimate, partitions


def test_partitions_are_every_grouping_once():
    for n, bell in ((1, 1), (2, 2), (3, 5), (4, 15)):
        splits = list(partitions("abcd"[:n]))
        assert len(splits) == bell and len({tuple(sorted(s)) for s in splits}) == bell
        assert all(sorted(m for g in s for m in g) == list("abcd"[:n]) for s in splits)


def test_two_small_models_share_one_replica_when_the_measured_mix_holds_them():
    asked = []
    d = decide({"a": 10, "b": 5}, {"a": 100, "b": 50}, 0.2, 2.0, lambda g: asked.append(g) or GroupCapacity(60.0))
    assert asked == [("a", "b")]
    assert [g.models for g in d.chosen.groups] == [("a", "b")] and d.chosen.replicas == 1
    assert d.chosen.cost_per_hour == 2.0
    assert d.chosen.groups[0].rates == {"a": 12.0, "b": 6.0}  # peak x (1 + headroom) per replica


def test_a_mix_that_interferes_loses_to_dedicated_replicas():
    # alone each fits one replica; the estimate says one shared replica, the measurement says 2 would be needed
    d = decide({"a": 40, "b": 40}, {"a": 100, "b": 100}, 0.0, 1.0, lambda g: GroupCapacity(50.0))
    assert d.measured == {("a", "b"): GroupCapacity(50.0)}
    assert [g.models for g in d.chosen.groups] == [("a",), ("b",)] and d.chosen.replicas == 2
    assert not d.chosen.estimated


def test_a_group_that_cannot_share_is_priced_out_with_its_reason():
    d = decide({"a": 1, "b": 1}, {"a": 100, "b": 100}, 0.2, None,
               lambda g: GroupCapacity(None, "out of memory: a 3 GB + b 2 GB > 4 GB"))
    assert [g.models for g in d.chosen.groups] == [("a",), ("b",)]
    shared = next(l for l in d.compared if len(l.groups) == 1)
    assert shared.replicas is None and "out of memory" in shared.groups[0].capacity.reason


def test_max_replicas_refuses_with_the_number_needed():
    d = decide({"a": 1000}, {"a": 100}, 0.0, 1.0, lambda g: GroupCapacity(1.0), max_replicas=5)
    assert d.chosen is None and "needs 10 replicas, more than limits.max_replicas 5" in d.reason


def test_time_sharing_estimate():
    assert estimate(("a", "b"), {"a": 10, "b": 10}, {"a": 100, "b": 50}).rate == pytest.approx(20 / 0.3)


def test_a_capacity_holds_only_after_k_of_k_retests_at_the_rate_itself():
    from deployment_toolkit.sizing.holding import hold

    class Point:
        def __init__(self, ok):
            self.ok = ok

        def passes(self, slo=None):
            return self.ok

        def verdict(self, slo=None):
            return "pass" if self.ok else "fail: p99 80 ms > 50 ms"

    flaky = iter([True, False])  # the found rate passes once, then fails its second re-test
    held = hold(lambda rate, trial: Point(next(flaky, rate <= 90.0)), 100.0, k=3)
    assert held.rate == pytest.approx(90.0) and held.derated
    assert [(r.rate, r.passed) for r in held.retests] == [(100.0, True), (100.0, False)] + [(pytest.approx(90.0), True)] * 3
    assert len({r.trial for r in held.retests}) == 5  # every re-test its own arrivals
    never = hold(lambda rate, trial: Point(False), 100.0, k=2)
    assert never.rate is None and "did not hold" in never.text()


def test_a_load_is_charged_its_new_stubs_and_the_servers_growth_not_the_others_shrinking():
    """A second model's load: its stub (new pid) and the server's growth count; the first model's stubs freeing
    load-time buffers at the same moment do not cancel it (the plan read mobile as 0.00 GB that way)."""
    from deployment_toolkit.deployment.memory import added

    before = {100: 50e6, 101: 300e6, 102: 200e6}  # the server, the classifier's stubs
    after = {100: 60e6, 101: 150e6, 102: 120e6, 103: 180e6}  # stubs shrank by 230 MB, mobile's stub 180 MB
    assert added(before, after, 100) == 190e6
    assert added(before, {**after, 100: 40e6}, 100) == 180e6  # a server that shrank adds nothing
