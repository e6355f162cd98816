"""A replica group confirmed under its mixed open-loop traffic, derated where it fails, then its burst check: the
rules of a confirmation for a group of one or more models on one server.

- a round drives one replica at the group's planned per-replica rates (every model at once, each its own seeded
  schedule and SLO, p99 from the intended send time); it passes when most of its `trials` pass, a trial passing when
  every model holds its SLO (one stall of a shared host must not derate a plan);
- a round that passes runs all its trials, so the group's own spread shows: where a minority of them failed, the
  group's margin is thin and is sized from those trials (the share of its rates the replica carried in them): the
  group is derated by it and confirmed once more (the "margin round"), so a noisy group pays for its own noise and a
  steady one (every trial held) keeps the margin its models' searches gave;
- a window that no quiet host could be had for (perf.neighbours.HostDisturbed) ends the group's confirmation as
  *not measured*, with the rounds it had: never a failure of the rates, never the end of the plan;
- a round that fails derates the group to what the replica did carry: for each model that missed, what it answered
  when it fell behind (else the offered rate x SLO / p99), the group's share the lowest of them (median over the
  failed trials); the replicas are recomputed for the same load and confirmed again, at most `rounds` rounds; a
  shared group stops earlier when a model that missed misses again with its p99 no better though offered less
  (`stuck`: interference, not load, which the planner answers by splitting the group);
- after a pass, the burst check: each model's peak share per replica x the burst factor for a few seconds, then
  straight back to the peak: whether the queue grew and drained. Informative: it does not change the plan.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..perf.openloop.capacity import derated_capacity
from ..perf.openloop.holding import STUCK  # the same rule as a step-down that leaves the p99 as it was
from ..perf.neighbours import HostDisturbed
from ..perf.openloop.ratepoint import ClientLimited
from ..tables import markdown_table
from .mixed import Mix, MixPoint


@dataclass
class GroupRound:
    replicas: int
    rates: dict[str, float]  # each model's inferences/s offered to one replica
    points: list[MixPoint]
    trials: int

    @property
    def passed(self) -> bool:
        return sum(p.passes() for p in self.points) >= self.trials // 2 + 1

    def decided(self) -> bool:
        """No trial left can change the round: it failed (most trials failed), or every trial ran. A passing round
        runs all of them: the trials that failed beside a majority that held are the group's own spread."""
        need = self.trials // 2 + 1
        return len(self.points) - sum(p.passes() for p in self.points) >= need or len(self.points) >= self.trials

    @property
    def thin(self) -> bool:
        """Passed by a majority with a trial that failed: the margin the group was planned with is thinner than
        its own spread."""
        return self.passed and any(not p.passes() for p in self.points)

    def p99_spread(self, name: str) -> float | None:
        """The model's worst trial p99 over its best (None: fewer than two trials)."""
        p99s = [p.points[name].p99 for p in self.points]
        return max(p99s) / min(p99s) if len(p99s) > 1 and min(p99s) > 0 else None

    def tally(self) -> str:
        return f"{sum(p.passes() for p in self.points)} of {len(self.points)} trials passed"

    def held(self, name: str) -> int:
        return sum(p.points[name].passes(p.slos[name]) for p in self.points)

    def missed(self) -> tuple[str, ...]:
        """The models that did not hold their SLO in most of the round's trials."""
        need = self.trials // 2 + 1
        return tuple(n for n in self.rates if self.held(n) < need)

    def p99(self, name: str) -> float:
        """The model's median p99 over the round's trials (ms)."""
        return statistics.median(p.points[name].p99 for p in self.points)


@dataclass
class GroupBurst:
    factor: float
    seconds: float
    during: MixPoint
    after: MixPoint

    def text(self) -> str:
        def model(name: str) -> str:
            d, a = self.during.points[name], self.after.points[name]
            slo = self.during.slos[name]
            return (f"{name}: during p99 {d.p99:.1f} ms ({'within' if d.p99 <= slo else 'over'} its {slo:g} ms, "
                    f"answered {d.answered:,.1f} of {d.offered:,.1f}/s), after p99 {a.p99:.1f} ms "
                    f"({a.verdict(slo)})")
        return (f"Burst check (each model's peak share x {self.factor:g} for about {self.seconds:g} s, then back to "
                "the peak): " + "; ".join(model(n) for n in self.during.points) + ".")


