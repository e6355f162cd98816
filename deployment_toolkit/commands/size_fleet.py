"""Size a Triton fleet from measured perf runs: for a peak load and a p99 SLO, how many replicas, GPUs (or CPU
hosts) and nodes each measured configuration needs, what it costs, and which is cheapest.

Each RUN is a results folder with online.csv and/or offline.csv and run.json (written by
triton/run_{online,offline}_performance_test_on_triton.py). The closed-loop curve seeds an open-loop search
(--capacity URL: perf_analyzer --request-intervals, seeded Poisson arrivals) for the highest offered rate one replica
keeps up with at p99 <= --p99-ms; replicas = ceil(peak x (1 + headroom) / that open-loop capacity), the headroom
derived from the spread of repeated searches unless given. The points are kept in each run's openloop.csv (a
rerun resumes; without --capacity the stored points are used, else the closed-loop figure with a warning).
--confirm checks the plan in open loop and derates it if it fails; --confirm-fleet N puts N replicas behind
nginx. --peak-rps counts inferences/s (requests x client batch size). Each plan says the memory its replica used
(the sweeps record the server's memory gauges); --gpu-memory-gb (--host-memory-gb for CPU-only runs) says how many
instances fit the device and leaves out plans that do not fit. Writes sizing.md, sizing.csv and sizing.png into the
first run's folder or --output.
"""
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.results.run_folder import add_result_path_argument  # noqa: E402

EXAMPLE = """
    deployment-toolkit size results/resnet50-onnx-x1 results/resnet50-trt-x2 \\
        --peak-rps 5000 --p99-ms 50 --headroom 0.2 --gpus-per-node 8 --prices prices.yaml --gpu-memory-gb 80 \\
        --emit-k8s deploy/resnet50 --pvc model-repository
    # prices.yaml:  {"NVIDIA H100 80GB HBM3": 4.5, "A100": 2.2}   (a key may be part of the device name)
    # CPU-only runs: --host-hour-cost 0.40; geospatial models: --gsd-m 10 30 --area-km2 1.49e8
    # plan on open-loop capacity, confirm it (derating if needed), then 2 replicas behind nginx:
    deployment-toolkit size results/sizing-example-cpu/resnet18_i1 --peak-rps 400 --p99-ms 50 \\
        --capacity 127.0.0.1:8001 --confirm 127.0.0.1:8001 \\
        --confirm-fleet 2 --fleet-model-repository workspace/sizing-example/repo
"""


import argparse  # noqa: E402

if TYPE_CHECKING:
    from deployment_toolkit.sizing.request import SizeRequest
    from deployment_toolkit.sizing.step import SizeResult


