"""What a replica's memory allows: the memory each run used at the point its plan rests on (the sweeps record the
server's memory gauges beside every point, `<kind>_server.csv`), the line through the instance counts measured of
one configuration (a fixed part + a cost per instance), and, given the device's size (--gpu-memory-gb for GPU runs,
--host-memory-gb for CPU-only runs), how many instances fit and which plans do not.

A plan whose configuration does not fit is rejected with the reason, so the ranking recommends the best one that
fits; a run that recorded no memory (one from before server telemetry) is said to be unchecked, never guessed.
The arithmetic is results.memory's, shared with the search.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..results.memory import GB, MemoryFit, MemoryModel, MemoryReading, PointMemory, at_point, fit, gb, \
    memory_model, sweep_memories
from ..tables import markdown_table
from .runs import Run, SizingError


@dataclass(frozen=True)
class MemoryBudget:
    """The device a replica gets, in GB (10^9 bytes): a GPU's memory for GPU runs, a host's for CPU-only runs."""

    gpu_gb: float | None = None
    host_gb: float | None = None

    def __post_init__(self) -> None:
        for flag, v in (("--gpu-memory-gb", self.gpu_gb), ("--host-memory-gb", self.host_gb)):
            if v is not None and not v > 0:
                raise SizingError(f"{flag} {v:g}: the device's memory in GB, > 0 (e.g. 80 for an H100 80GB)")

    def __bool__(self) -> bool:
        return self.gpu_gb is not None or self.host_gb is not None

    def check(self, runs: Sequence[Run]) -> None:
        """A GPU budget for CPU-only runs is a mistake worth one line, not a silent no-op."""
        if self.gpu_gb is not None and self.host_gb is None and runs and not any(r.gpu for r in runs):
            raise SizingError("--gpu-memory-gb: none of the runs is on a GPU; for CPU-only runs the replica's memory "
                              "is the host's: pass --host-memory-gb")

    def bytes_for(self, run: Run) -> float | None:
        v = self.gpu_gb if run.gpu else self.host_gb
        return None if v is None else v * GB

    @staticmethod
    def flag(run: Run) -> str:
        return "--gpu-memory-gb" if run.gpu else "--host-memory-gb"


@dataclass
class PlanMemory:
    """A plan's replica: its memory at the plan's point, the line of its configuration, the fit in the budget
    (None without one), and why a budget was not checked."""

    reading: PointMemory | None
    model: MemoryModel
    fit: MemoryFit | None = None
    unchecked: str = ""

    def text(self) -> str:
        """One sentence for the plan's line and the recommendation."""
        if self.unchecked:
            return self.unchecked
        if self.fit is not None:
            return self.fit.reason
        if self.reading is None:
            return "no memory recorded (a run from before server telemetry): how many instances fit is not known"
        return f"{gb(self.reading.bytes)} of {self.reading.device} memory at {self.reading.where}; {self.model.text()}"

    def brief(self) -> str:
        """The same in a few words, for the command's lines (sizing.md has the whole text)."""
        f = self.fit
        if self.unchecked or f is None or f.fits is None:
            return self.text()
        where = f" ({self.reading.where})" if self.reading is not None else " (from the line)"
        text = (f"x{f.instances} used {gb(f.used)} of {f.model.device} memory{where}, "
                + (f"fits {gb(f.budget)}" if f.fits else f"more than {gb(f.budget)}"))
        if f.max_instances is not None:
            return text + f"; at most {f.max_instances} instance(s) fit"
        return text + ("; how many fit is not known (one instance count measured)" if f.model.fixed is None else
                       "; how many fit is not known (the cost of an extra instance is not resolved)")


def config_key(run: Run) -> tuple[Any, ...]:
    """Runs that differ only in their instance count share one memory line."""
    return run.base_model or run.model, run.format, run.precision, run.device, run.gpu


_CACHE: dict[tuple[str, str, bool, float], dict[tuple[int, int], float]] = {}


def run_memories(run: Run) -> dict[tuple[int, int], float]:
    """The run's recorded memory per (batch, concurrency), read once per file version (the frontier asks often)."""
    path = Path(run.path) / f"{run.kind}_server.csv"
    stamp = path.stat().st_mtime if path.is_file() else -1.0
    key = (str(Path(run.path).resolve()), run.kind, run.gpu, stamp)
    if key not in _CACHE:
        _CACHE[key] = sweep_memories(run.path, run.kind, run.gpu) if stamp >= 0 else {}
    return _CACHE[key]


