"""From a model to a confirmed fleet plan in one command: convert and verify it, search its serving config ranked by
the open-loop capacity it sustains under the SLO, sweep the winner, plan the fleet (replicas, devices, cost), confirm
the plan under open-loop traffic (and a burst), write the Kubernetes manifests and one report (plan.md, plan.html).
Any model reference the toolkit takes (zoo name, timm:<arch>, model.py + checkpoint, ONNX/TorchScript, a manifest)
and the user's data (--data-dir / --dataloader). Rerunning the same command resumes the measured points.
Exit status: 0 the plan is confirmed (derated first where the confirmation asked for it), 1 no round of the
confirmation held (the last derated plan is written), or a deployment's model was left out (its search or hold
failed: the others are planned, the report says why; a rerun measures only what is missing), 2 no plan (no model
could be planned, the peak needs more than --max-replicas, bad input).

With --deployment FILE (a YAML file of models, each with its peak or traffic over time and its p99 SLO, and the
fleet's costs and limits: deployment_toolkit/deployment/file.py) the same planner runs for each model under its own
SLO: each capacity is re-tested until it holds k of k (--retests), a solver packs the models on replicas (which
share one, measured under their mixed traffic) and each replica group is confirmed with all its models driven at
once. --model, --peak-rps and --p99-ms come from the file then. One model without --deployment is a deployment of
one: the same stages, the same report."""
import argparse
import shlex
import sys
from pathlib import Path

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
PER_MODEL_GROUPS = ("model source",)  # argument groups whose every flag is a model's own
PER_MODEL_FLAGS = {"model": "--model", "input_path": "--input-path", "budget_ms": "--p99-ms", "peak_rps": "--peak-rps",
                   "model_name": "--model-name", "checkpoint": "--checkpoint", "data_dir": "--data-dir",
                   "dataloader": "--dataloader", "dataloader_arg": "--dataloader-arg", "input_data": "--input-data"}


def build_parser():
    """The search's flags (its time limit the plan's share) and the plan's: its Demand, Checks and Deploy fields."""
    from deployment_toolkit.commands.search_config import build_parser as search_parser
    from deployment_toolkit.deployment.settings import Checks, Demand, Deploy, FanOut
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
    add_arguments(p.add_argument_group("searches fanned out over identical hosts (with --deployment)"), FanOut)
    for action in p._actions:  # a plan ranks by open-loop capacity; make_plan refuses the other objectives
        if action.dest == "objective":
            action.help = argparse.SUPPRESS
        if action.dest in ("budget_ms", "peak_rps"):  # required unless --deployment gives them (main checks)
            action.required = False
    return p


