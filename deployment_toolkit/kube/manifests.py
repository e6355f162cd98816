"""Kubernetes manifests for a sized fleet: Deployment + Service + HorizontalPodAutoscaler of the NGC Triton image,
and a KServe InferenceService using the Triton runtime.

The Deployment, Service and HPA are validated against the Kubernetes OpenAPI schemas shipped in the
`kubernetes-validate` wheel (offline, strict: unknown fields fail). KServe's CRDs are not in those schemas, so
`check_inference_service` checks the InferenceService structurally (required fields, types, enums, quantities,
storage URI scheme) instead. Label keys and values (`label_problem`) and image references (`image_problem`) are
checked by the API server's own rules, so a manifest the server would refuse is said before it is written.

Over 400 lines on purpose: the manifests and the rules they are checked by (the schemas, KServe's structure, labels,
images) are one job, what the API server will accept, and share their label rules (gpu_product_label names the node
label the builders write and the form a refused GPU name is told).

The model repository on the volume must be configured for the NGC container's native backends
(`triton/config_model_on_triton.py --model-format onnx|ts-trace|trt`), not for the embedded server's Python
backend.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from .autoscale import (AUTOSCALE, HPA_METRIC, MIN_QUEUE_RATIO, QUEUE_RATIO_METRIC,  # noqa: F401  (re-exported)
                        adapter_rules, autoscaling, per_pod_request_target, queue_ratio_at)
from ..server.args import CONTAINER_PORTS, ServerArgs
from .fleet_spec import TRITON_IMAGE, FleetSpec, ManifestError  # noqa: F401  (TRITON_IMAGE re-exported)
from .replicas import ReplicaSet

K8S_VERSION = "1.31"
PORTS = CONTAINER_PORTS
_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)?$")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# Kubernetes' label rules (apimachinery validation): a key is [prefix/]name, the prefix a DNS-1123 subdomain
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# the Docker/OCI distribution reference grammar (github.com/distribution/reference, regexp.go)
_IMAGE_HOST = re.compile(r"^(([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(\.([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*"
                         r"[a-zA-Z0-9]))*|\[[a-fA-F0-9:]+\])(:[0-9]+)?$")
_IMAGE_PATH_COMPONENT = re.compile(r"^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*$")
_IMAGE_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_IMAGE_DIGEST = re.compile(r"^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$")
GPU_PRODUCT_KEY = "nvidia.com/gpu.product"  # GPU feature discovery's label of a node's GPU
_STORAGE_SCHEMES = ("pvc://", "s3://", "gs://", "https://", "http://", "hdfs://", "webhdfs://", "oci://", "hf://")

HPA_HEADER = """\
# The HPA scales on a per-pod custom metric, {metric} (requests/s), that Triton does not export as such:
# Triton exports the counter nv_inference_request_success on :8002/metrics. With prometheus-adapter, a rule like
#   - seriesQuery: 'nv_inference_request_success{{namespace!="",pod!=""}}'
#     resources: {{overrides: {{namespace: {{resource: namespace}}, pod: {{resource: pod}}}}}}
#     name: {{matches: "nv_inference_request_success", as: "{metric}"}}
#     metricsQuery: 'sum(rate(<<.Series>>{{<<.LabelMatchers>>}}[1m])) by (<<.GroupBy>>)'
# makes it available. Target per pod = sustainable requests/s / (1 + headroom); minReplicas = the sized count.
"""


def dns_name(text: str, prefix: str = "triton") -> str:
    """A DNS-1035 label (what a Service name must be): lowercase, [-a-z0-9], starts with a letter, <= 63."""
    s = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    s = re.sub(r"-{2,}", "-", s)
    if not s or not s[0].isalpha():
        s = f"{prefix}-{s}".strip("-")
    return s[:63].rstrip("-")


def gpu_product_label(device: str) -> str:
    """GPU feature discovery's nvidia.com/gpu.product value for an nvidia-smi name (spaces -> dashes)."""
    s = re.sub(r"[^A-Za-z0-9_.-]+", "-", device.strip()).strip("-_.")
    return s[:63].rstrip("-_.")