@dataclass
class GroupConfirmation:
    """One replica group's confirmation: its rounds (the last one's replicas and rates are the plan's) and burst."""

    models: tuple[str, ...]
    load: dict[str, float]  # each model's inferences/s over the whole fleet at the group's worst slice, headroom in
    rounds: list[GroupRound] = field(default_factory=list)
    burst: GroupBurst | None = None
    stuck: str = ""  # why derating stopped before its last round (a shared group that more replicas did not help)
    unmeasured: str = ""  # why the confirmation has no verdict: no quiet window on this host (perf.neighbours)
    margins: dict[str, float] = field(default_factory=dict)  # each model's headroom from its searches (the plan's)
    margin_round: bool = False  # the last round was confirmed at the margin a thin pass called for
    bursts: tuple[str, ...] = ()  # models sent their recorded arrivals (deployment.bursts), how bursty each is
    poisson_replicas: int | None = None  # with bursts: the replicas the same group confirmed under Poisson arrivals

    @property
    def passed(self) -> bool:
        return bool(self.rounds) and self.rounds[-1].passed and not self.unmeasured

    @property
    def held(self) -> bool:
        return self.passed

    @property
    def derated(self) -> bool:
        return len(self.rounds) > 1

    @property
    def replicas(self) -> int:
        return self.rounds[-1].replicas

    @property
    def rates(self) -> dict[str, float]:
        return self.rounds[-1].rates

    @property
    def points(self) -> list[MixPoint]:
        return self.rounds[-1].points

    def passed_of(self, name: str) -> int:
        return self.rounds[-1].held(name)

    def missed(self) -> tuple[str, ...]:
        """The models that did not hold their SLO in most trials of the last round (none when it passed)."""
        return () if not self.rounds or self.passed else self.rounds[-1].missed()

    def summary(self) -> str:
        r = self.rounds[-1]
        head = "PASS" if self.passed else "FAIL"
        if self.unmeasured:
            head = "NOT CONFIRMED (not measured)"
        elif self.passed and self.derated:
            head = f"PASS after derating to {r.replicas} replica(s)"
        return f"{' + '.join(self.models)}: {head} ({r.tally()})" + "".join(
            f"; {why}" for why in (self.stuck, self.unmeasured, self.bursts_text()) if why)

    def bursts_text(self) -> str:
        """With recorded bursts: what a Poisson plan gives against what the bursts need."""
        if not self.bursts or self.poisson_replicas is None:
            return ""
        return (f"confirmed with the recorded arrivals of {', '.join(self.bursts)}: a Poisson plan gives "
                f"{self.poisson_replicas} replica(s), the bursts need {self.replicas}")

    def margin_text(self) -> str:
        """The group's margin and where it came from: its models' own headroom (their searches' spread), and what
        its confirmation's trials showed of its own spread."""
        own = ", ".join(f"{n} {self.margins[n]:.0%}" for n in self.models if n in self.margins)
        said = f"Margin: each model's own headroom from its searches ({own})" if own else "Margin: none given"
        r = self.rounds[-1]
        spreads = [f"{n} x{s:.2f}" for n in self.models if (s := r.p99_spread(n)) is not None]
        if spreads:
            said += "; p99 worst trial over best in the last round: " + ", ".join(spreads)
        thin = next((x for x in self.rounds if x.thin), None)
        if self.margin_round and thin is not None:
            before = thin
            said += (f"; a thin pass ({before.tally()} at {before.replicas} replica(s)) sized the group's own margin "
                     f"from its failed trials: the replica carried {derate_factor(before.points):.0%} of its rates "
                     f"there, so it was confirmed again at more replicas ({r.replicas} in the last round)")
        return said + "."

    @property
    def client_cores(self) -> float | None:
        """The most cores the load generator kept busy in any trial (None: nothing measured)."""
        return max((p.client_cores for r in self.rounds for p in r.points if not math.isnan(p.client_cores)),
                   default=None)

    def client_text(self, cores: int) -> str:
        """What the load generator took of this host while it confirmed the group, and whether that matters."""
        points = [p for r in self.rounds for p in r.points if not math.isnan(p.client_cores)]
        if not points:
            return ""
        busiest = self.client_cores
        widest = max(points, key=lambda p: (p.processes, p.shared))
        kind = f"{widest.processes} process(es)" + (
            f", {widest.shared} of the {len(self.models)} models driven together from one (perf.multistream)"
            if widest.shared else ", one perf_analyzer per model")
        said = (f"Load generator: {kind}, at most {busiest:.2f} of this "
                f"host's {cores} cores busy in a trial ({max(p.client_cpu_s for p in points):.1f} CPU-s).")
        if busiest > cores / 2:
            said += (" That is over half the host: the client competed with the server, so the group may hold more "
                     "than confirmed here; confirm from another host (perf_analyzer -u) before buying from this.")
        return said

    def table(self) -> str:
        rows = []
        for i, r in enumerate(self.rounds, 1):
            for t, p in enumerate(r.points, 1):
                for name in self.models:
                    q = p.points[name]
                    rows.append([i, t, r.replicas, name, f"{r.rates[name]:,.1f}", f"{q.answered:,.1f}",
                                 f"{q.p99:.1f}", f"{p.slos[name]:g}", q.verdict(p.slos[name])])
        return markdown_table(["round", "trial", "replicas", "model", "offered per replica (inf/s)",
                               "answered (inf/s)", "p99 (ms)", "SLO (ms)", "verdict"], rows, "rrrlrrrrl")


MIN_DERATE = 0.1  # the lowest share of its load a failed round derates a group to


