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
from typing import TYPE_CHECKING, Any

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


class _Under:
    """An argument group whose flags' dests are the request's path to the field ("confirm.url", "fleet.run"):
    several specs have a field of the same name (url, run, trials, window_ms, ...), and one namespace holds them."""

    def __init__(self, group: argparse._ArgumentGroup, part: str) -> None:
        self.group, self.part = group, part

    def add_argument(self, *names: str, dest: str, **kwargs: Any) -> argparse.Action:
        return self.group.add_argument(*names, dest=f"{self.part}.{dest}", **kwargs)


def _part(args: argparse.Namespace, part: str) -> argparse.Namespace:
    """The parsed flags of one request field, named as its spec's fields (what config.from_args reads)."""
    prefix = f"{part}."
    return argparse.Namespace(**{k[len(prefix):]: v for k, v in vars(args).items() if k.startswith(prefix)})


def _specs() -> dict[str, type]:
    """SizeRequest's field -> the spec whose fields carry its flags, in the order the flags were always listed."""
    from deployment_toolkit.sizing.request import CapacitySpec, ConfirmSpec, CostSpec, CoverageSpec, DemandSpec, \
        FleetCheckSpec, K8sSpec, MemorySpec

    return {"demand": DemandSpec, "costs": CostSpec, "coverage": CoverageSpec, "memory": MemorySpec,
            "capacity": CapacitySpec, "confirm": ConfirmSpec, "fleet": FleetCheckSpec, "k8s": K8sSpec}


def _build_parser() -> argparse.ArgumentParser:
    """The flags, built from the request's fields (sizing.request: each default, choice and help written once)."""
    from deployment_toolkit.config import add_arguments
    from deployment_toolkit.sizing.request import CapacitySpec, CoverageSpec, SizeRequest

    p = cli.parser(__doc__, EXAMPLE)
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folder (or its online.csv / offline.csv)")
    specs = _specs()
    add_arguments(_Under(p.add_argument_group("demand"), "demand"), specs["demand"])
    add_arguments(_Under(p.add_argument_group("cost"), "costs"), specs["costs"])
    g = _Under(p.add_argument_group("geospatial coverage (manifest family 'geospatial')"), "coverage")
    add_arguments(g, CoverageSpec)
    m = p.add_argument_group("memory (the server's memory gauges, recorded by the sweeps beside every point)")
    add_arguments(_Under(m, "memory"), specs["memory"])
    o = p.add_argument_group("output")
    add_result_path_argument(o, "--output", dest="output", help="where sizing.md/csv/png go (default: the first RUN)")
    ol = p.add_argument_group("open-loop capacity (what the plan rests on)")
    served = ("url", "protocol", "shared_memory")  # --distribution follows these in --help, as it always did
    add_arguments(_Under(ol, "capacity"), CapacitySpec, only=served)
    add_arguments(ol, SizeRequest, only=("distribution",))
    add_arguments(_Under(ol, "capacity"), CapacitySpec, skip=served)
    v = p.add_argument_group("confirmation under open-loop load")
    add_arguments(_Under(v, "confirm"), specs["confirm"])
    v.add_argument("--confirm-max-attempts", type=int, help=argparse.SUPPRESS)  # accepted and ignored (old commands)
    f = p.add_argument_group("replicas behind a load balancer (nginx) on this host")
    add_arguments(_Under(f, "fleet"), specs["fleet"])
    add_arguments(_Under(p.add_argument_group("Kubernetes manifests"), "k8s"), specs["k8s"])
    return p


def request_from_args(args: argparse.Namespace, command: str | None = None) -> "SizeRequest":
    """The flags as a SizeRequest: each spec from its flags (a number that is not finite, or out of the range the
    step checks, is refused here); the step validates the rest, in the order the command always did."""
    from deployment_toolkit.config import from_args
    from deployment_toolkit.sizing.request import SizeRequest

    parts = {name: from_args(spec, _part(args, name)) for name, spec in _specs().items()}
    return from_args(SizeRequest, args, runs=tuple(args.runs), output=Path(args.output) if args.output else None,
                     command=command, **parts)


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
