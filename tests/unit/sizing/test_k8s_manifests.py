"""Kubernetes manifests of a sized fleet, validated offline against the Kubernetes schemas that ship in the
kubernetes-validate wheel (strict: unknown fields fail). KServe's InferenceService is a CRD those schemas do
not include, so it gets the structural check in deployment_toolkit.sizing.k8s instead."""
from __future__ import annotations

import copy
import socket
from pathlib import Path

import kubernetes_validate as kv  # declared in pyproject: missing is a broken install, not a skip
import pytest

from deployment_toolkit.server.args import ServerArgs
import yaml

from deployment_toolkit.sizing import Demand, Prices, SizingError, load_runs, size
from deployment_toolkit.sizing.replicas import replica_set
from deployment_toolkit.sizing.k8s import (
    TRITON_IMAGE,
    FleetSpec,
    check_inference_service,
    dns_name,
    fleet_manifests,
    gpu_product_label,
    validate_all,
    validate_kubernetes,
    write_manifests,
)

FIX = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "sizing"


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """The schemas are files in the wheel: any network access during validation is a bug."""
    def refuse(*args, **kwargs):
        raise AssertionError("network access during manifest validation")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def _plan(run: str, peak=5000.0, slo=10.0):
    (r,) = load_runs(FIX / run)
    return size([r], Demand(peak, slo), Prices(gpu_hour=2.0, host_hour=0.5)).recommendation


@pytest.fixture()
def gpu_manifests():
    plan = _plan("gpu_a100_onnx_x2")  # 1560 inf/s per replica at SLO 10 ms -> 4 replicas
    return plan, fleet_manifests(replica_set(plan), FleetSpec(name="triton-resnet50", pvc="models", repository_subpath="repo"))


def test_gpu_fleet_resources_are_valid_kubernetes(gpu_manifests):
    _, docs = gpu_manifests
    for name in ("deployment.yaml", "service.yaml", "hpa.yaml"):
        assert validate_kubernetes(docs[name], "1.31") == "1.31", name


def test_deployment_serves_the_volume_on_a_gpu_with_probes(gpu_manifests):
    plan, docs = gpu_manifests
    dep = docs["deployment.yaml"]
    assert dep["spec"]["replicas"] == plan.replicas == 4
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"] == TRITON_IMAGE == "nvcr.io/nvidia/tritonserver:24.10-py3"
    assert c["args"] == ServerArgs("/models", 8000, 8001, 8002).argv()  # the same builder as the script's
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert c["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": "http"}
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {"http": 8000, "grpc": 8001, "metrics": 8002}
    vol = next(v for v in pod["volumes"] if v["name"] == "model-repository")
    assert vol["persistentVolumeClaim"]["claimName"] == "models"
    assert next(m for m in c["volumeMounts"] if m["name"] == "model-repository")["subPath"] == "repo"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}


def test_service_and_hpa(gpu_manifests):
    plan, docs = gpu_manifests
    svc, hpa = docs["service.yaml"], docs["hpa.yaml"]
    assert {p["name"]: (p["port"], p["targetPort"]) for p in svc["spec"]["ports"]} == {
        "http": (8000, "http"), "grpc": (8001, "grpc"), "metrics": (8002, "metrics")}
    assert svc["spec"]["selector"] == docs["deployment.yaml"]["spec"]["selector"]["matchLabels"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["minReplicas"] == plan.replicas and hpa["spec"]["maxReplicas"] == 2 * plan.replicas
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "triton-resnet50"}
    # per-pod target: 1560 requests/s (batch 1) / 1.2 headroom = 1300
    assert hpa["spec"]["metrics"][0]["pods"]["target"] == {"type": "AverageValue", "averageValue": "1300"}


def test_inference_service_structure(gpu_manifests):
    plan, docs = gpu_manifests
    isvc = docs["kserve-inferenceservice.yaml"]
    assert check_inference_service(isvc) == []
    pred = isvc["spec"]["predictor"]
    assert isvc["apiVersion"] == "serving.kserve.io/v1beta1" and pred["minReplicas"] == plan.replicas
    assert pred["triton"]["storageUri"] == "pvc://models/repo" and pred["triton"]["runtimeVersion"] == "24.10-py3"
    assert pred["triton"]["resources"]["limits"]["nvidia.com/gpu"] == 1
    broken = copy.deepcopy(isvc)
    del broken["spec"]["predictor"]["triton"]["storageUri"]
    broken["spec"]["predictor"]["minReplicas"] = 99
    broken["spec"]["predictor"]["triton"]["resources"]["limits"]["memory"] = "lots"
    problems = check_inference_service(broken)
    assert any("storageUri" in p for p in problems) and any("minReplicas > maxReplicas" in p for p in problems)
    assert any("not a quantity" in p for p in problems)
    assert check_inference_service({**isvc, "apiVersion": "serving.kserve.io/v1alpha1"})


