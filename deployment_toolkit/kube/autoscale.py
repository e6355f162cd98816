"""What a fleet's HorizontalPodAutoscaler scales on, its per-pod target, and the prometheus-adapter rule that
makes the metric exist: requests/s per pod, or Triton's own queue-to-compute time ratio per pod (NVIDIA's practice
for Triton), its target taken from the point the plan rests on."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .fleet_spec import FleetSpec, ManifestError
from .replicas import ReplicaSet

HPA_METRIC = "triton_inference_requests_per_second"
QUEUE_RATIO_METRIC = "triton_queue_compute_ratio"
AUTOSCALE = ("requests", "queue-ratio")
MIN_QUEUE_RATIO = 0.1  # below this a ratio is noise of an idle queue: never a target


def per_pod_request_target(plan: ReplicaSet) -> float:
    """Requests/s per pod above which the headroom is being eaten: per-replica capacity (open loop or confirmed
    when measured) / batch / (1 + headroom)."""
    return plan.capacity / max(plan.batch, 1) / (1.0 + plan.headroom)


@dataclass
class Autoscaling:
    """What the HPA scales on, its per-pod target, and why (for plan.md and the manifest's header)."""

    metric: str
    target: float
    reason: str
    adapter_rule: dict[str, Any]


def queue_ratio_at(plan: ReplicaSet) -> float | None:
    """Server queue time over compute time at the point the plan rests on (None where the run lacks them)."""
    if math.isnan(plan.queue_ms) or math.isnan(plan.compute_ms) or plan.compute_ms <= 0:
        return None
    return plan.queue_ms / plan.compute_ms


def autoscaling(plan: ReplicaSet, spec: FleetSpec) -> Autoscaling:
    """requests: requests/s per pod above the planned load (the demand the plan was sized for). queue-ratio:
    NVIDIA's practice for Triton, rate(queue time) / rate(compute time) per pod, with the target the ratio the
    replica showed at the load the plan rests on; a queue that grows past what the plan measured means the pods
    are fuller than planned, whatever the request mix."""
    if spec.autoscale not in AUTOSCALE:
        raise ManifestError(f"--autoscale-on {spec.autoscale!r}: choose one of {', '.join(AUTOSCALE)}")
    if spec.autoscale == "queue-ratio":
        ratio = queue_ratio_at(plan)
        if ratio is None:
            raise ManifestError(f"{plan.label} has no Server Queue / Server Compute Infer at the planned point: "
                              "scale on requests (--autoscale-on requests) or measure with perf_analyzer's breakdown")
        target = max(ratio, MIN_QUEUE_RATIO)
        why = (f"queue/compute per pod, target {target:.3g}: the replica's {plan.queue_ms:.3g} ms queue over "
               f"{plan.compute_ms:.3g} ms compute at {plan.level}, the load the plan rests on"
               + (f" (measured {ratio:.3g}, raised to the floor {MIN_QUEUE_RATIO})" if ratio < MIN_QUEUE_RATIO else ""))
        rule = {"seriesQuery": 'nv_inference_queue_duration_us{namespace!="",pod!=""}',
                "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
                "name": {"matches": "nv_inference_queue_duration_us", "as": QUEUE_RATIO_METRIC},
                "metricsQuery": ("sum(rate(nv_inference_queue_duration_us{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)"
                                 " / sum(rate(nv_inference_compute_infer_duration_us{<<.LabelMatchers>>}[1m]))"
                                 " by (<<.GroupBy>>)")}
        return Autoscaling(QUEUE_RATIO_METRIC, target, why, rule)
    target = per_pod_request_target(plan)
    why = (f"requests/s per pod, target {target:.4g}: the per-replica capacity over the batch and (1 + headroom); "
           "simple, but blind to a request mix heavier than the one measured")
    rule = {"seriesQuery": 'nv_inference_request_success{namespace!="",pod!=""}',
            "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
            "name": {"matches": "nv_inference_request_success", "as": HPA_METRIC},
            "metricsQuery": "sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)"}
    return Autoscaling(HPA_METRIC, target, why, rule)


def adapter_rules(plan: ReplicaSet, spec: FleetSpec) -> dict[str, Any]:
    """The prometheus-adapter values that make the HPA's metric exist (`helm install ... -f` this file)."""
    scaling = autoscaling(plan, spec)
    return {"kind": "PrometheusAdapterValues", "rules": {"custom": [scaling.adapter_rule]},
            "autoscaling": {"metric": scaling.metric, "target": round(scaling.target, 4), "reason": scaling.reason}}
