"""The serving-overhead benchmark's arithmetic (overhead/bench.py measures): the best online point, Triton's
statistics between two snapshots, how much slower the backend's inference runs than in-process, and the single
client's figures."""
from __future__ import annotations

import math
from typing import Any, Sequence

from deployment_toolkit.results.bench_store import as_float as _f
from deployment_toolkit.results.schema import BREAKDOWN_COLUMNS, THROUGHPUT


def best_point(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The online point with the highest throughput (stable points first: an unstable one wins only alone)."""
    usable = [r for r in rows if not math.isnan(_f(r.get(THROUGHPUT)))]
    stable = [r for r in usable if r.get("stable", True)]
    pool = stable or usable
    return max(pool, key=lambda r: _f(r[THROUGHPUT])) if pool else None


def stats_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Triton statistics between two snapshots: requests, executions, samples, time per stage, executed batches.

    Triton's `inference_stats` accumulate per request (a dynamic batch of 3 requests adds its compute time 3
    times), so stage times are divided by the request count; the time per execution comes from
    `batch_stats`, which count each execution once, per executed batch size."""

    def stage(stats: dict, name: str, key: str = "ns") -> int:
        return int(stats.get("inference_stats", {}).get(name, {}).get(key, 0) or 0)

    def batches(stats: dict) -> dict[int, tuple[int, int]]:
        return {int(b["batch_size"]): (int(b.get("compute_infer", {}).get("count", 0) or 0),
                                       int(b.get("compute_infer", {}).get("ns", 0) or 0))
                for b in stats.get("batch_stats", []) or []}

    execs = int(after.get("execution_count", 0) or 0) - int(before.get("execution_count", 0) or 0)
    samples = int(after.get("inference_count", 0) or 0) - int(before.get("inference_count", 0) or 0)
    requests = stage(after, "success", "count") - stage(before, "success", "count")
    b0, b1 = batches(before), batches(after)
    hist: dict[int, tuple[int, float]] = {}
    for size, (count, total) in sorted(b1.items()):
        c0, t0 = b0.get(size, (0, 0))
        if count - c0 > 0:
            hist[size] = (count - c0, float(total - t0))
    exec_count = sum(c for c, _ in hist.values())
    out = {"requests": requests, "executions": execs, "inferences": samples,
           "avg_exec_batch": samples / execs if execs else math.nan,
           "exec_batch_hist": ";".join(f"{s}:{c}" for s, (c, _) in hist.items()),
           "infer_ms_by_exec_batch": ";".join(f"{s}:{ns / c / 1e6:.2f}" for s, (c, ns) in hist.items()),
           "infer_ms_per_exec": sum(ns for _, ns in hist.values()) / exec_count / 1e6 if exec_count else math.nan}
    for name in ("queue", "compute_input", "compute_infer", "compute_output"):
        out[f"{name}_ms_per_request"] = (stage(after, name) - stage(before, name)) / requests / 1e6 \
            if requests else math.nan
    return out


def infer_inflation(infer_ms_per_exec: float, avg_exec_batch: float, inprocess_throughput: float) -> float:
    """Server Compute Infer per execution / the in-process time for that many samples (linear in batch).

    1.0: the backend's ONNX Runtime runs as fast as in-process; above 1: it is slowed down (threads fighting
    the server, perf_analyzer or another instance for the cores)."""
    if not inprocess_throughput or math.isnan(avg_exec_batch) or math.isnan(infer_ms_per_exec):
        return math.nan
    return infer_ms_per_exec / (avg_exec_batch / inprocess_throughput * 1e3)


def single_client(point: dict[str, Any], batch: int, best: float, median: float) -> dict[str, Any]:
    """The concurrency-1 point against in-process, where serving costs most (nothing overlaps the per-request
    work): its throughput over the best and the median in-process timing, the time per request outside the
    runtime's inference (client, network, queue, input and output staging) and the inference against the
    in-process time per request (the median timing's)."""
    c1 = _f(point.get(THROUGHPUT))
    infer = _f(point.get("Server Compute Infer"))
    outside = sum(_f(point.get(c)) for c in BREAKDOWN_COLUMNS if c != "Server Compute Infer")
    inprocess_ms = batch * 1000.0 / median if median else math.nan
    return {"inprocess_median": median, "c1_throughput": c1,
            "c1_ratio": c1 / best if best and not math.isnan(c1) else math.nan,
            "c1_ratio_median": c1 / median if median and not math.isnan(c1) else math.nan,
            "c1_latency_ms": _f(point.get("Avg Latency")), "c1_outside_ms": outside, "c1_infer_ms": infer,
            "inprocess_ms_per_request": inprocess_ms,
            "c1_infer_inflation": infer / inprocess_ms if inprocess_ms and not math.isnan(infer) else math.nan}


__all__ = ["best_point", "infer_inflation", "single_client", "stats_delta"]
