"""The served pipeline's latency against its steps run in-process, measured side by side in one run: each round
runs every raw sample once through the same functions and the same artifact runtime in this process, then sends
each once through the served ensemble (one request at a time), rounds in turns, so both see the same machine. The
round trip is each request's client time less the server's own time for it (the ensemble's statistics read around every
request); the target is served <= 1.1 x in-process + round trip."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..client import TritonClient
from .measure import snapshot, step_shares
from .plan import PipelinePlan
from .verify import served_outputs

TARGET_FACTOR = 1.1
Arrays = dict[str, np.ndarray]


@dataclass(frozen=True)
class SpeedResult:
    requests: int
    inprocess_ms: float  # median per sample: the steps and the model in-process
    stage_ms: dict[str, float]  # median per stage in-process
    served_ms: float  # median per request, client side
    server_ms: float  # median per request inside the server (the ensemble's statistics around each request)
    round_trip_ms: float  # median of client less server time: network, serialisation, client
    steps: int = 1  # composing models a request passes through
    factor: float = TARGET_FACTOR
    # stage -> (queue, compute) ms of its model, medians over the requests (the model's statistics around each)
    served_steps: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.served_ms / self.inprocess_ms if self.inprocess_ms else float("nan")

    @property
    def bound_ms(self) -> float:
        return self.factor * self.inprocess_ms + self.round_trip_ms

    @property
    def met(self) -> bool:
        return self.served_ms <= self.bound_ms

    @property
    def overhead_per_step_ms(self) -> float:
        """What the server adds per composing model over the same work in-process (each step is a hop between
        processes of the Python backend): (server time - in-process time) / steps."""
        return (self.server_ms - self.inprocess_ms) / max(self.steps, 1)

    def text(self) -> str:
        stages = ", ".join(f"{k} {v:.2f}" for k, v in self.stage_ms.items())
        return (f"served {self.served_ms:.2f} ms vs in-process {self.inprocess_ms:.2f} ms ({stages}) per request, "
                f"{self.ratio:.2f}x; server side {self.server_ms:.2f} ms ({self.overhead_per_step_ms:+.2f} ms per "
                f"model over in-process, {self.steps} model(s) in the server), round trip {self.round_trip_ms:.2f} ms; "
                f"target <= {self.factor:g} x in-process + round trip = {self.bound_ms:.2f} ms: "
                + ("met" if self.met else "NOT met"))


def _inprocess(plan: PipelinePlan, runtime: Callable[[Arrays], Arrays], raw: Arrays) -> dict[str, float]:
    """One sample through the steps in-process, each stage timed (ms)."""
    times, x = {}, dict(raw)
    if plan.pre is not None:
        t0 = time.perf_counter()
        x = {**x, **plan.pre.call(raw)}
        times["preprocess"] = (time.perf_counter() - t0) * 1e3
    model = plan.step(plan.names.model)
    t0 = time.perf_counter()
    x = {**x, **runtime(model.feed(x))}
    times["model"] = (time.perf_counter() - t0) * 1e3
    if plan.post is not None:
        post = plan.step(plan.names.postprocess)
        t0 = time.perf_counter()
        plan.post.call(post.feed(x))
        times["postprocess"] = (time.perf_counter() - t0) * 1e3
    return times


def _served(plan: PipelinePlan, client: TritonClient, run, models: list[str]) -> dict[str, float]:
    """One request to the ensemble: the client's ms, and from the statistics read around it the ensemble's ms
    ("server") and each step model's queue and compute ms."""
    ensemble = plan.names.ensemble
    before = snapshot(client, [ensemble, *models])
    t0 = time.perf_counter()
    served_outputs(client, plan, run.raw, run.name)
    out = {"client": (time.perf_counter() - t0) * 1e3}
    after = _settled(client, [ensemble, *models], before)
    out["server"] = _success_ms(before[ensemble], after[ensemble])
    for share in step_shares({m: before[m] for m in models}, {m: after[m] for m in models}):
        out[f"{share.model}:queue"], out[f"{share.model}:compute"] = share.queue_ms, share.compute_ms
    return out


def _count(stats: dict) -> int:
    return int(stats.get("inference_stats", {}).get("success", {}).get("count", 0) or 0)


def _settled(client: TritonClient, models: list[str], before: dict[str, dict], timeout_s: float = 1.0
             ) -> dict[str, dict]:
    """The statistics once every model has counted the request: the server updates them as it releases the
    response, which can be after the client has it (read at once, a request's time would go to the next one)."""
    deadline = time.monotonic() + timeout_s
    while True:
        after = snapshot(client, models)
        if all(_count(after[m]) > _count(before[m]) for m in models) or time.monotonic() > deadline:
            return after
        time.sleep(0.001)


def _success_ms(before: dict, after: dict) -> float:
    """The time the server spent on the request(s) between two snapshots, per request (success count and ns)."""
    def get(stats, key):
        return int(stats.get("inference_stats", {}).get("success", {}).get(key, 0) or 0)

    count = get(after, "count") - get(before, "count")
    return (get(after, "ns") - get(before, "ns")) / max(count, 1) / 1e6


def measure_speed(plan: PipelinePlan, client: TritonClient, runtime: Callable[[Arrays], Arrays],
                  composing: Sequence[str], rounds: int = 5, warmup: int = 1) -> SpeedResult:
    """`runtime`: the artifact run in-process (the runtime the server runs the model with); `composing`: the models
    the served pipeline passes through (an ensemble's steps; none when fused: its one model is the pipeline). Every
    figure is a median over the requests; the round trip is the median of each request's client time less its
    server time."""
    for _ in range(max(warmup, 0)):
        for run in plan.runs:
            _inprocess(plan, runtime, run.raw)
            served_outputs(client, plan, run.raw, run.name)
    stages = {"preprocess": plan.names.preprocess, "model": plan.names.model, "postprocess": plan.names.postprocess}
    models = list(composing)
    local: list[dict[str, float]] = []
    served: list[dict[str, float]] = []
    for _ in range(max(rounds, 1)):  # whole passes in turns: a runtime's thread pool spins on for a while after
        local += [_inprocess(plan, runtime, run.raw) for run in plan.runs]  # a call and would slow the other side
        served += [_served(plan, client, run, models) for run in plan.runs]
    med = statistics.median
    stage_ms = {k: med(t[k] for t in local) for k in local[0]}
    steps = {k: (med(r[f"{m}:queue"] for r in served), med(r[f"{m}:compute"] for r in served))
             for k, m in stages.items() if k in stage_ms and m in models}
    return SpeedResult(len(served), med(sum(t.values()) for t in local), stage_ms, med(r["client"] for r in served),
                       med(r["server"] for r in served), max(med(r["client"] - r["server"] for r in served), 0.0),
                       steps=max(len(models), 1), served_steps=steps)


__all__ = ["SpeedResult", "TARGET_FACTOR", "measure_speed"]
