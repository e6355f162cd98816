"""The Model Analyzer comparison's settings and what it found (versus_ma runs it, versus_report writes it): apart
from both, so the report does not import the run that imports it."""
from __future__ import annotations

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
class Side:
    """One side's deployment and what the judge measured of it."""

    name: str
    repository: Path
    configs: dict[str, str]  # each served model's config, described
    at_rates: list[MixPoint] = field(default_factory=list)  # one per round
    capacities: list[float] = field(default_factory=list)  # mix capacity (inferences/s per replica), one per round
    error: str = ""
    replicas: int | None = None  # what the median mix capacity needs for the peaks (replicas_for)

    def held(self, model: str) -> int:
        return sum(p.points[model].passes(p.slos[model]) for p in self.at_rates)

    @property
    def capacity(self) -> float | None:
        return statistics.median(self.capacities) if self.capacities else None


@dataclass
class DeploymentVersus:
    plan: DeploymentPlan
    settings: VersusSettings
    out_dir: Path
    ma_runs: list[MARun] = field(default_factory=list)
    sides: list[Side] = field(default_factory=list)
    rates: dict[str, float] = field(default_factory=dict)  # per replica, what the judge offers each model
    replicas: int = 1  # our plan's fleet size: the judge's replicas
    steps: Any = None  # steps.StepRunner of out_dir
