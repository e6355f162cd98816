"""GPU acceptance in one command (`make gpu-check`): on a CUDA host, within --max-minutes of device time, run the
toolkit's own scripts as steps and record them: the framework bench (resnet50, a ViT, the 3D nnU-Net; fp32/TF32,
fp16, bf16, AMP; eager and torch.compile; OOM halving), fp16 conversions to TorchScript, ONNX and TensorRT
verified on the GPU against the framework, the embedded tritonserver with the Python backend running torch on
CUDA (KIND_GPU, fp16): accuracy vs the framework, perf_analyzer over CUDA shared memory (offline batch sweep,
online concurrency sweep, the 3D nnU-Net at concurrency 1..8 beside seed 001's A100/T4 figures), and diffusion
latency per request at 8 and 18 steps (seed 000's method).

Every step ends ok, failed (reason) or skipped (reason); one failure does not stop the others; each has a time
budget. Writes <result-path>/run.json (GPU, driver, CUDA, clocks, versions), steps.json, logs/, the stages'
CSVs and README.md. Exit 0: every step ok or skipped; 1: a step failed; 2: no usable GPU or bad input.

A command of the lab (deployment_toolkit_lab/acceptance/ is its plan, runner and README writer): it measures the
toolkit itself, as Model Analyzer keeps its QA in `qa/`."""
import argparse

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.results.run_folder import add_result_path_argument  # noqa: E402


def _budget(text: str) -> tuple[str, float]:
    from ..acceptance.plan import DEFAULT_BUDGETS

    stage, sep, seconds = text.partition("=")
    try:
        value = float(seconds)
    except ValueError:
        value = -1.0
    if not sep or stage not in DEFAULT_BUDGETS or value <= 0:
        raise argparse.ArgumentTypeError(
            f"--budget {text!r}: expected STAGE=SECONDS with STAGE one of {', '.join(DEFAULT_BUDGETS)}")
    return stage, value


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(__doc__, """
        deployment-toolkit-lab gpu-check                  # results/gpu-<device-slug>/
        deployment-toolkit-lab gpu-check --dry-run        # the plan, on any host
        deployment-toolkit-lab gpu-check --result-path results/gpu-nvidia-h100-80gb-hbm3 --max-minutes 10 \\
            --budget framework-compile=200
    """)
    add_result_path_argument(p, help="default: results/gpu-<device-slug>")
    p.add_argument("--workspace", default="workspace/gpu-acceptance",
                   help="artifacts and the model repository (its model_repository/ is rewritten each run)")
    p.add_argument("--max-minutes", type=float, default=10.0, help="device time for the whole check (default 10)")
    p.add_argument("--budget", type=_budget, action="append", default=[], metavar="STAGE=SECONDS",
                   help="a stage's per-step budget (repeatable)")
    p.add_argument("--stages", nargs="+", default=None, help="only these stages (default: all)")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--dry-run", action="store_true", help="print the steps, their commands and budgets, and exit")
    args = p.parse_args(argv)
    if args.max_minutes <= 0:
        p.error("--max-minutes must be > 0")

    from ..acceptance.check import run_check

    return run_check(args)


if __name__ == "__main__":
    cli.run(main)