def label_key_problem(key: str) -> str | None:
    """What Kubernetes would refuse in a label key (None: nothing): [prefix/]name, the prefix a DNS-1123 subdomain
    of at most 253 characters, the name 1-63 letters, digits, '-', '_' and '.' between a letter or digit each end.
    Said here, before a manifest is written, rather than by the API server at `kubectl apply`."""
    if not isinstance(key, str) or not key:
        return "the key is empty"
    parts = key.split("/")
    if len(parts) > 2:
        return f"the key {key!r} has more than one '/' (a key is [prefix/]name)"
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix):
            return (f"the key's prefix {prefix!r} is not a DNS subdomain (lowercase letters, digits, '-' and '.', at "
                    "most 253, e.g. nvidia.com)")
    if not name:
        return f"the key {key!r} has no name after its prefix"
    if len(name) > 63:
        return f"the key's name is {len(name)} characters long, at most 63"
    if not _LABEL_NAME.match(name):
        return (f"the key's name {name!r} must be letters, digits, '-', '_' and '.', starting and ending with a "
                "letter or digit")
    return None


def label_value_problem(value: str, key: str = "") -> str | None:
    """What Kubernetes would refuse in a label value (None: nothing): empty, or 1-63 letters, digits, '-', '_' and
    '.' between a letter or digit each end. A GPU named as nvidia-smi names it (spaces) is told GPU feature
    discovery's form of the name, the value its nodes carry."""
    if not isinstance(value, str):
        return f"the value {value!r} is not text"
    if len(value) > 63:
        return f"the value is {len(value)} characters long, at most 63"
    if not value or _LABEL_NAME.match(value):
        return None
    what = "has spaces" if " " in value else ("must be letters, digits, '-', '_' and '.', starting and ending "
                                             "with a letter or digit")
    suggestion = gpu_product_label(value)
    if key == GPU_PRODUCT_KEY:
        return (f"the value {value!r} {what}: GPU feature discovery labels the node {key}={suggestion} (nvidia-smi's "
                "name with dashes)")
    return f"the value {value!r} {what}" + (f" (e.g. {suggestion})" if suggestion else "")


def label_problem(key: str, value: str) -> str | None:
    """The first thing Kubernetes would refuse in the label key=value (None: nothing)."""
    return label_key_problem(key) or label_value_problem(value, key)


def image_problem(reference: str) -> str | None:
    """What the Docker/OCI distribution reference grammar refuses in an image reference (None: nothing):
    [host[:port]/]path[:tag][@sha256:digest], the path of lowercase letters and digits joined by '.', '_', '__' or
    '-', the tag [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}; no spaces. A pod with such an image would be refused by the API
    server (or never pulled), after the manifests were written."""
    if not isinstance(reference, str) or not reference.strip():
        return "it is empty"
    if any(c.isspace() for c in reference):
        return "it has a space (an image reference has none)"
    rest, at, digest = reference.partition("@")
    if at and not _IMAGE_DIGEST.match(digest):
        return f"its digest {digest!r} is not sha256: and 64 lowercase hex digits"
    name, tag = rest, None
    if rest.rfind(":") > rest.rfind("/"):
        name, tag = rest[:rest.rfind(":")], rest[rest.rfind(":") + 1:]
    parts = name.split("/")
    host = parts[0] if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"
                                           or parts[0] != parts[0].lower()) else None
    path = parts[1:] if host is not None else parts
    if host is not None and not _IMAGE_HOST.match(host):
        return f"its registry {host!r} is not a host name with an optional :port"
    if any(not p for p in path):
        return f"its repository path {'/'.join(path)!r} has an empty component ('//', or a '/' at an end)"
    if "/".join(path) != "/".join(path).lower():
        return (f"its repository path {'/'.join(path)!r} has upper case: repository names are lowercase "
                f"({'/'.join(path).lower()!r})")
    bad = next((p for p in path if not _IMAGE_PATH_COMPONENT.match(p)), None)
    if bad is not None:
        return (f"its path component {bad!r} must be lowercase letters and digits joined by '.', '_', '__' or '-'")
    if len(name) > 255:
        return f"its name is {len(name)} characters long, at most 255"
    if tag is not None and not _IMAGE_TAG.match(tag):
        return (f"its tag {tag!r} must be 1-128 letters, digits, '_', '.' and '-', not starting with '.' or '-'")
    return None