def stuck(before: GroupRound, after: GroupRound) -> str:
    """Why derating a shared group stopped helping ('' while it helps): a model missed in both rounds, kept up with
    what it was offered in the later one (answered it, no growing queue), and its p99 fell by less than a tenth
    though it was offered less. More replicas answer load; a model that misses at a lower rate beside the same
    neighbours is interfered with (the split in groups.split_missed answers that)."""
    said = [f"{n} {after.p99(n):,.1f} ms at {after.rates[n]:,.1f} inf/s a replica after {before.p99(n):,.1f} ms at "
            f"{before.rates[n]:,.1f}" for n in after.missed()
            if n in before.missed() and after.rates[n] < before.rates[n] and after.p99(n) > STUCK * before.p99(n)
            and all(p.points[n].kept_up for p in after.points)]
    return ("derating did not lower the p99 of " + "; ".join(said) + ": interference, not load; derating stopped"
            if said else "")


def per_replica(load: Mapping[str, float], replicas: int) -> dict[str, float]:
    return {n: r / replicas for n, r in load.items()}


def derate_factor(points: list[MixPoint]) -> float:
    """The share of what was offered that the replica did carry: per failed trial, the lowest over its models
    (perf.openloop.capacity.derated_capacity; a model that held carries all of its share), the median over the
    trials."""
    shares = []
    for p in points:
        if p.passes():
            continue
        shares.append(min((derated_capacity(q, p.slos[n]) / q.offered if not q.passes(p.slos[n]) and q.offered
                           else 1.0) for n, q in p.points.items()))
    return statistics.median(shares) if shares else 1.0


def _round(mix: Mix, out: GroupConfirmation, rates: dict[str, float], replicas: int, trials: int) -> GroupRound:
    """One round's trials at `rates` a replica, until no trial left can change it. No quiet window for a trial
    (HostDisturbed) leaves the group not measured, with the trials it had."""
    r = GroupRound(replicas, rates, [], trials)
    first = sum(len(x.points) for x in out.rounds) + 1
    while not r.decided():
        try:
            point = mix.at_rates(rates, first + len(r.points), "confirm")
        except HostDisturbed as err:
            out.unmeasured = str(err)
            break
        if point.client_limited:
            raise ClientLimited(f"{' + '.join(out.models)}: the client could not send the mix ({point.verdict()})")
        r.points.append(point)
    return r


def confirm_group(mix: Mix, load: Mapping[str, float], replicas: int, rounds: int, trials: int,
                  on_round: Callable[[GroupRound], None] | None = None,
                  margins: Mapping[str, float] | None = None) -> GroupConfirmation:
    """Confirm `replicas` replicas of the group carrying `load` (inferences/s per model, the whole fleet's):
    derated and confirmed again while most trials fail, or once where a minority failed (the group's own margin),
    at most `rounds` rounds. `margins`: each model's headroom already in `load`, for the report."""
    out = GroupConfirmation(tuple(m.name for m in mix.members), dict(load), margins=dict(margins or {}))
    trials = max(1, trials)
    for n in range(1, max(1, rounds) + 1):
        r = _round(mix, out, per_replica(load, replicas), replicas, trials)
        out.rounds.append(r)
        if on_round is not None:
            on_round(r)
        if out.unmeasured or n == rounds or (r.passed and (not r.thin or out.margin_round)):
            break
        if r.passed:  # thin: once more at the margin its failed trials call for, and that round decides
            out.margin_round = True
        elif len(out.models) > 1 and len(out.rounds) > 1:
            out.stuck = stuck(out.rounds[-2], r)
            if out.stuck:
                break
        # at most 10 x the replicas a round: a model that answered next to nothing is broken or starved, and
        # 1,000 replicas of it would be no plan (the next round says whether more replicas help at all)
        factor = max(min(derate_factor(r.points), 0.97), MIN_DERATE)
        replicas = max(replicas + 1, math.ceil(replicas / max(factor, 1e-3)))
    return out


def burst_group(mix: Mix, peak: Mapping[str, float], replicas: int, factor: float, seconds: float) -> GroupBurst:
    """Each model's peak share per replica x `factor` for about `seconds`, then the peak again for as long, in
    fixed windows (stability off: the burst lasts what it says)."""
    window = max(200, int(seconds * 1000 / 3))

    def fixed(target):
        options = dataclasses.replace(target.options, stability_percentage=100000.0, max_trials=3,
                                      measurement_interval_ms=window)
        return dataclasses.replace(target, options=options, config=f"{target.config}/burst")

    burst = Mix([dataclasses.replace(m, target=fixed(m.target)) for m in mix.members], mix.out_dir / "burst",
                fresh=True, generator=mix.generator)
    rates = per_replica(peak, replicas)
    during = burst.at_rates({n: r * factor for n, r in rates.items()}, 1, "burst", own_windows=True)
    after = burst.at_rates(rates, 2, "after_burst", own_windows=True)
    return GroupBurst(factor, window * 3 / 1000, during, after)


__all__ = ["GroupBurst", "GroupConfirmation", "GroupRound", "burst_group", "confirm_group", "derate_factor",
           "per_replica", "stuck"]