def test_the_validator_catches_mistakes(gpu_manifests):
    _, docs = gpu_manifests
    bad = copy.deepcopy(docs["deployment.yaml"])
    bad["spec"]["replicas"] = "four"
    with pytest.raises(kv.ValidationError):
        validate_kubernetes(bad)
    typo = copy.deepcopy(docs["service.yaml"])
    typo["spec"]["ports"][0]["prot"] = 8000  # strict: unknown field
    with pytest.raises(kv.ValidationError):
        validate_kubernetes(typo)
    with pytest.raises(SizingError, match="deployment.yaml is not a valid Deployment: spec.replicas"):
        validate_all({"deployment.yaml": bad})


def test_cpu_fleet_has_no_gpu_limit_and_is_valid():
    plan = _plan("cpu_host_onnx_x2", peak=200, slo=50)  # 90 inf/s per host -> 3 hosts
    docs = fleet_manifests(replica_set(plan), FleetSpec(name="resnet50 CPU!"))
    dep = docs["deployment.yaml"]
    res = dep["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert "nvidia.com/gpu" not in res["limits"] and res["requests"]["cpu"] == "16"
    assert "nodeSelector" not in dep["spec"]["template"]["spec"] and dep["spec"]["replicas"] == 3
    assert dep["metadata"]["name"] == "resnet50-cpu"
    lines = validate_all(docs)
    assert len(lines) == 5 and "structurally" in lines[-2] and "prometheus-adapter rule" in lines[-1]


def test_written_yaml_round_trips(gpu_manifests, tmp_path):
    _, docs = gpu_manifests
    paths = write_manifests(docs, tmp_path)
    for name, path in paths.items():
        text = path.read_text()
        assert text.startswith("# generated by triton/size_fleet.py")
        # the prometheus-adapter values are helm values, not a resource: written without our "kind" tag
        assert yaml.safe_load(text) == {k: v for k, v in docs[name].items()
                                        if not (k == "kind" and v == "PrometheusAdapterValues")}
    assert "prometheus-adapter" in paths["hpa.yaml"].read_text()
    for doc in kv.utils.resources_from_file(str(paths["deployment.yaml"])):
        assert kv.validate(doc, "1.31", strict=True)


def test_unreachable_plan_has_no_manifests():
    (r,) = load_runs(FIX / "gpu_a100_onnx_x1")
    plan = size([r], Demand(100, 1.0)).plans[0]
    with pytest.raises(SizingError, match="unreachable"):
        fleet_manifests(replica_set(plan), FleetSpec(name="x"))


def test_names_and_labels():
    assert dns_name("ResNet50_ONNX x2") == "resnet50-onnx-x2"
    assert dns_name("3d-unet") == "triton-3d-unet"
    assert len(dns_name("a" * 100)) == 63
    assert gpu_product_label("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"


def test_the_hpa_can_scale_on_tritons_queue_to_compute_ratio(tmp_path):
    """Issue 29: NVIDIA's practice for Triton. The target is the queue/compute ratio the replica showed at the
    point the plan rests on, and the prometheus-adapter rule that defines the metric is written beside the HPA."""
    import math

    import yaml

    from deployment_toolkit.sizing.k8s import MIN_QUEUE_RATIO, QUEUE_RATIO_METRIC, queue_ratio_at

    plan = _plan("cpu_host_onnx_x2", peak=200, slo=50)
    ratio = queue_ratio_at(replica_set(plan))
    point = plan.sustainable.point
    assert ratio is not None and math.isclose(ratio, point.queue_ms / point.compute_ms)
    docs = fleet_manifests(replica_set(plan), FleetSpec(name="r50", autoscale="queue-ratio"))
    metric = docs["hpa.yaml"]["spec"]["metrics"][0]["pods"]
    assert metric["metric"]["name"] == QUEUE_RATIO_METRIC
    target = float(metric["target"]["averageValue"].rstrip("m")) / (1000 if metric["target"]["averageValue"].endswith("m") else 1)
    assert math.isclose(target, max(ratio, MIN_QUEUE_RATIO), rel_tol=1e-2)
    rules = docs["prometheus-adapter-rules.yaml"]
    (rule,) = rules["rules"]["custom"]
    assert rule["name"]["as"] == QUEUE_RATIO_METRIC and "nv_inference_compute_infer_duration_us" in rule["metricsQuery"]
    assert "at the load the plan rests on" in rules["autoscaling"]["reason"] or "rests on" in rules["autoscaling"]["reason"]
    validate_all(docs)
    paths = write_manifests(docs, tmp_path)
    assert "queue_compute_ratio" in paths["hpa.yaml"].read_text()
    values = yaml.safe_load(paths["prometheus-adapter-rules.yaml"].read_text())
    assert "kind" not in values and values["rules"]["custom"][0]["seriesQuery"].startswith("nv_inference_queue")
