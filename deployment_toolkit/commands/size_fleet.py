"""Plan a fleet from a search already run, without searching again: `plan`'s front end for a stored search.

SEARCH is the folder a `deployment-toolkit search` (ranked by open-loop capacity, the default) or a plan of one
model left (its `models/<name>/search`). The search is replayed from its stored points, never measured again (a
search measured under another identity is refused, exit 2), and the one planner goes on from there as `plan` does:
the same demand flags with the same meaning, the capacity held k of k at the rate itself, the replicas, the
confirmation under open-loop traffic with derating and the burst check, the Kubernetes manifests and plan.md /
plan.html. --p99-ms defaults to the SLO the search measured under; another SLO needs another search. Run it from the
folder the search ran in: the model, checkpoint and samples are read by the paths its command gave.
Exit status: as plan's: 0 confirmed, 1 the last round of the confirmation did not hold, 2 no plan or bad input."""
import argparse
import shlex
import sys
from pathlib import Path

from deployment_toolkit import cli
from deployment_toolkit.config import add_arguments, from_args
from deployment_toolkit.errors import UserInputError

EXAMPLE = """
    deployment-toolkit search --model resnet18 --preset small --p99-ms 100 --result-path results/local/search-r18
    deployment-toolkit size results/local/search-r18 --peak-rps 2000 --host-hour-cost 0.40 --max-replicas 20 \\
        --result-path results/local/size-r18
"""


def build_parser() -> argparse.ArgumentParser:
    """SEARCH, and plan's own settings families (Demand, Checks, Deploy): each flag declared once, there."""
    from deployment_toolkit.deployment.settings import Checks, Demand, Deploy
    from deployment_toolkit.results.run_folder import add_result_path_argument

    p = cli.parser(__doc__, EXAMPLE)
    p.add_argument("search", metavar="SEARCH", help="the folder a search by open-loop capacity wrote")
    add_arguments(p.add_argument_group("demand and cost"), Demand)
    add_arguments(p.add_argument_group("confirmation"), Checks)
    add_arguments(p.add_argument_group("Kubernetes"), Deploy)
    add_result_path_argument(p.add_argument_group("output"), help="the plan's folder (default: "
                             "results/local/plan-<model>-<UTC time>)")
    for action in p._actions:
        if action.dest == "p99_ms":
            action.required = False
            action.help = "p99 SLO in ms (default: the one the search measured under; another needs a new search)"
    return p


def _search_request(stored, command: str, result_path: str | None):
    """The search as it was asked for, parsed by its own command's parser, replaying into the plan's folder."""
    import dataclasses

    from deployment_toolkit.commands.plan_fleet import build_parser as plan_parser
    from deployment_toolkit.commands.search_config import build_parser as search_parser, request_from_args

    parser = plan_parser() if stored.program == "plan" else search_parser()
    try:
        recorded = parser.parse_args(list(stored.argv))
    except SystemExit:  # argparse said why on stderr
        raise UserInputError(f"SEARCH {stored.folder}: its command no longer parses (above): search again")
    request = request_from_args(recorded, command)
    job = dataclasses.replace(request.job, result_dir=Path(result_path) if result_path else None, fresh=False,
                              resume=True, model_repository=None, command=command)
    return dataclasses.replace(request, job=job)


def main(argv: list[str] | None = None) -> int:
    """The stored search read and checked, its request rebuilt, the one planner run on it (`dt.plan`)."""
    from deployment_toolkit import api
    from deployment_toolkit.commands.plan_fleet import report
    from deployment_toolkit.committed import refuse_committed
    from deployment_toolkit.deployment.fanout import search_dir
    from deployment_toolkit.deployment.one import default_out_dir, deployment_of_one
    from deployment_toolkit.deployment.settings import Checks, Demand, Deploy, check_demand
    from deployment_toolkit.deployment.stored import stored_search

    args = build_parser().parse_args(argv)
    stored = stored_search(args.search)
    demand = from_args(Demand, args, p99_ms=stored.budget_ms if args.p99_ms is None else args.p99_ms)
    if demand.p99_ms != stored.budget_ms:
        raise UserInputError(f"--p99-ms {args.p99_ms:g}: {args.search} measured its capacities under p99 <= "
                                 f"{stored.budget_ms:g} ms; drop --p99-ms, or search again under the new SLO")
    if (why := stored.relative_paths_ok()) is not None:
        raise UserInputError(f"SEARCH {args.search}: {why}")
    check_demand(demand)
    command = shlex.join(["deployment-toolkit", "size", *(argv if argv is not None else sys.argv[1:])])
    request = _search_request(stored, command, args.result_path)
    out_dir = Path(request.job.result_dir or default_out_dir(request))
    refuse_committed(out_dir, "--result-path")  # before the stored points are copied in
    request.job.result_dir = out_dir
    stored.copy_to(search_dir(out_dir, deployment_of_one(request, demand).models[0].name))
    print(f"size: the search in {args.search} (winner: {stored.winner}), replayed; planning {demand.peak_rps:g} "
          f"inf/s at p99 <= {demand.p99_ms:g} ms")
    return report(api.plan(request.source, demand, request.settings, request.job, data=request.data,
                           checks=from_args(Checks, args), deploy=from_args(Deploy, args), options=request.options))


if __name__ == "__main__":
    cli.run(main)
