"""What one fleet sizing is asked to do, typed: the runs, the demand, the prices, the device's memory, how the
open-loop capacity is searched, the confirmation, the nginx fleet check and the Kubernetes manifests.
`size_fleet` (step.py) takes it; `deployment-toolkit size` builds its flags from these fields (config.setting:
each default, flag and help written once, here) and the request from the parsed flags (`request_from_args`); a
composite step or a Python caller builds it directly.

Plain data, validated by the step in the command's order (bad input is one line before anything is measured), so
a request can be built, inspected and changed before it runs: no spec checks its numbers on construction (the
command's `from_args` refuses a number that is not finite, or out of the range the step checks, as it parses)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Protocol, SharedMemory, flag_of, setting
from .capacity import DEFAULT_RESOLUTION
from .k8s import AUTOSCALE, K8S_VERSION, TRITON_IMAGE, FleetSpec
from .plan import DEFAULT_GSD_M, EARTH_LAND_KM2, Demand
from .ratepoint import DISTRIBUTIONS, STABILITY

# the confirmation's defaults (ConfirmSpec, sizing.confirm, the plan's Checks): written here, once
DEFAULT_ROUNDS = 3  # confirm, derate on failure, confirm again: at most this often
DEFAULT_TRIALS = 3  # open-loop runs per round; a round passes when most of them pass
DEFAULT_BURST_FACTOR = 1.5  # the burst check at peak x this after a passing confirmation (0 skips it)
DEFAULT_BURST_SECONDS = 6.0

PROTOCOLS = tuple(p.value for p in Protocol)
# perf_analyzer's shared memory for the open-loop runs: CUDA is not offered (the client and the server share a host)
HOST_SHARED_MEMORY = (SharedMemory.NONE.value, SharedMemory.SYSTEM.value)


def _as_demand(name: str, default: Any = dataclasses.MISSING, help: str = "") -> Any:
    """A DemandSpec field with the flag, unit and range of sizing.plan.Demand's field `name` (written there once),
    so the command refuses at parse time what the step's Demand refuses, in the same words."""
    (f,) = [flag_of(x) for x in dataclasses.fields(Demand) if x.name == name]
    return setting(default, flag=f.name, help=help or f.help, unit=f.unit, low=f.low, high=f.high,
                   low_open=f.low_open)


@dataclass
class DemandSpec:
    """The load to serve and its SLO; headroom None derives it from the spread of the open-loop searches."""

    peak_rps: float = _as_demand("peak_rps", help="peak inferences/s to serve")  # requests x client batch size
    p99_ms: float = _as_demand("slo_ms", help="p99 latency SLO in ms")
    headroom: float | None = _as_demand(
        "headroom", None, help="spare capacity on top of the peak (default: from the spread of the repeated "
                               "open-loop capacity searches; 0.2 when only closed-loop points exist)")
    gpus_per_node: int = _as_demand("gpus_per_node", Demand.gpus_per_node, help="GPUs per node")
    include_unreliable: bool = setting(False, flag="--include-unreliable", action="store_true",
                                       help="use points that fail the Little's-law check (default: leave them out)")


@dataclass
class CostSpec:
    """$ per GPU-hour / host-hour, and a prices file (device name -> $/hour) that overrides them."""

    gpu_hour: float | None = setting(None, flag="--gpu-hour-cost", help="$ per GPU-hour for GPU runs")
    host_hour: float | None = setting(None, flag="--host-hour-cost", help="$ per host-hour for CPU-only runs")
    prices_file: str | Path | None = setting(
        None, flag="--prices", metavar="YAML",
        help="device name -> $/hour (overrides the flat costs for the devices it names)")


@dataclass
class CoverageSpec:
    """Geospatial coverage for models of the 'geospatial' family (an empty gsd_m: the default 10 m)."""

    gsd_m: tuple[float, ...] = setting((), flag="--gsd-m", type=float, nargs="+", metavar="M", show_default=False,
                                       help=f"ground sample distance(s) in metres (default: {DEFAULT_GSD_M[0]:g})")
    area_km2: float = setting(EARTH_LAND_KM2, flag="--area-km2", help="area to cover (default: Earth's land, "
                                                                     "%(default)g)")


