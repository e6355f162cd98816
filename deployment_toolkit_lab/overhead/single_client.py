"""The single client measured in pairs: in-process and served at concurrency 1, in turns, on one server.

Why: at concurrency 1 nothing overlaps the per-request work, so the serving path's cost is the whole gap. The
sweep's concurrency-1 point is compared with in-process timings taken minutes apart (before and between the
sweeps), and on a shared host those timings alone spread by 10% or more, which hides a 3% cost or invents a 13%
one. Here each round times in-process ONNX Runtime, then measures the served model at concurrency 1 with
perf_analyzer, and a last in-process timing closes the rounds: every served point sits between two in-process
timings taken just before and after it, with the same server up (idle during the in-process timings) in both. A
round's ratio is the served throughput over the mean of the two timings around it; the ratio is the median of
the rounds, with their spread.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from deployment_toolkit.results.bench_store import as_float as _f
from deployment_toolkit.results.schema import BREAKDOWN_COLUMNS, THROUGHPUT
from deployment_toolkit.perf.analyzer import PerfAnalyzerError, PerfOptions


@dataclass
class PairedRound:
    """One round: the in-process timings before and after the served point, and the point's figures."""

    round: int
    inprocess_before: float  # images/s
    served: float  # images/s at concurrency 1
    inprocess_after: float = math.nan
    latency_ms: float = math.nan
    outside_ms: float = math.nan  # per request outside the runtime's inference (client, network, queue, staging)
    infer_ms: float = math.nan  # Triton's compute infer per request
    stable: bool = True
    batch: int = 1

    @property
    def reference(self) -> float:
        """The in-process throughput around the point: the mean of the timings before and after it."""
        around = [t for t in (self.inprocess_before, self.inprocess_after) if not math.isnan(t)]
        return sum(around) / len(around) if around else math.nan

    @property
    def ratio(self) -> float:
        ref = self.reference
        return self.served / ref if ref and not math.isnan(ref) else math.nan


def paired_summary(rounds: list[PairedRound]) -> dict[str, Any]:
    """The rounds' median ratio and its spread, and the median time per request outside the runtime and in it,
    as columns of the overhead row (pair_*)."""
    ratios = [r.ratio for r in rounds if not math.isnan(r.ratio)]
    if not ratios:
        return {}

    def med(values: list[float]) -> float:
        kept = [v for v in values if not math.isnan(v)]
        return statistics.median(kept) if kept else math.nan

    ref = med([r.reference for r in rounds])
    infer = med([r.infer_ms for r in rounds])
    return {"pair_rounds": len(ratios), "pair_ratio": statistics.median(ratios), "pair_ratio_min": min(ratios),
            "pair_ratio_max": max(ratios), "pair_served": med([r.served for r in rounds]), "pair_inprocess": ref,
            "pair_latency_ms": med([r.latency_ms for r in rounds]), "pair_outside_ms": med([r.outside_ms for r in rounds]),
            "pair_infer_ms": infer,
            # Triton's inference per request against the in-process time per request (batch / throughput)
            "pair_infer_vs_inprocess": infer / (rounds[0].batch * 1000.0 / ref) if ref and not math.isnan(infer)
            else math.nan,
            "pair_ratios": ";".join(f"{r.ratio:.3f}" for r in rounds if not math.isnan(r.ratio))}


def measure_pairs(time_inprocess: Callable[[], float], served_point: Callable[[int], dict[str, Any]], rounds: int,
                  batch: int, log: Callable[[str], None]) -> list[PairedRound]:
    """`rounds` rounds of (in-process timing, served point at concurrency 1), then a closing in-process timing.
    `time_inprocess()` returns images/s; `served_point(round)` perf_analyzer's values for one concurrency-1 point.
    A served point that fails ends the rounds; those measured are kept."""
    out: list[PairedRound] = []
    before = time_inprocess()
    for n in range(1, rounds + 1):
        try:
            values = served_point(n)
        except PerfAnalyzerError as err:  # reported, and the measured rounds are kept
            log(f"  single client round {n}: the served point failed ({str(err).splitlines()[0]}); "
                f"keeping {len(out)} round(s)")
            break
        after = time_inprocess()
        served = _f(values.get(THROUGHPUT))
        outside = sum(_f(values.get(c)) for c in BREAKDOWN_COLUMNS if c != "Server Compute Infer")
        out.append(PairedRound(n, before, served, after, _f(values.get("Avg Latency")), outside,
                               _f(values.get("Server Compute Infer")), bool(values.get("stable", True)), batch))
        log(f"  single client round {n}/{rounds}: in-process {before:.2f} -> served {served:.2f} -> in-process "
            f"{after:.2f} images/s ({out[-1].ratio:.3f}x)")
        before = after
    return out


def served_point_fn(model_name: str, url: str, batch: int, signature: Any, options: PerfOptions, raw_dir: Path,
                    binary: str | Path | None = None) -> Callable[[int], dict[str, Any]]:
    """perf_analyzer at concurrency 1 against the running server, one CSV per round under `raw_dir`."""
    from deployment_toolkit.perf.analyzer import Concurrency, PerfTarget, run_point

    target = PerfTarget(model_name, url, signature, binary=binary)

    def point(n: int) -> dict[str, Any]:
        result = run_point(target, batch, Concurrency(1), options, raw_dir / f"{model_name}_b{batch}_r{n}.csv")
        return {**result.values, "stable": result.stable}

    return point


__all__ = ["PairedRound", "measure_pairs", "paired_summary", "served_point_fn"]
