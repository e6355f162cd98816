"""A replica group's confirmation (deployment.confirm): majority of trials, derating to what the replica carried,
replicas recomputed for the same load, at most `rounds` rounds; the load generator's share of the host said."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from deployment_toolkit.deployment.confirm import confirm_group, derate_factor
from deployment_toolkit.deployment.mixed import MixPoint
from deployment_toolkit.perf.openloop.ratepoint import RatePoint
from deployment_toolkit.perf.openloop.ratestore import RateKey, options_key

OPTS = options_key({"measurement_interval_ms": 1000})


def _point(name: str, rate: float, carried: float, trial: int) -> RatePoint:
    """One model's point on a replica that answers up to `carried` inferences/s of it (a growing queue above)."""
    over = rate > carried
    row = {"answered": carried if over else rate, "p99_ms": 400.0 if over else 20.0, "avg_ms": 5.0,
           "window_latency_ms": [5, 10, 20, 40] if over else [5, 5, 5], "send_rate": None, "queue_growing": over,
           "client_limited": False, "stable": True}
    return RatePoint(RateKey(name, "poisson", rate, 1, OPTS, trial), row)


@dataclass
class Member:
    name: str


class ReplicaMix:
    """What one replica holds in total: a replica over `holds` inferences/s carries `holds` split as offered."""

    def __init__(self, holds: float, names=("a", "b"), cpu_s: float = 1.5):
        self.holds, self.members, self.calls, self.cpu_s = holds, [Member(n) for n in names], [], cpu_s

    def at_rates(self, rates, trial=1, tag=""):
        self.calls.append(dict(rates))
        total = sum(rates.values())
        scale = min(1.0, self.holds / total)
        points = {n: _point(n, r, r * scale if scale < 1 else r, trial) for n, r in rates.items()}
        return MixPoint(total, points, {n: 100.0 for n in rates}, client_cpu_s=self.cpu_s, wall_s=3.0)


def test_a_group_that_holds_its_rates_passes_in_one_round():
    mix = ReplicaMix(holds=100)
    c = confirm_group(mix, {"a": 60, "b": 30}, replicas=1, rounds=3, trials=3)
    assert c.passed and not c.derated and c.replicas == 1 and len(c.rounds[0].points) == 3  # all run: its spread
    assert c.rates == {"a": 60, "b": 30} and c.passed_of("a") == 3 and not c.margin_round


class NoisyMix(ReplicaMix):
    """A replica whose trial `bad` carries only 80 inferences/s (a noisy group); the others carry `holds`."""

    def __init__(self, holds: float, bad: int, **kw):
        super().__init__(holds, **kw)
        self.bad = bad

    def at_rates(self, rates, trial=1, tag=""):
        holds = self.holds
        if len(self.calls) + 1 == self.bad:
            self.holds = 80
        try:
            return super().at_rates(rates, trial, tag)
        finally:
            self.holds = holds


def test_a_thin_pass_sizes_the_groups_own_margin_and_a_steady_group_keeps_its_own():
    """Passing 2 of 3 trials is a pass with a margin thinner than the group's own spread: the failed trial's carried
    share derates it once more (the margin round), which then decides; a group whose every trial held is not
    touched. The report says where each group's margin came from."""
    thin = confirm_group(NoisyMix(holds=1000, bad=2), {"a": 60, "b": 30}, replicas=1, rounds=3, trials=3,
                         margins={"a": 0.1, "b": 0.25})
    assert [r.tally() for r in thin.rounds] == ["2 of 3 trials passed", "3 of 3 trials passed"]
    assert thin.margin_round and thin.passed and thin.replicas == 2 and thin.rates == {"a": 30, "b": 15}
    text = thin.margin_text()
    assert "a 10%, b 25%" in text and "a thin pass (2 of 3 trials passed at 1 replica(s))" in text
    assert "carried 89% of its rates" in text  # 80 of the 90 offered
    steady = confirm_group(NoisyMix(holds=1000, bad=0), {"a": 60, "b": 30}, replicas=1, rounds=3, trials=3)
    assert not steady.margin_round and steady.replicas == 1 and "thin" not in steady.margin_text()


