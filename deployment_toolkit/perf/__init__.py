"""Performance measurement with perf_analyzer: one point (analyzer), a resumable sweep (sweep), and the
DLE offline (batch sizes) and online (concurrency) scenarios."""
from ..binaries import PerfAnalyzerNotFound, check_perf_analyzer, find_perf_analyzer, perf_environment
from .analyzer import PerfAnalyzerError, PerfOptions, PointResult, build_command, parse_csv, run_point
from .offline import run_offline
from .online import parse_range, run_online
from .sweep import (
    ServerDiedError,
    ServerNotReady,
    SweepError,
    SweepOutcome,
    SweepPoint,
    run_sweep,
)

__all__ = [
    "PerfAnalyzerError", "PerfAnalyzerNotFound", "PerfOptions", "PointResult",
    "build_command", "check_perf_analyzer", "find_perf_analyzer", "parse_csv", "perf_environment", "run_point",
    "run_offline", "run_online", "parse_range", "ServerDiedError",
    "ServerNotReady", "SweepError", "SweepOutcome", "SweepPoint", "run_sweep",
]
