"""Offline scenario: static batching, a sweep over client batch sizes at concurrency 1.

This is the DLE "Offline scenario" table: the data is all there, so the client sends full batches one
after another and throughput comes from batch size alone.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from .analyzer import HasSignature, PerfOptions
from .online import _with_protocol, parse_range
from .sweep import SweepOutcome, SweepPoint, run_sweep

if TYPE_CHECKING:  # pragma: no cover
    from ..server.local import LocalTritonServer

KIND = "offline"
DEFAULT_BATCH_SIZES = (1, 2, 4, 8)


def run_offline(
    model_name: str,
    server_url: str | None,
    manifest: HasSignature | None,
    batch_sizes: Sequence[int] | str = DEFAULT_BATCH_SIZES,
    options: PerfOptions | None = None,
    result_dir: str | Path = "results/offline",
    protocol: str | None = None,
    server: "LocalTritonServer | None" = None,
    *,
    concurrency: int = 1,
    model_version: str = "",
    **kwargs,
) -> SweepOutcome:
    """Sweep client batch sizes at a fixed concurrency (1 by default); see `run_sweep` for the keyword options."""
    options = _with_protocol(options or PerfOptions(), protocol)
    sizes = parse_range(batch_sizes) if isinstance(batch_sizes, str) else sorted(dict.fromkeys(batch_sizes))
    points = [SweepPoint(b, concurrency) for b in sizes]
    return run_sweep(KIND, model_name, server_url, manifest, points, options, result_dir,
                     model_version=model_version, server=server, **kwargs)


__all__ = ["run_offline", "DEFAULT_BATCH_SIZES", "KIND"]
