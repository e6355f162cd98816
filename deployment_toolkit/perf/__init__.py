"""Performance measurement with perf_analyzer: one point at one load level (analyzer), a resumable sweep (sweep,
sweep_config: where the server is, the points, the settings), and the DLE offline (batch sizes) and online
(concurrency) scenarios."""
from ..binaries import PerfAnalyzerNotFound, check_perf_analyzer, find_perf_analyzer, perf_environment
from .analyzer import (Concurrency, Load, PerfAnalyzerError, PerfOptions, PerfTarget, PointResult, RequestRate,
                       Schedule, build_command, parse_csv, run_point)
from .offline import run_offline
from .online import parse_range, run_online
from .sweep import (
    ServerAt,
    ServerDiedError,
    ServerNotReady,
    SweepError,
    SweepOutcome,
    SweepPoint,
    SweepSettings,
    run_sweep,
)

__all__ = [
    "Concurrency", "Load", "RequestRate", "Schedule", "PerfAnalyzerError", "PerfAnalyzerNotFound", "PerfOptions",
    "PerfTarget", "PointResult", "build_command", "check_perf_analyzer", "find_perf_analyzer", "parse_csv",
    "perf_environment", "run_point", "run_offline", "run_online", "parse_range", "ServerAt", "ServerDiedError",
    "ServerNotReady", "SweepError", "SweepOutcome", "SweepPoint", "SweepSettings", "run_sweep",
]