def test_a_trial_with_no_quiet_window_leaves_the_group_not_measured_not_failed():
    """perf.neighbours gave up on a window: the group has no verdict (the plan exits 1 saying so), its rates are
    not derated and nothing is split."""
    from deployment_toolkit.perf.neighbours import HostDisturbed

    class Disturbed(ReplicaMix):
        def at_rates(self, rates, trial=1, tag=""):
            if len(self.calls) == 1:
                self.calls.append(rates)
                raise HostDisturbed("confirm: no quiet window in 4 tries (others took 1.2 of 2 cores)")
            return super().at_rates(rates, trial, tag)

    c = confirm_group(Disturbed(holds=1000), {"a": 60, "b": 30}, replicas=1, rounds=3, trials=3)
    assert not c.passed and len(c.rounds) == 1 and len(c.rounds[0].points) == 1 and c.replicas == 1
    assert c.summary().startswith("a + b: NOT CONFIRMED (not measured) (1 of 1 trials passed); confirm: no quiet")


def test_a_group_that_falls_short_is_derated_to_what_it_carried_and_confirmed_again():
    mix = ReplicaMix(holds=100)
    c = confirm_group(mix, {"a": 120, "b": 60}, replicas=1, rounds=3, trials=1)  # 180 offered, 100 carried
    assert [r.replicas for r in c.rounds] == [1, 2] and c.passed and c.derated
    assert c.rates == {"a": 60, "b": 30}  # the same load over the replicas the derating asked for
    assert "PASS after derating to 2 replica(s)" in c.summary()


def test_a_group_out_of_rounds_fails_and_says_so():
    c = confirm_group(ReplicaMix(holds=100), {"a": 120, "b": 60}, replicas=1, rounds=1, trials=1)
    assert not c.passed and len(c.rounds) == 1 and c.replicas == 1 and c.summary().endswith("FAIL (0 of 1 trials "
                                                                                            "passed)")


class InterferedMix(ReplicaMix):
    """Model `a` answers all it is offered at p99 150 ms (its SLO: 100) whatever its rate: its neighbours, not its
    load, keep it over (the twelve-model plan: scorer_apac at 19.5 ms with 660 inf/s a replica, 53.1 ms with 220)."""

    def at_rates(self, rates, trial=1, tag=""):
        self.calls.append(dict(rates))
        points = {}
        for n, r in rates.items():
            row = {"answered": r, "p99_ms": 150.0 if n == "a" else 20.0, "avg_ms": 5.0, "window_latency_ms": [5, 5],
                   "send_rate": None, "queue_growing": False, "client_limited": False, "stable": True}
            points[n] = RatePoint(RateKey(n, "poisson", r, 1, OPTS, trial), row)
        return MixPoint(sum(rates.values()), points, {n: 100.0 for n in rates}, client_cpu_s=1.0, wall_s=3.0)


def test_a_shared_group_that_derating_does_not_help_stops_and_says_why():
    """Derating answers load: once a model misses again at a lower rate with its p99 no better, more replicas are
    not the answer, and the group stops (the planner splits it); a model alone goes on derating to its last round."""
    c = confirm_group(InterferedMix(holds=1000), {"a": 60, "b": 30}, replicas=1, rounds=4, trials=1)
    assert [r.replicas for r in c.rounds] == [1, 2] and not c.passed and c.missed() == ("a",)
    assert c.stuck.startswith("derating did not lower the p99 of a 150.0 ms at 30.0 inf/s a replica after 150.0 ms")
    assert "interference, not load" in c.summary()
    alone = confirm_group(InterferedMix(holds=1000, names=("a",)), {"a": 60}, replicas=1, rounds=4, trials=1)
    assert len(alone.rounds) == 4 and not alone.stuck
    helped = confirm_group(ReplicaMix(holds=100), {"a": 240, "b": 120}, replicas=1, rounds=4, trials=1)
    assert helped.passed and not helped.stuck  # a queue that drains with more replicas is load


def test_the_derating_factor_is_the_worst_models_share_and_one_when_all_held():
    short = MixPoint(180, {"a": _point("a", 120, 60, 1), "b": _point("b", 60, 60, 1)}, {"a": 100, "b": 100})
    assert abs(derate_factor([short]) - 0.5) < 1e-9
    held = MixPoint(90, {"a": _point("a", 60, 60, 1), "b": _point("b", 30, 30, 1)}, {"a": 100, "b": 100})
    assert derate_factor([held]) == 1.0