_QUANTITY_FACTORS = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "m": 1e-3,
                     "n": 1e-9, "u": 1e-6, "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50,
                     "Ei": 2 ** 60}


def quantity_value(text: str) -> float | None:
    """A Kubernetes quantity (`16Gi`, `500M`, `1.5e9`) as a number (bytes for memory and storage); None when it is
    not one. The API server's grammar (_QUANTITY): a `16gb` or `16 GiB` is refused there, after the files were
    written, so a flag that takes a quantity is checked with this first."""
    if not isinstance(text, str) or not _QUANTITY.match(text.strip()) or text != text.strip():
        return None
    m = re.match(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(.*)$", text)
    if m is None:
        return None
    number, suffix = float(m.group(1)), m.group(2)
    if suffix[:1] in ("e", "E"):
        return number * 10 ** int(suffix[1:])
    return number * _QUANTITY_FACTORS[suffix]


def quantity_of_bytes(size: float, minimum: int = 2 ** 30) -> str:
    """The whole Gi at or above `size` bytes (at least `minimum`): a claim's storage request."""
    return f"{max(math.ceil(size / 2 ** 30), math.ceil(minimum / 2 ** 30))}Gi"


def subdomain_problem(name: str) -> str | None:
    """What Kubernetes refuses in an object name that is a DNS-1123 subdomain (a claim's, a storage class's); None:
    nothing."""
    if not isinstance(name, str) or not name:
        return "it is empty"
    if len(name) > 253:
        return f"it is {len(name)} characters long, at most 253"
    if not _DNS1123_SUBDOMAIN.match(name):
        return "it must be lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
    return None


def unique_dns_name(text: str, limit: int = 40) -> str:
    """A DNS-1123 label of at most `limit` characters for `text`, told apart from every other text: `text` itself
    when it is one already; else its dns_name cut to fit and the first 8 hex digits of its sha256 (`Shop_A` and
    `shop-a` have one dns_name, and two long names may share their first `limit` characters: their objects would
    replace each other)."""
    import hashlib

    base = dns_name(text, prefix="d")
    if base == text and len(base) <= limit:
        return base
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{base[:limit - 9].rstrip('-')}-{digest}"


def _milli(value: float) -> str:
    """A quantity: integer if whole, else milli-units (Kubernetes quantities have no floats with many digits)."""
    if abs(value - round(value)) < 1e-9:
        return str(int(round(value)))
    return f"{int(math.floor(value * 1000))}m"


def _resources(plan: ReplicaSet, spec: FleetSpec) -> dict[str, Any]:
    cpu = spec.cpu
    if cpu is None:
        cpu = str(plan.usable_cores) if (not plan.gpu and plan.usable_cores) else "4"
    limits: dict[str, Any] = {"memory": spec.memory}
    if plan.gpu:
        limits["nvidia.com/gpu"] = plan.gpus_per_replica
    return {"requests": {"cpu": cpu, "memory": spec.memory}, "limits": limits}


def _labels(spec: FleetSpec) -> dict[str, str]:
    return {"app.kubernetes.io/name": spec.name, "app.kubernetes.io/component": "tritonserver"}


def _meta(spec: FleetSpec, plan: ReplicaSet, **extra: Any) -> dict[str, Any]:
    m: dict[str, Any] = {"name": spec.name, "labels": _labels(spec)}
    if spec.namespace:
        m["namespace"] = spec.namespace
    annotations = {
        "sizing.deployment-toolkit/run": plan.source,
        "sizing.deployment-toolkit/config": plan.label[:200],
        "sizing.deployment-toolkit/slo-p99-ms": f"{plan.slo_ms:g}",
        "sizing.deployment-toolkit/sustainable-inferences-per-s": f"{plan.capacity:.6g}",
        "sizing.deployment-toolkit/capacity-basis": plan.basis,
        **extra,
    }
    m["annotations"] = annotations
    return m


def _probe(path: str, period: int, failures: int, initial: int = 0) -> dict[str, Any]:
    p: dict[str, Any] = {"httpGet": {"path": path, "port": "http"}, "periodSeconds": period,
                         "timeoutSeconds": 2, "failureThreshold": failures}
    if initial:
        p["initialDelaySeconds"] = initial
    return p


def _max_replicas(plan: ReplicaSet, spec: FleetSpec) -> int:
    return max(spec.max_replicas or 2 * plan.replicas, plan.replicas)


def deployment(plan: ReplicaSet, spec: FleetSpec) -> dict[str, Any]:
    ports = dict(CONTAINER_PORTS)
    args = ServerArgs(model_repository="/models", http_port=ports["http"], grpc_port=ports["grpc"],
                      metrics_port=ports["metrics"], extra=tuple(spec.extra_args)).argv()
    mount: dict[str, Any] = {"name": "model-repository", "mountPath": "/models", "readOnly": True}
    if spec.repository_subpath:
        mount["subPath"] = spec.repository_subpath.strip("/")
    pod: dict[str, Any] = {
        "containers": [{
            "name": "tritonserver",
            "image": spec.image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["tritonserver"],
            "args": args,
            "ports": [{"name": n, "containerPort": p, "protocol": "TCP"} for n, p in PORTS],
            "resources": _resources(plan, spec),
            "startupProbe": _probe("/v2/health/ready", 5, 120),  # model loading: up to 10 minutes
            "readinessProbe": _probe("/v2/health/ready", 5, 3),
            "livenessProbe": _probe("/v2/health/live", 10, 3),
            "volumeMounts": [mount, {"name": "dshm", "mountPath": "/dev/shm"}],
        }],
        "volumes": [
            {"name": "model-repository", "persistentVolumeClaim": {"claimName": spec.pvc, "readOnly": True}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": spec.shm_size}},
        ],
        "terminationGracePeriodSeconds": 30,
    }
    if plan.gpu and spec.node_selector:
        pod["nodeSelector"] = {"nvidia.com/gpu.product": gpu_product_label(plan.device)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(spec, plan),
        "spec": {
            "replicas": plan.replicas,
            "selector": {"matchLabels": _labels(spec)},
            "template": {
                "metadata": {"labels": _labels(spec),
                             "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "8002",
                                             "prometheus.io/path": "/metrics"}},
                "spec": pod,
            },
        },
    }


def service(plan: ReplicaSet, spec: FleetSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(spec, plan),
        "spec": {
            "type": "ClusterIP",
            "selector": _labels(spec),
            "ports": [{"name": n, "port": p, "targetPort": n, "protocol": "TCP"} for n, p in PORTS],
        },
    }


def hpa(plan: ReplicaSet, spec: FleetSpec) -> dict[str, Any]:
    scaling = autoscaling(plan, spec)
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _meta(spec, plan),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": spec.name},
            "minReplicas": plan.replicas,
            "maxReplicas": _max_replicas(plan, spec),
            "metrics": [{
                "type": "Pods",
                "pods": {
                    "metric": {"name": scaling.metric},
                    "target": {"type": "AverageValue", "averageValue": _milli(scaling.target)},
                },
            }],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}},
        },
    }


