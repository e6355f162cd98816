"""From a model to a confirmed fleet plan in one command: convert and verify it, search its serving config ranked by
the open-loop capacity it sustains under the SLO, sweep the winner, plan the fleet (replicas, devices, cost), confirm
the plan under open-loop traffic (and a burst), write the Kubernetes manifests and one report (plan.md, plan.html).
Any model reference the toolkit takes (zoo name, timm:<arch>, model.py + checkpoint, ONNX/TorchScript, a manifest)
and the user's data (--data-dir / --dataloader). Rerunning the same command resumes the measured points.
Exit status: 0 the plan is confirmed (derated first where the confirmation asked for it), 1 no round of the
confirmation held (the last derated plan is written), 2 no plan (no config meets the SLO, the peak needs more than
--max-replicas, bad input).

With --deployment FILE (a YAML file of several models, each with its peak and p99 SLO, and the fleet's costs and
limits: deployment_toolkit/deployment/file.py) the same search runs for each model under its own SLO, each
capacity is re-tested until it holds k of k (--retests), the models are laid out on replicas by cost (which share
one, measured under their mixed traffic) and the chosen fleet is confirmed with every model of a replica driven at
once. --model, --peak-rps and --p99-ms come from the file then."""
import argparse
import shlex
import sys

from deployment_toolkit import cli
from deployment_toolkit.config import add_arguments, from_args

EXAMPLE = """
    deployment-toolkit plan --input-path examples/my_model/model.py --input-type pyt \\
        --checkpoint workspace/my_model/checkpoint.safetensors --dataloader examples/my_model/dataloader.py \\
        --data-dir workspace/my_model/data --peak-rps 500 --p99-ms 50 --host-hour-cost 0.40
    deployment-toolkit plan --model resnet18 --preset small --peak-rps 2000 --p99-ms 100 --max-minutes 6 \\
        --host-hour-cost 0.40 --max-replicas 20 --result-path results/local/plan-resnet18
    deployment-toolkit plan --deployment examples/deployment/deployment.yaml --max-minutes 4 \\
        --result-path results/local/plan-deployment
"""
# flags a deployment file replaces (each model's own, in the file)
PER_MODEL_FLAGS = {"model": "--model", "input_path": "--input-path", "budget_ms": "--p99-ms", "peak_rps": "--peak-rps",
                   "model_name": "--model-name", "checkpoint": "--checkpoint"}


def build_parser():
    """The search's flags (its time limit the plan's share) and the plan's: its Demand, Checks and Deploy fields."""
    from deployment_toolkit.commands.search_config import build_parser as search_parser
    from deployment_toolkit.planner import Checks, Demand, Deploy
    from deployment_toolkit.search.trials import PLAN_MAX_MINUTES

    p = search_parser(max_minutes=PLAN_MAX_MINUTES)
    p.description = __doc__
    p.epilog = cli.parser("", EXAMPLE).epilog
    add_arguments(p.add_argument_group("demand and cost"), Demand, skip=("p99_ms",))  # --p99-ms: the search's
    add_arguments(p.add_argument_group("confirmation"), Checks)
    add_arguments(p.add_argument_group("Kubernetes"), Deploy)
    g = p.add_argument_group("several models (--deployment)")
    g.add_argument("--deployment", metavar="FILE", help="a YAML file of models with their peaks and SLOs, the fleet's "
                   "costs and limits: plan them as one fleet, confirmed under their mixed traffic")
    for action in p._actions:  # a plan ranks by open-loop capacity; make_plan refuses the other objectives
        if action.dest == "objective":
            action.help = argparse.SUPPRESS
        if action.dest in ("budget_ms", "peak_rps"):  # required unless --deployment gives them (main checks)
            action.required = False
    return p