def _build_parser():
    from deployment_toolkit.sizing.request import (DEFAULT_BURST_FACTOR, DEFAULT_BURST_SECONDS, DEFAULT_ROUNDS,
                                                   DEFAULT_TRIALS)

    p = cli.parser(__doc__, EXAMPLE)
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folder (or its online.csv / offline.csv)")
    d = p.add_argument_group("demand")
    d.add_argument("--peak-rps", type=float, required=True, help="peak inferences per second to serve")
    d.add_argument("--p99-ms", type=float, required=True, help="p99 latency SLO in ms")
    d.add_argument("--headroom", type=float, default=None,
                   help="spare capacity on top of the peak (default: from the spread of the repeated open-loop "
                        "capacity searches; 0.2 when only closed-loop points exist)")
    d.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default %(default)s)")
    d.add_argument("--include-unreliable", action="store_true",
                   help="use points that fail the Little's-law check (default: leave them out)")
    c = p.add_argument_group("cost")
    c.add_argument("--gpu-hour-cost", type=float, default=None, help="$ per GPU-hour for GPU runs")
    c.add_argument("--host-hour-cost", type=float, default=None, help="$ per host-hour for CPU-only runs")
    c.add_argument("--prices", default=None, metavar="YAML",
                   help="device name -> $/hour (overrides the flat costs for the devices it names)")
    g = p.add_argument_group("geospatial coverage (manifest family 'geospatial')")
    g.add_argument("--gsd-m", type=float, nargs="+", default=None, metavar="M",
                   help="ground sample distance(s) in metres (default: 10)")
    g.add_argument("--area-km2", type=float, default=1.49e8, help="area to cover (default: Earth's land, %(default)g)")
    m = p.add_argument_group("memory (the server's memory gauges, recorded by the sweeps beside every point)")
    m.add_argument("--gpu-memory-gb", type=float, default=None, metavar="GB",
                   help="memory of one GPU (10^9 bytes): each GPU plan says how many instances of its config fit "
                        "(fixed part + per instance, from the runs' instance counts); plans that do not fit are "
                        "left out, and none fitting is refused")
    m.add_argument("--host-memory-gb", type=float, default=None, metavar="GB",
                   help="the same for CPU-only runs: the memory of one host")
    o = p.add_argument_group("output")
    add_result_path_argument(o, "--output", dest="output", help="where sizing.md/csv/png go (default: the first RUN)")
    ol = p.add_argument_group("open-loop capacity (what the plan rests on)")
    ol.add_argument("--capacity", default=None, metavar="URL",
                    help="server serving every RUN's model: search each one's open-loop capacity (resumes openloop.csv)")
    ol.add_argument("--capacity-protocol", choices=("grpc", "http"), default=None, help="default: the run's protocol")
    ol.add_argument("--capacity-shared-memory", choices=("none", "system"), default="none",
                    help="system only when the server is on this host (default %(default)s)")
    ol.add_argument("--distribution", choices=("poisson", "constant"), default="poisson",
                    help="arrival distribution of the open-loop runs (default %(default)s)")
    ol.add_argument("--capacity-trials", type=int, default=3,
                    help="repeated searches; their spread sets the default headroom (default %(default)s)")
    ol.add_argument("--capacity-window-ms", type=int, default=3000, help="measurement window (default %(default)s)")
    ol.add_argument("--capacity-resolution", type=float, default=0.03,
                    help="bisect until the bracket is this narrow, relative (default %(default)s)")
    ol.add_argument("--capacity-max-points", type=int, default=10, help="points per search (default %(default)s)")
    ol.add_argument("--capacity-stability-percentage", type=float, default=30.0,
                    help="windows must agree this closely for a rate to count as held (default %(default)s)")
    v = p.add_argument_group("confirmation under open-loop load")
    v.add_argument("--confirm", default=None, metavar="URL",
                   help="server to drive with perf_analyzer --request-intervals at the planned per-replica rate")
    v.add_argument("--confirm-run", default=None, metavar="RUN",
                   help="which configuration to confirm (default: the recommended one)")
    v.add_argument("--confirm-protocol", choices=("grpc", "http"), default=None, help="default: the run's protocol")
    v.add_argument("--confirm-model-name", default=None, help="default: the run's model name")
    v.add_argument("--confirm-interval-ms", type=int, default=5000, help="measurement window (default %(default)s)")
    v.add_argument("--confirm-max-attempts", type=int, default=1, help=argparse.SUPPRESS)  # kept for old commands
    v.add_argument("--confirm-stability-percentage", type=float, default=30.0,
                   help="windows must agree this closely (default %(default)s)")
    v.add_argument("--confirm-shared-memory", choices=("none", "system"), default="none",
                   help="system only when the server is on this host (default %(default)s)")
    v.add_argument("--confirm-input-data", default=None, metavar="random|zero|PATH",
                   help="perf_analyzer --input-data for the open-loop runs (default: the JSON of real samples the run "
                        "was measured with, when it still exists, else random)")
    v.add_argument("--confirm-rounds", type=int, default=DEFAULT_ROUNDS,
                   help="confirm, derate on failure and confirm again, at most this often (default %(default)s)")
    v.add_argument("--confirm-trials", type=int, default=DEFAULT_TRIALS,
                   help="open-loop runs per round; a round passes when most of them pass, so one stall of the host "
                        "does not derate the plan (default %(default)s)")
    v.add_argument("--burst-factor", type=float, default=DEFAULT_BURST_FACTOR,
                   help="burst check at peak x this after a passing confirmation; 0 skips it (default %(default)s)")
    v.add_argument("--burst-seconds", type=float, default=DEFAULT_BURST_SECONDS,
                   help="length of the burst (default %(default)s)")
    f = p.add_argument_group("replicas behind a load balancer (nginx) on this host")
    f.add_argument("--confirm-fleet", type=int, default=None, metavar="N",
                   help="start N embedded servers and nginx in front; compare the fleet with N x one replica")
    f.add_argument("--fleet-model-repository", default=None, metavar="DIR",
                   help="model repository the N servers load the configuration's model from")
    f.add_argument("--fleet-run", default=None, metavar="RUN",
                   help="which configuration to put behind the balancer (default: the confirmed / recommended one)")
    f.add_argument("--fleet-window-ms", type=int, default=3000, help="measurement window (default %(default)s)")
    f.add_argument("--fleet-max-points", type=int, default=8, help="points per search (default %(default)s)")
    f.add_argument("--nginx", default=None, metavar="PATH", help="nginx binary (default: nginx on PATH or /usr/sbin)")
    k = p.add_argument_group("Kubernetes manifests")
    k.add_argument("--emit-k8s", default=None, metavar="DIR", help="write Deployment/Service/HPA/InferenceService here")
    k.add_argument("--k8s-run", default=None, metavar="RUN", help="which configuration (default: the recommended one)")
    k.add_argument("--pvc", default="triton-model-repository", help="PVC holding the model repository")
    k.add_argument("--repository-subpath", default="", help="model repository folder inside the PVC")
    k.add_argument("--k8s-name", default=None, help="resource name (default: triton-<model>)")
    k.add_argument("--namespace", default=None)
    k.add_argument("--max-replicas", type=int, default=None, help="HPA maximum (default: 2 x the sized replicas)")
    k.add_argument("--memory", default="8Gi", help="memory request and limit per pod (default %(default)s)")
    k.add_argument("--cpu", default=None, help="CPU request per pod (default: 4 on GPU, the measured cores on CPU)")
    k.add_argument("--image", default=None, help="default: nvcr.io/nvidia/tritonserver:24.10-py3")
    k.add_argument("--k8s-version", default="1.31", help="Kubernetes schema version to validate against")
    k.add_argument("--autoscale-on", choices=("requests", "queue-ratio"), default="requests",
                   help="what the HPA scales on: requests/s per pod, or Triton's queue-to-compute time ratio per pod "
                        "(NVIDIA's practice; target: the ratio at the planned load). The rule for prometheus-adapter "
                        "is written beside the manifests (default %(default)s)")
    return p


