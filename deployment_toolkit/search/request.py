"""What one config search is asked to do, typed: the model, its settings (trials.SearchSettings), the job (formats,
where the artifacts, the winner and the results go, how earlier points are reused), the perf_analyzer options, the
user's samples and the server's ports. `search_step` (orchestration.py) takes it; the command parses its flags into
the same dataclasses (`config.add_arguments` / `from_args`), and a composite step (the plan, the lab's Model
Analyzer comparison) or the Python API (`dt.search_config`) builds them directly, so every door measures alike."""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from ..config import Format, Reuse, check_numbers, setting
from ..data.perf_input import DEFAULT_PERF_SAMPLES
from ..data.samples import DataSpec
from ..errors import UserInputError
from ..perf.analyzer import PerfOptions
from ..server.startup import DEFAULT_START_TIMEOUT_S
from ..sources import ModelSource
from .trials import PLAN_MAX_MINUTES, SEARCH_MAX_MINUTES, SearchSettings

DEFAULT_PERF_OPTIONS = PerfOptions(
    # Windows of 40 requests (count_windows: at least 1 s) and a loose stability check; why: the search command's
    # parser (commands/search_config.py), whose perf_analyzer defaults are these.
    protocol="grpc", shared_memory="system", measurement_mode="count_windows", measurement_interval_ms=2000,
    measurement_request_count=40, stability_percentage=20.0, max_trials=5, max_attempts=1)

FINISH_RESERVE_S = 10.0  # writing the winner, the CSVs, the plot and the report took 3-5 s on a 2-core host


def format_list(text: str) -> tuple[Format, ...]:
    """'onnx,ts-trace' -> the formats, each one the toolkit converts to (an unknown one is refused by name)."""
    names = [f.strip() for f in text.split(",") if f.strip()]
    if not names:
        raise argparse.ArgumentTypeError("--formats needs at least one format, e.g. onnx")
    try:
        return tuple(Format(n) for n in names)
    except ValueError:
        bad = next(n for n in names if n not in Format.values())
        raise argparse.ArgumentTypeError(f"unknown format {bad!r}: choose from {', '.join(Format.values())}") from None


def formats_of(value: str | tuple[str, ...] | list[str]) -> tuple[Format, ...]:
    """The formats a caller gave (a comma-separated string or a sequence), checked like --formats."""
    try:
        return format_list(value if isinstance(value, str) else ",".join(value))
    except argparse.ArgumentTypeError as err:
        raise UserInputError(str(err)) from None


def _no_period(seconds: float) -> float | None:
    return seconds or None


@dataclass
class SearchServer:
    """The embedded tritonserver the search starts (explicit model control; 0 picks a free port)."""

    http_port: int = setting(0, flag="--http-port", low=0, high=65_535, help="0 picks a free port (default)",
                             show_default=False)
    grpc_port: int = setting(0, flag="--grpc-port", low=0, high=65_535)
    metrics_port: int = setting(0, flag="--metrics-port", low=0, high=65_535)
    log_verbose: int = setting(0, flag="--log-verbose", low=0, help="tritonserver --log-verbose")
    # scrape the metrics endpoint this often during a point (None: never)
    metrics_period_s: float | None = setting(
        0.5, flag="--metrics-period", unit="s", low=0, high=3600, to_value=_no_period, type=float, metavar="SECONDS",
        help="scrape the server's metrics endpoint this often during every point (0: never); search_server.csv and "
             "telemetry/ hold the result, search.md the memory per instance count")
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S  # --server-timeout (server.startup.add_server_timeout)

    def __post_init__(self) -> None:
        check_numbers(self)


@dataclass
class SearchJob:
    """What a search works on and where it writes, besides its settings: the search command's own flags, each
    default written once (the command builds its flags from these fields; dt.search_config and dt.plan take the
    same dataclass)."""

    preset: str = setting("small", flag="--preset", help="small (CI size) or full (benchmark size)")
    formats: tuple[Format, ...] = setting(
        (Format.ONNX,), flag="--formats", type=format_list, metavar="FORMAT,...", show_default=False,
        help="comma-separated artifact formats to try, each converted and verified first (e.g. onnx,ts-trace; "
             "default: onnx)")
    workspace: Path | None = setting(None, flag="--workspace", type=Path, metavar="DIR",
                                     help="where artifacts live (<DIR>/<format>); default workspace/<model>-<preset>")
    # where the winner is written (None: model_repository for a search, <plan>/model_repository for a plan)
    model_repository: Path | None = setting(None, flag="--model-repository", type=Path, metavar="DIR",
                                            help="where the winner is written (default model_repository)")
    model_name: str | None = setting(None, flag="--model-name",
                                     help="name of the winner in the repository (default: --model)")
    # --result-path (results.run_folder's one output flag): default results/search-<model>-<preset>
    result_dir: Path | None = None
    fresh: bool = setting(False, flag="--fresh", action="store_true",
                          help="set the checkpointed points in --result-path aside (kept under superseded/) and "
                               "start over")
    resume: bool = setting(False, flag="--resume", action="store_true",
                           help="refuse to go on (exit 2) if the checkpoint was measured under another identity, "
                                "instead of setting it aside")
    progress: bool = setting(True, flag="--no-progress", action="store_false", help="no progress bar")
    perf_samples: int = DEFAULT_PERF_SAMPLES  # at most this many of the user's samples in perf_analyzer's input file
    server: SearchServer = field(default_factory=SearchServer)
    command: str = ""  # how the search was asked for (the shell command, or the Python call), shown in search.md

    def __post_init__(self) -> None:
        self.formats = formats_of(self.formats)
        for name in ("workspace", "model_repository", "result_dir"):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, Path(value))
        if self.fresh and self.resume:
            raise UserInputError("--fresh and --resume contradict each other: pass one of them")

    @property
    def reuse(self) -> Reuse:
        """What the rerun does with the points an earlier run of the same folder measured."""
        return Reuse.FRESH if self.fresh else Reuse.RESUME if self.resume else Reuse.AUTO


@dataclass
class SearchRequest:
    """One search, whole: the model, what to explore, the job, perf_analyzer's options and the user's samples."""

    source: ModelSource
    settings: SearchSettings
    job: SearchJob = field(default_factory=SearchJob)
    options: PerfOptions = field(default_factory=lambda: DEFAULT_PERF_OPTIONS)
    data: DataSpec = field(default_factory=DataSpec)  # the user's samples for perf_analyzer (random without)


__all__ = ["DEFAULT_PERF_OPTIONS", "FINISH_RESERVE_S", "PLAN_MAX_MINUTES", "SEARCH_MAX_MINUTES", "SearchJob",
           "SearchRequest", "SearchServer", "format_list", "formats_of"]
