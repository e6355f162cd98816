#!/usr/bin/env python3
"""Size a Triton fleet from measured perf runs: for a peak load and a p99 SLO, how many replicas, GPUs (or CPU
hosts) and nodes each measured configuration needs, what it costs, and which is cheapest.

Each RUN is a results folder with online.csv and/or offline.csv and run.json (written by
triton/run_{online,offline}_performance_test_on_triton.py). One replica sustains the best measured
Inferences/second among stable points with p99 <= --p99-ms (never extrapolated); replicas =
ceil(peak x (1 + headroom) / that). --peak-rps counts inferences/s (requests x client batch size).
Writes sizing.md, sizing.csv and sizing.png (cost frontier) into the first run's folder or --output.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import deployment_toolkit  # noqa: E402,F401  (first: hides the triton/ folder from torch)
from deployment_toolkit import cli  # noqa: E402

EXAMPLE = """
    python triton/size_fleet.py results/resnet50-onnx-x1 results/resnet50-trt-x2 \\
        --peak-rps 5000 --p99-ms 50 --headroom 0.2 --gpus-per-node 8 --prices prices.yaml \\
        --emit-k8s deploy/resnet50 --pvc model-repository
    # prices.yaml:  {"NVIDIA H100 80GB HBM3": 4.5, "A100": 2.2}   (a key may be part of the device name)
    # CPU-only runs: --host-hour-cost 0.40; geospatial models: --gsd-m 10 30 --area-km2 1.49e8
    # check the plan under real open-loop load:  --confirm 127.0.0.1:8001
