"""Where an open-loop capacity search starts when nothing else says: the target's own closed-loop measurements."""
from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from ...errors import UserError
from ..analyzer import Concurrency, PerfTarget, run_point
from ...results.identity import key_fields
from .ratepoint import Target
from .ratestore import options_key

SEED_LEVELS = (1, 2, 4, 8)  # closed-loop concurrencies a target's own first measurements take


def closed_loop_seed(target: Target, slo_ms: float, out_dir: Path, levels: Sequence[int] = SEED_LEVELS) -> float:
    """Where an open-loop search of `target` starts, from its own first measurements: the most inferences/s a
    closed-loop sweep (doubling concurrency, stopped once p99 passes the SLO) finished within the SLO, else at
    concurrency 1. Closed loop never offers more than the server finishes, so it cannot overload a slow target (a
    pipeline whose network alone is many times faster). Kept in `out_dir/seed.json` per target and options, so a
    rerun measures nothing again."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "seed.json"
    key = f"{target.config}|{options_key(key_fields(target.options.measurement_fields()))}|{slo_ms:g}"
    stored = json.loads(path.read_text()) if path.exists() else {}
    if key in stored:
        return float(stored[key])
    options = replace(target.options, async_mode=False, max_attempts=2, relaxed_fallback=True)
    perf = PerfTarget(target.model_name, target.url, target.signature, target.model_version, binary=target.binary)
    best, first = 0.0, 0.0
    for clients in levels:
        result = run_point(perf, target.batch, Concurrency(clients), options, out_dir / f"seed_c{clients}.csv")
        rate, p99 = result.values.get("Inferences/second", math.nan), result.values.get("P99 Latency", math.nan)
        if math.isnan(rate):
            continue
        first = first or rate
        if p99 > slo_ms:
            break
        best = max(best, rate)
    seed = best or first
    if not seed > 0:
        raise UserError(f"{target.model_name}: no closed-loop level answered a request (concurrency "
                        f"{', '.join(map(str, levels))}): see {out_dir}")
    stored[key] = seed
    path.write_text(json.dumps(stored, indent=1))
    return seed


__all__ = ["SEED_LEVELS", "closed_loop_seed"]