def inference_service(plan: ReplicaSet, spec: FleetSpec) -> dict[str, Any]:
    sub = spec.repository_subpath.strip("/")
    uri = spec.storage_uri or f"pvc://{spec.pvc}" + (f"/{sub}" if sub else "")
    version = spec.image.rsplit(":", 1)[-1] if ":" in spec.image else "24.10-py3"
    triton: dict[str, Any] = {"storageUri": uri, "runtimeVersion": version, "resources": _resources(plan, spec)}
    if spec.extra_args:
        triton["args"] = list(spec.extra_args)
    predictor: dict[str, Any] = {
        "minReplicas": plan.replicas,
        "maxReplicas": _max_replicas(plan, spec),
        "scaleMetric": "rps",
        "scaleTarget": max(1, int(per_pod_request_target(plan))),
        "triton": triton,
    }
    if plan.gpu and spec.node_selector:
        predictor["nodeSelector"] = {"nvidia.com/gpu.product": gpu_product_label(plan.device)}
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": _meta(spec, plan),
        "spec": {"predictor": predictor},
    }


def fleet_manifests(plan: ReplicaSet, spec: FleetSpec) -> dict[str, dict[str, Any]]:
    """File name -> resource, for one kind of replica (the planner's replica groups)."""
    spec.name = dns_name(spec.name)
    return {
        "deployment.yaml": deployment(plan, spec),
        "service.yaml": service(plan, spec),
        "hpa.yaml": hpa(plan, spec),
        "kserve-inferenceservice.yaml": inference_service(plan, spec),
        "prometheus-adapter-rules.yaml": adapter_rules(plan, spec),
    }


