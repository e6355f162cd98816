"""Re-test a written fleet plan against any running Triton that serves its models: the fleet as deployed behind its
Service, or a server started by hand. Needs only the plan folder (`deployment-toolkit plan` wrote it: its run.json
names each model's p99 SLO and each replica group's models and per-replica rates) and, for pipelines, the user's raw
samples (--samples).

Each replica group is driven at its planned per-replica rates (or --scale of them), every model on its own seeded
Poisson schedule at once, from this process (an open-loop asyncio gRPC sender of its own, not the planner's);
latency counts from the intended send time, so a slow server cannot slow the clock. A model holds in a round when
its p99 <= its SLO, it had no errors and it answered what it was offered (less the Poisson tolerance,
3 sqrt(offered)); a group holds when all its models hold in a majority of its --rounds. The load generator's own CPU
is measured each round: above 0.8 of a core the round is void (run again once), not failed.
Prints a table per group and a summary; writes check.json, check.md and run.json into --result-path (default
PLAN_DIR/check-<UTC time>, or results/local/ for a plan folder git tracks).
Exit status: 0 every group holds, 1 a group does not (or could not be judged), 2 bad input or a model the server
does not serve (each named, before any load is sent)."""
from __future__ import annotations

import argparse

from deployment_toolkit import cli

EXAMPLE = """
    deployment-toolkit check-plan results/plan-fleet-cpu --url 127.0.0.1:8001
    deployment-toolkit check-plan results/local/plan-shop --url triton-shop.default.svc:8001 --scale 1.2 \\
        --samples workspace/samples --rounds 5 --window-s 10
    # one Service per group: --url scorer_us-churn=10.0.0.7:8001 --url 10.0.0.8:8001 (the rest)
"""


def build_parser() -> argparse.ArgumentParser:
    from deployment_toolkit.config import add_arguments
    from deployment_toolkit.deployment.checkplan import CheckSettings
    from deployment_toolkit.results.run_folder import add_result_path_argument

    p = cli.parser(__doc__, EXAMPLE)
    p.add_argument("plan_dir", metavar="PLAN_DIR", help="the folder `deployment-toolkit plan` wrote (its run.json)")
    add_arguments(p, CheckSettings)
    add_result_path_argument(p, help="where check.json, check.md and run.json go (default: PLAN_DIR/check-<UTC time>; "
                                     "results/local/check-<plan>-<UTC time> for a committed plan)")
    for action in p._actions:
        if action.dest == "url":
            action.required = True
    return p


def main(argv=None) -> int:
    from deployment_toolkit.config import from_args
    from deployment_toolkit.deployment.checkplan import CheckSettings
    from deployment_toolkit.deployment.checkplan_run import check_plan

    args = build_parser().parse_args(argv)
    settings = from_args(CheckSettings, args)
    return check_plan(args.plan_dir, settings, args.result_path).code


if __name__ == "__main__":
    cli.run(main)
