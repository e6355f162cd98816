"""What a fleet's manifests need besides the plan. Its own module: the manifests (k8s) and the autoscaling they
carry (autoscale) both take it, and k8s imports autoscale."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UserError

class ManifestError(UserError):
    """A manifest that cannot be written or does not validate: one line naming the file or the value."""


TRITON_IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"


@dataclass
class FleetSpec:
    """What the manifests need besides the plan."""

    name: str
    pvc: str = "triton-model-repository"
    repository_subpath: str = ""
    image: str = TRITON_IMAGE
    namespace: str | None = None
    max_replicas: int | None = None
    memory: str = "8Gi"
    cpu: str | None = None  # default: the measuring host's usable cores for CPU plans, 4 for GPU plans
    shm_size: str = "1Gi"
    node_selector: bool = True
    storage_uri: str | None = None  # KServe; default pvc://<pvc>/<subpath>
    extra_args: list[str] = field(default_factory=list)
    autoscale: str = "requests"  # requests | queue-ratio (AUTOSCALE; see autoscaling())