def write_manifests(manifests: dict[str, dict[str, Any]], out_dir: str | Path) -> dict[str, Path]:
    import yaml

    from ..spec import atomic_write_text

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, doc in manifests.items():
        header = f"# generated by deployment-toolkit plan ({doc['kind']})\n"
        kind = doc["kind"]
        if kind == "PrometheusAdapterValues":  # not a Kubernetes resource: helm values for prometheus-adapter
            header = ("# generated by deployment-toolkit plan (prometheus-adapter values: helm install "
                      "prometheus-adapter "
                      "prometheus-community/prometheus-adapter -f this file)\n# the rule that gives the HPA its "
                      "metric.\n")
            doc = {k: v for k, v in doc.items() if k != "kind"}
        elif kind == "HorizontalPodAutoscaler":
            metric = doc["spec"]["metrics"][0]["pods"]["metric"]["name"]
            header += HPA_HEADER.format(metric=metric) if metric == HPA_METRIC else (
                f"# The HPA scales on {metric}: rate(nv_inference_queue_duration_us) / rate(nv_inference_compute_"
                "infer_duration_us) per pod, NVIDIA's practice for Triton;\n# prometheus-adapter-rules.yaml beside "
                "this file defines it. Target per pod = the ratio the replica showed at the load the plan rests on.\n")
        if kind == "InferenceService":
            header += ("# KServe CRD (serving.kserve.io/v1beta1): not in the Kubernetes schemas, checked structurally.\n"
                       "# scaleMetric rps / scaleTarget: requests/s per pod = sustainable / (1 + headroom).\n")
        path = out_dir / name
        atomic_write_text(path, header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=1000))
        paths[name] = path
    return paths


# ---- validation ---------------------------------------------------------------------------------

def validate_kubernetes(doc: dict[str, Any], version: str = K8S_VERSION) -> str:
    """Validate against the Kubernetes schemas shipped in kubernetes-validate (strict); returns the schema
    version used, raises kubernetes_validate.ValidationError."""
    import kubernetes_validate

    return kubernetes_validate.validate(doc, version, strict=True)


