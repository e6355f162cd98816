"""Benchmark: a deployment of several models (a --deployment file, one of them with pre/post-processing as an
ensemble) through `plan --deployment` and through Model Analyzer (its ensemble profiling, its multi-model concurrent
quick search), then both picks served and judged under the same mixed open-loop traffic, in turns: each model's p99
against its SLO at the fleet's per-replica rates, each side's mix capacity and the replicas and cost it needs.
Takes every flag of `plan --deployment` (the plan goes to RESULT/plan and resumes its measured points on a rerun).
Model Analyzer lives in its own virtualenv (it pins numpy 2 and protobuf 6); its concurrent search needs MPI
(`apt-get install openmpi-bin libopenmpi-dev`). If it cannot run, the report says exactly why."""
import shlex
import sys

from deployment_toolkit import cli
from deployment_toolkit.config import add_arguments, from_args

EXAMPLE = """
    python3 -m venv /tmp/ma-venv && /tmp/ma-venv/bin/pip install triton-model-analyzer
    apt-get install -y openmpi-bin libopenmpi-dev
    python examples/image_pipeline/make_images.py --output workspace/plan-shop/images
    deployment-toolkit-lab bench-deployment-vs-model-analyzer --deployment examples/deployment/deployment.yaml \\
        --preset small --max-concurrency 4 --max-minutes 4 --ma-minutes 10 --model-analyzer /tmp/ma-venv/bin/model-analyzer \\
        --result-path results/local/deployment-vs-ma
"""


def main(argv: list[str] | None = None) -> int:
    """Plan the deployment (plan_fleet.deployment_plan), run Model Analyzer on it, judge both (versus_ma)."""
    from pathlib import Path

    from deployment_toolkit import api
    from deployment_toolkit.commands.plan_fleet import build_parser, deployment_plan
    from deployment_toolkit.committed import refuse_committed
    from ..versus.deployment import VersusSettings, compare_deployment, replicas_for

    p = build_parser()
    p.description, p.epilog = __doc__, cli.parser("", EXAMPLE).epilog
    add_arguments(p.add_argument_group("Model Analyzer and the judge"), VersusSettings)
    args = p.parse_args(argv)
    if args.deployment is None:
        p.error("--deployment FILE is required: the models, their peaks and SLOs")
    settings = from_args(VersusSettings, args)
    name = api.load_deployment(args.deployment).name
    out = Path(args.result_path or f"results/vs-ma-{name}")
    refuse_committed(out, "--result-path")
    command = shlex.join(["deployment-toolkit-lab", "bench-deployment-vs-model-analyzer",
                          *(argv if argv is not None else sys.argv[1:])])
    plan = deployment_plan(args, command, result_dir=str(out / "plan"))
    versus = compare_deployment(plan, settings, out, plan.workspace / "vs-ma")
    print()
    for run in versus.ma_runs:
        print(f"Model Analyzer, {run.asked}: {run.outcome}")
    for side in versus.sides:
        held = ", ".join(f"{n} {side.held(n)}/{len(side.group_of(n).at_rates)}" for n in plan.models)
        capacities = "; ".join(f"{g.name} {g.capacity:,.1f} inf/s" if g.capacity else f"{g.name} none"
                               for g in side.groups)
        print(f"{side.name}: SLO held at the fleet's rates: {held}; mix capacity per replica: {capacities}; "
              f"{replicas_for(versus, side) or '-'} replica(s) for the peaks" + (f" ({side.error})" if side.error else ""))
    print(f"summary: {out / 'vs_model_analyzer.md'}")
    return 0


if __name__ == "__main__":
    cli.run(main)
