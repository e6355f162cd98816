"""Issue 55: where a shared group's solo winners run twice the replica's cores in intra-op threads or more, the
split is measured first and the solo winners only re-tested k of k at the rate the split held less the resolution:
the rule of `kept` (the split only where it gains by more than the resolution) with one bisection instead of two."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from deployment_toolkit.deployment import groups
from deployment_toolkit.deployment.groupconfig import SPLIT, GroupSetting
from deployment_toolkit.deployment.groups import MeasuredGroup
from deployment_toolkit.perf.openloop.holding import Holding

SPLIT_HELD = 100.0  # what the group held with its threads split (inf/s)


@pytest.fixture()
def group_of_two(monkeypatch):
    """Two models whose solo winners hold `solo` inf/s together; the measuring faked, the calls recorded."""
    calls: list[str] = []
    threads = GroupSetting(SPLIT, {"a": 1, "b": 1})
    monkeypatch.setattr(groups, "split_setting", lambda plan, models: threads)
    monkeypatch.setattr(groups, "apply", lambda plan, server, models, setting: calls.append(
        "apply " + (setting.name if setting else "solo")))

    def measure_setting(plan, group, loads, tag):
        calls.append(f"bisect {tag}")
        held = SPLIT_HELD if tag == "mix-threads" else plan.solo
        return MeasuredGroup(group.models, dict(group.rates), 300.0, Holding(held, held, 1))

    monkeypatch.setattr(groups, "_measure_setting", measure_setting)

    class Mix:
        def measure(self, total, trial, tag):
            calls.append(f"re-test {total:.1f} #{trial}")
            return SimpleNamespace(passes=lambda: total <= plan.solo, verdict=lambda: "pass" if total <= plan.solo
                                   else "p99 over the SLO")

    monkeypatch.setattr(groups, "mix_of", lambda *a, **k: Mix())
    plan = SimpleNamespace(resolution=0.1, settings=SimpleNamespace(checks=SimpleNamespace(retests=3)), solo=0.0)
    group = SimpleNamespace(models=("a", "b"), rates={"a": 50.0, "b": 50.0})
    return plan, group, calls, threads


def test_solo_winners_that_cannot_hold_the_splits_rate_leave_the_split_without_a_second_bisection(
        group_of_two, monkeypatch):
    plan, group, calls, threads = group_of_two
    monkeypatch.setattr(groups, "oversubscription", lambda plan, models: 4.0)  # 4 models x 2 threads on 2 cores
    plan.solo = 60.0
    measured = groups._measure_group(plan, group, (), server=object())
    assert calls == ["apply intra-op threads split", "bisect mix-threads", "apply solo", "re-test 90.9 #201"]
    assert measured.setting is threads and measured.held == SPLIT_HELD
    solo, split = measured.tried
    assert solo.held is None and solo.below == pytest.approx(SPLIT_HELD / 1.1) and split.held == SPLIT_HELD
    assert solo.text().startswith("as searched alone: below 90.9 inf/s (re-test 1 of 3 at the split's rate")
    assert "4.0x the cores in threads" in solo.text()


def test_solo_winners_that_hold_it_are_kept_at_that_rate(group_of_two, monkeypatch):
    plan, group, calls, _ = group_of_two
    monkeypatch.setattr(groups, "oversubscription", lambda plan, models: 2.0)
    monkeypatch.setattr(groups, "_fit", lambda loads, split, held: ("fit at", held))
    plan.solo = 95.0
    measured = groups._measure_group(plan, group, (), server=object())
    assert calls[-3:] == ["re-test 90.9 #201", "re-test 90.9 #202", "re-test 90.9 #203"]
    assert "bisect mix" not in calls, "the solo winners were bisected although the split held"
    assert measured.setting is None and measured.held == pytest.approx(SPLIT_HELD / 1.1)
    assert measured.fit == ("fit at", pytest.approx(SPLIT_HELD / 1.1))  # the factors fitted to what it held


def test_below_the_threshold_the_solo_winners_are_measured_first_as_before(group_of_two, monkeypatch):
    plan, group, calls, threads = group_of_two
    monkeypatch.setattr(groups, "oversubscription", lambda plan, models: 1.5)
    plan.solo = 60.0
    measured = groups._measure_group(plan, group, (), server=object())
    assert calls == ["bisect mix", "apply intra-op threads split", "bisect mix-threads", "apply solo"]
    assert measured.setting is threads and [t.held for t in measured.tried] == [60.0, SPLIT_HELD]


def test_a_solo_re_test_the_neighbours_kept_from_measuring_keeps_the_split_that_held(group_of_two, monkeypatch):
    from deployment_toolkit.perf import neighbours

    plan, group, calls, threads = group_of_two
    monkeypatch.setattr(groups, "oversubscription", lambda plan, models: 4.0)

    class Busy:
        def measure(self, total, trial, tag):
            raise neighbours.HostDisturbed("a + b at 45 requests/s: no quiet window in 4 tries")

    monkeypatch.setattr(groups, "mix_of", lambda *a, **k: Busy())
    measured = groups._measure_group(plan, group, (), server=object())
    assert measured.setting is threads and measured.held == SPLIT_HELD
    assert measured.tried[0].text().startswith("as searched alone: not measured (a + b at 45 requests/s")
