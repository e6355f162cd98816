"""The search's contracts: what it is given (formats, settings, a Measurer), what it keeps per candidate (Trial,
its final Confirmation) and what it returns (Decision, SearchOutcome), and its errors."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..config import Objective, check_numbers, setting
from ..config.fields import MAX_LATENCY_MS, int_list
from ..errors import ToolkitError, UserError, UserInputError
from ..perf.openloop.ratepoint import AUTO_WINDOW_MS
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
    """What measures candidates (triton.TritonMeasurer on the real server). Under --objective capacity it also has
    `rate_point(candidate, rate, trial, store_key)`, and may have `stored_rate` with the same arguments: the stored
    rate or None, read without loading the candidate (bench.Bench asks it first)."""

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


SEARCH_MAX_MINUTES = 20.0  # `search` and dt.search_config: the time limit unless given one
PLAN_MAX_MINUTES = 8.0  # `plan` and dt.plan: the search's share of a plan


CAPACITY_RESOLUTION = 0.05  # a capacity search stops when its bracket is this narrow (relative)
OBJECTIVE_CHOICES = ("capacity", "closed-loop", "throughput", "latency")  # --objective; throughput is closed-loop


def objective_choice(text: str) -> Objective:
    """--objective's value; `throughput` is the older name of closed-loop."""
    if text == "throughput":
        return Objective.CLOSED_LOOP
    try:
        return Objective(text)
    except ValueError:
        raise UserInputError(f"objective {text!r}: choose one of {', '.join(OBJECTIVE_CHOICES)}") from None


def rate_point_estimate(open_loop_window_ms: int | None) -> float:
    """An open-loop rate's time before one is measured: 3 to 6 windows and its start (7 s at 1-s windows here).
    Windows sized to the rate (None) are counted at their shortest until the rate is known (capacity.expect_rates)."""
    window_ms = open_loop_window_ms or AUTO_WINDOW_MS[0]
    return 5.0 * window_ms / 1000.0 + 2.0


@dataclass
class SearchSettings:
    """What a search explores, how it ranks and how long; each field's flag, default and range written once (the
    search and plan commands build their flags from these fields, the Python API takes the same dataclass)."""

    budget_ms: float = setting(flag="--p99-ms", unit="ms", low=0, low_open=True, high=MAX_LATENCY_MS,
                               help="p99 latency budget: a point counts only within it")
    objective: Objective = setting(
        Objective.CAPACITY, flag="--objective", type=str, choices=OBJECTIVE_CHOICES,
        metavar="{" + ",".join(OBJECTIVE_CHOICES) + "}",
        help="capacity: the finalists ranked by open-loop capacity, the highest Poisson arrival rate one replica "
             "sustains within the budget (what a fleet plan uses); closed-loop (or throughput): most inferences/s "
             "at a concurrency within the budget; latency: lowest p99")
    cores: int = field(default_factory=host_cores)
    allow_oversubscribe: bool = setting(False, flag="--allow-oversubscribe", action="store_true",
                                        help="also measure configs with instances x threads > the usable cores")
    max_minutes: float | None = setting(SEARCH_MAX_MINUTES, flag="--max-minutes", unit="min", low=0, low_open=True,
                                        high=10_080, help="time limit from the command's start: the server's "
                                                          "start-up and the final re-measurement included")
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
    finish_reserve_s: float = 0.0  # kept at the end of --max-minutes for what the caller does after the search
    capacity_trials: int = setting(3, flag="--capacity-trials", low=1, high=20,
                                   help="open-loop capacity searches per finalist under --objective capacity; their "
                                        "spread is the capacity's")
    capacity_resolution: float = setting(
        CAPACITY_RESOLUTION, flag="--capacity-resolution", low=0.005, high=0.5,
        help="an open-loop capacity search bisects until its bracket is this narrow (relative): coarser is quicker, "
             "and a capacity's headroom is at least this")
    # the time of one open-loop rate (the time reserve's estimate until one is measured; None: from the window)
    rate_point_s: float | None = None
    open_loop_window_ms: int | None = setting(
        None, flag="--open-loop-window-ms", unit="ms", low=100, high=600_000,
        help="perf_analyzer window of an open-loop rate (3 to 6 windows a rate; default: about 100 requests at the "
             "rate, 300 to 1000 ms)")

    def __post_init__(self) -> None:
        self.objective = objective_choice(str(self.objective))
        self.queue_delays_us = tuple(self.queue_delays_us)
        check_numbers(self)
        if self.rate_point_s is None:
            self.rate_point_s = rate_point_estimate(self.open_loop_window_ms)

    @property
    def rank_by(self) -> str:
        """What the finalists are ranked by: their open-loop capacity, or their closed-loop re-measurement."""
        return "capacity" if self.objective == Objective.CAPACITY else "closed-loop"

    @property
    def explore(self) -> str:
        """What the closed-loop exploration maximises: throughput, or (minimises) the p99 latency."""
        return "latency" if self.objective == Objective.LATENCY else "throughput"

    @property
    def objective_name(self) -> str:
        """What the search ranks by, as --objective names it."""
        return self.objective.value


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
    measured_rates: int = 0  # open-loop rates measured in this run (capacity.measure)
    reused_rates: int = 0  # ... read back from the result folder's search_openloop.csv instead
    replayed_answers: int = 0  # time answers taken from an earlier run of the same search (clock.py)


@dataclass
class SearchRun:
    """What one search gives its caller in memory: the outcome, the files it wrote and the artifacts it searched.
    A search that cannot start raises a SearchError (or a UserError for bad input) instead; one that ran and found
    no config within the budget is a result (`found` is False), with every file written."""

    outcome: SearchOutcome
    result_dir: Path
    wall_s: float
    csv_path: Path | None = None
    written: Path | None = None  # the winner's config in the model repository
    report: Path | None = None
    model_name: str = ""  # the winner's name in the model repository
    formats: list[FormatInfo] = field(default_factory=list)  # the verified artifacts searched
    options: Any = None  # perf.analyzer.PerfOptions the points were measured with (the user's samples as its input)

    @property
    def found(self) -> bool:
        """A config met the budget (the winner)."""
        return self.outcome.decision.winner is not None

    def winner(self) -> tuple[Candidate, int] | None:
        """The winner and the concurrency of its final re-measurement (of its best level within the budget when
        it was ranked by open-loop capacity)."""
        d = self.outcome.decision
        if d.winner is None:
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
