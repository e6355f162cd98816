"""Check a plan against a real load: perf_analyzer in open-loop mode (`--request-rate-range`) at the request
rate each replica gets in the plan, against a running server; did p99 stay within the SLO?

A closed-loop sweep (fixed concurrency) slows its clients down when the server slows down, so it can flatter
latency; an open-loop run keeps sending at the planned rate whatever happens, as real traffic does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..perf.analyzer import PerfOptions, PointResult, run_point
from ..spec import Manifest, ModelSignature
from .plan import Plan, SizingError

P99 = "P99 Latency"
THROUGHPUT = "Inferences/second"
RATE_TOLERANCE = 0.10  # achieved throughput may fall this far below the target before the run counts as failed


@dataclass
class Confirmation:
    plan: Plan
    url: str
    target_inferences: float  # inferences/s per replica the plan assumes
    request_rate: float  # requests/s sent (target / batch)
    batch: int
    result: PointResult

    @property
    def p99(self) -> float:
        return self.result.values.get(P99, math.nan)

    @property
    def achieved(self) -> float:
        return self.result.values.get(THROUGHPUT, math.nan)

    @property
    def kept_up(self) -> bool:
        return not math.isnan(self.achieved) and self.achieved >= self.target_inferences * (1 - RATE_TOLERANCE)

    @property
    def within_slo(self) -> bool:
        return not math.isnan(self.p99) and self.p99 <= self.plan.demand.slo_ms

    @property
    def passed(self) -> bool:
        return self.within_slo and self.kept_up

    def text(self) -> str:
        slo = self.plan.demand.slo_ms
        verdict = "PASS" if self.passed else "FAIL"
        lines = [
            f"**{verdict}**: {self.plan.run.label} at the planned per-replica load of {self.target_inferences:,.1f} "
            f"inferences/s ({self.request_rate:g} requests/s at batch {self.batch}, open loop) against `{self.url}`: "
            f"p99 {self.p99:.3f} ms {'<=' if self.within_slo else '>'} SLO {slo:g} ms; the server answered "
            f"{self.achieved:,.1f} inferences/s"
            + ("." if self.kept_up else f", short of the target by more than {RATE_TOLERANCE:.0%} (it could not keep up)."),
        ]
        predicted = self.plan.sustainable.point
        if predicted is not None:
            lines.append(f"The plan rests on {predicted.level} of the closed-loop sweep: {predicted.throughput:,.1f} "
                         f"inf/s at p99 {predicted.p99:.3f} ms; the replica runs at {self.plan.utilisation:.0%} of it.")
        if not self.result.stable:
            lines.append(f"The open-loop measurement was unstable ({self.result.note}); treat the verdict as indicative.")
        lines.append(f"perf_analyzer: `{' '.join(self.result.command)}`")
        return "  \n".join(lines)


def _signature(plan: Plan) -> ModelSignature | Manifest:
    run = plan.run
    if run.manifest_path is not None:
        return Manifest.load(run.manifest_path)
    sig = (run.meta.get("config") or {}).get("signature")
    if not sig:
        raise SizingError(f"{run.path}/run.json records neither a manifest nor a signature: cannot build requests")
    return ModelSignature.from_dict(sig)


def planned_request_rate(plan: Plan) -> tuple[float, float, int]:
    """(inferences/s per replica, requests/s to send, client batch size) for a reachable plan."""
    if not plan.reachable:
        raise SizingError(f"{plan.run.name} has no plan to confirm: the SLO is unreachable")
    batch = plan.sustainable.point.batch
    target = plan.per_replica_rate
    # perf_analyzer prints the rate it was given with %g; two decimals keep the CSV row findable
    rate = float(f"{round(target / batch, 2):g}")
    if rate <= 0:
        raise SizingError(f"per-replica request rate {target / batch:g}/s rounds to 0: raise --peak-rps")
    return target, rate, batch


def confirm(plan: Plan, url: str, out_dir: str | Path, options: PerfOptions | None = None,
            model_name: str | None = None, model_version: str | None = None,
            binary: str | Path | None = None) -> Confirmation:
    """Drive `url` open-loop at the plan's per-replica rate and measure p99 (see Confirmation.passed)."""
    run = plan.run
    cfg = run.meta.get("config") or {}
    target, rate, batch = planned_request_rate(plan)
    options = options or PerfOptions(protocol=cfg.get("protocol") or "grpc")
    name = model_name or cfg.get("model_name")
    if not name:
        raise SizingError(f"{run.path}/run.json has no model_name: pass the model name to confirm")
    version = model_version if model_version is not None else (
        "" if cfg.get("model_version") in (None, "latest") else str(cfg.get("model_version")))
    out_dir = Path(out_dir)
    result = run_point(name, url, batch, None, _signature(plan), options,
                       out_dir / f"confirm_{run.path.name}_{run.kind}_rate{rate:g}.csv", request_rate=rate,
                       model_version=version, binary=binary)
    return Confirmation(plan, url, target, rate, batch, result)


def server_instances(url: str, protocol: str, model: str) -> int | None:
    """The instance count of the model on the server to confirm against (None if it cannot be read)."""
    try:
        from ..perf.sweep import fetch_model_config, instance_count

        return instance_count(fetch_model_config(url, protocol, model))
    except Exception:  # noqa: BLE001 - informative only
        return None


def describe(c: Confirmation) -> dict[str, Any]:
    return {"passed": c.passed, "p99_ms": c.p99, "achieved": c.achieved, "target": c.target_inferences,
            "request_rate": c.request_rate, "batch": c.batch, "stable": c.result.stable}
