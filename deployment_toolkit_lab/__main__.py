"""`deployment-toolkit-lab COMMAND ...` (also `python -m deployment_toolkit_lab`): the lab's benchmarks of the toolkit
itself and the housekeeping of its committed runs, one table. Each command is a module with `main(argv)`, run through
the product's `cli.run` (a user error is one line and exit 2, as in every toolkit command). The scripts in
deployment_toolkit_lab/scripts/ keep the names they had in triton/ as shims over the same table (`run_script`)."""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from enum import Enum

import deployment_toolkit  # noqa: F401  (first: hides the triton/ scripts folder from torch)
from deployment_toolkit_lab import console_logging


class Group(str, Enum):
    """The headings of `deployment-toolkit-lab --help`, in this order."""

    BENCHMARKS = "benchmarks of the toolkit"
    HOUSEKEEPING = "committed results"


@dataclass(frozen=True)
class Command:
    name: str  # the command
    module: str  # deployment_toolkit_lab.<module>, which has main(argv) -> int
    help: str  # one line for `deployment-toolkit-lab --help`
    group: Group  # the heading it is listed under
    script: str | None = None  # deployment_toolkit_lab/scripts/<script>.py, its name when it was in triton/


PROG = "deployment-toolkit-lab"
SCRIPTS = "deployment_toolkit_lab/scripts"  # the shims' folder, relative to the checkout's root
B, H = Group  # short names for the table below, in Group's order
COMMANDS: dict[str, Command] = {c.name: c for c in (
    Command("bench", "commands.bench", "benchmark the framework itself (precisions, compile)", B,
            "run_framework_benchmark"),
    Command("gpu-check", "commands.gpu_check",
            "GPU acceptance: the toolkit's own scripts as timed steps on a CUDA host (`make gpu-check`)", B,
            "gpu_acceptance"),
    Command("bench-overhead", "commands.benchmark_overhead", "Triton's overhead over the same runtime in-process",
            B, "benchmark_overhead"),
    Command("bench-ragged", "commands.benchmark_ragged",
            "what samples of different lengths cost the accuracy check, against one length", B),
    Command("bench-runtimes", "commands.benchmark_runtimes", "compare the serving runtimes on one model", B,
            "benchmark_runtimes"),
    Command("bench-sources", "commands.benchmark_sources",
            "the same architecture from the zoo and from timm, alternated", B, "benchmark_sources"),
    Command("bench-telemetry", "commands.benchmark_telemetry",
            "what scraping the server's metrics costs the measured throughput", B, "benchmark_telemetry"),
    Command("bench-corpus", "commands.benchmark_corpus",
            "real architectures (transformers, torchvision, timm, torch) converted, served and measured", B,
            "benchmark_corpus"),
    Command("bench-vs-model-analyzer", "commands.benchmark_vs_model_analyzer",
            "our search against Triton's Model Analyzer", B, "benchmark_vs_model_analyzer"),
    Command("bench-deployment-vs-model-analyzer", "commands.benchmark_deployment_vs_model_analyzer",
            "a deployment of several models: plan --deployment against Model Analyzer, judged under mixed traffic", B),
    Command("bench-neighbour", "commands.benchmark_neighbour",
            "a plan made while a neighbour busy-loops a core: its disturbed windows, measured again", B),
    Command("bench-check-plan", "commands.benchmark_check_plan",
            "plans made, served and re-tested by check-plan: how often the two agree", B),
    Command("bench-group-config", "commands.benchmark_group_config",
            "one shared group with its solo configs and with its group config, side by side", B),
    Command("conversion-matrix", "commands.conversion_matrix", "which model converts to which format on this host", B,
            "conversion_matrix"),
    Command("pack-bench", "pack_bench",
            "the packing MILP on N models from recorded capacities, with day-shaped traffic", B),
    Command("embed-results", "commands.embed_results",
            "copy generated result files into the Markdown that quotes them", H, "embed_results"),
    Command("compact-results", "commands.compact_results",
            "summarise raw per-request exports and compress telemetry so a run folder stays small to commit", H),
    Command("footprint", "commands.footprint", "the size of the repository and of each run folder under results/", H),
)}
EXAMPLE = f"""example:
  {PROG} bench-overhead --model resnet50 --preset full --batch-sizes 1,8 --concurrency 1:4:1
  {PROG} embed-results --check README.md
  {PROG} COMMAND --help"""


def usage() -> str:
    """The commands under their headings (Group), each with its one line, then the examples."""
    width = max(len(n) for n in COMMANDS)
    sections = []
    for group in Group:
        rows = [f"  {c.name:<{width}}  {c.help}" for c in COMMANDS.values() if c.group is group]
        sections.append(f"{group.value}:\n" + "\n".join(rows))
    return (f"usage: {PROG} COMMAND [options]\n\nThe toolkit's own benchmarks and the housekeeping of its committed "
            f"runs (the commands for your models: `deployment-toolkit --help`).\n\n" + "\n\n".join(sections) +
            f"\n\n{EXAMPLE}")


def _command_main(name: str):
    return importlib.import_module(f"deployment_toolkit_lab.{COMMANDS[name].module}").main


def run(name: str, argv: list[str]) -> None:
    """Run one command through cli.run (exits); its --help names it `deployment-toolkit-lab NAME`."""
    from deployment_toolkit.cli import run as cli_run

    sys.argv = [f"{PROG} {name}", *argv]  # argparse's prog
    console_logging()  # the lab's library logs too, beside the toolkit's that cli.run routes
    cli_run(lambda: _command_main(name)(argv))


def run_script(name: str) -> None:
    """A scripts/*.py shim: the script's name in --help, the same flags, the same entry point."""
    from deployment_toolkit.cli import run as cli_run

    console_logging()
    cli_run(lambda: _command_main(name)(sys.argv[1:]))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        print(f"error: unknown command {argv[0]!r}; choose one of {', '.join(COMMANDS)} (`{PROG} --help` says what "
              "each does)", file=sys.stderr)
        return 2
    run(argv[0], argv[1:])
    return 0  # not reached: run exits


if __name__ == "__main__":
    sys.exit(main())