def request_from_args(args: argparse.Namespace, command: str | None = None) -> "SizeRequest":
    """The flags as a SizeRequest (the step validates them, in the order the command always did)."""
    from deployment_toolkit.sizing.request import CapacitySpec, ConfirmSpec, CostSpec, CoverageSpec, DemandSpec, \
        FleetCheckSpec, K8sSpec, MemorySpec, SizeRequest

    return SizeRequest(
        runs=tuple(args.runs),
        demand=DemandSpec(peak_rps=args.peak_rps, p99_ms=args.p99_ms, headroom=args.headroom,
                          gpus_per_node=args.gpus_per_node, include_unreliable=args.include_unreliable),
        costs=CostSpec(gpu_hour=args.gpu_hour_cost, host_hour=args.host_hour_cost, prices_file=args.prices),
        coverage=CoverageSpec(gsd_m=tuple(args.gsd_m or ()), area_km2=args.area_km2),
        memory=MemorySpec(gpu_gb=args.gpu_memory_gb, host_gb=args.host_memory_gb),
        capacity=CapacitySpec(
            url=args.capacity, protocol=args.capacity_protocol, shared_memory=args.capacity_shared_memory,
            trials=args.capacity_trials, window_ms=args.capacity_window_ms, resolution=args.capacity_resolution,
            max_points=args.capacity_max_points, stability_percentage=args.capacity_stability_percentage),
        confirm=ConfirmSpec(
            url=args.confirm, run=args.confirm_run, protocol=args.confirm_protocol, model_name=args.confirm_model_name,
            interval_ms=args.confirm_interval_ms, stability_percentage=args.confirm_stability_percentage,
            shared_memory=args.confirm_shared_memory, input_data=args.confirm_input_data, rounds=args.confirm_rounds,
            trials=args.confirm_trials, burst_factor=args.burst_factor, burst_seconds=args.burst_seconds),
        fleet=FleetCheckSpec(
            replicas=args.confirm_fleet, model_repository=args.fleet_model_repository, run=args.fleet_run,
            window_ms=args.fleet_window_ms, max_points=args.fleet_max_points, nginx=args.nginx),
        k8s=K8sSpec(
            out_dir=args.emit_k8s, run=args.k8s_run, pvc=args.pvc, repository_subpath=args.repository_subpath,
            name=args.k8s_name, namespace=args.namespace, max_replicas=args.max_replicas, memory=args.memory,
            cpu=args.cpu, image=args.image, version=args.k8s_version, autoscale_on=args.autoscale_on),
        distribution=args.distribution,
        output=Path(args.output) if args.output else None,
        command=command)


def exit_code(result: "SizeResult") -> int:
    """The command's exit code for a sizing (README: exit codes): 0 the plan is met (and confirmed where asked), 1
    no plan meets the SLO or the confirmation failed, 2 the fleet check asked for could not run."""
    if result.fleet_skipped:
        return cli.EXIT_USER_ERROR
    return 0 if result.met else cli.EXIT_NOT_MET


def main(argv=None) -> int:
    """Parse, build the request, size (each line shown through the library's logging as the step produces it),
    return the exit code its result maps to."""
    from deployment_toolkit.binaries import PerfAnalyzerNotFound
    from deployment_toolkit.perf.analyzer import PerfAnalyzerError

    args = _build_parser().parse_args(argv)
    request = request_from_args(args, shlex.join(["python", "triton/size_fleet.py", *(argv or sys.argv[1:])]))
    from deployment_toolkit.sizing.step import size_fleet

    try:
        return exit_code(size_fleet(request))
    except (PerfAnalyzerError, PerfAnalyzerNotFound) as err:  # measured points are kept; a rerun resumes
        print(f"error: a perf_analyzer run failed: {err}", file=sys.stderr)
        return cli.EXIT_USER_ERROR  # a server or tool problem, not a plan that failed its confirmation


def __getattr__(name: str):
    """confirm_input_data moved to sizing.step; still importable from here, without loading sizing for --help."""
    if name == "confirm_input_data":
        from deployment_toolkit.sizing.step import confirm_input_data

        return confirm_input_data
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    cli.run(main)
