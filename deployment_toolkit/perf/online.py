"""Online scenario: dynamic batching on the server, a sweep over concurrent client requests at batch 1.

This is the DLE "Online scenario" table: how throughput and each latency stage grow as more clients
send single requests and the dynamic batcher groups them.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..config import Concurrency
from ..errors import UserInputError
from .analyzer import HasSignature, PerfOptions
from .sweep import PointCallback, ServerAt, SweepOutcome, SweepPoint, SweepSettings, run_sweep, sweep_arguments

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


def run_online(model_name: str, where: "ServerAt | str | LocalTritonServer | None", manifest: HasSignature | None,
               concurrencies: Sequence[int] | str, options: PerfOptions | None = None,
               result_dir: str | Path = "results/online", *, batch_size: int = 1,
               settings: SweepSettings | None = None, **fields: Any) -> SweepOutcome:
    """Sweep concurrency at a fixed batch size (1 by default): one point per level, `Concurrency(c)`.

    `where`: the server's URL, the embedded server, or a ServerAt; `settings`: how the sweep runs (SweepSettings);
    `fields` set single SweepSettings fields by name, and `server=`, `protocol=`, `metrics_url=` as before."""
    at, options, settings = sweep_arguments(where, options or PerfOptions(), settings, fields)
    levels = parse_range(concurrencies) if isinstance(concurrencies, str) else sorted(dict.fromkeys(concurrencies))
    points = [SweepPoint(batch_size, Concurrency(c)) for c in levels]
    return run_sweep(KIND, model_name, at, manifest, points, options, result_dir, settings)


__all__ = ["run_online", "parse_range", "KIND", "PointCallback"]
