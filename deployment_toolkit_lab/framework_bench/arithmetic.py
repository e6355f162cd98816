"""The figures' arithmetic: latency statistics, km^2/s coverage of geospatial tiles, and the batch halving on
out-of-memory."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from deployment_toolkit.results.schema import BENCH_COVERAGE_PREFIX


def tile_pixels(shape: Sequence[int]) -> tuple[int, int] | None:
    """(H, W) of a per-sample image shape (C, H, W); None for anything that is not a 2-D image."""
    return (int(shape[-2]), int(shape[-1])) if len(shape) == 3 else None


def coverage_km2_per_s(throughput: float, tile_hw: tuple[int, int], gsd_m: float) -> float:
    """Area mapped per second: tiles/s x (H x GSD) x (W x GSD) m^2 / 1e6 (non-overlapping tiles)."""
    return throughput * (tile_hw[0] * gsd_m) * (tile_hw[1] * gsd_m) / 1e6


def coverage_column(gsd_m: float) -> str:
    return f"{BENCH_COVERAGE_PREFIX}{gsd_m:g}m"


def latency_stats(seconds: Sequence[float], batch: int) -> dict[str, float]:
    """Throughput from the total timed wall time; latency percentiles per call, in ms."""
    arr = np.asarray(seconds, dtype=np.float64)
    total = float(arr.sum())
    p50, p95, p99 = (float(v) * 1e3 for v in np.percentile(arr, [50, 95, 99]))
    return {"throughput": batch * len(arr) / total if total > 0 else math.nan, "mean_ms": float(arr.mean()) * 1e3,
            "p50_ms": p50, "p95_ms": p95, "p99_ms": p99, "iterations": len(arr), "timed_s": total}


def is_oom(err: BaseException) -> bool:
    """Out of memory in any runtime: CUDA's OutOfMemoryError, MemoryError, or the allocators' messages."""
    if isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError":
        return True
    msg = str(err).lower()
    return any(s in msg for s in ("out of memory", "can't allocate memory", "cannot allocate memory",
                                  "failed to allocate memory", "bad_alloc"))


def with_batch_halving(measure: Callable[[int], Any], batch: int, on_oom: Callable[[int, BaseException], None] | None = None
                       ) -> tuple[Any, int]:
    """measure(batch), halving the batch on out-of-memory until it fits; raises the last OOM at batch 1."""
    while True:
        try:
            return measure(batch), batch
        except Exception as err:  # noqa: BLE001 - only OOM is handled, everything else propagates
            if not is_oom(err) or batch <= 1:
                raise
            if on_oom is not None:
                on_oom(batch, err)
            batch //= 2