def _required(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--p99-ms and --peak-rps without --deployment; none of the per-model flags with it."""
    if args.deployment is None:
        missing = [flag for dest, flag in (("budget_ms", "--p99-ms"), ("peak_rps", "--peak-rps"))
                   if getattr(args, dest) is None]
        if missing:
            p.error(f"the following arguments are required: {', '.join(missing)}")
        return
    given = [flag for dest, flag in PER_MODEL_FLAGS.items() if getattr(args, dest, None) not in (None, [], False)]
    if given:
        p.error(f"{', '.join(given)}: --deployment names each model, its peak and its SLO; drop them (or plan one "
                "model without --deployment)")


def deployment_plan(args: argparse.Namespace, command: str, result_dir: str | None = None):
    """The search template from the flags, the deployment from the file, dt.plan_deployment: the DeploymentPlan
    (`result_dir`: where it goes; default --result-path, then results/plan-<name>)."""
    from deployment_toolkit import api
    from deployment_toolkit.config import from_args
    from deployment_toolkit.deployment.plan import DeploymentSettings
    from deployment_toolkit.perf.analyzer import perf_options_from_args
    from deployment_toolkit.planner import Checks, Deploy
    from deployment_toolkit.search.request import SearchJob, SearchServer
    from deployment_toolkit.search.trials import SearchSettings

    deployment = api.load_deployment(args.deployment)
    server = from_args(SearchServer, args, start_timeout_s=args.server_timeout)
    job = from_args(SearchJob, args, result_dir=result_dir or args.result_path or f"results/plan-{deployment.name}",
                    perf_samples=getattr(args, "perf_samples", None), server=server, command=command)
    settings = from_args(SearchSettings, args, budget_ms=1.0)  # each model's own SLO replaces the budget
    shm = "system" if args.shared_memory == "auto" else args.shared_memory
    checks, deploy = from_args(Checks, args), from_args(Deploy, args)
    plan = DeploymentSettings(retests=checks.retests, trials=checks.trials, window_ms=checks.window_ms, k8s=deploy.k8s)
    return api.plan_deployment(deployment, settings, job, plan=plan,
                               options=perf_options_from_args(args, shared_memory=shm))


def plan_deployment(args: argparse.Namespace, command: str) -> int:
    """`plan --deployment FILE`: the plan, then its fleet and confirmation in a few lines."""
    result = deployment_plan(args, command)
    chosen = result.decision.chosen
    print(f"\nfleet: {chosen.describe()}" + (f", ${chosen.cost_per_hour:,.2f}/h" if chosen.cost_per_hour else ""))
    for c in result.confirmations:
        for name in c.models:
            print(f"  {name}: SLO held in {c.passed(name)} of {len(c.points)} confirmation rounds")
    print(f"report: {result.out_dir / 'plan.md'} and {result.out_dir / 'plan.html'}")
    return 0 if result.confirmed else cli.EXIT_NOT_MET


def main(argv: list[str] | None = None) -> int:
    """Parse the flags into the typed settings, run `dt.plan` (api.plan) on them, print the plan."""
    from deployment_toolkit import api
    from deployment_toolkit.commands.search_config import request_from_args
    from deployment_toolkit.planner import Checks, Demand, Deploy, check_demand

    parser = build_parser()
    args = parser.parse_args(argv)
    _required(parser, args)
    command = shlex.join(["deployment-toolkit", "plan", *(argv if argv is not None else sys.argv[1:])])
    if args.deployment is not None:
        return plan_deployment(args, command)
    demand = from_args(Demand, args, p99_ms=args.budget_ms)
    check_demand(demand)  # the demand's bad input first, then the search's flags
    request = request_from_args(args, command)
    result = api.plan(request.source, demand, request.settings, request.job, data=request.data,
                      checks=from_args(Checks, args), deploy=from_args(Deploy, args), options=request.options)
    plan = result.plan
    print(f"\nplan: {plan.replicas} replica(s) of {result.search.outcome.decision.winner.candidate.slug} "
          f"({plan.replica_capacity:,.1f} inf/s each), {plan.devices} {plan.run.unit}(s)"
          + (f", ${plan.cost_h:,.2f}/h" if plan.cost_h is not None else ""))
    if result.confirmation is not None:
        print(f"confirmation: {result.confirmation.summary()}")
    print(f"report: {result.out_dir / 'plan.md'} and {result.out_dir / 'plan.html'}")
    return cli.EXIT_NOT_MET if result.confirmed is False else 0


if __name__ == "__main__":
    cli.run(main)
