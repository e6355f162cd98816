"""Mixed open-loop traffic: every model of a replica driven at once, each on its own seeded schedule, each judged
against its own SLO from the intended send time.

What drives a mix is the load generator (LoadGenerator): one perf_analyzer per model at the same time against the
same server (perf_analyzer drives one model), or one process for several models (perf.multistream, through
perf.openloop.together), so a group of many models does not need more load-generator processes than the host has cores.
`auto` shares one process once a group has more models than half the host's cores (at least 2), among its lightest
models up to SHARED_PROCESS_RPS together; a busier model keeps its own perf_analyzer (one Python process sending
1,100 requests/s beside a busy server fell behind its schedule here). Either way each model keeps its own seeded
schedule and its latency from the intended send time, and the client's CPU is measured (MixPoint.client_cores).
They send over the network, not shared memory: perf_analyzer unregisters every shared-memory region of its server
when it starts, so two at once corrupt each other (perf.analyzer.shm_lock). A mix point passes only when every
model's point passes; its rate is the total inferences/s, split between the models as their peaks are, so the one
number `perf.openloop.capacity.search` bisects is the group's mix capacity.
"""
from __future__ import annotations

import dataclasses
import math
import resource
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from ..config import Choice, Protocol, SharedMemory
from ..perf import neighbours
from ..errors import UserInputError
from ..perf.neighbours import usable_cores
from ..perf.openloop.ratepoint import RatePoint, Target, auto_window_ms, measure, round_rate, settling_window_ms
from ..perf.openloop.ratestore import FreshStore, RateStore
from ..perf.openloop.together import measure_together


MEASURED_S = 1.0  # a mix point shorter than this was replayed from its stores, not measured
SHARED_PROCESS_RPS = 400.0  # requests/s `auto` lets one shared load-generator process send (the module docstring)


class LoadGenerator(Choice):
    """What drives a group's mixed traffic."""
    AUTO = "auto"  # a large group's lightest models from one process, the others one perf_analyzer each
    PERF_ANALYZER = "perf_analyzer"  # one perf_analyzer per model
    ONE_PROCESS = "one-process"  # one process for every model of the group (perf.multistream, gRPC)


