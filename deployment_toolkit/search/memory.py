"""The memory each instance count used in a search, at its best point: what one more instance costs (how many fit)
is the question a sizing needs answered, and the search measures several instance counts of one model anyway.

Per instance count, the best config with that many instances (by the search's objective, within the budget; a
count with no level within the budget falls back to its highest-throughput point, marked so) and its peak memory
at that level over every sample measured there (GPU memory where the server reported any, else the host's).
The arithmetic (the line through the counts, the fit in a device) is results.memory's, shared with the sizing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..results.memory import MemoryModel, MemoryReading, gb, memory_model
from ..tables import markdown_table
from .store import Point, SearchStore
from .sweep import score
from .trials import SearchOutcome, Trial


@dataclass(frozen=True)
class CountMemory:
    """One instance count's reading and where it comes from."""

    reading: MemoryReading
    config: str
    concurrency: int
    within_budget: bool


def _peak(points: list[Point], field: str) -> float | None:
    values = [getattr(p, field) for p in points if not math.isnan(getattr(p, field))]
    return max(values) if values else None


def _level(t: Trial) -> tuple[Point | None, bool]:
    """The trial's best level within the budget, else its highest-throughput measured point."""
    if t.best is not None:
        return t.best, True
    pts = t.sweep.points if t.sweep else []
    return (max(pts, key=lambda p: p.throughput) if pts else None), False


def per_instance_count(outcome: SearchOutcome, store: SearchStore) -> tuple[list[CountMemory], MemoryModel]:
    """The reading of every measured instance count and the line through them (GPU when any point has GPU
    memory, else host)."""
    measured = [t for t in outcome.trials if t.status == "measured" and t.sweep and t.sweep.points]
    gpu = any(not math.isnan(p.gpu_memory_bytes) for p in store.points.values())
    field, device = ("gpu_memory_bytes", "GPU") if gpu else ("host_memory_bytes", "host")
    objective = outcome.settings.objective
    best: dict[int, tuple[tuple, CountMemory]] = {}
    for t in measured:
        point, within = _level(t)
        if point is None:
            continue
        used = _peak(store.samples(t.key, point.concurrency), field)
        if used is None:
            continue
        gauge = [getattr(q, field) for q in store.points.values() if q.candidate == t.key
                 and not math.isnan(getattr(q, field))]
        spread = max(gauge) - min(gauge)  # how far the gauge moved over this config's points: its noise
        value = score(point, objective) if within else point.throughput
        rank = (within, -value if within and objective == "latency" else value)  # higher ranks better
        entry = CountMemory(MemoryReading(t.candidate.instances, used, device,
                                          f"{t.candidate.slug} at concurrency {point.concurrency}", spread),
                            t.candidate.slug, point.concurrency, within)
        n = t.candidate.instances
        if n not in best or rank > best[n][0]:
            best[n] = (rank, entry)
    rows = [best[n][1] for n in sorted(best)]
    # the line through each count's own best point (not the largest reading of any config with that count)
    return rows, memory_model([r.reading for r in rows], device)


def markdown(outcome: SearchOutcome, store: SearchStore) -> list[str]:
    """search.md's section: instances -> memory at the best point, the cost of each extra instance, the line."""
    rows, model = per_instance_count(outcome, store)
    md = ["## Memory per instance count", ""]
    if not rows:
        return md + ["No memory was recorded: the server's metrics endpoint did not answer during the points (or "
                     "--metrics-period 0), or every point was reused from a checkpoint written before the search "
                     "recorded it.", ""]
    gpu = model.device == "GPU"
    what = ("GPU memory used (Triton's `nv_gpu_memory_used_bytes`, summed over the host's GPUs)" if gpu
            else "Host memory used (Triton's `nv_cpu_memory_used_bytes`: the whole host's used memory, so the fixed "
                 "part includes everything else running on it)")
    md += [f"{what}, peak over the samples of each instance count's best point (the best config with that many "
           "instances, at its best level within the budget). GB = 10^9 bytes.", ""]
    previous: CountMemory | None = None
    table = []
    for r in rows:
        step = ""
        if previous is not None:
            extra = (r.reading.bytes - previous.reading.bytes) / (r.reading.instances - previous.reading.instances)
            step = f"{'+' if extra >= 0 else '-'}{gb(abs(extra))}"
        table.append([str(r.reading.instances), f"`{r.config}`", str(r.concurrency) + ("" if r.within_budget
                      else " (over budget)"), gb(r.reading.bytes), step, gb(r.reading.spread)])
        previous = r
    md += [markdown_table(["instances", "config", "at c", "memory", "per extra instance (vs the row above)",
                           "gauge's range over the config's points"], table, ["r", "l", "r", "r", "r", "r"]), ""]
    md += [f"Estimate: {model.text()}.", ""]
    return md


def record(outcome: SearchOutcome, store: SearchStore) -> dict:
    """run.json's entry: the readings and the line."""
    return per_instance_count(outcome, store)[1].to_dict()


__all__ = ["CountMemory", "markdown", "per_instance_count", "record"]