@dataclass
class MemorySpec:
    """The memory of one GPU / one host in GB (10^9 bytes): plans that do not fit are left out."""

    gpu_gb: float | None = setting(
        None, flag="--gpu-memory-gb", metavar="GB",
        help="memory of one GPU (10^9 bytes): each GPU plan says how many instances of its config fit (fixed part + "
             "per instance, from the runs' instance counts); plans that do not fit are left out, and none fitting "
             "is refused")
    host_gb: float | None = setting(None, flag="--host-memory-gb", metavar="GB",
                                    help="the same for CPU-only runs: the memory of one host")


@dataclass
class CapacitySpec:
    """The open-loop capacity search per run: against `url`, or replayed from each run's openloop.csv without."""

    url: str | None = setting(
        None, flag="--capacity", metavar="URL",
        help="server serving every RUN's model: search each one's open-loop capacity (resumes openloop.csv)")
    protocol: str | None = setting(None, flag="--capacity-protocol", choices=PROTOCOLS,
                                   help="default: the run's protocol")
    shared_memory: str = setting(SharedMemory.NONE.value, flag="--capacity-shared-memory", choices=HOST_SHARED_MEMORY,
                                 help="system only when the server is on this host")
    trials: int = setting(3, flag="--capacity-trials",
                          help="repeated searches; their spread sets the default headroom (default %(default)s)")
    window_ms: int = setting(3000, flag="--capacity-window-ms", help="measurement window")
    resolution: float = setting(DEFAULT_RESOLUTION, flag="--capacity-resolution",
                                help="bisect until the bracket is this narrow, relative")
    max_points: int = setting(10, flag="--capacity-max-points", help="points per search")
    stability_percentage: float = setting(STABILITY, flag="--capacity-stability-percentage",
                                          help="windows must agree this closely for a rate to count as held")


@dataclass
class ConfirmSpec:
    """The plan confirmed in open loop at its per-replica rate against `url` (None: no confirmation)."""

    url: str | None = setting(
        None, flag="--confirm", metavar="URL",
        help="server to drive with perf_analyzer --request-intervals at the planned per-replica rate")
    run: str | None = setting(None, flag="--confirm-run", metavar="RUN",
                              help="which configuration to confirm (default: the recommended one)")
    protocol: str | None = setting(None, flag="--confirm-protocol", choices=PROTOCOLS,
                                   help="default: the run's protocol")
    model_name: str | None = setting(None, flag="--confirm-model-name", help="default: the run's model name")
    interval_ms: int = setting(5000, flag="--confirm-interval-ms", help="measurement window")
    stability_percentage: float = setting(STABILITY, flag="--confirm-stability-percentage",
                                          help="windows must agree this closely")
    shared_memory: str = setting(SharedMemory.NONE.value, flag="--confirm-shared-memory", choices=HOST_SHARED_MEMORY,
                                 help="system only when the server is on this host")
    input_data: str | None = setting(
        None, flag="--confirm-input-data", metavar="random|zero|PATH",
        help="perf_analyzer --input-data for the open-loop runs (default: the JSON of real samples the run was "
             "measured with, when it still exists, else random)")
    rounds: int = setting(DEFAULT_ROUNDS, flag="--confirm-rounds",
                          help="confirm, derate on failure and confirm again, at most this often")
    trials: int = setting(DEFAULT_TRIALS, flag="--confirm-trials",  # < 1 is refused by the step, as it always was
                          help="open-loop runs per round; a round passes when most of them pass, so one stall of the "
                               "host does not derate the plan")
    burst_factor: float = setting(DEFAULT_BURST_FACTOR, flag="--burst-factor",
                                  help="burst check at peak x this after a passing confirmation; 0 skips it")
    burst_seconds: float = setting(DEFAULT_BURST_SECONDS, flag="--burst-seconds", help="length of the burst")


