"""`deployment-toolkit SUBCOMMAND ...` (also `python -m deployment_toolkit`): one command for every step.

COMMANDS is the one table: each subcommand is a module of deployment_toolkit/commands with `main(argv)`, run through
`cli.run` (user errors: one line, exit 2; bugs: traceback, exit 1), listed in --help under what the user is doing
(Group). The triton/*.py scripts keep the seed's names and flags as shims over the same table (`run_script`).
The toolkit's own benchmarks and result housekeeping are the lab's (`deployment-toolkit-lab`, deployment_toolkit_lab/),
which imports this package and is never imported by it.
"""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from enum import Enum

import deployment_toolkit  # noqa: F401  (first: hides the triton/ scripts folder from torch)


class Group(str, Enum):
    """What the user is doing: the headings of `deployment-toolkit --help`, in this order."""

    BRING = "bring and convert"
    SERVE = "serve and check"
    MEASURE = "measure"
    DECIDE = "decide and plan"
    PIPELINES = "pipelines and diffusion"
    HOST = "host checks"


@dataclass(frozen=True)
class Command:
    name: str  # the subcommand
    module: str  # deployment_toolkit.<module>, which has main(argv) -> int
    help: str  # one line for `deployment-toolkit --help`
    group: Group  # the heading it is listed under
    script: str | None = None  # triton/<script>.py, the seed's name, when there is one


B, S, M, D, P, H = Group  # short names for the table below, in Group's order
COMMANDS: dict[str, Command] = {c.name: c for c in (
    Command("models", "commands.models", "list the registered models", B),
    Command("convert", "commands.convert_model", "convert a model to TorchScript, ONNX or TensorRT and verify it", B,
            "convert_model"),
    Command("train", "commands.train_segmentation", "train the small segmentation U-Net on synthetic shapes", B,
            "train_segmentation"),
    Command("config", "commands.config_model_on_triton", "write a model's Triton repository entry (config.pbtxt)", S,
            "config_model_on_triton"),
    Command("serve", "commands.serve", "run the embedded tritonserver on a model repository until Ctrl-C", S),
    Command("infer", "commands.run_inference_on_triton", "run a dataset through Triton and dump the outputs", S,
            "run_inference_on_triton"),
    Command("infer-fw", "commands.run_inference_on_fw", "run a dataset through the framework and dump the outputs",
            S, "run_inference_on_fw"),
    Command("metrics", "commands.calculate_metrics", "accuracy metrics of a dump, with optional thresholds", S,
            "calculate_metrics"),
    Command("demo", "demo", "convert, serve and measure one model end to end", S),
    Command("accuracy-demo", "commands.accuracy_demo",
            "train a small U-Net and compare Triton's Dice with the framework's", S, "accuracy_demo"),
    Command("perf-offline", "commands.run_offline_performance_test_on_triton", "perf_analyzer over client batch sizes",
            M, "run_offline_performance_test_on_triton"),
    Command("perf-online", "commands.run_online_performance_test_on_triton", "perf_analyzer over concurrencies", M,
            "run_online_performance_test_on_triton"),
    Command("report", "commands.report", "build report.md/html for a results folder, or compare two", M, "report"),
    Command("search", "commands.search_config",
            "search the serving config with the most throughput within a p99 budget", D, "search_config"),
    Command("size", "commands.size_fleet",
            "plan a fleet from a search already run: plan's front end, nothing searched again", D, "size_fleet"),
    Command("traffic", "commands.traffic",
            "each model's peak, mean and bursts from a Prometheus export, a request log or rates; the fleet's sum", D),
    Command("plan", "commands.plan_fleet",
            "from a model to a confirmed fleet plan: convert, search by open-loop capacity, size, confirm, manifests",
            D, "plan_fleet"),
    Command("check-plan", "commands.check_plan", "re-test a written plan against a running Triton at its rates", D),
    Command("deploy-pipeline", "commands.deploy_pipeline",
            "a model with its pre/post-processing as a Triton ensemble: serve, verify, measure", P),
    Command("deploy-diffusion", "commands.deploy_diffusion", "deploy a diffusion sampler pipeline on Triton", P,
            "deploy_diffusion"),
    Command("diffusion-latency", "commands.run_diffusion_latency", "per-request latency of a diffusion pipeline", P,
            "run_diffusion_latency"),
    Command("diffusion-speedup", "commands.run_diffusion_speedup", "diffusion speedup of the converted formats", P,
            "run_diffusion_speedup"),
    Command("doctor", "commands.doctor", "report what this host has and what to install", H),
)}
PROG = "deployment-toolkit"
LAB = "deployment-toolkit-lab"  # the toolkit's own benchmarks and result housekeeping (deployment_toolkit_lab/)
EXAMPLE = f"""example:
  {PROG} doctor
  {PROG} convert --model resnet50 --output-type onnx --output-path workspace/resnet50/onnx
  {PROG} serve --model-repository model_repository --http-port 8000 --grpc-port 8001
  {PROG} SUBCOMMAND --help"""


def usage() -> str:
    """The subcommands under their headings (Group), each with its one line, then the examples."""
    width = max(len(n) for n in COMMANDS)
    sections = []
    for group in Group:
        rows = [f"  {c.name:<{width}}  {c.help}" for c in COMMANDS.values() if c.group is group]
        sections.append(f"{group.value}:\n" + "\n".join(rows))
    return (f"usage: {PROG} SUBCOMMAND [options]\n\nConvert, configure, serve, check and measure models on "
            f"Triton Inference Server.\n\n" + "\n\n".join(sections) +
            f"\n\nThe toolkit's own benchmarks and the housekeeping of its committed runs: `{LAB} --help`.\n\n"
            f"{EXAMPLE}")


def _command_main(name: str):
    return importlib.import_module(f"deployment_toolkit.{COMMANDS[name].module}").main


def run(name: str, argv: list[str]) -> None:
    """Run one subcommand through cli.run (exits); its --help names it `deployment-toolkit NAME`."""
    from .cli import run as cli_run

    sys.argv = [f"{PROG} {name}", *argv]  # argparse's prog
    cli_run(lambda: _command_main(name)(argv))


def run_script(name: str) -> None:
    """A triton/*.py shim: the seed's script name in --help, the same flags, the same entry point."""
    from .cli import run as cli_run

    cli_run(lambda: _command_main(name)(sys.argv[1:]))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        print(f"error: unknown subcommand {argv[0]!r}; choose one of {', '.join(COMMANDS)} "
              f"(`{PROG} --help` says what each does)", file=sys.stderr)
        return 2
    run(argv[0], argv[1:])
    return 0  # not reached: run exits


if __name__ == "__main__":
    sys.exit(main())
