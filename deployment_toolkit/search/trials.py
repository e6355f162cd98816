"""The search's contracts: what it is given (formats, settings, a Measurer), what it keeps per candidate (Trial,
its final Confirmation) and what it returns (Decision, SearchOutcome), and its errors."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..config import check_numbers, setting
from ..config.fields import int_list
from ..errors import ToolkitError, UserError, UserInputError
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
    """What a search explores and how long; each field's flag, default and range written once (the search and
    plan commands build their flags from these fields, the Python API takes the same fields)."""

    budget_ms: float = setting(flag="--p99-ms", unit="ms", low=0, low_open=True, high=3_600_000,
                               help="p99 latency budget: a point counts only within it")
    objective: str = "throughput"  # the closed-loop exploration's: throughput | latency (objective_fields)
    cores: int = field(default_factory=host_cores)
    allow_oversubscribe: bool = setting(False, flag="--allow-oversubscribe", action="store_true",
                                        help="also measure configs with instances x threads > the usable cores")
    max_minutes: float | None = setting(None, flag="--max-minutes", unit="min", low=0, low_open=True, high=10_080,
                                        help="time limit from the command's start: the server's start-up and the "
                                             "final re-measurement included")
    max_configs: int | None = setting(None, flag="--max-configs", low=1, high=100_000,
                                      help="stop exploring after this many measured configs")
    noise_repeats: int = setting(2, flag="--noise-repeats", low=0, high=100,
                                 help="extra measurements of the baseline to estimate the noise")
    confirm_samples: int = setting(3, flag="--confirm-samples", low=1, high=100,
                                   help="samples per finalist in the final re-measurement")
    max_concurrency: int = setting(256, flag="--max-concurrency", low=1, high=65_536,
                                   help="cap of each concurrency sweep")
    refine_steps: int = setting(8, flag="--refine-steps", low=0, high=64,
                                help="at most this many probes between the last concurrency within budget and the "
                                     "first over it; they stop when the two are one client apart")
    queue_delays_us: tuple[int, ...] = setting(DEFAULT_QUEUE_DELAYS_US, flag="--queue-delays-us", type=int_list,
                                               unit="us", low=0, high=60_000_000,
                                               help="max queue delays to try, comma-separated")
    min_noise: float = setting(MIN_NOISE, flag="--min-noise", low=0, high=1,
                               help="floor of the relative noise: smaller gains never count")
    finish_reserve_s: float = 0.0  # kept at the end of --max-minutes for what the command does after the search
    rank_by: str = "closed-loop"  # closed-loop | capacity (the finalists' open-loop capacity: search/capacity.py)
    capacity_trials: int = setting(3, flag="--capacity-trials", low=1, high=20,
                                   help="open-loop capacity searches per finalist under --objective capacity; their "
                                        "spread is the capacity's")
    rate_point_s: float = 6.0  # the time of one open-loop rate (the time reserve's estimate until one is measured)
    open_loop_window_ms: int | None = setting(
        None, flag="--open-loop-window-ms", unit="ms", low=100, high=600_000,
        help="perf_analyzer window of an open-loop rate (3 to 6 windows a rate; default: about 100 requests at the "
             "rate, 300 to 1000 ms)")

    def __post_init__(self) -> None:
        self.queue_delays_us = tuple(self.queue_delays_us)
        check_numbers(self)

    @property
    def objective_name(self) -> str:
        """What the search ranks by, as --objective names it."""
        if self.rank_by == "capacity":
            return "capacity"
        return "closed-loop" if self.objective == "throughput" else self.objective


OBJECTIVES = ("capacity", "closed-loop", "throughput", "latency")  # --objective; throughput is closed-loop


def objective_fields(objective: str) -> dict[str, str]:
    """The SearchSettings fields --objective sets: what the finalists are ranked by and what the closed-loop
    exploration maximises."""
    if objective not in OBJECTIVES:
        raise UserInputError(f"objective {objective!r}: choose one of {', '.join(OBJECTIVES)}")
    return {"rank_by": "capacity" if objective == "capacity" else "closed-loop",
            "objective": "latency" if objective == "latency" else "throughput"}


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
