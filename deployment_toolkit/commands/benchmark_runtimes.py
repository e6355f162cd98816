"""Throughput of PyTorch eager vs ONNX Runtime (CPU, default threads) for registered models, side by side
in one process: the same random batches, timed calls interleaved between the runtimes, median of the timed
iterations after warm-up. Prints the ORT/eager ratio; writes runtime_speed.csv, runtime_speed.md and run.json."""
import sys
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.results.run_folder import add_result_path_argument  # noqa: E402
from deployment_toolkit.committed import refuse_committed  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(__doc__, """
        deployment-toolkit bench-runtimes --models resnet50 nnunet3d:1 --preset full --batch-sizes 1,8 \\
            --warmup 1 --iterations 10 --min-iterations 3 --max-seconds 30 --result-path results/runtime-speed-cpu
    """)
    p.add_argument("--models", nargs="+", required=True, metavar="MODEL[:B1,B2]",
                   help="models (a zoo name, timm:<arch>, a model.py with get_signature, an ONNX file or an artifact "
                        "folder); a :B1,B2 suffix sets that model's batch sizes")
    p.add_argument("--preset", default="small", help="small (CI size) or full (benchmark size)")
    p.add_argument("--batch-sizes", type=cli.int_list, default=(1,), help="default batch sizes, e.g. 1,8")
    p.add_argument("--warmup", type=int, default=1, help="untimed calls per runtime and batch size")
    p.add_argument("--iterations", type=int, default=10, help="timed calls per runtime and batch size (at most)")
    p.add_argument("--min-iterations", type=int, default=3, help="timed calls at least, whatever --max-seconds says")
    p.add_argument("--max-seconds", type=float, default=None,
                   help="stop timing a batch size once a runtime has spent this long (slow models)")
    p.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                   help="shared machines: before each point, wait up to this long for other processes to go quiet")
    p.add_argument("--retries", type=int, default=0,
                   help="shared machines: re-time a point during which other processes used > 10%% of the CPU")
    p.add_argument("--onnx-dir", default=None, help="use this convert_model ONNX output instead of exporting (one model)")
    add_result_path_argument(p, "--result-dir", dest="result_dir", required=True,
                             help="results/<run>: CSV, markdown and run.json go here")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    refuse_committed(args.result_dir, "--result-path")
    if args.warmup < 0 or args.iterations < 1 or not 1 <= args.min_iterations:
        p.error("--warmup must be >= 0, --iterations and --min-iterations >= 1")

    import os
    import resource
    from dataclasses import asdict

    from deployment_toolkit.export.speed import SpeedPlan, TimingOptions, measure_model, to_markdown, write_results

    plans = [SpeedPlan.parse(m) for m in args.models]
    if args.onnx_dir and len(plans) > 1:
        p.error("--onnx-dir works with one model only")
    timing = TimingOptions(warmup=args.warmup, iterations=args.iterations,
                           min_iterations=min(args.min_iterations, args.iterations), max_seconds=args.max_seconds,
                           wait_quiet_s=args.wait_quiet, retries=max(args.retries, 0))
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
