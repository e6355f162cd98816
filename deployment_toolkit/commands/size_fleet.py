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
import sys
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.errors import UserInputError  # noqa: E402

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
from deployment_toolkit.committed import refuse_committed  # noqa: E402


def _build_parser():
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
    o.add_argument("--result-path", "--output", dest="output", default=None, metavar="DIR", help="where sizing.md/csv/png go (default: the first RUN)")
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
    v.add_argument("--confirm-rounds", type=int, default=3,
                   help="confirm, derate on failure and confirm again, at most this often (default %(default)s)")
    v.add_argument("--confirm-trials", type=int, default=3,
                   help="open-loop runs per round; a round passes when most of them pass, so one stall of the host "
                        "does not derate the plan (default %(default)s)")
    v.add_argument("--burst-factor", type=float, default=1.5,
                   help="burst check at peak x this after a passing confirmation; 0 skips it (default %(default)s)")
    v.add_argument("--burst-seconds", type=float, default=6.0, help="length of the burst (default %(default)s)")
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


def _pick(plans, which, sizing, what):
    if which is None:
        if sizing.recommendation is None:
            raise UserInputError(f"no configuration meets the SLO, nothing to {what}")
        return sizing.recommendation
    target = Path(which).resolve()
    for p in plans:
        if p.run.path.resolve() == target or p.run.name == which or str(p.run.path) == which:
            if p.rejected:
                raise UserInputError(f"nothing to {what}: {p.rejected}")
            return p
    raise UserInputError(f"{which!r} is not one of the given runs ({', '.join(p.run.name for p in plans)})")


def _reachable(url: str, protocol: str, model: str, what: str) -> None:
    """One line and exit 2 when nothing answers at `url` (before any perf_analyzer run)."""
    from deployment_toolkit.client import TritonClient

    with TritonClient(url, protocol) as client:
        reason = client.health_reason(model)
    if reason is not None:
        raise UserInputError(f"{what} {url}: {reason.splitlines()[0]} - start the server (or fix the URL) first")


def _options(args, protocol: str, shared_memory: str, window_ms: int, stability: float, input_data: str = "random"):
    from deployment_toolkit.perf.analyzer import PerfOptions
    from deployment_toolkit.sizing.ratepoint import open_loop_options

    return open_loop_options(PerfOptions(protocol=protocol, shared_memory=shared_memory, input_data=input_data),
                             args.distribution, window_ms, stability)


def _input_data(args, plan_or_run) -> str:
    run = getattr(plan_or_run, "run", plan_or_run)
    return confirm_input_data(args.confirm_input_data, run.meta.get("config") or {})


def main(argv=None) -> int:
    from deployment_toolkit.binaries import PerfAnalyzerNotFound
    from deployment_toolkit.perf.analyzer import PerfAnalyzerError

    try:
        return _main(argv)
    except (PerfAnalyzerError, PerfAnalyzerNotFound) as err:  # measured points are kept; a rerun resumes
        print(f"error: a perf_analyzer run failed: {err}", file=sys.stderr)
        return 2  # a server or tool problem, not a plan that failed its confirmation (README: exit codes)


