"""The Model Analyzer comparison's settings and what it found (versus_ma runs it, versus_report writes it): apart
from both, so the report does not import the run that imports it."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deployment_toolkit.config import check_numbers, setting

if TYPE_CHECKING:  # pragma: no cover
    from deployment_toolkit.deployment.mixed import MixPoint
    from deployment_toolkit.deployment.plan import DeploymentPlan


@dataclass(frozen=True)
class VersusSettings:
    """Model Analyzer's time limits and the judge's rounds."""

    ma_binary: str | None = setting(None, flag="--model-analyzer", metavar="PATH",
                                    help="the model-analyzer CLI (default: /tmp/ma-venv, then PATH)")
    ma_minutes: float = setting(10.0, flag="--ma-minutes", unit="min", low=0.5, high=24 * 60,
                                help="time limit of each Model Analyzer run (its checkpoint keeps what it measured)")
    rounds: int = setting(3, flag="--rounds", low=1, high=20, help="judge rounds, the two sides in turns")

    def __post_init__(self) -> None:
        check_numbers(self)


@dataclass
class MARun:
    """One Model Analyzer run: what it was asked, what it answered, what it picked."""

    asked: str
    result: Any  # search.model_analyzer.MAResult
    budgets: dict[str, float]
    pick: Any = None  # MARunConfig: its first-ranked run config within every budget

    @property
    def outcome(self) -> str:
        r = self.result
        if not r.ran:
            return r.error
        head = f"{r.wall_s / 60:.1f} min, {len(r.run_configs)} measurement(s)"
        if self.pick is not None:
            points = ", ".join(f"{n} {p.throughput:,.1f} inf/s p99 {p.p99_ms:.1f} ms"
                               for n, p in self.pick.points.items())
            head += f"; its pick {self.pick.variants}: {points}"
        elif r.run_configs:
            head += "; none within every budget"
        return head + (f"; {r.error}" if r.error else "")


@dataclass
class Judged:
    """One replica group of a side as the judge serves it: its models on a server of their own at the rates one of
    its replicas gets, then the group's mix capacity."""

    models: tuple[str, ...]
    replicas: int  # the replicas the side gives this group in a fleet of our plan's size
    rates: dict[str, float]  # per replica, what the judge offers each model of the group
    seed: float  # where the first round's capacity search starts (what the plan measured, else time sharing)
    at_rates: list[MixPoint] = field(default_factory=list)  # one per round
    capacities: list[float] = field(default_factory=list)  # mix capacity (inferences/s per replica), one per round
    error: str = ""

    @property
    def name(self) -> str:
        return " + ".join(self.models)

    @property
    def capacity(self) -> float | None:
        return statistics.median(self.capacities) if self.capacities else None

    def held(self, model: str) -> int:
        return sum(p.points[model].passes(p.slos[model]) for p in self.at_rates)


@dataclass
class Side:
    """One side's deployment, laid out as it deploys (its replica groups), and what the judge measured of it."""

    name: str
    repository: Path
    configs: dict[str, str]  # each served model's config, described
    groups: list[Judged] = field(default_factory=list)
    replicas: int | None = None  # what its groups' median mix capacities need for the peaks (replicas_for)

    def group_of(self, model: str) -> Judged:
        return next(g for g in self.groups if model in g.models)

    def held(self, model: str) -> int:
        return self.group_of(model).held(model)

    @property
    def error(self) -> str:
        return "; ".join(f"{g.name}: {g.error}" for g in self.groups if g.error)


@dataclass
class DeploymentVersus:
    plan: DeploymentPlan
    settings: VersusSettings
    out_dir: Path
    ma_runs: list[MARun] = field(default_factory=list)
    sides: list[Side] = field(default_factory=list)
    replicas: int = 1  # our plan's fleet size: the fleet both sides are judged on
    steps: Any = None  # steps.StepRunner of out_dir


def group_replicas(versus: DeploymentVersus, group: Judged) -> int | None:
    """The replicas `group`'s median mix capacity needs for its models' peaks (with the plan's headroom), as the
    plan counts them."""
    if not group.capacity:
        return None
    load = sum(versus.plan.models[n].entry.peak_rps for n in group.models) * (1 + versus.plan.headroom)
    return max(1, math.ceil(load / group.capacity - 1e-9))


def replicas_for(versus: DeploymentVersus, side: Side) -> int | None:
    """The replicas `side`'s groups need for the peaks (None when a group held no rate)."""
    counts = [group_replicas(versus, g) for g in side.groups]
    return None if not counts or None in counts else sum(counts)