def one_process(generator: LoadGenerator, members: Sequence["Member"]) -> bool:
    """Whether one process drives the mix: asked for, or `auto` with more models than the host has room for
    perf_analyzers beside its server. It sends over gRPC only: asked for with another protocol, one line."""
    grpc = all(m.target.options.protocol == Protocol.GRPC for m in members)
    if LoadGenerator(generator) == LoadGenerator.ONE_PROCESS:
        if not grpc:
            raise UserInputError("--load-generator one-process sends over gRPC: drop --protocol http, or take "
                                 "--load-generator perf_analyzer")
        return True
    if LoadGenerator(generator) == LoadGenerator.PERF_ANALYZER:
        return False
    return grpc and len(members) > max(2, usable_cores() // 2)


@dataclass(frozen=True)
class Member:
    """One model of a mix: how to drive it, its share of the mix's inferences, its SLO."""

    name: str
    target: Target
    share: float  # of the mix's total inferences/s (the shares of a mix add up to 1)
    slo_ms: float


def member_target(target: Target, group: str) -> Target:
    """A model's target inside a mix: over the network (see the module docstring), its points keyed by the group
    (a mix point is never the same measurement as the model alone), its own schedule seed (independent arrivals)."""
    options = dataclasses.replace(target.options, shared_memory=SharedMemory.NONE.value)
    return dataclasses.replace(target, options=options, config=f"mix[{group}]/{target.model_name}",
                               schedule_seed=zlib.crc32(target.model_name.encode()))


@dataclass
class MixPoint:
    """Every model's point at one total rate; duck-types RatePoint for perf.openloop.capacity.search."""

    rate: float  # total inferences/s offered
    points: dict[str, RatePoint]
    slos: dict[str, float]
    client_cpu_s: float = math.nan  # CPU seconds the load generator (its processes) used
    wall_s: float = math.nan
    processes: int = 1  # load-generator processes that drove it
    shared: int = 0  # models of it driven together from one process (perf.multistream)

    @property
    def client_cores(self) -> float:
        """Cores the load generator kept busy on average: beside the server's on the same host, they are cores
        the server did not have."""
        return self.client_cpu_s / self.wall_s if self.wall_s and self.wall_s > 0 else math.nan

    def passes(self, slo_ms: float | None = None) -> bool:  # each model against its own SLO
        return all(p.passes(self.slos[name]) for name, p in self.points.items())

    @property
    def kept_up(self) -> bool:
        return all(p.kept_up for p in self.points.values())

    @property
    def client_limited(self) -> bool:
        return any(p.client_limited for p in self.points.values())

    @property
    def answered(self) -> float:
        values = [p.answered for p in self.points.values()]
        return math.nan if any(math.isnan(v) for v in values) else sum(values)

    @property
    def offered(self) -> float:
        return self.rate

    @property
    def p99(self) -> float:  # the worst model's p99 against its SLO, as a fraction of it (1.0 = at its SLO)
        return max(p.p99 / self.slos[name] for name, p in self.points.items())

    def client_limit_text(self) -> str:
        """Which model's load generator could not send its share, and what it managed (capacity.search's stop)."""
        return "; ".join(f"{n}: {p.client_limit_text()}" for n, p in self.points.items() if p.client_limited)

    def verdicts(self) -> dict[str, str]:
        return {name: p.verdict(self.slos[name]) for name, p in self.points.items()}

    def verdict(self, slo_ms: float | None = None) -> str:
        bad = {n: v for n, v in self.verdicts().items() if v != "pass"}
        return "pass" if not bad else "fail: " + "; ".join(f"{n} {v}" for n, v in bad.items())


def windowed(target: Target, rate: float) -> Target:
    """The target with windows long enough for `rate` requests/s (at least its own): a low rate in a short window
    has too few requests for the windows to agree, and a point whose windows never settle fails."""
    window = max(target.options.measurement_interval_ms, auto_window_ms(rate), settling_window_ms(rate))
    return dataclasses.replace(target, options=dataclasses.replace(target.options, measurement_interval_ms=window))


class Mix:
    """A group of models on one server, measured together; each model's points in `<out_dir>/<model>/`."""

    def __init__(self, members: Sequence[Member], out_dir: Path, fresh: bool = False,
                 generator: LoadGenerator = LoadGenerator.AUTO):
        total = sum(m.share for m in members)
        if not members or not math.isclose(total, 1.0, rel_tol=1e-6):
            raise ValueError(f"a mix's shares add up to 1, got {total}")
        self.members = list(members)
        self.generator = LoadGenerator(generator)
        self.one_process = one_process(self.generator, self.members)
        self.out_dir = Path(out_dir)
        self.stores: dict[str, RateStore | FreshStore] = {}
        for m in self.members:
            (self.out_dir / m.name).mkdir(parents=True, exist_ok=True)
            store = RateStore(self.out_dir / m.name)
            self.stores[m.name] = FreshStore(store) if fresh else store

    def shares(self, total: float) -> dict[str, float]:
        """Each model's inferences/s at a total of `total`, split as the members' shares."""
        return {m.name: total * m.share for m in self.members}

    def measure(self, total: float, trial: int = 1, tag: str = "") -> MixPoint:
        """All models at once at `total` inferences/s, each its share: the point the mix capacity bisects."""
        return self.at_rates(self.shares(total), trial, tag)

    def at_rates(self, rates: Mapping[str, float], trial: int = 1, tag: str = "",
                 own_windows: bool = False) -> MixPoint:
        """All models at once, each at its own inferences/s (a confirmation sends the planned per-replica rates),
        driven by one perf_analyzer each or by one process for all (`one_process`); `own_windows` keeps the
        targets' own windows (a burst of fixed length), else each rate gets windows long enough for it. A mix
        other processes disturbed (perf.neighbours) is measured again whole once the host is quiet, never judged."""
        return neighbours.until_quiet(lambda: self._once(rates, trial, tag, own_windows),
                                      " + ".join(m.name for m in self.members), f"mix {tag}".strip(),
                                      on_window=self._mark, measured=lambda d: d.seconds >= MEASURED_S)

    def _mark(self, point: MixPoint, disturbance: neighbours.Disturbance) -> None:
        """Each model's stored row carries the mix's window figures; a disturbed one is measured again on replay."""
        for name, p in point.points.items():
            p.row.update(disturbance.row())
            self.stores[name].put(p.key, {k: v for k, v in p.row.items() if k not in ("cpu", "wall_s")})

    def _once(self, rates: Mapping[str, float], trial: int, tag: str, own_windows: bool) -> MixPoint:
        requests = {m.name: round_rate(rates[m.name] / max(m.target.batch, 1)) for m in self.members}
        together, alone = self.drivers(requests)
        targets = {m.name: dataclasses.replace(m.target if own_windows else windowed(m.target, requests[m.name]),
                                               remeasure=False) for m in self.members}
        before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
        with ThreadPoolExecutor(max_workers=len(alone) + 1, thread_name_prefix="mix") as pool:
            shared = pool.submit(measure_together, {m.name: m.target for m in together}, requests, self.stores,
                                 self.out_dir, trial, tag,
                                 max(targets[m.name].options.measurement_interval_ms for m in together)) \
                if together else None
            futures = {m.name: pool.submit(measure, targets[m.name], requests[m.name], self.stores[m.name],
                                           self.out_dir / m.name, trial, tag) for m in alone}
            found = {**(shared.result() if shared else {}), **{n: f.result() for n, f in futures.items()}}
        # the load generators are this process's children, each waited for: their CPU is the client's (a point
        # replayed from the store measured nothing, and counts nothing)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        return MixPoint(sum(rates.values()), {m.name: found[m.name] for m in self.members},
                        {m.name: m.slo_ms for m in self.members}, cpu, time.monotonic() - started,
                        len(alone) + (1 if together else 0), len(together))

    def drivers(self, requests: Mapping[str, float]) -> tuple[list[Member], list[Member]]:
        """(the models driven together from one process, those driven by a perf_analyzer each) at these
        requests/s: `one-process` all together; `auto` in a large group (one_process) its lightest models while
        they add up to SHARED_PROCESS_RPS, when that is at least two of them."""
        if not self.one_process:
            return [], list(self.members)
        recorded = [m for m in self.members if m.target.distribution == "recorded"]  # a log's bursts: perf_analyzer
        if self.generator == LoadGenerator.ONE_PROCESS:  # replays them (its --request-intervals file)
            return [m for m in self.members if m not in recorded], recorded
        together, total = [], 0.0
        for m in sorted((m for m in self.members if m not in recorded), key=lambda m: requests[m.name]):
            if total + requests[m.name] > SHARED_PROCESS_RPS:
                break
            together.append(m)
            total += requests[m.name]
        if len(together) < 2:
            return [], list(self.members)
        return together, [m for m in self.members if m not in together]


__all__ = ["SHARED_PROCESS_RPS", "LoadGenerator", "Member", "Mix", "MixPoint", "member_target", "one_process"]
