"""From a model to a confirmed fleet plan in one command: convert and verify it, search its serving config ranked by
the open-loop capacity it sustains under the SLO, sweep the winner, plan the fleet (replicas, devices, cost), confirm
the plan under open-loop traffic (and a burst), write the Kubernetes manifests and one report (plan.md, plan.html).
Any model reference the toolkit takes (zoo name, timm:<arch>, model.py + checkpoint, ONNX/TorchScript, a manifest)
and the user's data (--data-dir / --dataloader). Rerunning the same command resumes the measured points.
Exit status: 0 the plan is confirmed (derated first where the confirmation asked for it), 1 no round of the
confirmation held (the last derated plan is written), 2 no plan (no config meets the SLO, the peak needs more than
--max-replicas, bad input)."""
import argparse
import shlex
import sys
import time
from pathlib import Path

from deployment_toolkit import cli
from deployment_toolkit.search.request import PLAN_MAX_MINUTES

EXAMPLE = """
    deployment-toolkit plan --input-path examples/my_model/model.py --input-type pyt \\
        --checkpoint workspace/my_model/checkpoint.safetensors --dataloader examples/my_model/dataloader.py \\
        --data-dir workspace/my_model/data --peak-rps 500 --p99-ms 50 --host-hour-cost 0.40
    deployment-toolkit plan --model resnet18 --preset small --peak-rps 2000 --p99-ms 100 --max-minutes 6 \\
        --host-hour-cost 0.40 --max-replicas 20 --result-path results/local/plan-resnet18
"""


def build_parser():
    from deployment_toolkit.search.cli import build_parser as search_parser

    p = search_parser()
    p.description = __doc__
    p.epilog = cli.parser("", EXAMPLE).epilog
    d = p.add_argument_group("demand and cost")
    d.add_argument("--peak-rps", type=float, required=True, help="peak inferences per second to serve")
    d.add_argument("--headroom", type=float, default=None,
                   help="spare capacity on top of the peak (default: from the spread of the capacity searches)")
    d.add_argument("--max-replicas", type=int, default=None, help="refuse a plan that needs more replicas than this")
    d.add_argument("--host-hour-cost", type=float, default=None, help="$ per host-hour (CPU hosts)")
    d.add_argument("--gpu-hour-cost", type=float, default=None, help="$ per GPU-hour")
    d.add_argument("--gpus-per-node", type=int, default=8)
    d.add_argument("--gpu-memory-gb", type=float, default=None, metavar="GB",
                   help="memory of one GPU (10^9 bytes): the plan says how many instances fit and is refused if its "
                        "config does not (the server's memory gauges, scraped during the winner's sweep)")
    d.add_argument("--host-memory-gb", type=float, default=None, metavar="GB", help="the same for a CPU host")
    c = p.add_argument_group("confirmation")
    c.add_argument("--no-confirm", action="store_true", help="skip the open-loop confirmation and the burst check")
    c.add_argument("--confirm-rounds", type=int, default=3, help="confirm, derate on failure, confirm again (default 3)")
    c.add_argument("--confirm-trials", type=int, default=3, help="open-loop runs per round (default 3)")
    c.add_argument("--confirm-window-ms", type=int, default=3000)
    c.add_argument("--burst-factor", type=float, default=1.5, help="burst at peak x this; 0 skips it (default 1.5)")
    c.add_argument("--burst-seconds", type=float, default=6.0)
    k = p.add_argument_group("Kubernetes")
    k.add_argument("--no-k8s", action="store_true", help="no manifests")
    k.add_argument("--pvc", default="triton-model-repository")
    k.add_argument("--image", default=None)
    k.add_argument("--namespace", default=None)
    k.add_argument("--autoscale-on", choices=("requests", "queue-ratio"), default="requests")
    p.set_defaults(max_minutes=PLAN_MAX_MINUTES, model_repository=None)
    for action in p._actions:  # a plan ranks by open-loop capacity; make_plan refuses the other objectives
        if action.dest == "objective":
            action.help = argparse.SUPPRESS
    return p


def main(argv: list[str] | None = None) -> int:
    from deployment_toolkit.committed import refuse_committed
    from deployment_toolkit.planner import Checks, Demand, Deploy, check_demand, make_plan
    from deployment_toolkit.search.cli import request_from_args

    args = build_parser().parse_args(argv)
    label = args.model or Path(getattr(args, "input_path", None) or "model").stem
    out_dir = Path(args.result_path or Path("results") / "local" /
                   f"plan-{label}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    refuse_committed(out_dir, "--result-path")
    demand = Demand(args.peak_rps, args.budget_ms, args.headroom, args.max_replicas, args.gpus_per_node,
                    args.host_hour_cost, args.gpu_hour_cost, args.gpu_memory_gb, args.host_memory_gb)
    checks = Checks(not args.no_confirm, args.confirm_rounds, args.confirm_trials, args.burst_factor,
                    args.burst_seconds, args.confirm_window_ms)
    deploy = Deploy(not args.no_k8s, args.pvc, args.image, args.namespace, args.autoscale_on)
    command = shlex.join(["deployment-toolkit", "plan", *(argv if argv is not None else sys.argv[1:])])
    check_demand(demand)  # the demand's bad input first, then the search's flags
    result = make_plan(request_from_args(args, command), demand, checks, deploy, out_dir, command)
    plan = result.plan
    print(f"\nplan: {plan.replicas} replica(s) of {result.search.outcome.decision.winner.candidate.slug} "
          f"({plan.replica_capacity:,.1f} inf/s each), {plan.devices} {plan.run.unit}(s)"
          + (f", ${plan.cost_h:,.2f}/h" if plan.cost_h is not None else ""))
    if result.confirmation is not None:
        print(f"confirmation: {result.confirmation.summary()}")
    print(f"report: {out_dir / 'plan.md'} and {out_dir / 'plan.html'}")
    return result.code


if __name__ == "__main__":
    cli.run(main)
