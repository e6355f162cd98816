"""The open-loop capacity of each run for size_fleet.py: measured against a server (resuming the run folder's
openloop.csv), or replayed from openloop.csv alone when no server is given."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..client import TritonClient
from ..perf.analyzer import PerfOptions
from .capacity import DEFAULT_RESOLUTION, OpenLoopCapacity, measure_capacity, repeat_search
from .ratepoint import RatePoint, Target, point_key
from .runs import Run
from .sustainable import sustainable
from .ratestore import FILE_NAME, RateStore
from ..errors import ToolkitError, UserInputError


class NotStored(ToolkitError, LookupError):
    """Replaying a search reached a point openloop.csv does not hold."""


@dataclass
class Settings:
    options: PerfOptions  # capacity.open_loop_options(...)
    distribution: str = "poisson"
    trials: int = 3
    resolution: float = DEFAULT_RESOLUTION
    max_points: int = 10


def _replay(target: Target, store: RateStore):
    def at(rate: float, trial: int) -> RatePoint:
        key = point_key(target, rate, trial)
        row = store.get(key)
        if row is None:
            raise NotStored(key)
        return RatePoint(key, row)
    return at


def open_loop_capacity(run: Run, slo_ms: float, settings: Settings, url: str | None,
                       include_unreliable: bool = False, model_name: str | None = None) -> OpenLoopCapacity | None:
    """The run's OpenLoopCapacity; None when nothing is measured and no server is given (or the closed-loop
    sweep meets no point within the SLO, which leaves nothing to seed the search)."""
    from .confirm import target_for

    s = sustainable(run, slo_ms, include_unreliable)
    if not s.reachable:
        return None
    batch = s.point.batch
    if url:
        target = target_for(run, url, settings.options, settings.distribution, batch, model_name=model_name)
        store = RateStore(run.path, identity=live_identity(target))
    else:  # replaying openloop.csv sends nothing: no model name or signature needed
        target = Target(run.name, model_name or run.model, "", batch, None, settings.options, settings.distribution)
        store = RateStore(run.path)
    seed = s.point.throughput / batch
    if url:
        trials = measure_capacity(target, seed, slo_ms, store, run.path / "openloop", settings.trials,
                                  settings.resolution, settings.max_points)
    else:
        if not store.path.exists():
            return None
        try:
            trials = repeat_search(_replay(target, store), seed, slo_ms, batch, settings.trials, settings.resolution,
                                   settings.max_points)
        except NotStored:
            raise UserInputError(f"{store.path} does not hold a complete open-loop search for {run.name} with these "
                             "settings (SLO, distribution, window, trials): pass --capacity URL to measure the rest "
                             "(it resumes)") from None
    return OpenLoopCapacity(run.name, settings.distribution, slo_ms, trials, s.point.throughput, s.point.level,
                            s.point.p99)


def live_identity(target: Target):
    """The run identity of open-loop points against the server at `target.url` (the same fields as a sweep's:
    host, server version, the config it loaded, perf options, input data, toolkit)."""
    from ..perf.sweep import sweep_identity

    with TritonClient(target.url, target.options.protocol) as client:
        config, version = client.config_json(target.model_name, target.model_version), client.server_version()
    return sweep_identity(config, version, None, target.options, None)


def stored_anywhere(runs: list[Run]) -> bool:
    return any((r.path / FILE_NAME).exists() for r in runs)


def derived_headroom(capacities: dict[str, Any]) -> tuple[float, str]:
    """The widest headroom among the configurations measured (each: max(spread, resolution)), and how."""
    parts = {name: c for name, c in capacities.items() if c is not None and c.reachable}
    if not parts:
        return 0.2, "Headroom 20% (fixed default: no open-loop capacity measured to derive it from)."
    name, worst = max(parts.items(), key=lambda kv: kv[1].headroom)
    detail = "; ".join(
        f"{n}: {len(c.capacities)} searches, "
        + (f"spread {c.spread:.1%}" if c.spread is not None else "a single search (no spread)")
        + f", resolution {c.resolution:.0%}" for n, c in parts.items())
    return worst.headroom, (
        f"Headroom {worst.headroom:.1%} derived from the repeated open-loop capacity measurements: for each "
        "configuration, max(spread = (max - min) / min of its searches' capacities, the search's resolution); the "
        f"widest ({name}) is used for all, so every plan carries the peak even at its lowest measured capacity. "
        f"({detail}.)")


def stored_path(run: Run) -> Path:
    return run.path / FILE_NAME
