"""The searches of a deployment fanned out over identical hosts as a Kubernetes Indexed Job, and the gathering.

Each model's search is an independent task that writes only its own folder (`<result>/models/<name>/search`,
`search_dir`), so a deployment of N models is a batch/v1 Job with `completionMode: Indexed` and N completions: the
pod of index i runs `deployment-toolkit plan --deployment FILE --search-only --index i --result-path DIR`, the
search of the file's i-th model (`JOB_COMPLETION_INDEX`, set from the pod's completion-index annotation). Every pod
has the same image, command and shape, a node selector for the target device (a search's points are reused only on
the host identity they were measured on: CPU model, usable cores, GPUs), the results volume (read-write, shared by
every pod: each writes its own folder) and the inputs volume (the deployment file and the model sources it names,
read-only). The manifests are validated against the Kubernetes schema as the fleet's are (kube.manifests.validate_all).

The gathering run is the same plan command without --search-only, on the same results volume and the same kind
of host (`gather_job`, one pod of the same template): each search replays from its folder and measures nothing
(search.clock), then the plan goes on. `searches_done` says which folders hold a finished search, so the gathering
can refuse in one line ("2 of 12 searches missing: indexes 4 (tagger), 9 (ocr)") instead of searching them itself,
and whose each is (owner.py: a folder another deployment's searches, or another definition of a model, left is
refused, naming the index and model).

Bad input is refused in one line before anything is written (UserInputError): the folder (`job_folder`), the node
selectors by Kubernetes' label rules (`node_selector_of`), the image by the distribution reference grammar
(JobSpec, kube.manifests), and a job file there that was edited by hand (replaced only with --force: `write_jobs`,
deployment.jobfiles). What `plan --write-job` writes around these two jobs (the staged inputs, the claims, the pod
that loads them) is deployment.joboutput's.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..config.keyvalue import parse_pairs
from ..errors import UserInputError
from ..search.store import search_complete
from ..kube.manifests import GPU_PRODUCT_KEY, dns_name, gpu_product_label, image_problem, label_problem
from . import owner
from .errors import DeploymentPlanError
from .jobfiles import check_jobs, job_folder, manifest_text, write_jobs  # noqa: F401  (re-exported)
from .owner import OWNER_FILE

if TYPE_CHECKING:
    from .file import Deployment, ModelEntry

INDEX_ENV = "JOB_COMPLETION_INDEX"  # what the Job controller sets; declared from the annotation as well
INDEX_ANNOTATION = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
INDEX_REF = f"$({INDEX_ENV})"  # expanded by the kubelet in command and args from the container's env
GPU_PRODUCT_LABEL = GPU_PRODUCT_KEY  # GPU feature discovery's label (kube.manifests's)
RESULTS_VOLUME, INPUTS_VOLUME, SHM_VOLUME = "results", "inputs", "dshm"
JOB_FILE, GATHER_FILE = "search-job.yaml", "gather-job.yaml"
_ENV_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
MAX_JOB_NAME = 56  # <name>-<index> (index < 10^5) and <name>-gather are DNS labels of at most 63


@dataclass(frozen=True)
class JobSpec:
    """The cluster side of the fan-out: where the pods run and what they mount. Requests equal limits (whole CPUs:
    Guaranteed QoS, so with the static CPU manager every pod gets the same exclusive cores, and the same usable-core
    count the search's identity records)."""

    image: str  # an image with the toolkit installed (its perf_analyzer and tritonserver as on the measuring hosts)
    node_selector: Mapping[str, str]  # the target device's nodes, e.g. gpu_node_selector("NVIDIA H100 80GB HBM3")
    name: str = "deployment-search"  # at most MAX_JOB_NAME: an index's hostname is <name>-<index>, a DNS label
    gather_name: str | None = None  # the gathering job's name (default <name>-gather)
    namespace: str | None = None
    results_claim: str = "deployment-search-results"  # a ReadWriteMany PersistentVolumeClaim: every pod writes here
    results_mount: str = "/results"
    inputs_claim: str = "deployment-search-inputs"  # the deployment file and the model sources it names (read-only)
    inputs_mount: str = "/inputs"
    workspace: str | None = None  # --workspace in the pod; default <results_mount>/workspace (see search_command)
    parallelism: int | None = None  # pods at once; default every index
    backoff_limit_per_index: int = 1  # retries of one model's search before its index is marked failed
    max_failed_indexes: int | None = None  # the Job gives up after this many failed indexes (default: never early)
    cpu: int = 4
    memory: str = "16Gi"
    gpus: int = 0  # nvidia.com/gpu per pod
    shm_size: str = "1Gi"  # /dev/shm: perf_analyzer's system shared memory
    working_dir: str | None = None  # the container's working directory (default: the results volume)
    args: tuple[str, ...] = ()  # the plan's other flags, the gathering run's too (--max-minutes, --preset, ...)
    active_deadline_s: int | None = None
    ttl_after_finished_s: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.image.strip():
            raise UserInputError("the search job's image is empty: name an image with deployment-toolkit installed")
        if problem := image_problem(self.image):
            raise UserInputError(f"the search job's image {self.image!r}: {problem}")
        if not self.node_selector:
            raise UserInputError("the search job needs a node selector for the target device (e.g. "
                                 f"{GPU_PRODUCT_LABEL}=...): a search's points are reused only on the host identity "
                                 "they were measured on")
        for what, labels in (("node selector", self.node_selector), ("label", self.labels)):
            for key, value in labels.items():
                if problem := label_problem(key, value):
                    raise UserInputError(f"search job {what} {key}={value}: {problem}")
        for what, value, low in (("parallelism", self.parallelism, 1), ("backoff_limit_per_index",
                                                                          self.backoff_limit_per_index, 0),
                                 ("max_failed_indexes", self.max_failed_indexes, 0), ("cpu", self.cpu, 1),
                                 ("gpus", self.gpus, 0), ("active_deadline_s", self.active_deadline_s, 1),
                                 ("ttl_after_finished_s", self.ttl_after_finished_s, 0)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < low):
                raise UserInputError(f"search job {what} must be a whole number >= {low}, got {value!r}")
        for mount in (self.results_mount, self.inputs_mount, self.working_dir or "/"):
            if not mount.startswith("/"):
                raise UserInputError(f"search job mount path {mount!r} must be absolute")
        for what, name, most in (("name", self.name, MAX_JOB_NAME), ("gathering job's name", self.gather_job_name, 63)):
            if len(name) > most:
                raise UserInputError(f"search job {what} {name!r} is {len(name)} characters long, at most {most} "
                                     "(a Job's pods carry it in a label; an index's hostname is <name>-<index>)")

    @property
    def gather_job_name(self) -> str:
        return self.gather_name or f"{self.name}-gather"

    @property
    def pod_workspace(self) -> str:
        """The artifacts go on the results volume by default: the gathering run reuses them instead of converting
        again (an artifact's digest is part of the search's identity)."""
        return self.workspace or f"{self.results_mount.rstrip('/')}/workspace"


def gpu_node_selector(device: str) -> dict[str, str]:
    """The node selector of a GPU as nvidia-smi names it (GPU feature discovery's product label)."""
    return {GPU_PRODUCT_LABEL: gpu_product_label(device)}


def node_selector_of(items: Sequence[str], flag: str = "--node-selector") -> dict[str, str]:
    """KEY=VALUE items (the repeatable flag's) as a node selector, read by the one KEY=VALUE reader as text (a label
    value is a string: `zone=1` is '1') and each checked by Kubernetes' label rules as it is read: a selector the API
    server would refuse is said now, naming the item, not at `kubectl apply`."""
    for item in items:  # the reader's own line, with the example a node selector needs
        if "=" not in item or not item.partition("=")[0].strip():
            raise UserInputError(f"{flag} {item!r}: give KEY=VALUE, e.g. {GPU_PRODUCT_LABEL}=NVIDIA-H100-80GB-HBM3")
    selector = parse_pairs(items, flag, text=True)
    for key, value in selector.items():
        if problem := label_problem(key, value):
            raise UserInputError(f"{flag} {f'{key}={value}'!r}: {problem}; give a label as the nodes carry it "
                                 "(kubectl get nodes --show-labels)")
    return selector


def search_dir(result_dir: str | Path, name: str) -> Path:
    """Where the search of the deployment's model `name` writes (the plan's per-model search folder)."""
    return Path(result_dir) / "models" / name / "search"


def search_command(deployment_file: str, result_dir: str, spec: JobSpec, index: str | int = INDEX_REF) -> list[str]:
    """One index's command: its model's search only, into `<result_dir>/models/<name>/search`."""
    return ["deployment-toolkit", "plan", "--deployment", str(deployment_file), "--search-only", "--index", str(index),
            "--result-path", str(result_dir), "--workspace", spec.pod_workspace, *spec.args]


def gather_command(deployment_file: str, result_dir: str, spec: JobSpec) -> list[str]:
    """The gathering: the whole plan on the folders the searches left (each replayed, nothing measured again)."""
    return ["deployment-toolkit", "plan", "--deployment", str(deployment_file), "--gather", "--result-path",
            str(result_dir), "--workspace", spec.pod_workspace, *spec.args]


def _labels(spec: JobSpec, component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": dns_name(spec.name), "app.kubernetes.io/component": component,
            **dict(spec.labels)}


def _pod(spec: JobSpec, command: list[str], component: str) -> dict[str, Any]:
    resources: dict[str, Any] = {"cpu": str(spec.cpu), "memory": spec.memory}
    if spec.gpus:
        resources["nvidia.com/gpu"] = spec.gpus
    container: dict[str, Any] = {
        "name": component,
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "volumeMounts": [{"name": RESULTS_VOLUME, "mountPath": spec.results_mount},
                         {"name": INPUTS_VOLUME, "mountPath": spec.inputs_mount, "readOnly": True},
                         {"name": SHM_VOLUME, "mountPath": "/dev/shm"}],
    }
    if INDEX_REF in command:  # declared, not only left to the Job controller: what $(...) expands is explicit
        container["env"] = [{"name": INDEX_ENV, "valueFrom": {"fieldRef": {"fieldPath": INDEX_ANNOTATION}}}]
    container["workingDir"] = spec.working_dir or spec.results_mount  # a relative path lands on the results volume
    pod: dict[str, Any] = {
        "restartPolicy": "Never",  # a failed search is retried as a new pod of its index (backoffLimitPerIndex)
        "nodeSelector": dict(spec.node_selector),
    }
    if spec.gpus:  # GPU node pools carry this taint: without the toleration no GPU pod is scheduled there
        pod["tolerations"] = [dict(GPU_TOLERATION)]
    return {
        "metadata": {"labels": _labels(spec, component)},
        "spec": {
            **pod,
            "containers": [container],
            "volumes": [
                {"name": RESULTS_VOLUME, "persistentVolumeClaim": {"claimName": spec.results_claim}},
                {"name": INPUTS_VOLUME, "persistentVolumeClaim": {"claimName": spec.inputs_claim, "readOnly": True}},
                {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": spec.shm_size}},
            ],
        },
    }


def _job(spec: JobSpec, name: str, component: str, job_spec: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": dns_name(name), "labels": _labels(spec, component)}
    if spec.namespace:
        meta["namespace"] = spec.namespace
    body = {**job_spec, "template": pod}
    if spec.active_deadline_s is not None:
        body["activeDeadlineSeconds"] = spec.active_deadline_s
    if spec.ttl_after_finished_s is not None:
        body["ttlSecondsAfterFinished"] = spec.ttl_after_finished_s
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": body}


def search_job(deployment_file: str, n_models: int, result_dir_in_pod: str, spec: JobSpec) -> dict[str, Any]:
    """The Indexed Job: index i searches the deployment file's i-th model (0-based, the file's order)."""
    if not isinstance(n_models, int) or n_models < 1:
        raise UserInputError(f"a search job needs at least one model, got {n_models!r}")
    body: dict[str, Any] = {"completionMode": "Indexed", "completions": n_models,
                            "parallelism": min(spec.parallelism or n_models, n_models),
                            "backoffLimitPerIndex": spec.backoff_limit_per_index}
    if spec.max_failed_indexes is not None:
        body["maxFailedIndexes"] = spec.max_failed_indexes
    command = search_command(deployment_file, result_dir_in_pod, spec)
    return _job(spec, spec.name, "search", body, _pod(spec, command, "search"))


def gather_job(deployment_file: str, result_dir_in_pod: str, spec: JobSpec) -> dict[str, Any]:
    """The gathering as one pod of the same template (same image, host kind, volumes): the plan from the folders
    the search job left. Run on another kind of host, the searches' identity would differ and they would measure
    again."""
    body = {"completions": 1, "parallelism": 1, "backoffLimit": spec.backoff_limit_per_index}
    return _job(spec, spec.gather_job_name, "gather", body,
                _pod(spec, gather_command(deployment_file, result_dir_in_pod, spec), "gather"))


def index_command(job: Mapping[str, Any], index: int) -> list[str]:
    """The command the pod of `index` runs, `$(VAR)` expanded from the container's env as the kubelet does (the
    completion index for JOB_COMPLETION_INDEX): the same search run locally, index by index."""
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: str(index) if e["name"] == INDEX_ENV else e.get("value", "") for e in container.get("env", [])}
    env.setdefault(INDEX_ENV, str(index))
    return [_ENV_REF.sub(lambda m: env.get(m.group(1), m.group(0)), a) for a in container["command"]]


def write_owner(result_dir: str | Path, deployment_name: str, entry: "ModelEntry") -> Path:
    """Record whose search `<result_dir>/models/<name>/search` holds (owner.py; written once the search ran: one that
    never ran leaves the folder's earlier owner, whose search is still what the folder holds)."""
    return owner.write_owner(search_dir(result_dir, entry.name).parent, deployment_name, entry)


@dataclass(frozen=True)
class SearchState:
    """One index of the fan-out: its model, its folder and whether a finished search is there (else why not), and
    whether that search is this deployment's (`foreign`: why it is not)."""

    index: int
    name: str
    folder: Path
    complete: bool
    why: str = ""
    foreign: str = ""


@dataclass(frozen=True)
class Gathered:
    """What the search job left in a result folder, index by index."""

    result_dir: Path
    states: tuple[SearchState, ...]

    @property
    def missing(self) -> list[SearchState]:
        return [s for s in self.states if not s.complete]

    @property
    def foreign(self) -> list[SearchState]:
        return [s for s in self.states if s.foreign]

    @property
    def complete(self) -> bool:
        return not self.missing

    def line(self) -> str:
        """One line: how many searches are missing, their indexes and models, and what each folder shows."""
        if self.complete:
            return f"all {len(self.states)} searches complete in {self.result_dir / 'models'}"
        missing = self.missing
        shown = ", ".join(f"{s.index} ({s.name}: {s.why})" for s in missing[:8])
        more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        return (f"{len(missing)} of {len(self.states)} searches missing in {self.result_dir / 'models'}: "
                f"indexes {shown}{more}")

    def check(self) -> None:
        """Raise the one-line DeploymentPlanError when a search is another deployment's (first: rerunning the
        missing indexes would not mend it) or missing."""
        if foreign := self.foreign:
            others = f" (and {len(foreign) - 1} more index(es) like it)" if len(foreign) > 1 else ""
            raise DeploymentPlanError(f"{foreign[0].foreign}{others}")
        if not self.complete:
            raise DeploymentPlanError(self.line() + "; rerun those indexes of the search job (or plan without the "
                                                    "fan-out to search them here)")


def searches_done(result_dir: str | Path, names: Sequence[str], deployment: "Deployment | None" = None) -> Gathered:
    """Which of the deployment's models (`names`, in the file's order: index i is names[i]) have a finished search
    in `result_dir` (search.store.search_complete: its checkpoint ran to the end and its outputs are written); with
    `deployment`, whether each finished one was searched for it and this definition of its model (its owner
    record, write_owner)."""
    states = []
    for i, name in enumerate(names):
        folder = search_dir(result_dir, name)
        done, why = search_complete(folder)
        foreign = owner.owner_problem(folder.parent, i, deployment.name, deployment.model(name)) \
            if done and deployment is not None else ""
        states.append(SearchState(i, name, folder, done, why, foreign))
    return Gathered(Path(result_dir), tuple(states))


__all__ = ["GATHER_FILE", "GPU_TOLERATION", "Gathered", "INDEX_ENV", "JOB_FILE", "JobSpec", "MAX_JOB_NAME",
           "OWNER_FILE", "SearchState", "check_jobs", "gather_command", "gather_job", "gpu_node_selector",
           "index_command", "job_folder", "manifest_text", "node_selector_of", "search_command", "search_dir",
           "search_job", "searches_done", "write_jobs", "write_owner"]
