"""`plan --autoscale-on queue-ratio` (issue 56: it raised in the manifests stage, after every measurement): each
group's autoscaler targets the queue-over-compute time its confirmation scraped from Triton's metrics at its planned
rates; a group without that figure (no confirmation) scales on requests, said in the log."""
from __future__ import annotations

import logging
import math
from types import SimpleNamespace

import pytest
import yaml

from deployment_toolkit.deployment.report import queue_and_compute, write_manifests


def _point(queue_us, compute_us, answered):
    return SimpleNamespace(row={"server_queue_us": queue_us, "server_compute_us": compute_us, "answered": answered})


def _plan(tmp_path, confirmed: bool, autoscale_on: str = "queue-ratio"):
    mixes = [SimpleNamespace(points={"a": _point(300.0, 1000.0, 100.0), "b": _point(900.0, 3000.0, 300.0)}),
             SimpleNamespace(points={"a": _point(500.0, 1000.0, 100.0), "b": _point(float("nan"), 3000.0, 300.0)})]
    confirmations = [SimpleNamespace(models=("a", "b"), rounds=[1], points=mixes)] if confirmed else []
    group = SimpleNamespace(models=("a", "b"), replicas=2, rates={"a": 50.0, "b": 30.0}, shared=True)
    return SimpleNamespace(
        settings=SimpleNamespace(deploy=SimpleNamespace(pvc="models", namespace="default", autoscale_on=autoscale_on,
                                                        image=None)),
        served=lambda: {"a": ["a"], "b": ["b"]}, out_dir=tmp_path, groups=[group], confirmations=confirmations,
        deployment=SimpleNamespace(name="shop", model=lambda m: SimpleNamespace(p99_ms=50.0)),
        margin=lambda m: 0.1, device="AMD EPYC")


def test_queue_and_compute_are_the_confirmations_metrics_weighted_by_answered_rate(tmp_path):
    queue, compute = queue_and_compute(_plan(tmp_path, True), ("a", "b"))
    # (300*100 + 900*300 + 500*100) / 500 us queue; (1000*100 + 3000*300 + 1000*100) / 500 us compute (NaN row out)
    assert queue == pytest.approx(0.7) and compute == pytest.approx(2.2)
    assert all(math.isnan(v) for v in queue_and_compute(_plan(tmp_path, False), ("a", "b")))


def test_the_autoscaler_scales_on_the_confirmed_queue_ratio(tmp_path):
    files = write_manifests(_plan(tmp_path, True))
    hpa = next(d for path in files.values() for d in yaml.safe_load_all(path.read_text())
               if d and d.get("kind") == "HorizontalPodAutoscaler")
    metric = hpa["spec"]["metrics"][0]["pods"]
    assert metric["metric"]["name"] == "triton_queue_compute_ratio"
    assert metric["target"]["averageValue"] == "318m"  # 0.7 / 2.2 as a Kubernetes quantity


def test_a_group_without_a_confirmation_scales_on_requests_and_says_so(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        files = write_manifests(_plan(tmp_path, False))
    hpa = next(d for path in files.values() for d in yaml.safe_load_all(path.read_text())
               if d and d.get("kind") == "HorizontalPodAutoscaler")
    assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == "triton_inference_requests_per_second"
    assert "a-b: no queue and compute time was measured" in caplog.text and "scales on requests" in caplog.text


def test_a_replica_is_priced_by_the_device_that_serves_it(monkeypatch):
    """On a GPU host a replica's price is keyed on the GPU's name (it was the CPU's, so by_device never matched)."""
    from deployment_toolkit.results import runinfo
    from deployment_toolkit.deployment.file import Costs

    monkeypatch.setattr(runinfo, "gpu_info", lambda: [{"name": "NVIDIA H100 80GB HBM3", "memory": "81559 MiB",
                                                        "driver": "550"}])
    monkeypatch.setattr(runinfo, "cpu_info", lambda: {"model": "AMD EPYC 9654"})
    prices = Costs(host_hour=0.5, gpu_hour=3.0, by_device={"H100": 4.5, "EPYC": 1.0})
    assert runinfo.serving_device(True) == "NVIDIA H100 80GB HBM3"
    assert prices.price_for(runinfo.serving_device(True), True) == 4.5
    assert runinfo.serving_device(False) == "AMD EPYC 9654" and prices.price_for("AMD EPYC 9654", False) == 1.0
