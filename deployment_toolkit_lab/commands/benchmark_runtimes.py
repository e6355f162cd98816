"""Throughput of PyTorch eager vs ONNX Runtime (CPU, default threads) for registered models, side by side
in one process: the same random batches, timed calls interleaved between the runtimes, median of the timed
iterations after warm-up. Prints the ORT/eager ratio; writes runtime_speed.csv, runtime_speed.md and run.json."""
import sys
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.results.run_folder import add_result_path_argument  # noqa: E402
from deployment_toolkit.committed import refuse_committed  # noqa: E402
from deployment_toolkit.config import add_arguments, from_args  # noqa: E402
from deployment_toolkit.export.convert import ConvertOptions  # noqa: E402
from ..runtime_speed import DEFAULT_BATCH_SIZES, DEFAULT_SEED, TimingOptions  # noqa: E402


def _parser():
    p = cli.parser(__doc__, """
        deployment-toolkit-lab bench-runtimes --models resnet50 nnunet3d:1 --preset full --batch-sizes 1,8 \\
            --warmup 1 --iterations 10 --min-iterations 3 --max-seconds 30 --result-path results/runtime-speed-cpu
    """)
    p.add_argument("--models", nargs="+", required=True, metavar="MODEL[:B1,B2]",
                   help="models (a zoo name, timm:<arch>, a model.py with get_signature, an ONNX file or an artifact "
                        "folder); a :B1,B2 suffix sets that model's batch sizes")
    add_arguments(p, ConvertOptions, only=("preset",))
    p.add_argument("--batch-sizes", type=cli.int_list, default=DEFAULT_BATCH_SIZES,
                   help="default batch sizes, e.g. 1,8 (default 1)")
    add_arguments(p, TimingOptions)  # --warmup, --iterations, --min-iterations, --max-seconds, --wait-quiet, --retries
    p.add_argument("--onnx-dir", default=None, help="use this convert_model ONNX output instead of exporting (one model)")
    add_result_path_argument(p, "--result-dir", dest="result_dir", required=True,
                             help="results/<run>: CSV, markdown and run.json go here")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the random weights and batches")
    return p


def main(argv: list[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    refuse_committed(args.result_dir, "--result-path")

    import os
    import resource
    from dataclasses import asdict

    from ..runtime_speed import SpeedPlan, measure_model, to_markdown, write_results

    plans = [SpeedPlan.parse(m) for m in args.models]
    if args.onnx_dir and len(plans) > 1:
        p.error("--onnx-dir works with one model only")
    timing = from_args(TimingOptions, args, min_iterations=min(args.min_iterations, args.iterations))
    load_before = os.getloadavg()
    rows = []
    for plan in plans:
        rows += measure_model(plan.model, args.preset, plan.batch_sizes or args.batch_sizes, timing,
                              seed=args.seed, onnx_dir=args.onnx_dir)
    config = {
        "models": [{"model": pl.model, "batch_sizes": list(pl.batch_sizes or args.batch_sizes)} for pl in plans],
        "preset": args.preset, "timing": asdict(timing), "seed": args.seed,
        "statistic": "median seconds per call; throughput = batch / median",
        "interleaved": True,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2, 2),
    }
    paths = write_results(args.result_dir, rows, config)
    print(to_markdown(rows), end="")
    print("wrote " + ", ".join(str(v) for v in paths.values()))
    return 0


if __name__ == "__main__":
    cli.run(main)
