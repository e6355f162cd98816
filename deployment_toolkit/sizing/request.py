"""What one fleet sizing is asked to do, typed: the runs, the demand, the prices, the device's memory, how the
open-loop capacity is searched, the confirmation, the nginx fleet check and the Kubernetes manifests.
`size_fleet` (step.py) takes it; `deployment-toolkit size` builds it from its flags (`request_from_args`), and a
composite step or a Python caller builds it directly.

Plain data, validated by the step in the command's order (bad input is one line before anything is measured), so
a request can be built, inspected and changed before it runs."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .plan import EARTH_LAND_KM2

# the confirmation's defaults (ConfirmSpec, sizing.confirm, the plan's Checks): written here, once
DEFAULT_ROUNDS = 3  # confirm, derate on failure, confirm again: at most this often
DEFAULT_TRIALS = 3  # open-loop runs per round; a round passes when most of them pass
DEFAULT_BURST_FACTOR = 1.5  # the burst check at peak x this after a passing confirmation (0 skips it)
DEFAULT_BURST_SECONDS = 6.0


@dataclass
class DemandSpec:
    """The load to serve and its SLO; headroom None derives it from the spread of the open-loop searches."""

    peak_rps: float  # peak inferences per second (requests x client batch size)
    p99_ms: float
    headroom: float | None = None
    gpus_per_node: int = 8
    include_unreliable: bool = False  # use points that fail the Little's-law check


@dataclass
class CostSpec:
    """$ per GPU-hour / host-hour, and a prices file (device name -> $/hour) that overrides them."""

    gpu_hour: float | None = None
    host_hour: float | None = None
    prices_file: str | Path | None = None


@dataclass
class CoverageSpec:
    """Geospatial coverage for models of the 'geospatial' family (an empty gsd_m: the default 10 m)."""

    gsd_m: tuple[float, ...] = ()
    area_km2: float = EARTH_LAND_KM2


@dataclass
class MemorySpec:
    """The memory of one GPU / one host in GB (10^9 bytes): plans that do not fit are left out."""

    gpu_gb: float | None = None
    host_gb: float | None = None


@dataclass
class CapacitySpec:
    """The open-loop capacity search per run: against `url`, or replayed from each run's openloop.csv without."""

    url: str | None = None
    protocol: str | None = None  # default: the run's protocol
    shared_memory: str = "none"
    trials: int = 3
    window_ms: int = 3000
    resolution: float = 0.03
    max_points: int = 10
    stability_percentage: float = 30.0


@dataclass
class ConfirmSpec:
    """The plan confirmed in open loop at its per-replica rate against `url` (None: no confirmation)."""

    url: str | None = None
    run: str | None = None  # which configuration (default: the recommended one)
    protocol: str | None = None
    model_name: str | None = None
    interval_ms: int = 5000
    stability_percentage: float = 30.0
    shared_memory: str = "none"
    input_data: str | None = None  # random|zero|PATH (default: the run's own samples when they still exist)
    rounds: int = DEFAULT_ROUNDS
    trials: int = DEFAULT_TRIALS
    burst_factor: float = DEFAULT_BURST_FACTOR  # 0 skips the burst check
    burst_seconds: float = DEFAULT_BURST_SECONDS


@dataclass
class FleetCheckSpec:
    """`replicas` embedded servers behind nginx on this host (None: no fleet check)."""

    replicas: int | None = None
    model_repository: str | Path | None = None
    run: str | None = None  # default: the confirmed / recommended one
    window_ms: int = 3000
    max_points: int = 8
    nginx: str | Path | None = None


@dataclass
class K8sSpec:
    """Kubernetes manifests written to `out_dir` (None: none), for `run` (default: the recommended one)."""

    out_dir: str | Path | None = None
    run: str | None = None
    pvc: str = "triton-model-repository"
    repository_subpath: str = ""
    name: str | None = None  # default: triton-<model>
    namespace: str | None = None
    max_replicas: int | None = None
    memory: str = "8Gi"
    cpu: str | None = None
    image: str | None = None  # default: k8s.FleetSpec's NGC image
    version: str = "1.31"
    autoscale_on: str = "requests"  # or "queue-ratio"


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
    distribution: str = "poisson"  # arrivals of every open-loop run (capacity, confirmation, fleet)
    output: Path | None = None  # where sizing.md/csv/png go (default: the first run's folder)
    command: str | None = None  # the equivalent command, shown in sizing.md


__all__ = ["DEFAULT_BURST_FACTOR", "DEFAULT_BURST_SECONDS", "DEFAULT_ROUNDS", "DEFAULT_TRIALS", "CapacitySpec",
           "ConfirmSpec", "CostSpec", "CoverageSpec", "DemandSpec", "FleetCheckSpec", "K8sSpec", "MemorySpec",
           "SizeRequest"]
