"""What one config search is asked to do, typed: the model, the formats, the budget and the search's settings, the
perf_analyzer options, the user's samples, where the results go and the server's ports. `search_step` (cli.py)
takes it; the command builds it from its flags (`request_from_args`), a composite step (the plan, the Model
Analyzer comparison) or the Python API (`deployment_toolkit.api.search`) builds it directly."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..data.samples import DataSpec
from ..perf.analyzer import PerfOptions
from ..server.startup import DEFAULT_START_TIMEOUT_S
from ..sources import ModelSource
from .trials import SearchSettings

DEFAULT_PERF_OPTIONS = PerfOptions(
    # Windows of 40 requests (count_windows: at least 1 s) and a loose stability check; the reasons are at the
    # command's parser (search/cli.py build_parser), whose defaults are these.
    protocol="grpc", shared_memory="system", measurement_mode="count_windows", measurement_interval_ms=2000,
    measurement_request_count=40, stability_percentage=20.0, max_trials=5, max_attempts=1)

SEARCH_MAX_MINUTES = 20.0  # `search` and dt.search_config: the time limit unless given one
PLAN_MAX_MINUTES = 8.0  # `plan` and dt.plan: the search's share of a plan
FINISH_RESERVE_S = 10.0  # writing the winner, the CSVs, the plot and the report took 3-5 s on a 2-core host


@dataclass
class SearchServer:
    """The embedded tritonserver the search starts (explicit model control; 0 picks a free port)."""

    http_port: int = 0
    grpc_port: int = 0
    metrics_port: int = 0
    log_verbose: int = 0
    metrics_period_s: float | None = 0.5  # scrape the metrics endpoint this often during a point (None: never)
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S  # --server-timeout


@dataclass
class SearchRequest:
    source: ModelSource
    settings: SearchSettings
    options: PerfOptions = field(default_factory=lambda: DEFAULT_PERF_OPTIONS)
    preset: str = "small"
    formats: tuple[str, ...] = ("onnx",)
    data: DataSpec = field(default_factory=DataSpec)  # the user's samples for perf_analyzer (random without)
    perf_samples: int | None = None  # at most this many of them in perf_analyzer's input file
    result_dir: Path | None = None  # default results/search-<model>-<preset>
    workspace: Path | None = None  # default workspace/<model>-<preset>
    model_repository: Path | None = None  # where the winner is written (default model_repository; a plan's own)
    model_name: str | None = None  # default: the model's slug
    server: SearchServer = field(default_factory=SearchServer)
    fresh: bool = False  # set the checkpointed points aside and start over
    resume: bool = False  # refuse (exit 2) a checkpoint measured under another identity instead of setting it aside
    progress: bool = True
    command: str = ""  # the equivalent command, shown in search.md


__all__ = ["DEFAULT_PERF_OPTIONS", "FINISH_RESERVE_S", "PLAN_MAX_MINUTES", "SEARCH_MAX_MINUTES", "SearchRequest",
           "SearchServer"]