def _required(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--p99-ms and --peak-rps without --deployment; none of the per-model flags with it."""
    if args.deployment is None and not any(getattr(args, d) for d in ("write_job", "search_only", "gather")):
        missing = [flag for dest, flag in (("budget_ms", "--p99-ms"), ("peak_rps", "--peak-rps"))
                   if getattr(args, dest) is None]
        if missing:
            p.error(f"the following arguments are required: {', '.join(missing)}")
        return
    fan_out = [f for d, f in (("write_job", "--write-job"), ("search_only", "--search-only"), ("gather", "--gather"))
               if getattr(args, d) is not None and getattr(args, d) is not False]
    if args.deployment is None and fan_out:
        p.error(f"{', '.join(fan_out)}: the fan-out is of a deployment's searches: give --deployment FILE")
    given = [flag for dest, flag in _per_model_flags(p).items() if getattr(args, dest, None) != p.get_default(dest)]
    if given:
        p.error(f"{', '.join(given)}: --deployment names each model, its data, its peak and its SLO (the file's "
                "model, data, dataloader, model_args, checkpoint, peak_rps, p99_ms keys); drop them (or plan one "
                "model without --deployment)")


def _per_model_flags(p: argparse.ArgumentParser) -> dict[str, str]:
    """Every flag a deployment file replaces: PER_MODEL_FLAGS and the whole model-source and data groups (the
    file's entries say what each model is and what it is measured with), by destination."""
    flags = {dest: flag for dest, flag in PER_MODEL_FLAGS.items()}
    for group in p._action_groups:
        if (group.title or "").startswith(PER_MODEL_GROUPS):
            flags.update({a.dest: a.option_strings[0] for a in group._group_actions if a.option_strings})
    return flags


def deployment_plan(args: argparse.Namespace, command: str, result_dir: str | None = None, fan=None):
    """The search template from the flags, the deployment from the file, dt.plan_deployment: the DeploymentPlan
    (`result_dir`: where it goes; default --result-path, then results/plan-<name>; `fan`: the FanOut flags)."""
    from deployment_toolkit import api
    from deployment_toolkit.config import from_args
    from deployment_toolkit.perf.analyzer import perf_options_from_args
    from deployment_toolkit.search.request import SearchJob, SearchServer
    from deployment_toolkit.search.trials import SearchSettings

    deployment = api.load_deployment(args.deployment)
    server = from_args(SearchServer, args, start_timeout_s=args.server_timeout)
    job = from_args(SearchJob, args, result_dir=result_dir or args.result_path or f"results/plan-{deployment.name}",
                    perf_samples=getattr(args, "perf_samples", None), server=server, command=command)
    settings = from_args(SearchSettings, args, budget_ms=1.0)  # each model's own SLO replaces the budget
    shm = "system" if args.shared_memory == "auto" else args.shared_memory
    return api.plan_deployment(deployment, settings, job, plan=_settings(args),
                               options=perf_options_from_args(args, shared_memory=shm),
                               only=fan.index if fan is not None and fan.search_only else None,
                               gather=bool(fan is not None and fan.gather))


def write_job(args: argparse.Namespace, fan, argv: list[str] | None = None) -> int:
    """`--write-job DIR`: the deployment's inputs staged, its claims, the Indexed Job of its searches and the
    gathering job, validated, written; nothing is searched. The pods take the staged deployment file from the inputs
    claim and the plan's flags as parsed here (`_passed_on`; `argv` is not read: nothing typed here reaches a
    pod)."""
    from deployment_toolkit import api
    from deployment_toolkit.deployment.fanout import JOB_FILE, GATHER_FILE, gpu_node_selector, job_folder, \
        node_selector_of
    from deployment_toolkit.deployment.joboutput import JobRequest, README_FILE, write_kit
    from deployment_toolkit.errors import UserInputError
    from deployment_toolkit.repository.config import host_has_gpu
    from deployment_toolkit.results.runinfo import gpu_info

    job_folder(fan.write_job)  # a file, a path under one, a folder not writable: said before the file is read
    deployment = api.load_deployment(args.deployment)
    selector = node_selector_of(fan.node_selector)  # each KEY=VALUE by Kubernetes' label rules
    pod_args = tuple(_passed_on(args))  # a path of this machine among the flags: refused before the GPU probe
    gpus = gpu_info() if host_has_gpu() else []
    if not selector and isinstance(gpus, list) and gpus:
        selector = gpu_node_selector(str(gpus[0].get("name", "")))
    if not selector:
        raise UserInputError("--write-job: this host has no GPU to name the pods' nodes by: give --node-selector "
                             "KEY=VALUE for the hosts the searches must run on (identical to each other)")
    request = JobRequest.of(deployment, fan, selector, pod_args, namespace=args.namespace)
    paths, checks, staged = write_kit(request)
    for line in checks:
        print(line)
    left = f"; {len(staged.left_out)} left out (listed in staged.json)" if staged.left_out else ""
    print(f"inputs: {len(staged.files)} file(s), {staged.size / 2 ** 20:,.1f} MiB staged in {paths['inputs']}{left}\n"
          f"search job ({len(deployment.models)} indexes, one per model): {paths[JOB_FILE]}\n"
          f"gathering job (once every index succeeded): {paths[GATHER_FILE]}\n"
          f"the kubectl commands, in order: {paths[README_FILE]}")
    return 0


def _passed_on(args: argparse.Namespace) -> list[str]:
    """The plan's flags for the pods, from the parsed settings (deployment.jobargs: each flag given, in its
    canonical form, less those the jobs set themselves; a path of this machine refused)."""
    from deployment_toolkit.deployment.jobargs import pod_args

    return pod_args(build_parser(), args)


def _settings(args: argparse.Namespace):
    from deployment_toolkit.deployment.settings import Checks, Deploy, DeploymentSettings

    return DeploymentSettings(from_args(Checks, args), from_args(Deploy, args))


def report(result) -> int:
    """The fleet, each group's confirmation and where the report is, in a few lines; the exit status."""
    cost = f", ${result.cost_per_hour:,.2f}/h" if result.cost_per_hour is not None else ""
    print(f"\nfleet: {result.replicas} replica(s){cost}")
    for g in result.groups:
        configs = ", ".join(f"{n} `{result.models[n].config}`" for n in g.models)
        print(f"  {' + '.join(g.models)}: {g.replicas} replica(s) ({configs})")
    for c in result.confirmations:
        print(f"  confirmation: {c.summary()}")
        if split := result.split_of(c.models):
            print(f"  split: {split.text()}")
    if result.confirmed is None:
        print("  not confirmed (--no-confirm)")
    for name, why in result.unplanned.items():
        print(f"  left out: {name}: {why}")
    measured, disturbed, again = result.disturbed
    if disturbed:
        print(f"  {disturbed} of {measured} measuring window(s) disturbed by other processes, {again} measured again")
    print(f"report: {result.out_dir / 'plan.md'} and {result.out_dir / 'plan.html'}")
    return cli.EXIT_NOT_MET if result.code else 0


def main(argv: list[str] | None = None) -> int:
    """Parse the flags into the typed settings, run `dt.plan` (one model) or `dt.plan_deployment` on them: the same
    planner either way; print the plan."""
    from deployment_toolkit import api
    from deployment_toolkit.commands.search_config import request_from_args
    from deployment_toolkit.deployment.settings import Checks, Demand, Deploy, FanOut, check_demand

    parser = build_parser()
    args = parser.parse_args(argv)
    _required(parser, args)
    command = shlex.join(["deployment-toolkit", "plan", *(argv if argv is not None else sys.argv[1:])])
    if args.deployment is not None:
        fan = from_args(FanOut, args)
        if fan.write_job:
            return write_job(args, fan, argv if argv is not None else sys.argv[1:])
        result = deployment_plan(args, command, fan=fan)
        if fan.search_only:
            model = next(iter(result.models.values()))
            print(f"\nsearch of {model.entry.name} (index {fan.index}): `{model.config}`, {model.found:,.1f} inf/s "
                  f"alone within p99 <= {model.entry.p99_ms:g} ms, in {model.search.result_dir}")
            return 0
        return report(result)
    demand = from_args(Demand, args, p99_ms=args.budget_ms)
    check_demand(demand)  # the demand's bad input first, then the search's flags
    request = request_from_args(args, command)
    return report(api.plan(request.source, demand, request.settings, request.job, data=request.data,
                           checks=from_args(Checks, args), deploy=from_args(Deploy, args), options=request.options))


if __name__ == "__main__":
    cli.run(main)