def check_inference_service(doc: dict[str, Any]) -> list[str]:
    """Structural check of a KServe v1beta1 InferenceService with a Triton predictor; [] when fine."""
    problems: list[str] = []

    def need(cond: bool, msg: str) -> None:
        if not cond:
            problems.append(msg)

    need(doc.get("apiVersion") == "serving.kserve.io/v1beta1", "apiVersion must be serving.kserve.io/v1beta1")
    need(doc.get("kind") == "InferenceService", "kind must be InferenceService")
    meta = doc.get("metadata")
    need(isinstance(meta, dict) and isinstance(meta.get("name"), str) and bool(_DNS1035.match(meta.get("name", "")))
         and len(meta.get("name", "")) <= 63, "metadata.name must be a DNS-1035 label")
    for key, val in ((meta or {}).get("labels") or {}).items():
        need(isinstance(val, str) and bool(_LABEL_VALUE.match(val)) and len(val) <= 63, f"label {key} has a bad value")
    for key, val in ((meta or {}).get("annotations") or {}).items():
        need(isinstance(val, str), f"annotation {key} must be a string")
    pred = (doc.get("spec") or {}).get("predictor")
    need(isinstance(pred, dict), "spec.predictor is required")
    if not isinstance(pred, dict):
        return problems
    allowed = {"minReplicas", "maxReplicas", "scaleMetric", "scaleTarget", "triton", "nodeSelector", "tolerations",
               "serviceAccountName", "containerConcurrency", "timeout", "canaryTrafficPercent", "annotations", "labels"}
    need(not set(pred) - allowed, f"unknown predictor fields {sorted(set(pred) - allowed)}")
    for k in ("minReplicas", "maxReplicas", "scaleTarget"):
        if k in pred:
            need(isinstance(pred[k], int) and not isinstance(pred[k], bool) and pred[k] >= 0, f"predictor.{k} must be an integer >= 0")
    if isinstance(pred.get("minReplicas"), int) and isinstance(pred.get("maxReplicas"), int):
        need(pred["minReplicas"] <= pred["maxReplicas"], "predictor.minReplicas > maxReplicas")
    if "scaleMetric" in pred:
        need(pred["scaleMetric"] in ("cpu", "memory", "concurrency", "rps"), "predictor.scaleMetric: cpu|memory|concurrency|rps")
    for k, v in (pred.get("nodeSelector") or {}).items():
        need(isinstance(v, str) and bool(_LABEL_VALUE.match(v)), f"nodeSelector {k} has a bad value")
    tr = pred.get("triton")
    need(isinstance(tr, dict), "spec.predictor.triton is required (the Triton runtime)")
    if not isinstance(tr, dict):
        return problems
    tallowed = {"storageUri", "runtimeVersion", "protocolVersion", "resources", "args", "env", "name", "image"}
    need(not set(tr) - tallowed, f"unknown predictor.triton fields {sorted(set(tr) - tallowed)}")
    uri = tr.get("storageUri")
    need(isinstance(uri, str) and uri.startswith(_STORAGE_SCHEMES) and len(uri) > len(uri.split("://")[0]) + 3,
         f"predictor.triton.storageUri must be a URI with one of {', '.join(_STORAGE_SCHEMES)}")
    if "runtimeVersion" in tr:
        need(isinstance(tr["runtimeVersion"], str) and bool(tr["runtimeVersion"]), "runtimeVersion must be a string")
    if "protocolVersion" in tr:
        need(tr["protocolVersion"] in ("v1", "v2", "grpc-v2"), "protocolVersion: v1|v2|grpc-v2")
    if "args" in tr:
        need(isinstance(tr["args"], list) and all(isinstance(a, str) for a in tr["args"]), "args must be strings")
    res = tr.get("resources")
    need(isinstance(res, dict) and set(res) <= {"limits", "requests"}, "predictor.triton.resources: limits/requests")
    for part in ("limits", "requests"):
        for name, q in ((res or {}).get(part) or {}).items():
            need(isinstance(q, (int, str)) and not isinstance(q, bool) and bool(_QUANTITY.match(str(q))),
                 f"resources.{part}.{name}={q!r} is not a quantity")
    return problems


def validate_all(manifests: dict[str, dict[str, Any]], version: str = K8S_VERSION) -> list[str]:
    """One line per file: what it was checked against; raises ManifestError on the first invalid one."""
    lines = []
    for name, doc in manifests.items():
        if doc.get("kind") == "PrometheusAdapterValues":
            rules = doc.get("rules", {}).get("custom", [])
            if not rules or not all({"seriesQuery", "metricsQuery", "name", "resources"} <= set(r) for r in rules):
                raise ManifestError(f"{name}: a prometheus-adapter rule lacks seriesQuery/metricsQuery/name/resources")
            lines.append(f"{name}: prometheus-adapter rule for {doc['autoscaling']['metric']} checked structurally")
            continue
        if doc.get("kind") == "InferenceService":
            problems = check_inference_service(doc)
            if problems:
                raise ManifestError(f"{name}: " + "; ".join(problems))
            lines.append(f"{name}: InferenceService checked structurally (KServe CRD, not in the Kubernetes schemas)")
            continue
        try:
            used = validate_kubernetes(doc, version)
        except ImportError:
            lines.append(f"{name}: not validated (pip install kubernetes-validate)")
            continue
        except Exception as err:  # kubernetes_validate.ValidationError carries the path and message
            path = ".".join(str(p) for p in (getattr(err, "path", None) or []))
            msg = getattr(err, "message", None) or str(err)
            raise ManifestError(f"{name} is not a valid {doc.get('kind')}: {path or '(top)'}: {msg}") from err
        lines.append(f"{name}: valid {doc['kind']} ({doc['apiVersion']}) against the Kubernetes {used} schema (strict)")
    return lines
