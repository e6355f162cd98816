"""The search's contracts: what it is given (formats, settings, a Measurer), what it keeps per candidate (Trial,
its final Confirmation) and what it returns (Decision, SearchOutcome), and its errors."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..errors import ToolkitError, UserError
from ..repository.config import ConfigError, build_config
from ..spec import Manifest
from .space import DEFAULT_QUEUE_DELAYS_US, Candidate, host_cores
from .stats import MIN_NOISE, Gain, Noise, Spread
from .store import Point
from .sweep import SweepResult


class SearchError(UserError, RuntimeError):
    """The search cannot go on (e.g. the default config itself does not load); measured points are kept."""


class CandidateRefused(ToolkitError):
    """The server refused to load a config; the message is the server's reason."""


class CandidateFailed(ToolkitError):
    """A loaded config failed while being measured (crash, error responses); the message says how."""


class Measurer(Protocol):
    def load(self, candidate: Candidate) -> None: ...

    def measure(self, candidate: Candidate, concurrency: int, sample: int, store_key: str) -> Point: ...

    def release(self, candidate: Candidate) -> None: ...


@dataclass
class FormatInfo:
    """A verified artifact of one format, or why there is none."""

    format: str
    manifest: Manifest | None = None
    artifact_dir: Path | None = None
    digest: str = ""
    error: str = ""


@dataclass
class SearchSettings:
    budget_ms: float
    objective: str = "throughput"
    cores: int = field(default_factory=host_cores)
    allow_oversubscribe: bool = False
    max_minutes: float | None = None
    max_configs: int | None = None
    noise_repeats: int = 2  # extra measurements of the baseline's best point
    confirm_samples: int = 3  # samples per finalist in the final comparison
    max_concurrency: int = 256
    refine_steps: int = 8  # at most this many probes to narrow the knee to one client
    queue_delays_us: tuple[int, ...] = DEFAULT_QUEUE_DELAYS_US
    min_noise: float = MIN_NOISE
    finish_reserve_s: float = 0.0  # kept at the end of --max-minutes for what the command does after the search
    rank_by: str = "closed-loop"  # closed-loop | capacity (the finalists' open-loop capacity: search/capacity.py)
    capacity_trials: int = 3  # open-loop capacity searches per finalist
    rate_point_s: float = 6.0  # the time of one open-loop rate (the time reserve's estimate until one is measured)
    open_loop_window_ms: int | None = None  # perf_analyzer's window at an open-loop rate (None: sized to the rate)

    @property
    def objective_name(self) -> str:
        """What the search ranks by, as --objective names it."""
        if self.rank_by == "capacity":
            return "capacity"
        return "closed-loop" if self.objective == "throughput" else self.objective


@dataclass
class Confirmation:
    """The final re-measurement of a finalist at one level (fresh samples, taken in turns)."""

    concurrency: int
    throughput: Spread
    p99: Spread
    holds: bool = True  # every sample within the budget, the median with room for the p99 noise


@dataclass
class Trial:
    """One candidate's fate: measured (with its sweep) or why not, and the final verdict."""

    candidate: Candidate
    stage: str
    key: str
    status: str = "pending"  # measured | refused | invalid | oversubscribed | skipped | failed | unavailable
    reason: str = ""
    sweep: SweepResult | None = None
    verdict: str = ""
    detail: str = ""
    confirmation: Confirmation | None = None
    best: Point | None = None  # best point within budget (medians where a level was measured repeatedly)
    measured_points: int = 0
    seconds: float = 0.0
    capacity: Any = None  # search.capacity.CapacityMeasurement under --objective capacity


@dataclass
class Decision:
    winner: Trial | None
    default: Trial
    runner_up: Trial | None = None
    gain: Gain | None = None
    default_as_good: bool = False
    message: str = ""
    best_p99_seen: Point | None = None


@dataclass
class SearchOutcome:
    settings: SearchSettings
    trials: list[Trial]
    decision: Decision
    noise: Noise
    notes: list[str]
    measured_points: int
    reused_points: int
    wall_s: float
    stopped: str = ""


@dataclass
class SearchRun:
    """What one search step gives its caller in memory: the outcome, where it wrote, the exit code it implies."""

    outcome: SearchOutcome | None  # None when the search could not start (`error` says why)
    result_dir: Path
    code: int
    wall_s: float
    csv_path: Path | None = None
    written: Path | None = None  # the winner's config in the model repository
    report: Path | None = None
    error: str = ""
    model_name: str = ""  # the winner's name in the model repository
    formats: list[FormatInfo] = field(default_factory=list)  # the verified artifacts searched
    options: Any = None  # perf.analyzer.PerfOptions the points were measured with (the user's samples as its input)

    def winner(self) -> tuple[Candidate, int] | None:
        """The winner and the concurrency of its final re-measurement (of its best level within the budget when
        it was ranked by open-loop capacity)."""
        d = self.outcome.decision if self.outcome else None
        if d is None or d.winner is None:
            return None
        if d.winner.confirmation is not None:
            return d.winner.candidate, d.winner.confirmation.concurrency
        return (d.winner.candidate, d.winner.best.concurrency) if d.winner.best is not None else None


def config_problem(manifest: Manifest, candidate: Candidate) -> str | None:
    """build_config's verdict on a candidate (the same validation `config_model_on_triton.py` runs)."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            build_config(manifest, candidate.config_options("probe"))
    except ConfigError as err:
        return str(err)
    return None
