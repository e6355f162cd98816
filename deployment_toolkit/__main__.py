"""`deployment-toolkit SUBCOMMAND ...` (also `python -m deployment_toolkit`): one command for every step.

COMMANDS is the one table: each subcommand is a module of deployment_toolkit/commands with `main(argv)`, run through
`cli.run` (user errors: one line, exit 2; bugs: traceback, exit 1). The triton/*.py scripts keep the seed's names
and flags as shims over the same table (`run_script`).
"""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass

import deployment_toolkit  # noqa: F401  (first: hides the triton/ scripts folder from torch)


@dataclass(frozen=True)
class Command:
    name: str  # the subcommand
    module: str  # deployment_toolkit.<module>, which has main(argv) -> int
    help: str  # one line for `deployment-toolkit --help`
    script: str | None = None  # triton/<script>.py, the seed's name, when there is one


COMMANDS: dict[str, Command] = {c.name: c for c in (
    Command("doctor", "commands.doctor", "report what this host has and what to install"),
    Command("models", "commands.models", "list the registered models"),
    Command("convert", "commands.convert_model", "convert a model to TorchScript, ONNX or TensorRT and verify it",
            "convert_model"),
    Command("config", "commands.config_model_on_triton", "write a model's Triton repository entry (config.pbtxt)",
            "config_model_on_triton"),
    Command("serve", "commands.serve", "run the embedded tritonserver on a model repository until Ctrl-C"),
    Command("infer", "commands.run_inference_on_triton", "run a dataset through Triton and dump the outputs",
            "run_inference_on_triton"),
    Command("infer-fw", "commands.run_inference_on_fw", "run a dataset through the framework and dump the outputs",
            "run_inference_on_fw"),
    Command("metrics", "commands.calculate_metrics", "accuracy metrics of a dump, with optional thresholds",
            "calculate_metrics"),
    Command("perf-offline", "commands.run_offline_performance_test_on_triton", "perf_analyzer over client batch sizes",
            "run_offline_performance_test_on_triton"),
    Command("perf-online", "commands.run_online_performance_test_on_triton", "perf_analyzer over concurrencies",
            "run_online_performance_test_on_triton"),
    Command("report", "commands.report", "build report.md/html for a results folder, or compare two", "report"),
    Command("search", "commands.search_config",
            "search the serving config with the most throughput within a p99 budget",
            "search_config"),
    Command("size", "commands.size_fleet", "size a fleet (replicas, GPUs, cost) from measured runs", "size_fleet"),
    Command("plan", "commands.plan_fleet",
            "from a model to a confirmed fleet plan: convert, search by open-loop capacity, size, confirm, manifests",
            "plan_fleet"),
    Command("bench", "commands.run_framework_benchmark", "benchmark the framework itself (precisions, compile)",
            "run_framework_benchmark"),
    Command("bench-overhead", "commands.benchmark_overhead", "Triton's overhead over the same runtime in-process",
            "benchmark_overhead"),
    Command("bench-ragged", "commands.benchmark_ragged",
            "what samples of different lengths cost the accuracy check, against one length"),
    Command("bench-runtimes", "commands.benchmark_runtimes",
            "compare the serving runtimes on one model", "benchmark_runtimes"),
    Command("bench-sources", "commands.benchmark_sources",
            "the same architecture from the zoo and from timm, alternated",
            "benchmark_sources"),
    Command("bench-vs-model-analyzer", "commands.benchmark_vs_model_analyzer",
            "our search against Triton's Model Analyzer",
            "benchmark_vs_model_analyzer"),
    Command("bench-deployment-vs-model-analyzer", "commands.benchmark_deployment_vs_model_analyzer",
            "a deployment of several models: plan --deployment against Model Analyzer, judged under mixed traffic"),
    Command("bench-telemetry", "commands.benchmark_telemetry",
            "what scraping the server's metrics costs the measured throughput", "benchmark_telemetry"),
    Command("bench-corpus", "commands.benchmark_corpus",
            "real architectures (transformers, torchvision, timm, torch) converted, served and measured",
            "benchmark_corpus"),
    Command("conversion-matrix", "commands.conversion_matrix", "which model converts to which format on this host",
            "conversion_matrix"),
    Command("demo", "demo", "convert, serve and measure one model end to end"),
    Command("accuracy-demo", "commands.accuracy_demo",
            "train a small U-Net and compare Triton's Dice with the framework's",
            "accuracy_demo"),
    Command("train", "commands.train_segmentation", "train the small segmentation U-Net on synthetic shapes",
            "train_segmentation"),
    Command("deploy-pipeline", "commands.deploy_pipeline",
            "a model with its pre/post-processing as a Triton ensemble: serve, verify, measure"),
    Command("deploy-diffusion", "commands.deploy_diffusion", "deploy a diffusion sampler pipeline on Triton",
            "deploy_diffusion"),
    Command("diffusion-latency", "commands.run_diffusion_latency", "per-request latency of a diffusion pipeline",
            "run_diffusion_latency"),
    Command("diffusion-speedup", "commands.run_diffusion_speedup", "diffusion speedup of the converted formats",
            "run_diffusion_speedup"),
    Command("embed-results", "commands.embed_results", "copy generated result files into the Markdown that quotes them",
            "embed_results"),
    Command("compact-results", "commands.compact_results",
            "summarise raw per-request exports and compress telemetry so a run folder stays small to commit"),
    Command("footprint", "commands.footprint", "the size of the repository and of each run folder under results/"),
    Command("gpu-check", "commands.gpu_acceptance", "GPU acceptance in one command", "gpu_acceptance"),
)}
PROG = "deployment-toolkit"
EXAMPLE = f"""example:
  {PROG} doctor
  {PROG} convert --model resnet50 --output-type onnx --output-path workspace/resnet50/onnx
  {PROG} serve --model-repository model_repository --http-port 8000 --grpc-port 8001
  {PROG} SUBCOMMAND --help"""


def usage() -> str:
    width = max(len(n) for n in COMMANDS)
    rows = "\n".join(f"  {c.name:<{width}}  {c.help}" for c in COMMANDS.values())
    return (f"usage: {PROG} SUBCOMMAND [options]\n\nConvert, configure, serve, check and measure models on "
            f"Triton Inference Server.\n\nsubcommands:\n{rows}\n\n{EXAMPLE}")


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
