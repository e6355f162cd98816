"""Several models' open-loop points measured together from one load-generator process (perf.multistream), as the
store rows perf_analyzer's points become, so perf.openloop.ratepoint.RatePoint judges each model of a mix the same way
whichever process drove it.

Why here: perf/multistream.py may not import perf.openloop, and a row must follow ratepoint's own rules (queue growth,
the client limit, what an unsettled run keeps). A point driven this way is keyed apart from perf_analyzer's
(`driving`: MULTISTREAM), so a rerun replays it and never mixes the two.
"""
from __future__ import annotations

import dataclasses
import math
import re
import zlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from .. import neighbours
from ..multistream import DriveError, DriveSpec, Stream, StreamResult, drive
from .ratepoint import (MULTISTREAM, RatePoint, Target, client_limited, point_key, point_seed, queue_growing,
                        round_rate)

REQUEST_TIMEOUT_S = 30.0  # a request of a mix unanswered for this long is an error of its model


def row_of(result: StreamResult, offered: float) -> dict[str, Any]:
    """The store row (row_from_outputs' keys) of one stream offered `offered` inferences/s.

    As with perf_analyzer, only a settled run has latency figures: a stream whose windows never agreed, or one with
    a failed request (perf_analyzer stops on one), keeps its windows and answered rate but no p50/p99/avg and no
    latency from the intended send, so RatePoint fails it. The send rate and delayed share are always known here
    (perf_analyzer prints them only when it fell behind), so RatePoint compares what was answered with what was
    really sent; the client fell behind only when it sent less than its schedule meant to within the same windows
    (against the nominal rate, a Poisson schedule's own few percent would read as a slow client)."""
    judged = bool(result.stable) and not result.errors
    latency = [math.nan if v is None else float(v) for v in result.window_latency_ms]
    answered = result.answered if result.answered is not None else math.nan

    def kept(value: float | None) -> float | None:
        return value if judged else None

    return {
        "offered": offered, "answered": answered, "send_rate": result.send_rate, "delayed_pct": result.delayed_pct,
        "p50_ms": kept(result.p50_ms), "p99_ms": kept(result.p99_ms), "avg_ms": kept(result.avg_ms),
        "server_queue_ms": None, "window_throughput": list(result.window_throughput), "window_latency_ms": latency,
        "queue_growing": queue_growing(latency),
        "client_limited": client_limited(result.intended_rate or offered, result.send_rate, result.delayed_pct),
        "stable": judged,
        **{k: kept(getattr(result, k)) if result.counted else None
           for k in ("sched_p50_ms", "sched_p90_ms", "sched_p99_ms", "late_pct", "late_p99_ms", "late_max_ms")},
    }


def driven_together(target: Target) -> Target:
    """The target as one stream of a multistream run: its points keyed apart from perf_analyzer's."""
    return dataclasses.replace(target, driving=MULTISTREAM)


def measure_together(targets: Mapping[str, Target], rates: Mapping[str, float], stores: Mapping[str, Any],
                     out_dir: Path, trial: int = 1, tag: str = "",
                     window_ms: int | None = None) -> dict[str, RatePoint]:
    """Every target (by name) at its requests/s at once, from one process, on one server: the stored points when
    every one is there (a rerun), else all measured together and stored (a mix point is one measurement). The
    window is `window_ms`, else the longest of the targets'; their first target's options give the windows'
    number and stability (a warm-up window first, as perf_analyzer's first window usually falls out)."""
    targets = {n: driven_together(t) for n, t in targets.items()}
    rates = {n: round_rate(rates[n]) for n in targets}
    keys = {n: point_key(t, rates[n], trial) for n, t in targets.items()}
    rows = {n: stores[n].get(k) for n, k in keys.items()}
    replay = neighbours.policy() is neighbours.Policy.RECORD  # a disturbed row is measured again (perf.neighbours)
    if all(row is not None and (replay or not row.get("disturbed")) for row in rows.values()):
        return {n: RatePoint(keys[n], rows[n]) for n in targets}
    urls = {t.url for t in targets.values()}
    if len(urls) != 1:
        raise ValueError(f"one process drives one server's models, got {sorted(urls)}")
    options = next(iter(targets.values())).options
    seeds = {n: point_seed(t.schedule_seed, rates[n], trial) for n, t in targets.items()}
    streams = tuple(Stream(t.model_name, t.batch, rates[n], seeds[n], t.distribution, t.model_version,
                           str(t.options.input_data), tuple(t.signature.inputs), t.samples_per_request,
                           batched=getattr(t.signature, "max_batch_size", 1) != 0) for n, t in targets.items())
    spec = DriveSpec(urls.pop(), streams, int(window_ms or max(t.options.measurement_interval_ms
                                                              for t in targets.values())),
                     options.max_trials + 1, options.stability_percentage, REQUEST_TIMEOUT_S)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"together_{tag}t{trial}_" + "_".join(f"r{rates[n]:g}" for n in targets))
    if len(safe) > 120:  # many models: a file name within every file system's limit, still one per point
        safe = f"{safe[:100]}_{zlib.crc32(safe.encode()):08x}"
    log = Path(out_dir) / f"{safe}.log"
    started = datetime.now(timezone.utc)
    results = drive(spec, log)
    for n, t in targets.items():  # a request the server refused is an error, as perf_analyzer stops on one
        r = results[t.model_name]
        if r.errors > r.unanswered and not any(w in r.first_error.lower() for w in ("deadline", "no answer within")):
            raise DriveError(f"{t.model_name}: {r.errors} of {r.requests} requests failed: {r.first_error} (the "
                             f"load generator's log: {log})")
    points = {}
    for n, t in targets.items():
        row = row_of(results[t.model_name], rates[n] * t.batch * t.samples_per_request)
        row.update({"timestamp": started.isoformat(timespec="seconds"), "url": t.url,
                    "command": f"python -m deployment_toolkit.perf.multistream ({len(targets)} models)",
                    "log": str(log), "schedule_seed": seeds[n], "profile_export": ""})
        stores[n].put(keys[n], row)
        points[n] = RatePoint(keys[n], stores[n].get(keys[n]) or row)
    return points


__all__ = ["MULTISTREAM", "driven_together", "measure_together", "row_of"]
