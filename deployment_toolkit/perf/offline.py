"""Offline scenario: static batching, a sweep over client batch sizes at concurrency 1.

This is the DLE "Offline scenario" table: the data is all there, so the client sends full batches one
after another and throughput comes from batch size alone.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..config import Concurrency
from .analyzer import HasSignature, PerfOptions
from .online import parse_range
from .sweep import ServerAt, SweepOutcome, SweepPoint, SweepSettings, run_sweep, sweep_arguments

if TYPE_CHECKING:  # pragma: no cover
    from ..server.local import LocalTritonServer

KIND = "offline"
DEFAULT_BATCH_SIZES = (1, 2, 4, 8)


def run_offline(model_name: str, where: "ServerAt | str | LocalTritonServer | None", manifest: HasSignature | None,
                batch_sizes: Sequence[int] | str = DEFAULT_BATCH_SIZES, options: PerfOptions | None = None,
                result_dir: str | Path = "results/offline", *, concurrency: int = 1,
                settings: SweepSettings | None = None, **fields: Any) -> SweepOutcome:
    """Sweep client batch sizes at a fixed load (concurrency 1 by default); `where`, `settings` and `fields` as in
    `run_online`."""
    at, options, settings = sweep_arguments(where, options or PerfOptions(), settings, fields)
    sizes = parse_range(batch_sizes) if isinstance(batch_sizes, str) else sorted(dict.fromkeys(batch_sizes))
    points = [SweepPoint(b, Concurrency(concurrency)) for b in sizes]
    return run_sweep(KIND, model_name, at, manifest, points, options, result_dir, settings)


__all__ = ["run_offline", "DEFAULT_BATCH_SIZES", "KIND"]