"""


def _build_parser():
    p = cli.parser(__doc__, EXAMPLE)
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folder (or its online.csv / offline.csv)")
    d = p.add_argument_group("demand")
    d.add_argument("--peak-rps", type=float, required=True, help="peak inferences per second to serve")
    d.add_argument("--p99-ms", type=float, required=True, help="p99 latency SLO in ms")
    d.add_argument("--headroom", type=float, default=0.2, help="spare capacity on top of the peak (default %(default)s)")
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
    o = p.add_argument_group("output")
    o.add_argument("--output", default=None, metavar="DIR", help="where sizing.md/csv/png go (default: the first RUN)")
    v = p.add_argument_group("confirmation under open-loop load")
    v.add_argument("--confirm", default=None, metavar="URL",
                   help="server to drive with perf_analyzer --request-rate-range at the planned per-replica rate")
    v.add_argument("--confirm-run", default=None, metavar="RUN",
                   help="which configuration to confirm (default: the recommended one)")
    v.add_argument("--confirm-protocol", choices=("grpc", "http"), default=None, help="default: the run's protocol")
    v.add_argument("--confirm-model-name", default=None, help="default: the run's model name")
    v.add_argument("--confirm-interval-ms", type=int, default=5000, help="measurement window (default %(default)s)")
    v.add_argument("--confirm-max-attempts", type=int, default=3, help="attempts when unstable (default %(default)s)")
    v.add_argument("--confirm-stability-percentage", type=float, default=10.0,
                   help="perf_analyzer --stability-percentage (default %(default)s)")
    v.add_argument("--confirm-shared-memory", choices=("none", "system"), default="none",
                   help="system only when the server is on this host (default %(default)s)")
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
    return p


def _pick(plans, which, sizing, what):
    if which is None:
        if sizing.recommendation is None:
            raise ValueError(f"no configuration meets the SLO, nothing to {what}")
        return sizing.recommendation
    target = Path(which).resolve()
    for p in plans:
        if p.run.path.resolve() == target or p.run.name == which or str(p.run.path) == which:
            return p
    raise ValueError(f"{which!r} is not one of the given runs ({', '.join(p.run.name for p in plans)})")


def main(argv=None) -> int:
    import shlex

    args = _build_parser().parse_args(argv)
    from deployment_toolkit.sizing import Demand, Prices, frontier, load_prices, load_runs, size
    from deployment_toolkit.sizing.output import write_outputs

    runs = [r for path in args.runs for r in load_runs(path)]
    demand = Demand(args.peak_rps, args.p99_ms, args.headroom, args.gpus_per_node)
    prices = Prices(load_prices(args.prices) if args.prices else {}, args.gpu_hour_cost, args.host_hour_cost)
    sizing = size(runs, demand, prices, args.gsd_m or (), args.area_km2, args.include_unreliable)
    out_dir = Path(args.output) if args.output else runs[0].path
    steps = frontier(runs, demand, prices, args.include_unreliable)
    code = 0 if sizing.recommendation else 3

    print(sizing.reason)
    for plan in sizing.ranked:
        s = plan.sustainable
        cost = f", ${plan.cost_h:,.2f}/h" if plan.cost_h is not None else ""
        print(f"  #{plan.rank} {plan.run.name}: {s.throughput:.1f} inf/s per replica at {s.point.level} "
              f"(p99 {s.point.p99:.3f} ms) -> {plan.replicas} replicas, {plan.devices} {plan.run.unit}(s), "
              f"{plan.nodes} node(s){cost}")
    for text in sizing.unreachable:
        print(f"  {text}")
    for text in sizing.notes:
        print(f"  note: {text}")

    confirmation = None
    if sizing.recommendation is None and (args.confirm or args.emit_k8s):
        print("no configuration meets the SLO: nothing to confirm or deploy", file=sys.stderr)
        args.confirm = args.emit_k8s = None
    if args.confirm:
        from deployment_toolkit.perf.analyzer import PerfOptions
        from deployment_toolkit.sizing.confirm import confirm, server_instances

        plan = _pick(sizing.plans, args.confirm_run, sizing, "confirm")
        cfg = plan.run.meta.get("config") or {}
        protocol = args.confirm_protocol or cfg.get("protocol") or "grpc"
        model = args.confirm_model_name or cfg.get("model_name")
        have = server_instances(args.confirm, protocol, model)
        if have is not None and have != plan.run.instances:
            print(f"warning: {model} on {args.confirm} has {have} instance(s), the plan was measured with "
                  f"{plan.run.instances}", file=sys.stderr)
        options = PerfOptions(protocol=protocol, shared_memory=args.confirm_shared_memory,
                              measurement_interval_ms=args.confirm_interval_ms, max_attempts=args.confirm_max_attempts,
                              stability_percentage=args.confirm_stability_percentage)
        from deployment_toolkit.perf.analyzer import PerfAnalyzerError, PerfAnalyzerNotFound

        try:
            result = confirm(plan, args.confirm, out_dir / "confirm", options, model_name=model)
        except (PerfAnalyzerError, PerfAnalyzerNotFound) as err:
            print(f"error: the confirmation run failed: {err}", file=sys.stderr)
            return 2  # a server or tool problem, not a plan that failed its confirmation (README: exit codes)
        confirmation = result.text()
        print(("PASS" if result.passed else "FAIL") + f": p99 {result.p99:.3f} ms at {result.achieved:.1f} inf/s "
              f"(planned {result.target_inferences:.1f} inf/s per replica, SLO {demand.slo_ms:g} ms)")
        if not result.passed:
            code = 1

    paths = write_outputs(sizing, runs, steps, out_dir, confirmation,
                          command=shlex.join(["python", "triton/size_fleet.py", *(argv or sys.argv[1:])]))
    from deployment_toolkit.runinfo import run_metadata, write_run_json

    if all(out_dir.resolve() != Path(r.path).resolve() for r in runs):  # a run folder keeps its own run.json
        paths["run.json"] = write_run_json(out_dir, run_metadata({
            "kind": "fleet-sizing", "runs": [str(r.path) for r in runs], "peak_rps": args.peak_rps,
            "p99_ms": args.p99_ms, "headroom": args.headroom, "confirm": args.confirm, "passed": code == 0}))
    print("wrote " + ", ".join(str(p) for p in paths.values()))

    if args.emit_k8s:
        from deployment_toolkit.sizing.k8s import FleetSpec, fleet_manifests, validate_all, write_manifests

        plan = _pick(sizing.plans, args.k8s_run, sizing, "deploy")
        spec = FleetSpec(name=args.k8s_name or f"triton-{plan.run.model}", pvc=args.pvc,
                         repository_subpath=args.repository_subpath, namespace=args.namespace,
                         max_replicas=args.max_replicas, memory=args.memory, cpu=args.cpu,
                         **({"image": args.image} if args.image else {}))
        manifests = fleet_manifests(plan, spec)
        for line in validate_all(manifests, args.k8s_version):
            print(f"  {line}")
        written = write_manifests(manifests, args.emit_k8s)
        print(f"wrote {len(written)} manifests to {args.emit_k8s} ({plan.replicas} replicas of {plan.run.label})")
        if plan.run.format.endswith("/python"):
            print("note: this run used the embedded server's Python backend; the repository on the PVC must be "
                  "configured for the NGC image's native backends (config_model_on_triton.py --model-format "
                  "onnx|ts-trace|trt) and its numbers will differ: measure that deployment before trusting the plan")
    return code


if __name__ == "__main__":
    cli.run(main)