def test_the_load_generators_share_of_the_host_is_said_and_flagged_past_half():
    c = confirm_group(ReplicaMix(holds=100), {"a": 60, "b": 30}, replicas=1, rounds=1, trials=1)
    assert "at most 0.50 of this host's 2 cores" in c.client_text(2) and "competed" not in c.client_text(2)
    busy = confirm_group(ReplicaMix(holds=100, cpu_s=4.5), {"a": 60, "b": 30}, replicas=1, rounds=1, trials=1)
    assert "at most 1.50 of this host's 2 cores" in busy.client_text(2)
    assert "competed with the server" in busy.client_text(2)


def test_auto_drives_a_group_from_one_process_once_it_has_more_models_than_half_the_cores(monkeypatch):
    """`--load-generator auto`: one perf_analyzer per model while the group is small beside the host, one process
    for all beyond max(2, cores // 2) models; one-process is refused in one line over HTTP (it sends gRPC)."""
    import dataclasses

    from deployment_toolkit.config import Protocol
    from deployment_toolkit.deployment import mixed
    from deployment_toolkit.deployment.mixed import LoadGenerator, Member, one_process
    from deployment_toolkit.errors import UserInputError
    from deployment_toolkit.perf.analyzer import PerfOptions
    from deployment_toolkit.perf.openloop.ratepoint import Target

    def members(n, protocol=Protocol.GRPC):
        target = Target("c", "m", "localhost:8001", 1, None, PerfOptions(protocol=protocol))
        return [Member(f"m{i}", dataclasses.replace(target, model_name=f"m{i}"), 1 / n, 100.0) for i in range(n)]

    monkeypatch.setattr(mixed, "usable_cores", lambda: 2)
    assert [one_process(LoadGenerator.AUTO, members(n)) for n in (1, 2, 3, 6)] == [False, False, True, True]
    monkeypatch.setattr(mixed, "usable_cores", lambda: 16)
    assert [one_process(LoadGenerator.AUTO, members(n)) for n in (8, 9)] == [False, True]
    assert one_process(LoadGenerator.ONE_PROCESS, members(2)) and not one_process(LoadGenerator.PERF_ANALYZER,
                                                                                   members(9))
    assert not one_process(LoadGenerator.AUTO, members(9, Protocol.HTTP))
    with pytest.raises(UserInputError, match="^--load-generator one-process sends over gRPC"):
        one_process(LoadGenerator.ONE_PROCESS, members(2, Protocol.HTTP))


def test_auto_shares_one_process_among_the_lightest_models_and_a_busy_one_keeps_its_own(monkeypatch, tmp_path):
    """A Python process sending 1,100 requests/s beside a busy server fell behind its schedule: `auto` drives the
    lightest models of a large group together up to SHARED_PROCESS_RPS, the others one perf_analyzer each."""
    import dataclasses

    from deployment_toolkit.deployment import mixed
    from deployment_toolkit.deployment.mixed import SHARED_PROCESS_RPS, LoadGenerator, Member, Mix
    from deployment_toolkit.perf.analyzer import PerfOptions
    from deployment_toolkit.perf.openloop.ratepoint import Target

    monkeypatch.setattr(mixed, "usable_cores", lambda: 2)
    target = Target("c", "m", "localhost:8001", 1, None, PerfOptions())
    names = ("a", "b", "c", "busy")
    members = [Member(n, dataclasses.replace(target, model_name=n), 0.25, 100.0) for n in names]
    requests = {"a": 30.0, "b": 120.0, "c": 200.0, "busy": 1100.0}
    together, alone = Mix(members, tmp_path).drivers(requests)
    assert [m.name for m in together] == ["a", "b", "c"] and [m.name for m in alone] == ["busy"]
    assert sum(requests[m.name] for m in together) <= SHARED_PROCESS_RPS
    # two light models are not worth a shared process beside two busy ones; one-process takes every model
    heavy = {"a": 30.0, "b": 500.0, "c": 600.0, "busy": 1100.0}
    assert Mix(members, tmp_path).drivers(heavy) == ([], members)
    assert Mix(members, tmp_path, generator=LoadGenerator.ONE_PROCESS).drivers(heavy) == (members, [])
    pair = [dataclasses.replace(m, share=0.5) for m in members[:2]]
    assert Mix(pair, tmp_path).drivers(requests) == ([], pair)  # a small group: a perf_analyzer each
