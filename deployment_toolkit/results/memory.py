"""Memory per instance: what each instance count of a config used (Triton's own memory gauges, scraped during
its points), a straight line through those readings (a fixed part + a cost per instance), and whether, and how
many, instances fit a device of a given size.

Why a line: every Triton instance is its own copy of the model (on a GPU its weights and workspace; in the Python
backend its own stub process and runtime session), while the server, its CUDA contexts and everything else on the
device are paid once. Two instance counts give the cost of an extra instance; more make it a least-squares fit.
The gauges are the device's *used* memory (`nv_gpu_memory_used_bytes` per GPU, `nv_cpu_memory_used_bytes` for the
host), so the fixed part includes whatever else ran there: a fit on a quiet device is the one to plan with.
Used by the search (its points) and the sizing (the sweeps' `<kind>_server.csv`); here because both read it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

from .server_metrics import read_series, read_summaries, server_csv

GB = 1e9  # --gpu-memory-gb counts decimal GB: conservative for cards sold as "80 GB" (nvidia-smi: 81559 MiB)
GIB = 2.0 ** 30  # the server summaries store GiB
BATCH, CONCURRENCY = "Client Batch Size", "Concurrent client requests"


def gb(n_bytes: float | None) -> str:
    """Bytes as 'N.NN GB' (decimal, like the flag), or 'n/a'."""
    return "n/a" if n_bytes is None or math.isnan(n_bytes) else f"{n_bytes / GB:,.2f} GB"


@dataclass(frozen=True)
class MemoryReading:
    """What one instance count used at its point: peak bytes on `device` ("GPU": the busiest GPU; "host")."""

    instances: int
    bytes: float
    device: str
    where: str = ""  # the point (and config) the reading comes from
    spread: float = 0.0  # how far the gauge moved between the points of the same run (or config): its noise


@dataclass(frozen=True)
class MemoryModel:
    """memory = fixed + per_instance x instances, through one reading per instance count (the largest where a
    count was read more than once). fixed / per_instance are None with fewer than two instance counts."""

    device: str
    readings: tuple[MemoryReading, ...]
    fixed: float | None = None
    per_instance: float | None = None

    @property
    def counts(self) -> list[int]:
        return [r.instances for r in self.readings]

    def used(self, instances: int) -> float | None:
        """The measured bytes of this instance count, else the line's prediction (None without a line)."""
        for r in self.readings:
            if r.instances == instances:
                return r.bytes
        if self.fixed is None or self.per_instance is None:
            return None
        return self.fixed + self.per_instance * instances

    def steps(self) -> list[tuple[int, int, float]]:
        """(from, to, bytes per extra instance) between consecutive instance counts."""
        rs = self.readings
        return [(a.instances, b.instances, (b.bytes - a.bytes) / (b.instances - a.instances))
                for a, b in zip(rs, rs[1:])]

    @property
    def noise(self) -> float:
        """The most the gauge moved within one instance count: a rise smaller than that is not resolved."""
        return max((r.spread for r in self.readings), default=0.0)

    @property
    def grows(self) -> bool:
        """An extra instance costs measurable memory: the line rises over the measured counts by more than the
        gauge moved within one of them."""
        if self.per_instance is None or self.per_instance <= 0:
            return False
        return self.per_instance * (self.counts[-1] - self.counts[0]) > self.noise

    def text(self) -> str:
        """One sentence: the line, or why there is none."""
        if not self.readings:
            return f"no {self.device} memory measured"
        if self.fixed is None:
            r = self.readings[0]
            return (f"{r.instances} instance(s) used {gb(r.bytes)} of {self.device} memory; one instance count "
                    "measured, so the cost of an extra instance is not known (measure another instance count)")
        if not self.grows:
            moved = f"the gauge moved up to {gb(self.noise)} within one instance count"
            return (f"the cost of an extra instance is not resolved: {gb(self.per_instance)} per extra instance over "
                    f"instance counts {', '.join(map(str, self.counts))}, while {moved}"
                    + (" (a shared host's used memory; measure on a quiet host or a GPU)" if self.device == "host"
                       else ""))
        return (f"{self.device} memory = {gb(self.fixed)} fixed + {gb(self.per_instance)} per instance "
                f"(least squares over instance counts {', '.join(map(str, self.counts))})")

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "fixed_bytes": self.fixed, "per_instance_bytes": self.per_instance,
                "resolved": self.grows, "noise_bytes": self.noise,
                "readings": [{"instances": r.instances, "bytes": r.bytes, "where": r.where, "spread_bytes": r.spread}
                             for r in self.readings]}


def memory_model(readings: Iterable[MemoryReading], device: str | None = None) -> MemoryModel:
    """The line through the readings (one per instance count, the largest of repeats): least squares over the
    counts, so two counts give their difference and more are averaged."""
    per: dict[int, MemoryReading] = {}
    for r in readings:
        if r.bytes is None or math.isnan(r.bytes):
            continue
        if r.instances in per:  # repeats of a count: the largest, and their disagreement counts as noise
            other = per[r.instances]
            spread = max(r.spread, other.spread, abs(r.bytes - other.bytes))
            r = replace(r if r.bytes > other.bytes else other, spread=spread)
        per[r.instances] = r
    rs = tuple(sorted(per.values(), key=lambda r: r.instances))
    dev = device or (rs[0].device if rs else "GPU")
    if len(rs) < 2:
        return MemoryModel(dev, rs)
    n = len(rs)
    mx = sum(r.instances for r in rs) / n
    my = sum(r.bytes for r in rs) / n
    slope = (sum((r.instances - mx) * (r.bytes - my) for r in rs) / sum((r.instances - mx) ** 2 for r in rs))
    return MemoryModel(dev, rs, my - slope * mx, slope)


