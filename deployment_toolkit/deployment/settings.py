"""The planner's settings, each declared once with its flag (config.setting): the demand of a plan of one model
(`plan --peak-rps ... --p99-ms ...`, a deployment of one entry), the confirmation and its checks, the Kubernetes
manifests, and the packing solver's limits. `plan --deployment FILE` takes the demand from the file."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..config import check_numbers, setting
from ..config.fields import MAX_HEADROOM, MAX_HOUR_COST, MAX_LATENCY_MS, MAX_MEMORY_GB, MAX_RATE
from ..errors import UserInputError
from ..kube.fleet_spec import FleetSpec
from .mixed import LoadGenerator
from .packing import SolverSettings

DEFAULT_ROUNDS = 3  # confirm, derate on failure, confirm again: at most this often
DEFAULT_TRIALS = 3  # open-loop runs per round; a round passes when most of them pass
DEFAULT_BURST_FACTOR = 1.5  # the burst check at peak x this after a passing confirmation (0 skips it)
DEFAULT_BURST_SECONDS = 6.0
RESULTS_SIZE = "50Gi"  # the results claim's default: every search's folder, the artifacts, the plan
MIN_JOB_MEMORY = 2 ** 30  # a pod runs tritonserver, perf_analyzer and the model: under 1 GiB is a unit forgotten


@dataclass
class Demand:
    """The load a plan serves and its limits; every number checked where it is given (config.check_numbers)."""

    peak_rps: float = setting(flag="--peak-rps", unit="inferences/s", low=0, low_open=True, high=MAX_RATE,
                              help="peak inferences per second to serve")
    p99_ms: float = setting(flag="--p99-ms", unit="ms", low=0, low_open=True, high=MAX_LATENCY_MS)
    headroom: float | None = setting(None, flag="--headroom", low=0, high=MAX_HEADROOM,
                                     help="spare capacity on top of the peak (default: from the spread of the capacity "
                                          "searches)")
    max_replicas: int | None = setting(None, flag="--max-replicas", low=1, high=100_000,
                                       help="refuse a plan that needs more replicas than this (each group's "
                                            "autoscaler scales up to twice its planned replicas)")
    host_hour_cost: float | None = setting(None, flag="--host-hour-cost", unit="$/h", low=0, high=MAX_HOUR_COST,
                                           help="$ per host-hour (CPU hosts)")
    gpu_hour_cost: float | None = setting(None, flag="--gpu-hour-cost", unit="$/h", low=0, high=MAX_HOUR_COST,
                                          help="$ per GPU-hour")
    # the device's memory: how many instances fit, a plan that does not is refused
    gpu_memory_gb: float | None = setting(
        None, flag="--gpu-memory-gb", unit="GB", low=0, low_open=True, high=MAX_MEMORY_GB, metavar="GB",
        help="memory of one GPU (10^9 bytes): the plan says how many instances fit and is refused if its config does "
             "not (the server's memory gauges, scraped during the winner's sweep)")
    host_memory_gb: float | None = setting(None, flag="--host-memory-gb", unit="GB", low=0, low_open=True,
                                           high=MAX_MEMORY_GB, metavar="GB", help="the same for a CPU host")

    def __post_init__(self) -> None:
        check_numbers(self)


@dataclass
class Checks:
    """The plan's confirmation under open-loop traffic and its burst check."""

    confirm: bool = setting(True, flag="--no-confirm", action="store_false",
                            help="skip the open-loop confirmation and the burst check")
    rounds: int = setting(DEFAULT_ROUNDS, flag="--confirm-rounds", low=1, high=20,
                          help="confirm, derate on failure, confirm again")
    trials: int = setting(DEFAULT_TRIALS, flag="--confirm-trials", low=1, high=20, help="open-loop runs per round")
    burst_factor: float = setting(DEFAULT_BURST_FACTOR, flag="--burst-factor", low=0, high=1000,
                                  help="burst at peak x this; 0 skips it")
    burst_seconds: float = setting(DEFAULT_BURST_SECONDS, flag="--burst-seconds", unit="s", low=0, low_open=True,
                                   high=3600)
    window_ms: int = setting(3000, flag="--confirm-window-ms", unit="ms", low=100, high=600_000)
    load_generator: LoadGenerator = setting(
        LoadGenerator.AUTO, flag="--load-generator",
        help="what drives a group's mixed traffic: one perf_analyzer per model, one process for all of a group's "
             "models (gRPC), or auto: one process once a group has more models than half this host's cores (at "
             "least 2)")
    retests: int = setting(3, flag="--retests", low=0, high=20,
                           help="k: the capacity a plan uses must hold k of k re-tests at the rate itself (independent "
                                "arrivals, --confirm-window-ms windows), stepping down 10%% until it does; 0 skips it")

    def __post_init__(self) -> None:
        check_numbers(self)


