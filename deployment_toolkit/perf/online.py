"""Online scenario: dynamic batching on the server, a sweep over concurrent client requests at batch 1.

This is the DLE "Online scenario" table: how throughput and each latency stage grow as more clients
send single requests and the dynamic batcher groups them.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from .analyzer import HasSignature, PerfOptions
from .sweep import PointCallback, SweepOutcome, SweepPoint, run_sweep
from ..errors import UserInputError

if TYPE_CHECKING:  # pragma: no cover
    from ..server.local import LocalTritonServer

KIND = "online"


def parse_range(text: str) -> list[int]:
    """`1:8:1` (start:end:step, end included, like perf_analyzer's --concurrency-range), `1:8`, `4` or `1,2,4,8`."""
    text = text.strip()
    try:
        if ":" in text:
            parts = [int(p) for p in text.split(":")]
            if len(parts) not in (2, 3) or parts[0] < 1:
                raise ValueError
            start, end = parts[0], parts[1]
            step = parts[2] if len(parts) == 3 else 1
            if step < 1 or end < start:
                raise ValueError
            return list(range(start, end + 1, step))
        values = [int(p) for p in text.replace(" ", "").split(",") if p]
    except ValueError:
        raise UserInputError(f"{text!r} is not a range: use start:end:step (e.g. 1:8:1) or a list (e.g. 1,2,4,8)") from None
    if not values or any(v < 1 for v in values):
        raise UserInputError(f"{text!r}: values must be positive integers")
    return sorted(dict.fromkeys(values))


def run_online(
    model_name: str,
    server_url: str | None,
    manifest: HasSignature | None,
    concurrencies: Sequence[int] | str,
    options: PerfOptions | None = None,
    result_dir: str | Path = "results/online",
    protocol: str | None = None,
    server: "LocalTritonServer | None" = None,
    *,
    batch_size: int = 1,
    model_version: str = "",
    **kwargs,
) -> SweepOutcome:
    """Sweep concurrency at a fixed batch size (1 by default); see `run_sweep` for the keyword options."""
    options = _with_protocol(options or PerfOptions(), protocol)
    levels = parse_range(concurrencies) if isinstance(concurrencies, str) else sorted(dict.fromkeys(concurrencies))
    points = [SweepPoint(batch_size, c) for c in levels]
    return run_sweep(KIND, model_name, server_url, manifest, points, options, result_dir,
                     model_version=model_version, server=server, **kwargs)


def _with_protocol(options: PerfOptions, protocol: str | None) -> PerfOptions:
    from dataclasses import replace

    return replace(options, protocol=protocol) if protocol and protocol != options.protocol else options


__all__ = ["run_online", "parse_range", "KIND", "PointCallback"]
