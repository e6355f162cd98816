"""Kubernetes manifests of a planned replica group, validated offline against the Kubernetes schemas that ship in the
kubernetes-validate wheel (strict: unknown fields fail). KServe's InferenceService is a CRD those schemas do
not include, so it gets the structural check in deployment_toolkit.kube.manifests instead."""
from __future__ import annotations

import copy
import socket

import kubernetes_validate as kv  # declared in pyproject: missing is a broken install, not a skip
import pytest

from deployment_toolkit.server.args import ServerArgs
import yaml

from deployment_toolkit.kube.fleet_spec import ManifestError
from deployment_toolkit.kube.replicas import ReplicaSet
from deployment_toolkit.kube.manifests import (
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

# a GPU group: 1560 inf/s per replica at p99 <= 10 ms, 4 replicas; a CPU group: 90 inf/s per 16-core host, 3 hosts,
# its server queue 2 ms and compute 8 ms at the planned point (what queue-ratio scaling targets)
GPU = ReplicaSet("resnet50 onnx x2", "results/plan", 4, 1560.0, 10.0, 0.2, "mix capacity held 3 of 3", 1, True,
                 "NVIDIA A100-SXM4-80GB", 1, None, 0.4, 1.2, "1560 inf/s")
CPU = ReplicaSet("resnet50 onnx x2", "results/plan", 3, 90.0, 50.0, 0.2, "capacity held 3 of 3", 1, False,
                 "AMD EPYC 7763", 1, 16, 2.0, 8.0, "90 inf/s")


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """The schemas are files in the wheel: any network access during validation is a bug."""
    def refuse(*args, **kwargs):
        raise AssertionError("network access during manifest validation")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture()
def gpu_manifests():
    return GPU, fleet_manifests(GPU, FleetSpec(name="triton-resnet50", pvc="models", repository_subpath="repo"))


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
    with pytest.raises(ManifestError, match="deployment.yaml is not a valid Deployment: spec.replicas"):
        validate_all({"deployment.yaml": bad})


def test_cpu_fleet_has_no_gpu_limit_and_is_valid():
    docs = fleet_manifests(CPU, FleetSpec(name="resnet50 CPU!"))
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
        assert text.startswith("# generated by deployment-toolkit plan")
        # the prometheus-adapter values are helm values, not a resource: written without our "kind" tag
        assert yaml.safe_load(text) == {k: v for k, v in docs[name].items()
                                        if not (k == "kind" and v == "PrometheusAdapterValues")}
    assert "prometheus-adapter" in paths["hpa.yaml"].read_text()
    for doc in kv.utils.resources_from_file(str(paths["deployment.yaml"])):
        assert kv.validate(doc, "1.31", strict=True)


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

    from deployment_toolkit.kube.manifests import MIN_QUEUE_RATIO, QUEUE_RATIO_METRIC, queue_ratio_at

    ratio = queue_ratio_at(CPU)
    assert ratio is not None and math.isclose(ratio, CPU.queue_ms / CPU.compute_ms)
    docs = fleet_manifests(CPU, FleetSpec(name="r50", autoscale="queue-ratio"))
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
