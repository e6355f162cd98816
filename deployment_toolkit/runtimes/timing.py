"""THE in-process timer: a callable (or several, taking turns call by call) timed after a warm-up, for a number of
calls or a time budget, with the share of the machine's CPU other processes took meanwhile.

Why one: the runtime comparison (export/speed), the serving-overhead reference (perf/overhead), the framework bench
(the lab's framework_bench now) and the diffusion latency table (diffusion/latency) each had their own loop; they
differed in what they could do (interleaving, a time budget, the background probe), not in what they measured.
Several callables are interleaved round by round (a, b, a, b, ...), so background load on a shared host hits them
alike and their ratio stays meaningful even when the absolute numbers drift.

Part of `runtimes`, which imports nothing of the toolkit: anything that times a call can use it.
"""
from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence


def machine_busy_seconds() -> float | None:
    """CPU-seconds all processes have spent busy since boot (Linux /proc/stat), None elsewhere."""
    try:
        with open("/proc/stat") as fh:
            parts = fh.readline().split()
    except OSError:
        return None
    if not parts or parts[0] != "cpu":
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in parts[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method) of a non-empty list."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True)
class Budget:
    """How a callable is timed: `warmup` untimed calls, then timed rounds until `iterations` are done, or earlier
    once `min_iterations` are done and one callable has spent `max_seconds` (None: no time budget).
    `background`: also measure the CPU other processes took (reads /proc/stat around every call)."""

    warmup: int = 0
    iterations: int = 10
    min_iterations: int = 1
    max_seconds: float | None = None
    background: bool = True

    @classmethod
    def for_seconds(cls, seconds: float, warmup: int = 0, min_iterations: int = 3) -> "Budget":
        """Back-to-back calls for `seconds` (at least `min_iterations` of them)."""
        return cls(warmup=warmup, iterations=sys.maxsize, min_iterations=min_iterations, max_seconds=seconds)


@dataclass
class Timing:
    """One callable's timed calls."""

    seconds: list[float]  # wall time per timed call
    background_cpu: float  # share of the machine's CPU other processes used meanwhile (0..1; -1: unknown)

    def percentile(self, q: float) -> float:
        return percentile(self.seconds, q) if self.seconds else math.nan

    @property
    def median(self) -> float:
        return self.percentile(50)


def time_calls(calls: Mapping[str, Callable[[], object]], budget: Budget = Budget(),
               after_warmup: Callable[[], object] | None = None) -> dict[str, Timing]:
    """Per-call seconds of each callable, the calls interleaved round by round after every callable's warm-up.
    `after_warmup` runs between the warm-up and the first timed call (e.g. to snapshot a server's statistics)."""
    if budget.iterations < 1 or budget.warmup < 0:
        raise ValueError(f"need iterations >= 1 and warmup >= 0, got {budget.iterations} and {budget.warmup}")
    for call in calls.values():
        for _ in range(budget.warmup):
            call()
    if after_warmup is not None:
        after_warmup()
    times: dict[str, list[float]] = {name: [] for name in calls}
    foreign = {name: 0.0 for name in calls}
    probe = budget.background and machine_busy_seconds() is not None
    for i in range(budget.iterations):
        for name, call in calls.items():
            busy0, own0 = (machine_busy_seconds(), time.process_time()) if probe else (0.0, 0.0)
            t0 = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t0)
            if probe:
                foreign[name] += (machine_busy_seconds() - busy0) - (time.process_time() - own0)
        if budget.max_seconds is not None and i + 1 >= budget.min_iterations and \
                max(sum(t) for t in times.values()) >= budget.max_seconds:
            break
    cores = usable_cores()
    return {name: Timing(ts, min(1.0, max(0.0, foreign[name] / (sum(ts) * cores))) if probe and sum(ts) > 0
                         else -1.0)
            for name, ts in times.items()}


def time_call(call: Callable[[], object], budget: Budget = Budget(),
              after_warmup: Callable[[], object] | None = None) -> Timing:
    """One callable's timing (time_calls of one)."""
    return time_calls({"call": call}, budget, after_warmup)["call"]


__all__ = ["Budget", "Timing", "machine_busy_seconds", "percentile", "time_call", "time_calls", "usable_cores"]