@dataclass(frozen=True)
class MemoryFit:
    """Whether `instances` instances fit a device of `budget` bytes, and how many would. `fits` is None when
    nothing was measured (never guessed); `max_instances` is None when the cost per instance is not known or does
    not grow (then memory does not bound the count)."""

    budget: float
    instances: int
    model: MemoryModel
    used: float | None
    fits: bool | None
    max_instances: int | None
    reason: str = field(default="")


def fit(model: MemoryModel, instances: int, budget: float, where: str = "") -> MemoryFit:
    """The plan's `instances` against a device of `budget` bytes: the measured bytes of that count (the line's
    prediction when the count was not measured and the line is resolved) and the largest count the line allows.
    A measured reading wins over the line where they disagree (the line is a fit through noisy gauges). `where`:
    the point the reading comes from, for the text."""
    measured = instances in model.counts
    used = model.used(instances) if measured or model.grows else None
    if used is None:
        why = (f"no {model.device} memory measured (a run from before server telemetry, or its metrics endpoint did "
               "not answer: rerun the sweep, it records the server's memory)" if not model.readings else
               f"x{instances} was not measured and the other instance counts do not resolve the cost of an instance")
        return MemoryFit(budget, instances, model, None, None, None, f"{why}: the fit in {gb(budget)} is not checked")
    fits = used <= budget
    most: int | None = None
    if model.grows:
        most = max(0, math.floor((budget - model.fixed) / model.per_instance + 1e-9))
        if fits and most < instances:
            most = instances
        if not fits and most >= instances:
            most = instances - 1
    how = "used" if measured else "would use (from the line)"
    text = f"x{instances} {how} {gb(used)} of {model.device} memory{f' ({where})' if where and measured else ''}, " + (
        f"which fits {gb(budget)}" if fits else f"more than {gb(budget)}")
    if most is not None:
        text += (f"; at most {most} instance(s) fit" if most else "; not even one instance fits") + f" ({model.text()})"
    elif model.fixed is None:
        text += "; how many instances fit is not known (one instance count measured: measure another)"
    else:
        text += f"; how many instances fit is not known: {model.text()}"
    return MemoryFit(budget, instances, model, used, fits, most, text)


# ---- readings from a run folder ----------------------------------------------------------------

def _num(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def _gpu_peaks(result_dir: Path, kind: str) -> dict[tuple[str, str], float]:
    """Per point (batch, concurrency): the busiest GPU's peak `nv_gpu_memory_used_bytes` from the series (the
    summary sums every GPU of the host, which counts the idle GPUs' contexts too)."""
    per: dict[tuple[str, str], dict[str, float]] = {}
    for r in read_series(Path(result_dir), kind):  # plain or compressed (a committed run's is .csv.gz)
        if r.get("metric") != "nv_gpu_memory_used_bytes":
            continue
        value = _num(r.get("value"))
        if value is None:
            continue
        gpus = per.setdefault((r.get(BATCH, ""), r.get(CONCURRENCY, "")), {})
        gpus[r.get("series", "")] = max(value, gpus.get(r.get("series", ""), 0.0))
    return {k: max(v.values()) for k, v in per.items() if v}


@dataclass(frozen=True)
class PointMemory:
    """A sweep's memory at one point (or its peak over all points when that one has none)."""

    bytes: float
    device: str
    where: str


def sweep_memories(result_dir: Path, kind: str, gpu: bool) -> dict[tuple[int, int], float]:
    """(batch, concurrency) -> the peak bytes a sweep's `<kind>_server.csv` recorded there: GPU memory on a GPU
    run (the busiest GPU, from the series where it is there), else the host's; {} when the sweep recorded none
    (a run from before server telemetry, or an endpoint that did not answer)."""
    peaks = _gpu_peaks(result_dir, kind) if gpu else {}
    out: dict[tuple[int, int], float] = {}
    for r in read_summaries(server_csv(result_dir, kind)):
        key = (r.get(BATCH, ""), r.get(CONCURRENCY, ""))
        v = peaks.get(key) if gpu else None
        if v is None:
            gib = _num(r.get("gpu_memory_gib" if gpu else "cpu_memory_gib"))
            v = None if gib is None else gib * GIB
        try:
            point = (int(key[0]), int(key[1]))
        except ValueError:
            continue
        if v is not None:
            out[point] = v
    return out


def at_point(memories: dict[tuple[int, int], float], gpu: bool, batch: int | None = None,
             concurrency: int | None = None) -> PointMemory | None:
    """The memory at (batch, concurrency), else the peak over every point (said so); None without any."""
    device = "GPU" if gpu else "host"
    if (batch, concurrency) in memories:
        return PointMemory(memories[(batch, concurrency)], device, f"batch {batch}, concurrency {concurrency}")
    if not memories:
        return None
    (b, c), v = max(memories.items(), key=lambda kv: kv[1])
    return PointMemory(v, device, f"peak over the sweep, at batch {b}, concurrency {c}")


__all__ = ["GB", "MemoryFit", "MemoryModel", "MemoryReading", "PointMemory", "at_point", "fit", "gb",
           "memory_model", "sweep_memories"]