def _main(argv=None) -> int:
    import shlex

    args = _build_parser().parse_args(argv)
    from deployment_toolkit.sizing import Demand, Prices, frontier, load_prices, load_runs, size
    from deployment_toolkit.sizing.openloop import Settings, derived_headroom, open_loop_capacity
    from deployment_toolkit.sizing.output import write_outputs

    if args.confirm_fleet is not None and not args.fleet_model_repository:
        raise UserInputError("--confirm-fleet needs --fleet-model-repository DIR (the repository the replicas serve)")
    if args.confirm_fleet is not None:
        from deployment_toolkit.sizing.fleet import find_nginx

        find_nginx(args.nginx)  # nginx missing: say so before measuring anything
    runs = [r for path in args.runs for r in load_runs(path)]
    probe = Demand(args.peak_rps, args.p99_ms, args.headroom if args.headroom is not None else 0.0,
                   args.gpus_per_node)  # validates the demand before anything is measured
    from deployment_toolkit.sizing.memory import MemoryBudget

    budget = MemoryBudget(args.gpu_memory_gb, args.host_memory_gb)
    budget.check(runs)
    # memory is read at the closed-loop point, so a config that does not fit is known before measuring anything
    closed_loop = (size(runs, probe, memory_budget=budget, include_unreliable=args.include_unreliable) if budget
                   else None)
    if closed_loop is not None and closed_loop.recommendation is None and closed_loop.rejected:
        raise UserInputError(closed_loop.reason)
    too_big = {p.run.name for p in closed_loop.plans if p.rejected} if closed_loop else set()

    capacities = {}
    for run in runs:
        if run.name in too_big:
            print(f"open-loop capacity of {run.name}: not measured, its memory does not fit the device")
            continue
        cfg = run.meta.get("config") or {}
        protocol = args.capacity_protocol or cfg.get("protocol") or "grpc"
        if args.capacity:
            _reachable(args.capacity, protocol, cfg.get("model_name") or run.model, "--capacity")
        settings = Settings(_options(args, protocol, args.capacity_shared_memory, args.capacity_window_ms,
                                     args.capacity_stability_percentage, _input_data(args, run)),
                            args.distribution, args.capacity_trials,
                            args.capacity_resolution, args.capacity_max_points)
        capacities[run.name] = open_loop_capacity(run, probe.slo_ms, settings, args.capacity, args.include_unreliable)
        c = capacities[run.name]
        if c is not None:
            got = "none (no rate met the SLO)" if c.capacity is None else f"{c.capacity:.1f} inf/s"
            print(f"open-loop capacity of {run.name}: {got} ({len(c.trials)} search(es), closed loop "
                  f"{c.closed_loop:.1f} inf/s)")
    measured = {k: v for k, v in capacities.items() if v is not None}
    headroom, headroom_note = (args.headroom, None) if args.headroom is not None else derived_headroom(measured)
    if args.headroom is not None:
        headroom_note = f"Headroom {args.headroom:.1%} (given with --headroom)."
    if not measured:
        print("warning: no open-loop capacity measured (--capacity URL): planning on closed-loop points, which "
              "overstate what a replica sustains under real traffic", file=sys.stderr)
    demand = Demand(args.peak_rps, args.p99_ms, headroom, args.gpus_per_node)
    prices = Prices(load_prices(args.prices) if args.prices else {}, args.gpu_hour_cost, args.host_hour_cost)
    sizing = size(runs, demand, prices, args.gsd_m or (), args.area_km2, args.include_unreliable, measured,
                  memory_budget=budget)
    if sizing.recommendation is None and sizing.rejected:
        raise UserInputError(sizing.reason)  # what meets the SLO does not fit the device
    out_dir = Path(args.output) if args.output else runs[0].path
    refuse_committed(out_dir, "--output" if args.output else "the first RUN, where sizing goes without --output")
    steps = frontier(runs, demand, prices, args.include_unreliable, memory_budget=budget)
    code = 0 if sizing.recommendation else cli.EXIT_NOT_MET  # no plan meets the SLO

    print(sizing.reason)
    for plan in sizing.ranked:
        s = plan.sustainable
        cost = f", ${plan.cost_h:,.2f}/h" if plan.cost_h is not None else ""
        closed = "" if plan.open_loop is None else f"; closed loop {s.throughput:.1f}"
        print(f"  #{plan.rank} {plan.run.name}: {plan.replica_capacity:.1f} inf/s per replica ({plan.basis}, "
              f"{s.point.level}{closed}) -> {plan.replicas} replicas, {plan.devices} {plan.run.unit}(s), "
              f"{plan.nodes} node(s){cost}")
        if plan.memory is not None and (budget or plan.memory.reading is not None):
            print(f"     memory: {plan.memory.brief()}")
    for text in sizing.rejected:
        print(f"  rejected: {text}")
    for text in sizing.unreachable:
        print(f"  {text}")
    for text in sizing.notes:
        print(f"  note: {text}")

    confirmation, sections = None, []
    if sizing.recommendation is None and (args.confirm or args.emit_k8s or args.confirm_fleet):
        print("no configuration meets the SLO: nothing to confirm or deploy", file=sys.stderr)
        args.confirm = args.emit_k8s = args.confirm_fleet = None
    from deployment_toolkit.sizing.confirm import confirm, server_instances, target_for

    def served(plan):
        cfg = plan.run.meta.get("config") or {}
        return (args.confirm_protocol or cfg.get("protocol") or "grpc", args.confirm_model_name or cfg.get("model_name"),
                plan.sustainable.point.batch)

    if args.confirm:
        plan = _pick(sizing.plans, args.confirm_run, sizing, "confirm")
        protocol, model, batch = served(plan)
        _reachable(args.confirm, protocol, model, "--confirm")
        have = server_instances(args.confirm, protocol, model)
        if have is not None and have != plan.run.instances:
            print(f"warning: {model} on {args.confirm} has {have} instance(s), the plan was measured with "
                  f"{plan.run.instances}", file=sys.stderr)
        options = _options(args, protocol, args.confirm_shared_memory, args.confirm_interval_ms,
                           args.confirm_stability_percentage, _input_data(args, plan))
        target = target_for(plan.run, args.confirm, options, args.distribution, batch, model_name=model)
        if args.confirm_trials < 1:
            raise UserInputError(f"--confirm-trials {args.confirm_trials}: at least 1 (3 lets one stall of the host pass)")
        result = confirm(plan, target, out_dir / "confirm", args.confirm_rounds, args.burst_factor or None,
                         args.burst_seconds, args.confirm_trials)
        confirmation = result.text()
        if result.derated:
            sizing.reason += (f" The open-loop confirmation derated {plan.run.name} to {plan.replicas} replicas of "
                              f"{plan.replica_capacity:.1f} inf/s (confirmed); the table and the manifests use that "
                              "(see the confirmation below; the ranking was not recomputed).")
        print(result.summary())
        if not result.passed:
            code = 1
    fleet_skipped = ""
    plan = _pick(sizing.plans, args.fleet_run or args.confirm_run, sizing, "put behind a balancer") \
        if args.confirm_fleet else None
    if plan is not None and not plan.reachable:
        # known only after the capacity searches: the report still gets written (with the confirmation), exit 2
        fleet_skipped = (f"{plan.run.name} meets no rate within the SLO: nothing to put behind a balancer; pass "
                         "--fleet-run with a configuration that does")
        sections.append((f"{args.confirm_fleet} replicas behind a load balancer", f"**Not run**: {fleet_skipped}."))
    if plan is not None and not fleet_skipped:
        from deployment_toolkit.sizing.fleet import check_fleet

        protocol, model, batch = served(plan)
        if protocol != "grpc":
            raise UserInputError("--confirm-fleet balances gRPC (nginx grpc_pass): use a gRPC run or --confirm-protocol grpc")

        options = _options(args, protocol, "none", args.fleet_window_ms, args.capacity_stability_percentage,
                           _input_data(args, plan))
        target = target_for(plan.run, "", options, args.distribution, batch, model_name=model)
        seed = (plan.replica_capacity or plan.sustainable.throughput) / batch
        fleet = check_fleet(args.confirm_fleet, args.fleet_model_repository, target, seed, demand.slo_ms,
                            out_dir / "fleet", args.capacity_resolution, args.fleet_max_points, nginx=args.nginx)
        sections.append((f"{args.confirm_fleet} replicas behind a load balancer", fleet.text()))
        print(fleet.text().replace("**", "").replace("  \n", "\n"))

    paths = write_outputs(sizing, runs, steps, out_dir, confirmation,
                          command=shlex.join(["python", "triton/size_fleet.py", *(argv or sys.argv[1:])]),
                          headroom_note=headroom_note, sections=sections)
    from deployment_toolkit.results.runinfo import run_metadata, write_run_json

    if all(out_dir.resolve() != Path(r.path).resolve() for r in runs):  # a run folder keeps its own run.json
        paths["run.json"] = write_run_json(out_dir, run_metadata({
            "kind": "fleet-sizing", "runs": [str(r.path) for r in runs], "peak_rps": args.peak_rps,
            "p99_ms": args.p99_ms, "headroom": headroom, "headroom_given": args.headroom is not None,
            "capacity": args.capacity, "distribution": args.distribution, "confirm": args.confirm,
            "confirm_fleet": args.confirm_fleet, "passed": code == 0}))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    if fleet_skipped:
        print(f"error: {fleet_skipped}", file=sys.stderr)
        code = 2

    if args.emit_k8s:
        from deployment_toolkit.sizing.k8s import FleetSpec, fleet_manifests, validate_all, write_manifests

        plan = _pick(sizing.plans, args.k8s_run, sizing, "deploy")
        spec = FleetSpec(name=args.k8s_name or f"triton-{plan.run.model}", pvc=args.pvc,
                         repository_subpath=args.repository_subpath, namespace=args.namespace,
                         max_replicas=args.max_replicas, memory=args.memory, cpu=args.cpu, autoscale=args.autoscale_on,
                         **({"image": args.image} if args.image else {}))
        manifests = fleet_manifests(plan, spec)
        for line in validate_all(manifests, args.k8s_version):
            print(f"  {line}")
        written = write_manifests(manifests, args.emit_k8s)
        print(f"wrote {len(written)} manifests to {args.emit_k8s} ({plan.replicas} replicas of {plan.run.label})")
        reason = manifests['prometheus-adapter-rules.yaml']['autoscaling']['reason']
        print(f"the HPA scales on {reason}")
        other = ("--autoscale-on queue-ratio scales on Triton's queue-to-compute time ratio instead (NVIDIA's practice)"
                 if args.autoscale_on == "requests" else "--autoscale-on requests scales on requests/s per pod instead")
        sizing_md = out_dir / "sizing.md"
        if sizing_md.exists():
            from deployment_toolkit.spec import atomic_write_text

            atomic_write_text(sizing_md, sizing_md.read_text().rstrip() + "\n\n## Autoscaling\n\n"
                              f"The HPA (`{Path(args.emit_k8s) / 'hpa.yaml'}`) scales on {reason}. Its metric comes "
                              f"from the prometheus-adapter rule in `{Path(args.emit_k8s) / 'prometheus-adapter-rules.yaml'}`."
                              f" {other}.\n")
        if plan.run.format.endswith("/python"):
            print("note: this run used the embedded server's Python backend; the repository on the PVC must be "
                  "configured for the NGC image's native backends (config_model_on_triton.py --model-format "
                  "onnx|ts-trace|trt) and its numbers will differ: measure that deployment before trusting the plan")
    return code


def confirm_input_data(flag: str | None, run_config: dict) -> str:
    """The confirmation sends what the plan's run measured with: its real-sample JSON when the run used one
    (and it is still there), unless --confirm-input-data says otherwise."""
    if flag:
        return flag
    for section in (run_config.get("sweeps") or {}).values():
        path = (section.get("perf_options") or {}).get("input_data")
        if path and path not in ("random", "zero") and Path(path).is_file():
            return str(path)
    return "random"


if __name__ == "__main__":
    cli.run(main)