@dataclass
class Deploy:
    """The Kubernetes manifests of the confirmed plan."""

    k8s: bool = setting(True, flag="--no-k8s", action="store_false", help="no manifests")
    pvc: str = setting(FleetSpec.pvc, flag="--pvc", help="PVC holding the model repository")
    image: str | None = setting(None, flag="--image", help="default: the NGC tritonserver image")
    namespace: str | None = setting(None, flag="--namespace")
    autoscale_on: str = setting(FleetSpec.autoscale, flag="--autoscale-on", choices=("requests", "queue-ratio"),
                                help="what the HPA scales on: requests/s per pod, or Triton's queue-to-compute time "
                                     "ratio per pod")


@dataclass(frozen=True)
class DeploymentSettings:
    """How the one planner checks and ships a plan: the confirmation (Checks), the manifests (Deploy), the solver."""

    checks: Checks = field(default_factory=Checks)
    deploy: Deploy = field(default_factory=Deploy)
    solver: SolverSettings = field(default_factory=SolverSettings)


@dataclass(frozen=True)
class FanOut:
    """Each model's search as its own task over identical hosts (deployment.fanout: a Kubernetes Indexed Job), and
    the gathering run that plans from the folders the searches left."""

    write_job: str | None = setting(None, flag="--write-job", metavar="DIR",
                                    help="write the search job (one index per model) and the gathering job here, "
                                         "validated against the Kubernetes schema, instead of searching")
    job_image: str | None = setting(None, flag="--job-image", metavar="IMAGE",
                                    help="with --write-job: an image with deployment-toolkit installed")
    node_selector: tuple[str, ...] = setting((), flag="--node-selector", action="append", metavar="KEY=VALUE",
                                             help="with --write-job: the target device's nodes (repeatable; default "
                                                  "on a GPU host: its nvidia.com/gpu.product)")
    force: bool = setting(False, flag="--force", action="store_true",
                          help="with --write-job: replace a job file there that was edited by hand")
    search_only: bool = setting(False, flag="--search-only", action="store_true",
                                help="run only the search of the model --index names, into its own folder, and stop")
    index: int | None = setting(None, flag="--index", low=0, high=1_000_000,
                                help="with --search-only: the model's position in the deployment file, from 0")
    gather: bool = setting(False, flag="--gather", action="store_true",
                           help="plan from the searches a search job left; refuse in one line when any is missing "
                                "instead of searching it here")
    job_cpu: int | None = setting(None, flag="--job-cpu", low=1, high=1024, metavar="CORES",
                                  help="with --write-job: whole cores per pod, requested and limited alike (default 4)")
    job_memory: str | None = setting(None, flag="--job-memory", metavar="QUANTITY",
                                     help="with --write-job: memory per pod, a Kubernetes quantity (default 16Gi)")
    job_gpus: int | None = setting(None, flag="--job-gpus", low=0, high=64, metavar="N",
                                   help="with --write-job: nvidia.com/gpu per pod, with the toleration of the GPU "
                                        "nodes' taint (default 1 under a nvidia.com/gpu.product node selector, else 0)")
    parallelism: int | None = setting(None, flag="--parallelism", low=1, high=100_000, metavar="PODS",
                                      help="with --write-job: searches at once (default: every model's)")
    results_claim: str | None = setting(None, flag="--results-claim", metavar="NAME",
                                        help="with --write-job: an existing ReadWriteMany PersistentVolumeClaim for "
                                             "the results (default: <name>-results, written beside the jobs)")
    results_size: str | None = setting(None, flag="--results-size", metavar="QUANTITY",
                                       help=f"with --write-job: the results claim's storage (default {RESULTS_SIZE})")
    storage_class: str | None = setting(None, flag="--storage-class", metavar="NAME",
                                        help="with --write-job: the claims' storage class (default: the cluster's)")

    def __post_init__(self) -> None:
        check_numbers(self)
        if self.write_job is not None and not self.write_job.strip():  # `if fan.write_job:` would take it as absent
            raise UserInputError("--write-job is empty (an unset shell variable?): give the folder to write the jobs "
                                 "to")
        if self.write_job is None and (given := self._job_flags_given()):
            raise UserInputError(f"{', '.join(given)}: only the jobs --write-job DIR writes take it; add --write-job "
                                 "or drop it")
        if self.write_job and self.gather:
            raise UserInputError("--write-job writes the jobs and --gather runs the gathering: give one of them (the "
                                 "gathering job --write-job writes runs --gather in its pod)")
        if self.search_only != (self.index is not None):
            raise UserInputError("--search-only and --index go together: --search-only --index I runs the search of "
                                 "the deployment's I-th model (from 0)")
        if self.write_job and not self.job_image:
            raise UserInputError("--write-job: name the image the pods run with --job-image (one with "
                                 "deployment-toolkit installed)")
        self._check_job_flags()
        if self.search_only and (self.gather or self.write_job):
            raise UserInputError("--search-only runs one index of a search job: drop --gather / --write-job")

    def _job_flags_given(self) -> list[str]:
        """The flags only the jobs --write-job writes take, as given."""
        values = {"--job-image": self.job_image, "--node-selector": self.node_selector or None,
                  "--force": self.force or None, "--job-cpu": self.job_cpu, "--job-memory": self.job_memory,
                  "--job-gpus": self.job_gpus, "--parallelism": self.parallelism,
                  "--results-claim": self.results_claim, "--results-size": self.results_size,
                  "--storage-class": self.storage_class}
        return [flag for flag, value in values.items() if value is not None]

    def _check_job_flags(self) -> None:
        """The image, node selectors, quantities and names as the API server would take them, said now (one line
        naming the flag) rather than at `kubectl apply` after the jobs were written."""
        from ..kube.manifests import image_problem, quantity_value, subdomain_problem
        from .fanout import node_selector_of

        if self.job_image is not None and (problem := image_problem(self.job_image)):
            raise UserInputError(f"--job-image {self.job_image!r}: {problem}: give [REGISTRY[:PORT]/]PATH[:TAG]"
                                 "[@sha256:DIGEST], e.g. registry.example/deployment-toolkit:1.0")
        node_selector_of(self.node_selector)
        for flag, value, least in (("--job-memory", self.job_memory, MIN_JOB_MEMORY),
                                   ("--results-size", self.results_size, 2 ** 30)):
            if value is None:
                continue
            amount = quantity_value(value)
            if amount is None:
                raise UserInputError(f"{flag} {value!r} is not a Kubernetes quantity: give a number and a unit, "
                                     "e.g. 16Gi or 500M (no space, no 'B')")
            if amount < least:
                raise UserInputError(f"{flag} {value!r} is {amount / 2 ** 20:,.0f} MiB: give at least "
                                     f"{least // 2 ** 30}Gi (a number without a unit is bytes)")
        for flag, value in (("--results-claim", self.results_claim), ("--storage-class", self.storage_class)):
            if value is not None and (problem := subdomain_problem(value)):
                raise UserInputError(f"{flag} {value!r}: {problem}: give the name as `kubectl get` shows it")


def check_demand(demand: Demand) -> None:
    """Bad demand said in one line before anything is converted or measured (its numbers: Demand itself)."""
    from ..repository.config import host_has_gpu

    if demand.gpu_memory_gb is not None and demand.host_memory_gb is None and not host_has_gpu():
        raise UserInputError("--gpu-memory-gb: this host has no GPU, so the plan is for CPU hosts: pass "
                             "--host-memory-gb (the memory of one host) instead")


__all__ = ["Checks", "Demand", "Deploy", "DeploymentSettings", "FanOut", "check_demand"]
