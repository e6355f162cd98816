"""Check a plan against real open-loop load, derate it when it fails, and see what a burst does.

- confirm_plan: perf_analyzer in open loop (ratepoint.measure: `--request-intervals`, Poisson arrivals, async) at
  the request rate each replica gets in the plan, `trials` times (default 3). A round passes when most of its
  trials pass: one stall of a shared host (a 100 ms hiccup puts a dozen requests of a 9-s run over the SLO, so
  that run's p99 breaks it) must not derate a plan, just as the capacity it rests on is the median of repeated
  searches, not its worst one. If most trials fail, the plan is derated to the rate the replica did carry (the
  median over the failed trials of what it answered when it fell behind, or, when it kept up but broke the SLO,
  the planned rate scaled by SLO / p99) and confirmed again, for at most `rounds` rounds; every trial of every
  round is in the report.
- at the predicted capacity: after a pass, the per-replica capacity itself, with the same majority rule, so the
  report says whether prediction and confirmation agree (within 10% is the bar).
- burst_check: the peak x burst factor (per replica) for a short period, then straight back to the peak: p99 and
  whether the queue grew during the burst and drained after it. Informative: it does not change the plan.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from ..client import TritonClient, instance_count
from ..perf.analyzer import PerfOptions
from ..spec import Manifest, ModelSignature
from ..tables import markdown_table
from .ratepoint import ClientLimited, RatePoint, Target, client_limit_message, measure, round_rate
from .plan import Plan, derate
from .runs import SizingError
from .ratestore import FreshStore, RateStore
from .request import DEFAULT_BURST_FACTOR, DEFAULT_BURST_SECONDS, DEFAULT_ROUNDS, DEFAULT_TRIALS
from ..errors import UserInputError


def signature_of(plan_or_run: Any) -> ModelSignature | Manifest:
    run = getattr(plan_or_run, "run", plan_or_run)
    if run.manifest_path is not None:
        return Manifest.load(run.manifest_path)
    sig = (run.meta.get("config") or {}).get("signature")
    if not sig:
        raise SizingError(f"{run.path}/run.json records neither a manifest nor a signature: cannot build requests")
    return ModelSignature.from_dict(sig)


def run_model(run: Any, model_name: str | None = None) -> tuple[str, str]:
    """(model name, version) a run measured, for perf_analyzer."""
    cfg = run.meta.get("config") or {}
    name = model_name or cfg.get("model_name")
    if not name:
        raise SizingError(f"{run.path}/run.json has no model_name: pass the model name")
    version = "" if cfg.get("model_version") in (None, "latest") else str(cfg.get("model_version"))
    return name, version


def target_for(run: Any, url: str, options: PerfOptions, distribution: str, batch: int,
               model_name: str | None = None, metrics_url: str | None = None) -> Target:
    """The run's model at `url`, its points keyed by the run's name. `metrics_url`: default Triton's metrics port on
    the server's host (perf.telemetry.metrics_url_for; a host without one is said once and the points are measured
    without it)."""
    from ..perf.telemetry import metrics_url_for

    name, version = run_model(run, model_name)
    return Target(run.name, name, url, batch, signature_of(run), options, distribution, version,
                  metrics_url=metrics_url or (metrics_url_for(url) if url else None))


# ---- confirmation with derating -----------------------------------------------------------------

def majority_passes(points: list[RatePoint], slo_ms: float, trials: int) -> bool | None:
    """True/False once most of `trials` have passed/failed; None while undecided."""
    need = trials // 2 + 1
    passed = sum(p.passes(slo_ms) for p in points)
    if passed >= need:
        return True
    if len(points) - passed >= need:
        return False
    return None


def representative(points: list[RatePoint]) -> RatePoint:
    """The trial with the median p99 (the one a table shows for the round)."""
    ranked = sorted(points, key=lambda p: (math.isnan(p.p99), p.p99))
    return ranked[(len(ranked) - 1) // 2]


def measure_majority(measure_one: Callable[[int], RatePoint], slo_ms: float, trials: int) -> list[RatePoint]:
    """Up to `trials` points, stopping as soon as most have passed or most have failed."""
    points: list[RatePoint] = []
    for t in range(1, max(1, trials) + 1):
        point = measure_one(t)
        if point.client_limited:
            raise ClientLimited(client_limit_message(point))
        points.append(point)
        if majority_passes(points, slo_ms, max(1, trials)) is not None:
            break
    return points


@dataclass
class Round:
    replicas: int
    capacity: float  # per-replica inferences/s the plan assumed in this round
    target: float  # per-replica inferences/s offered
    points: list[RatePoint]  # the trials at that rate, in the order measured
    slo_ms: float
    trials: int = 1

    @property
    def point(self) -> RatePoint:
        return representative(self.points)

    @property
    def passed(self) -> bool:
        return bool(majority_passes(self.points, self.slo_ms, self.trials))

    def tally(self) -> str:
        return f"{sum(p.passes(self.slo_ms) for p in self.points)} of {len(self.points)} trials passed"


@dataclass
class Confirmation:
    plan: Plan
    url: str
    rounds: list[Round] = field(default_factory=list)
    burst: "Burst | None" = None
    at_capacity_points: list[RatePoint] = field(default_factory=list)  # offered the capacity the plan rests on
    trials: int = 1

    @property
    def at_capacity(self) -> RatePoint | None:
        return representative(self.at_capacity_points) if self.at_capacity_points else None

    @property
    def at_capacity_held(self) -> bool:
        return bool(self.at_capacity_points) and bool(
            majority_passes(self.at_capacity_points, self.plan.demand.slo_ms, self.trials))

    def capacity_agreement(self) -> float | None:
        """Answered / offered at the predicted capacity, the median over its trials (None when not measured)."""
        ratios = [p.answered / p.offered for p in self.at_capacity_points if p.offered and not math.isnan(p.answered)]
        return statistics.median(ratios) if ratios else None

    @property
    def passed(self) -> bool:
        return bool(self.rounds) and self.rounds[-1].passed

    @property
    def derated(self) -> bool:
        return len(self.rounds) > 1

    @property
    def last(self) -> Round:
        return self.rounds[-1]

    def summary(self) -> str:
        r = self.last
        p = r.point
        head = "PASS" if self.passed else "FAIL"
        if self.passed and self.derated:
            head = f"PASS after derating to {r.replicas} replicas"
        return (f"{head} ({r.tally()}): median p99 {p.p99:.3f} ms, answered {p.answered:.1f} of {p.sent:.1f} inf/s "
                f"offered per replica (planned {r.target:.1f}, SLO {self.plan.demand.slo_ms:g} ms)")

    def text(self) -> str:
        slo = self.plan.demand.slo_ms
        first = self.rounds[0]
        lines = []
        verdict = "PASS" if self.passed else "FAIL"
        if self.passed and not self.derated:
            lines.append(f"**PASS**: the plan of {first.replicas} replicas holds: at its per-replica rate of "
                         f"{first.target:,.1f} inferences/s (open loop, {first.point.key.distribution} arrivals) "
                         f"against `{self.url}` the replica kept up with median p99 {first.point.p99:.3f} ms <= "
                         f"{slo:g} ms ({first.tally()}).")
        elif self.passed:
            lines.append(f"**{verdict} after derating**: the plan's {first.replicas} replica(s) at {first.capacity:,.1f} "
                         f"inferences/s each did not hold; derated to {self.last.replicas} replicas of "
                         f"{self.last.capacity:,.1f} inferences/s, which held.")
        else:
            lines.append(f"**{verdict}**: no plan held within {len(self.rounds)} round(s); the last offered "
                         f"{self.last.target:,.1f} inferences/s per replica ({self.last.point.verdict(slo)}). Measure "
                         "the open-loop capacity again (--capacity) on a quieter host before buying from this plan.")
        rows = []
        for i, r in enumerate(self.rounds, 1):
            for t, p in enumerate(r.points, 1):
                rows.append([i, t, r.replicas, f"{r.capacity:,.1f}", f"{r.target:,.1f}", f"{p.sent:,.1f}",
                             f"{p.answered:,.1f}", f"{p.p99:.3f}", p.verdict(slo),
                             ("PASS" if r.passed else "FAIL") + f" ({r.tally()})" if t == len(r.points) else ""])
        lines += ["", markdown_table(["Round", "Trial", "Replicas", "Planned capacity/replica", "Offered/replica",
                                      "Sent", "Answered", "p99 (ms)", "Verdict", "Round"], rows,
                                     ["r"] * 8 + ["l", "l"]), ""]
        lines.append(f"A round passes when most of its trials pass (up to {self.trials} trials of one perf_analyzer "
                     "run each, stopped once most have passed or failed): one stall of the host must not derate a "
                     "plan whose capacity is itself the median of repeated searches. Derating: a round that fails sets "
                     "the per-replica capacity to what the replica did carry (the median over its failed trials of "
                     "what it answered when it fell behind, else the offered rate x SLO / p99, and always below the "
                     "rate that failed); the replicas are recomputed for the same demand and confirmed again.")
        lines.append(f"perf_analyzer (last round): `{self.last.point.row.get('command', '')}`")
        if self.at_capacity is not None:
            p, agree = self.at_capacity, self.capacity_agreement()
            trials = "; ".join(f"answered {q.answered:,.1f}/s, p99 {q.p99:.3f} ms ({q.verdict(slo)})"
                               for q in self.at_capacity_points)
            lines += ["", f"**Predicted capacity check**: offered the per-replica capacity the plan rests on, "
                          f"{p.offered:,.1f} inferences/s ({self.plan.basis}), {len(self.at_capacity_points)} "
                          f"trial(s): {trials}. "
                      + (f"The prediction held (most trials passed; the replica answered {agree:.0%} of it, median)."
                         if self.at_capacity_held else
                         f"It did not hold at exactly the prediction; the replica answered {agree:.0%} of it "
                         "(median; the search's resolution and window-to-window noise are the usual gap).")]
        if self.burst is not None:
            lines += ["", self.burst.text(slo)]
        return "\n".join(lines)


def derated_capacity(point: RatePoint, slo_ms: float) -> float:
    """What a replica that failed at `point` did carry (inferences/s), always below the offered rate.

    A replica that fell behind carried what it answered. Its p99 says nothing more: the queue grew through the
    window, so the p99 measures the window's length, and scaling the rate by SLO / p99 derated the sizing example
    to half of what the replica answered. Only a replica that kept up but broke the SLO is derated by that ratio.
    """
    if not point.kept_up and not math.isnan(point.answered):
        cap = point.answered
    elif not math.isnan(point.p99) and point.p99 > slo_ms:
        cap = point.offered * slo_ms / point.p99
    else:
        cap = point.offered
    return min(cap, point.offered * 0.97)


def confirm_plan(plan: Plan, measure_at: Callable[[float, int], RatePoint], rounds: int = DEFAULT_ROUNDS,
                 url: str = "", trials: int = 1) -> Confirmation:
    """Confirm the plan at its per-replica rate; derate and reconfirm when most trials fail (at most `rounds`
    rounds). `measure_at(rate requests/s, n)` measures one open-loop point; n numbers the trials of all rounds
    from 1. The plan is updated in place."""
    if not plan.reachable:
        raise SizingError(f"{plan.run.name} has no plan to confirm: the SLO is unreachable")
    batch = plan.sustainable.point.batch
    slo = plan.demand.slo_ms
    trials = max(1, trials)
    out = Confirmation(plan, url, trials=trials)
    for n in range(1, max(1, rounds) + 1):
        target = plan.per_replica_rate
        rate = round_rate(target / batch)
        if rate <= 0:
            raise SizingError(f"per-replica request rate {target / batch:g}/s rounds to 0: raise --peak-rps")
        points = measure_majority(lambda t: measure_at(rate, (n - 1) * trials + t), slo, trials)
        out.rounds.append(Round(plan.replicas, plan.replica_capacity, target, points, slo, trials))
        if out.rounds[-1].passed or n == rounds:
            break
        derate(plan, statistics.median(derated_capacity(p, slo) for p in points if not p.passes(slo)))
    return out


def confirm(plan: Plan, target: Target, out_dir: str | Path, rounds: int = DEFAULT_ROUNDS,
            burst_factor: float | None = DEFAULT_BURST_FACTOR, burst_s: float = DEFAULT_BURST_SECONDS,
            trials: int = DEFAULT_TRIALS) -> Confirmation:
    """confirm_plan against a live server, then the burst check; points go to <out_dir>/confirm.csv (fresh
    measurements every time: a confirmation is not replayed from an earlier run)."""
    out_dir = Path(out_dir)
    store = RateStore(out_dir, "confirm.csv")
    store_fresh = FreshStore(store)
    result = confirm_plan(plan, lambda r, n: measure(target, r, store_fresh, out_dir, n, tag="confirm_"), rounds,
                          target.url, trials)
    if result.passed and plan.replica_capacity:
        batch = plan.sustainable.point.batch
        at = replace(target, config=f"{target.config}/at-capacity")
        rate = round_rate(plan.replica_capacity / batch)
        result.at_capacity_points = measure_majority(
            lambda t: measure(at, rate, store_fresh, out_dir, t, tag="at_capacity_"), plan.demand.slo_ms, trials)
    if burst_factor and result.passed:
        result.burst = burst_check(plan, target, out_dir, burst_factor, burst_s, result.last.point.avg)
    return result


# ---- burst --------------------------------------------------------------------------------------

@dataclass
class Burst:
    factor: float
    seconds: float
    replicas: int
    during: RatePoint
    after: RatePoint
    baseline_ms: float  # the passing round's average latency

    @property
    def queue_grew(self) -> bool:
        lat = self.during.row.get("window_latency_ms") or []
        return bool(lat) and (self.during.queue_growing or lat[-1] > 2 * max(self.baseline_ms, 1e-9))

    @property
    def drained(self) -> bool:
        lat = self.after.row.get("window_latency_ms") or []
        return bool(lat) and not self.after.queue_growing and lat[-1] <= 1.25 * self.baseline_ms + 1.0

    def text(self, slo_ms: float) -> str:
        d, a = self.during, self.after
        fmt = lambda xs: ", ".join(f"{x:.1f}" for x in (xs or [])) or "n/a"  # noqa: E731
        return "\n".join([
            f"**Burst check** (peak x {self.factor:g} for about {self.seconds:g} s, {d.offered:,.1f} inferences/s per "
            f"replica of {self.replicas}, then back to the peak, {a.offered:,.1f}/s):",
            f"- during: p99 {d.p99:.3f} ms ({'within' if d.p99 <= slo_ms else 'over'} the SLO), answered "
            f"{d.answered:,.1f}/s; per-window average latency {fmt(d.row.get('window_latency_ms'))} ms: "
            + ("the queue grew." if self.queue_grew else "no queue build-up."),
            f"- after: p99 {a.p99:.3f} ms, per-window average latency {fmt(a.row.get('window_latency_ms'))} ms "
            f"(steady state {self.baseline_ms:.1f} ms): " + ("drained." if self.drained else "still draining."),
            "(Two perf_analyzer runs back to back: the half second between them lets a queue drain a little; the "
            "first window of each includes connection set-up.)",
        ])


def burst_check(plan: Plan, target: Target, out_dir: Path, factor: float = DEFAULT_BURST_FACTOR,
                seconds: float = DEFAULT_BURST_SECONDS, baseline_ms: float = math.nan) -> Burst:
    """`factor` x the peak (each replica's share) for `seconds`, then the peak again for as long."""
    if factor <= 1:
        raise UserInputError(f"--burst-factor {factor:g}: a burst is above the peak (e.g. 1.5)")
    batch = plan.sustainable.point.batch
    window = max(200, int(seconds * 1000 / 3))
    # three fixed windows each: stability off, so the burst lasts what it says
    opts = replace(target.options, stability_percentage=100000.0, max_trials=3, measurement_interval_ms=window)
    t = replace(target, options=opts, config=f"{target.config}/burst")
    store = FreshStore(RateStore(out_dir, "confirm.csv"))
    per_peak = plan.demand.peak_rps / plan.replicas
    during = measure(t, round_rate(per_peak * factor / batch), store, out_dir, 1, tag="burst_")
    after = measure(t, round_rate(per_peak / batch), store, out_dir, 2, tag="after_burst_")
    return Burst(factor, window * 3 / 1000, plan.replicas, during, after, baseline_ms)


def server_instances(url: str, protocol: str, model: str) -> int | None:
    """The instance count of the model on the server to confirm against (None if it cannot be read)."""
    try:
        with TritonClient(url, protocol) as client:
            return instance_count(client.config(model))
    except Exception:  # noqa: BLE001 - informative only
        return None
