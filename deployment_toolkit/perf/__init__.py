"""Performance measurement with perf_analyzer: one point (analyzer), a resumable sweep (sweep), and the
DLE offline (batch sizes) and online (concurrency) scenarios."""
from .analyzer import (
    MEASURE_COLUMNS,
    PerfAnalyzerError,
    PerfAnalyzerNotFound,
    PerfOptions,
    PointResult,
    build_command,
    check_perf_analyzer,
    find_perf_analyzer,
    parse_csv,
    perf_environment,
    run_point,
)
from .offline import run_offline
from .online import parse_range, run_online
from .sweep import (
    STORE_COLUMNS,
    ResultsStore,
    ServerDiedError,
    ServerNotReady,
    SweepError,
    SweepOutcome,
    SweepPoint,
    read_store_csv,
    run_sweep,
)

__all__ = [
    "MEASURE_COLUMNS", "STORE_COLUMNS", "PerfAnalyzerError", "PerfAnalyzerNotFound", "PerfOptions", "PointResult",
    "build_command", "check_perf_analyzer", "find_perf_analyzer", "parse_csv", "perf_environment", "run_point",
    "run_offline", "run_online", "parse_range", "ResultsStore", "ServerDiedError",
    "ServerNotReady", "SweepError", "SweepOutcome", "SweepPoint", "read_store_csv", "run_sweep",
]
