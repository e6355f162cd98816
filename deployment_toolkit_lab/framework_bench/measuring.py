"""Measuring: time one configuration into its CSV row, and a group of configurations on one prepared model."""
from __future__ import annotations

import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from deployment_toolkit.results.bench_store import as_float
from deployment_toolkit.runtimes.timing import Budget, time_call
from .arithmetic import coverage_column, coverage_km2_per_s, latency_stats, tile_pixels, with_batch_halving
from .configs import STATUS_FAILED, STATUS_OK, BenchConfig
from .host import HostCaps, amp_dtype_for
from .memory import PeakMemory
from .runners import BenchOptions, Prepared, prepare


def loadavg() -> tuple[float, float]:
    try:
        one, five, _ = os.getloadavg()
        return round(one, 2), round(five, 2)
    except OSError:
        return math.nan, math.nan


def base_row(cfg: BenchConfig, device: str, status: str, reason: str = "") -> dict[str, Any]:
    one, five = loadavg()
    return {
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "model": cfg.model, "preset": cfg.preset,
        "runtime": cfg.runtime, "precision": cfg.precision, "compile_mode": cfg.compile_mode,
        "requested_batch_size": cfg.batch_size, "threads_requested": cfg.threads, "status": status,
        "reason": reason, "device": device, "loadavg_1m": one, "loadavg_5m": five,
    }


def measure(prepared: Prepared, cfg: BenchConfig, opts: BenchOptions, log: Callable[[str], None]) -> dict[str, Any]:
    """Time one configuration (halving the batch on OOM) and return its CSV row."""
    def at(batch: int) -> dict[str, Any]:
        inputs = prepared.make_inputs(batch)
        memory = PeakMemory(opts.device)
        memory.start()

        def call():
            prepared.run(inputs)
            prepared.sync()

        # the first call compiles (torch.compile, cuDNN autotune, ORT's first run): timed on its own
        first = time_call(call, Budget(iterations=1, background=False)).seconds[0]
        timing = time_call(call, Budget.for_seconds(opts.duration_s, warmup=max(opts.warmup - 1, 0),
                                                    min_iterations=max(opts.min_iterations, 1)))
        stats = latency_stats(timing.seconds, batch)
        return {**stats, "first_call_s": first, "peak_mem_mb": memory.peak_mb(), "peak_mem_metric": memory.metric,
                "peak_rss_mb": memory.peak_rss_mb(),
                "background_cpu": timing.background_cpu}

    def on_oom(batch: int, err: BaseException) -> None:
        log(f"{cfg.label}: out of memory at batch {batch} ({str(err).splitlines()[0][:120]}); trying {batch // 2}")
        gc_device(opts.device)

    values, batch = with_batch_halving(at, cfg.batch_size, on_oom)
    row = base_row(cfg, opts.device, STATUS_OK, "" if batch == cfg.batch_size else
                   f"out of memory at batch {cfg.batch_size}: halved to {batch}")
    row.update(values)
    row.update({"family": prepared.family, "batch_size": batch, "input_shape": "x".join(map(str, prepared.input_shape)),
                "unit": prepared.unit, "warmup": opts.warmup, "prepare_s": prepared.prepare_s,
                "threads": prepared.threads, "tf32": _tf32_label(cfg, opts),
                "amp_dtype": amp_dtype_for(HostCaps(device=opts.device), opts.amp_dtype) if cfg.precision == "amp" else ""})
    add_coverage(row, opts.gsd_m)
    return row


def _tf32_label(cfg: BenchConfig, opts: BenchOptions) -> str:
    if not opts.device.startswith("cuda") or cfg.precision not in ("fp32", "amp") or cfg.runtime == "onnxruntime":
        return "n/a"
    return "on" if opts.tf32 else "off"


def add_coverage(row: dict[str, Any], gsds: Iterable[float]) -> dict[str, Any]:
    """km^2/s columns for a geospatial row with a measured throughput (tile size from its input shape)."""
    if row.get("family") != "geospatial" or row.get("status") != STATUS_OK:
        return row
    shape = [int(d) for d in str(row.get("input_shape", "")).split("x") if d]
    tile = tile_pixels(shape)
    throughput = as_float(row.get("throughput"))
    if tile is None or math.isnan(throughput):
        return row
    row["tile_px"] = f"{tile[0]}x{tile[1]}"
    for gsd in gsds:
        row[coverage_column(gsd)] = coverage_km2_per_s(throughput, tile, gsd)
    return row


def gc_device(device: str) -> None:
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def run_group(configs: Sequence[BenchConfig], opts: BenchOptions, emit: Callable[[dict[str, Any]], None],
              log: Callable[[str], None]) -> None:
    """Prepare the group's model once and measure each batch size; every outcome is emitted as a row."""
    if not configs:
        return
    with tempfile.TemporaryDirectory(prefix="framework-bench-") as tmp:
        try:
            prepared = prepare(configs[0], opts, Path(tmp))
        except Exception as err:  # noqa: BLE001 - a failed export/build fails the group, not the bench
            reason = f"prepare failed: {type(err).__name__}: {_first_line(err)}"
            for cfg in configs:
                emit(base_row(cfg, opts.device, STATUS_FAILED, reason))
            return
        for cfg in configs:
            try:
                emit(measure(prepared, cfg, opts, log))
            except Exception as err:  # noqa: BLE001
                emit(base_row(cfg, opts.device, STATUS_FAILED, f"{type(err).__name__}: {_first_line(err)}"))
                gc_device(opts.device)
        prepared.cleanup()
        del prepared
        gc_device(opts.device)


def _first_line(err: BaseException) -> str:
    lines = [ln for ln in str(err).strip().splitlines() if ln.strip()]
    return lines[0][:300] if lines else ""