@dataclass
class FleetCheckSpec:
    """`replicas` embedded servers behind nginx on this host (None: no fleet check)."""

    replicas: int | None = setting(
        None, flag="--confirm-fleet", metavar="N",
        help="start N embedded servers and nginx in front; compare the fleet with N x one replica")
    model_repository: str | Path | None = setting(
        None, flag="--fleet-model-repository", metavar="DIR",
        help="model repository the N servers load the configuration's model from")
    run: str | None = setting(
        None, flag="--fleet-run", metavar="RUN",
        help="which configuration to put behind the balancer (default: the confirmed / recommended one)")
    window_ms: int = setting(3000, flag="--fleet-window-ms", help="measurement window")
    max_points: int = setting(8, flag="--fleet-max-points", help="points per search")
    nginx: str | Path | None = setting(None, flag="--nginx", metavar="PATH",
                                       help="nginx binary (default: nginx on PATH or /usr/sbin)")


@dataclass
class K8sSpec:
    """Kubernetes manifests written to `out_dir` (None: none), for `run` (default: the recommended one); the
    defaults of the manifests themselves are k8s.FleetSpec's."""

    out_dir: str | Path | None = setting(None, flag="--emit-k8s", metavar="DIR",
                                         help="write Deployment/Service/HPA/InferenceService here")
    run: str | None = setting(None, flag="--k8s-run", metavar="RUN",
                              help="which configuration (default: the recommended one)")
    pvc: str = setting(FleetSpec.pvc, flag="--pvc", help="PVC holding the model repository")
    repository_subpath: str = setting(FleetSpec.repository_subpath, flag="--repository-subpath", show_default=False,
                                      help="model repository folder inside the PVC")
    name: str | None = setting(None, flag="--k8s-name", help="resource name (default: triton-<model>)")
    namespace: str | None = setting(None, flag="--namespace")
    max_replicas: int | None = setting(None, flag="--max-replicas",
                                       help="HPA maximum (default: 2 x the sized replicas)")
    memory: str = setting(FleetSpec.memory, flag="--memory", help="memory request and limit per pod")
    cpu: str | None = setting(None, flag="--cpu",
                              help="CPU request per pod (default: 4 on GPU, the measured cores on CPU)")
    image: str | None = setting(None, flag="--image", help=f"default: {TRITON_IMAGE}")  # None: FleetSpec's
    version: str = setting(K8S_VERSION, flag="--k8s-version", help="Kubernetes schema version to validate against")
    autoscale_on: str = setting(
        FleetSpec.autoscale, flag="--autoscale-on", choices=AUTOSCALE,
        help="what the HPA scales on: requests/s per pod, or Triton's queue-to-compute time ratio per pod (NVIDIA's "
             "practice; target: the ratio at the planned load). The rule for prometheus-adapter is written beside "
             "the manifests")


@dataclass
class SizeRequest:
    runs: tuple[str | Path, ...]  # run folders (or their online.csv / offline.csv)
    demand: DemandSpec
    costs: CostSpec = field(default_factory=CostSpec)
    coverage: CoverageSpec = field(default_factory=CoverageSpec)
    memory: MemorySpec = field(default_factory=MemorySpec)
    capacity: CapacitySpec = field(default_factory=CapacitySpec)
    confirm: ConfirmSpec = field(default_factory=ConfirmSpec)
    fleet: FleetCheckSpec = field(default_factory=FleetCheckSpec)
    k8s: K8sSpec = field(default_factory=K8sSpec)
    # arrivals of every open-loop run (capacity, confirmation, fleet)
    distribution: str = setting("poisson", flag="--distribution", choices=DISTRIBUTIONS,
                                help="arrival distribution of the open-loop runs")
    output: Path | None = None  # where sizing.md/csv/png go (default: the first run's folder)
    command: str | None = None  # the equivalent command, shown in sizing.md


__all__ = ["DEFAULT_BURST_FACTOR", "DEFAULT_BURST_SECONDS", "DEFAULT_ROUNDS", "DEFAULT_TRIALS", "HOST_SHARED_MEMORY",
           "PROTOCOLS", "CapacitySpec", "ConfirmSpec", "CostSpec", "CoverageSpec", "DemandSpec", "FleetCheckSpec",
           "K8sSpec", "MemorySpec", "SizeRequest"]
