"""Which models share a replica: every grouping of the models is priced, and the cheapest wins.

A replica of a group is one Triton server holding each model of the group (each with its own instances). What a
group's replica holds is its mix capacity: the highest total rate it keeps every model under its own SLO when the
traffic is split as the models' peaks are (a model alone: its own capacity). Replicas of a group = ceil(sum of its
peaks x (1 + headroom) / mix capacity); the cost of a layout is its replicas times the price of one.

Measuring a group costs minutes, so groups are first estimated by time sharing (each model takes p_i / c_i of a
replica's time: mix capacity = sum p_i / sum (p_i / c_i)), the layouts ranked on the estimates, and only the groups
of the best layout measured; the ranking is redone with what was measured until the best layout rests on measured
groups only. Interference makes real mixes slower than the estimate, so a measured group can only lose its place.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Sequence

from ..sizing.plan import ceil_div

MAX_MEASURED_GROUPS = 12  # a guard: each measurement is a capacity search of minutes


@dataclass(frozen=True)
class GroupCapacity:
    """A group's measured mix capacity (inferences/s in total), or why it cannot share a replica."""

    rate: float | None
    reason: str = ""  # why rate is None (out of memory, said per model; an SLO missed even at the lowest rate)
    measured: bool = True


@dataclass(frozen=True)
class Group:
    models: tuple[str, ...]
    capacity: GroupCapacity
    replicas: int | None  # None: the group cannot hold its peaks on any number of replicas
    rates: Mapping[str, float]  # each model's planned rate per replica (its peak x (1 + headroom) / replicas)

    @property
    def shared(self) -> bool:
        return len(self.models) > 1


@dataclass(frozen=True)
class Layout:
    groups: tuple[Group, ...]
    price_per_replica: float | None

    @property
    def replicas(self) -> int | None:
        counts = [g.replicas for g in self.groups]
        return None if any(c is None for c in counts) else sum(counts)  # type: ignore[misc]

    @property
    def cost_per_hour(self) -> float | None:
        return None if self.replicas is None or self.price_per_replica is None else self.replicas * self.price_per_replica

    @property
    def estimated(self) -> bool:
        return any(not g.capacity.measured for g in self.groups)

    def describe(self) -> str:
        parts = [(" + ".join(g.models) + (" (shared)" if g.shared else "") +
                  (f": {g.replicas} replica(s)" if g.replicas is not None else ": cannot"))
                 for g in self.groups]
        return "; ".join(parts)

    def key(self) -> tuple:
        """Cheaper first; then fewer replicas; then fewer shared groups (isolation costs nothing extra)."""
        return (self.replicas is None, self.cost_per_hour if self.cost_per_hour is not None else self.replicas or 0,
                self.replicas or 0, sum(g.shared for g in self.groups))


@dataclass
class Decision:
    chosen: Layout | None
    compared: list[Layout] = field(default_factory=list)  # every layout, cheapest first, as last priced
    measured: dict[tuple[str, ...], GroupCapacity] = field(default_factory=dict)
    reason: str = ""  # why nothing was chosen


def partitions(items: Sequence[str]) -> Iterator[tuple[tuple[str, ...], ...]]:
    """Every way to split `items` into groups (set partitions, in a stable order)."""
    if not items:
        yield ()
        return
    first, rest = items[0], items[1:]
    for smaller in partitions(rest):
        yield ((first,), *smaller)
        for i in range(len(smaller)):
            yield (*smaller[:i], (first, *smaller[i]), *smaller[i + 1:])


def estimate(models: Sequence[str], peaks: Mapping[str, float], alone: Mapping[str, float]) -> GroupCapacity:
    """Time sharing: the mix capacity a group would have if its models only took turns."""
    busy = sum(peaks[m] / alone[m] for m in models)
    return GroupCapacity(sum(peaks[m] for m in models) / busy, "estimated by time sharing", measured=False)


def group_of(models: tuple[str, ...], capacity: GroupCapacity, peaks: Mapping[str, float], headroom: float) -> Group:
    if capacity.rate is None or capacity.rate <= 0:
        return Group(models, capacity, None, {})
    total = sum(peaks[m] for m in models) * (1 + headroom)
    replicas = ceil_div(total, capacity.rate)
    return Group(models, capacity, replicas, {m: peaks[m] * (1 + headroom) / replicas for m in models})


def decide(peaks: Mapping[str, float], alone: Mapping[str, float], headroom: float,
           price_per_replica: float | None, measure: Callable[[tuple[str, ...]], GroupCapacity],
           max_replicas: int | None = None) -> Decision:
    """The cheapest layout of the models whose shared groups were measured (`measure(group)`); `alone` is each
    model's own capacity per replica (inferences/s at its SLO)."""
    names = tuple(peaks)
    known: dict[tuple[str, ...], GroupCapacity] = {(m,): GroupCapacity(alone[m]) for m in names}
    decision = Decision(None, measured={})
    while True:
        layouts = []
        for split in partitions(names):
            groups = tuple(group_of(g, known.get(g) or estimate(g, peaks, alone), peaks, headroom) for g in split)
            layouts.append(Layout(groups, price_per_replica))
        layouts.sort(key=Layout.key)
        fitting = [l for l in layouts if l.replicas is not None
                   and (max_replicas is None or l.replicas <= max_replicas)]
        decision.compared = layouts
        if not fitting:
            best = next((l for l in layouts if l.replicas is not None), None)
            decision.reason = ("no layout holds every model's peak" if best is None else
                               f"the cheapest layout needs {best.replicas} replicas, more than limits.max_replicas "
                               f"{max_replicas}: raise it or lower the peaks")
            return decision
        best = fitting[0]
        todo = [g.models for g in best.groups if not g.capacity.measured]
        if not todo:
            decision.chosen = best
            return decision
        if len(decision.measured) + len(todo) > MAX_MEASURED_GROUPS:
            decision.reason = f"more than {MAX_MEASURED_GROUPS} shared groups would need measuring"
            return decision
        for g in todo:
            known[g] = decision.measured[g] = measure(g)


__all__ = ["Decision", "Group", "GroupCapacity", "Layout", "MAX_MEASURED_GROUPS", "decide", "estimate",
           "partitions"]
