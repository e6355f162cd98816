"""perf_analyzer against the served ensemble with the user's raw samples (`--input-data` JSON: strings as base64
of perf_analyzer's length-prefixed BYTES encoding), one closed-loop point per concurrency, and each step's share of
the time from the server's per-model statistics between two snapshots around the point: queue and compute per
request of every composing model."""
from __future__ import annotations

import base64
import json
import logging
import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..client import TritonClient
from ..config import Concurrency
from ..perf.analyzer import PerfOptions, PerfTarget, run_point
from ..results.schema import LATENCY_COLUMNS, THROUGHPUT
from ..spec import ModelSignature, atomic_write_text
from .plan import PipelinePlan
from .ports import Port

log = logging.getLogger(__name__)
STAGES = ("queue", "compute_input", "compute_infer", "compute_output")


def _b64_strings(values: np.ndarray) -> str:
    """perf_analyzer's BYTES element: a 4-byte little-endian length, then the bytes; base64 of them all."""
    blob = b"".join(struct.pack("<I", len(bytes(v))) + bytes(v) for v in values.ravel())
    return base64.b64encode(blob).decode("ascii")


def input_entry(ports: Sequence[Port], inputs: dict[str, np.ndarray]) -> dict[str, Any]:
    """One `data` entry: every raw input of one sample with its shape (no batch axis)."""
    entry: dict[str, Any] = {}
    for port in ports:
        arr = np.asarray(inputs[port.name])[0]
        shape = list(arr.shape) if port.shape else list(port.wire_dims)
        if port.is_string:
            entry[port.name] = {"content": {"b64": _b64_strings(np.asarray(arr, dtype=object))}, "shape": shape}
        else:
            data = np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("<"), copy=False)).tobytes()
            entry[port.name] = {"content": {"b64": base64.b64encode(data).decode("ascii")}, "shape": shape}
    return entry


def write_input_json(plan: PipelinePlan, path: str | Path) -> Path:
    """The raw samples as perf_analyzer's `--input-data` file, sent round-robin."""
    entries = [input_entry(plan.wiring.inputs, r.raw) for r in plan.runs]
    atomic_write_text(path, json.dumps({"data": entries}) + "\n")
    return Path(path)


def signature(plan: PipelinePlan) -> ModelSignature:
    """The ensemble's tensors as perf_analyzer's target takes them (a varying size at its first sample's)."""
    first = plan.runs[0]

    def spec(port: Port, arrays: dict[str, np.ndarray]):
        arr = arrays.get(port.name)
        return port.to_spec(arr.shape[1:] if arr is not None else None)

    return ModelSignature(inputs=tuple(spec(p, first.raw) for p in plan.wiring.inputs),
                          outputs=tuple(spec(p, first.final) for p in plan.wiring.outputs))


@dataclass(frozen=True)
class StepShare:
    """One composing model's time per request during a point (server statistics)."""

    model: str
    requests: int
    queue_ms: float
    compute_ms: float
    share: float = math.nan  # of the steps' summed time

    @property
    def total_ms(self) -> float:
        return self.queue_ms + self.compute_ms


@dataclass
class PipelinePoint:
    concurrency: int
    values: dict[str, float]  # perf_analyzer's columns (ms, inferences/s)
    stable: bool
    steps: list[StepShare] = field(default_factory=list)
    note: str = ""

    @property
    def throughput(self) -> float:
        return self.values.get(THROUGHPUT, math.nan)


def _counter(stats: dict[str, Any], stage: str, key: str) -> int:
    return int(stats.get("inference_stats", {}).get(stage, {}).get(key, 0) or 0)


def step_shares(before: dict[str, dict], after: dict[str, dict]) -> list[StepShare]:
    """Per composing model: requests, queue and compute (input + infer + output) ms per request, share of the sum.
    The steps of an ensemble overlap a little (a Python-backend step's output time runs on while the next step
    starts), so the shares are of the steps' summed time, not of the request's."""
    shares = []
    for model, stats in after.items():
        old = before.get(model, {})
        requests = _counter(stats, "success", "count") - _counter(old, "success", "count")
        ns = {s: _counter(stats, s, "ns") - _counter(old, s, "ns") for s in STAGES}
        per = (lambda v: v / requests / 1e6) if requests else (lambda v: math.nan)
        shares.append(StepShare(model, requests, per(ns["queue"]), per(sum(ns[s] for s in STAGES[1:]))))
    total = sum(s.total_ms for s in shares if not math.isnan(s.total_ms))
    return [StepShare(s.model, s.requests, s.queue_ms, s.compute_ms, s.total_ms / total if total else math.nan)
            for s in shares]


def snapshot(client: TritonClient, models: Sequence[str]) -> dict[str, dict]:
    return {m: client.statistics(m) for m in models}


@dataclass(frozen=True)
class MeasureJob:
    """Where and how the points are measured."""

    url: str
    concurrencies: tuple[int, ...]
    options: PerfOptions
    out_dir: Path
    input_json: Path


def measure_points(plan: PipelinePlan, client: TritonClient, composing: Sequence[str], job: MeasureJob
                   ) -> list[PipelinePoint]:
    """One perf_analyzer point per concurrency against the ensemble, with the steps' shares during it."""
    target = PerfTarget(model_name=plan.names.ensemble, url=job.url, signature=signature(plan),
                        input_data=str(job.input_json))
    points = []
    for c in job.concurrencies:
        before = snapshot(client, composing)
        # a window no request finished in is measured again with a longer one (perf.analyzer.point)
        result = run_point(target, 1, Concurrency(c), job.options, job.out_dir / f"perf_c{c}.csv")
        steps = step_shares(before, snapshot(client, composing))
        point = PipelinePoint(c, dict(result.values), result.stable, steps, result.note)
        log.info("concurrency %d: %.1f inf/s, p99 %.1f ms; %s", c, point.throughput,
                 point.values.get(LATENCY_COLUMNS[3], math.nan),
                 ", ".join(f"{s.model} {s.share:.0%}" for s in steps if not math.isnan(s.share)))
        points.append(point)
    return points


__all__ = ["MeasureJob", "PipelinePoint", "StepShare", "input_entry", "measure_points", "signature", "step_shares",
           "write_input_json"]
