"""THE column names of the measured CSVs (`<run>/online.csv`, `offline.csv`): what perf writes, what report,
sizing and search read, and the row schemas (results.rows) of the stores that hold them. Names follow the DLE "Full
tabular data" tables; times are in ms."""
from __future__ import annotations

import math

from .ledger import IDENTITY_COLUMN, MEASURED_AT_COLUMN, PROVENANCE_COLUMNS
from .rows import RowSchema

THROUGHPUT = "Inferences/second"
RESIDUAL = "Network+server Send/recv"
BREAKDOWN_COLUMNS = (
    "Client Send",
    "Network+server Send/recv",
    "Server Queue",
    "Server Compute Input",
    "Server Compute Infer",
    "Server Compute Output",
    "Client Recv",
)
LATENCY_COLUMNS = ("P50 Latency", "P90 Latency", "P95 Latency", "P99 Latency", "Avg Latency")
# Measured values of one point, in the order of the seed's online table (times in ms).
MEASURE_COLUMNS = (THROUGHPUT, *BREAKDOWN_COLUMNS, *LATENCY_COLUMNS)

KEY_COLUMNS = ("Client Batch Size", "Concurrent client requests")
STORE_COLUMNS = (
    "Precision",
    *KEY_COLUMNS,
    *MEASURE_COLUMNS,
    "Triton Instances",
    "stable",
    "residual_clamped",
    "attempts",
    "window",
    "note",
    *PROVENANCE_COLUMNS,
)
INT_COLUMNS = {"Client Batch Size", "Concurrent client requests", "Triton Instances", "attempts"}
BOOL_COLUMNS = {"stable", "residual_clamped"}

# The framework bench's `<device>.csv` (the lab's framework_bench): what identifies a configuration (a rerun skips
# rows with these values), every column, and the prefix of the km^2/s coverage columns added after them.
BENCH_KEY_COLUMNS = (
    "model", "preset", "runtime", "precision", "compile_mode", "requested_batch_size", "threads_requested",
)
BENCH_COLUMNS = (
    "timestamp", *BENCH_KEY_COLUMNS, "status", "reason", "family", "device", "batch_size", "input_shape",
    "throughput", "unit", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "iterations", "timed_s", "warmup",
    "first_call_s", "prepare_s", "peak_mem_mb", "peak_mem_metric", "peak_rss_mb", "threads", "amp_dtype", "tf32",
    "loadavg_1m", "loadavg_5m", "background_cpu", "tile_px", "identity",
)
BENCH_COVERAGE_PREFIX = "km2_per_s_at_"


def _short_float(value: float) -> str:
    """A sweep's numbers: 6 significant digits, small ones (under 1 µs in ms) in exponent form."""
    return f"{value:.6g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3e}"


def _coverage_order(column: str) -> tuple:
    """A bench CSV's extra columns: the coverage ones first, by their ground sample distance, then the rest."""
    try:
        gsd = float(column[len(BENCH_COVERAGE_PREFIX):-1])
    except ValueError:
        gsd = math.nan
    return (not column.startswith(BENCH_COVERAGE_PREFIX), gsd, column)


# `<run>/<kind>.csv` as results.rows stores it: keyed by (batch, concurrency), sorted by it, typed read-back
STORE_SCHEMA = RowSchema(
    columns=STORE_COLUMNS, key=KEY_COLUMNS, sort_by=KEY_COLUMNS,
    types={**{c: int for c in INT_COLUMNS}, **{c: bool for c in BOOL_COLUMNS}, **{c: float for c in MEASURE_COLUMNS}},
    float_format=_short_float, identity_column=IDENTITY_COLUMN, stamp_column=MEASURED_AT_COLUMN)
# the framework bench's `<device>.csv`: rows in the order they were written, kept as strings, coverage columns kept
BENCH_SCHEMA = RowSchema(columns=BENCH_COLUMNS, key=BENCH_KEY_COLUMNS, extra_order=_coverage_order,
                         identity_column="identity")