def attach(plans: Sequence[Any], budget: MemoryBudget | None = None) -> list[str]:
    """Set every plan's `memory`; with a budget, reject the reachable plans whose configuration does not fit
    (`plan.rejected`, the whole reason) and return those reasons in brief."""
    budget = budget or MemoryBudget()
    budget.check([p.run for p in plans])
    readings: dict[int, PointMemory | None] = {}
    groups: dict[tuple[Any, ...], list[MemoryReading]] = {}
    for p in plans:
        point, memories = p.sustainable.point, run_memories(p.run)
        r = at_point(memories, p.run.gpu, point.batch if point else None, point.concurrency if point else None)
        readings[id(p)] = r
        if r is not None:  # the gauge's range over the run's points: what a difference between runs must exceed
            spread = max(memories.values()) - min(memories.values())
            groups.setdefault(config_key(p.run), []).append(
                MemoryReading(p.run.instances, r.bytes, r.device, f"{p.run.name}, {r.where}", spread))
    rejected = []
    for p in plans:
        model = memory_model(groups.get(config_key(p.run), []), "GPU" if p.run.gpu else "host")
        pm = PlanMemory(readings[id(p)], model)
        limit = budget.bytes_for(p.run)
        if budget and limit is None:
            given = "--host-memory-gb" if p.run.gpu else "--gpu-memory-gb"
            pm.unchecked = (f"not checked: {given} does not apply to a {'GPU' if p.run.gpu else 'CPU-only'} run "
                            f"(pass {budget.flag(p.run)})")
        elif limit is not None:
            pm.fit = fit(model, p.run.instances, limit, pm.reading.where if pm.reading else "")
        p.memory = pm
        if pm.fit is not None and pm.fit.fits is False and p.reachable:
            p.rejected = f"{p.run.name} ({p.run.label}) does not fit: {pm.fit.reason}"
            rejected.append(f"{p.run.name}: {pm.brief()}")
    return rejected


def csv_cells(plan: Any) -> dict[str, Any]:
    """sizing.csv's memory columns of one plan (empty where not measured or not checked)."""
    m = plan.memory
    f = m.fit if m is not None else None

    def g(v: float | None) -> Any:
        return "" if v is None else f"{v / GB:.6g}"

    return {"memory_device": m.model.device if m is not None else "",
            "memory_gb": g(m.reading.bytes if m is not None and m.reading else None),
            "memory_per_instance_gb": g(m.model.per_instance if m is not None else None),
            "memory_budget_gb": g(f.budget if f else None),
            "memory_fits": "" if f is None or f.fits is None else ("yes" if f.fits else "no"),
            "memory_max_instances": "" if f is None or f.max_instances is None else f.max_instances}


def markdown(plans: Sequence[Any], budget: MemoryBudget | None = None) -> list[str]:
    """sizing.md's memory section: every plan's memory at its point, the lines, the fit; [] when nothing was
    recorded and no budget was given."""
    shown = [p for p in plans if getattr(p, "memory", None) is not None]
    if not shown or (not budget and all(p.memory.reading is None for p in shown)):
        return []
    md = ["## Memory per replica", "",
          "The server's memory gauge at the point each plan rests on (GPU runs: `nv_gpu_memory_used_bytes` of the "
          "busiest GPU; CPU-only runs: `nv_cpu_memory_used_bytes`, the whole host's used memory), from the sweep's "
          "`<kind>_server.csv`. Runs of one configuration that differ in instance count give the line: a fixed part "
          "(the server, its contexts, whatever else was on the device) + a cost per instance; a difference smaller "
          "than the gauge moved within one run is not resolved. The gauges count everything on the device: each "
          "instance count must be measured on a server that has only that model loaded. GB = 10^9 bytes.", ""]
    rows = []
    for p in shown:
        m, f = p.memory, p.memory.fit
        rows.append([p.run.label, m.reading.where if m.reading else "n/a", gb(m.reading.bytes) if m.reading else "n/a",
                     gb(m.model.per_instance) if m.model.per_instance is not None else "n/a",
                     "n/a" if f is None else gb(f.budget),
                     "n/a" if f is None or f.fits is None else ("yes" if f.fits else "**no**"),
                     "n/a" if f is None or f.max_instances is None else str(f.max_instances)])
    md += [markdown_table(["Configuration", "Point", "Memory", "Per extra instance", "Device", "Fits",
                           "Most instances that fit"], rows, ["l", "l", "r", "r", "r", "l", "r"]), ""]
    md += [f"- {p.run.name}: {p.memory.text()}." for p in shown] + [""]
    rejected = [p.rejected for p in shown if getattr(p, "rejected", "")]
    if rejected:
        md += ["Left out of the ranking, their memory does not fit:", ""] + [f"- {r}." for r in rejected] + [""]
    return md


__all__ = ["MemoryBudget", "PlanMemory", "attach", "config_key", "csv_cells", "markdown", "run_memories"]
