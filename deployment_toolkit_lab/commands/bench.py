"""In-process framework throughput bench (no server): models x precision (fp32/fp16/bf16/amp) x torch.compile
mode x batch size x runtime (torch eager, TorchScript, ONNX Runtime). Warm-up calls, then a timed duration;
throughput, mean/p50/p95/p99 latency and peak memory (CUDA max allocated on a GPU, peak-RSS growth on CPU);
the batch is halved on out-of-memory; combinations the host cannot run are recorded as skipped with the
reason. Rows go to <result-dir>/<device_slug>.csv (+ <device_slug>_hardware.json); a rerun skips completed
configurations. Geospatial models get km^2/s coverage columns at each --gsd-m.

A benchmark of the framework and of the toolkit's exports, so a command of the lab (its library:
deployment_toolkit_lab/framework_bench/); the lab's gpu-check runs it as its framework stages
(`python -m deployment_toolkit_lab bench`)."""
import argparse
import sys
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.config import add_arguments, from_args  # noqa: E402
from deployment_toolkit.results.run_folder import add_result_path_argument  # noqa: E402
from deployment_toolkit.results.ledger import add_reuse_arguments  # noqa: E402
from deployment_toolkit.committed import refuse_committed  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    p = cli.parser(__doc__, """
        deployment-toolkit-lab bench --models resnet50 s2_resnet50 --preset full \\
            --precisions fp32 bf16 amp --compile-modes none default --batch-sizes 1,8 \\
            --runtimes eager torchscript onnxruntime --warmup 5 --duration 5 --gsd-m 10 30
        deployment-toolkit-lab bench --models resnet18 --preset small --dry-run
    """)
    from ..framework_bench import BenchMatrix, BenchOptions, BenchRun

    add_arguments(p, BenchMatrix, skip=("threads",))  # --models, --preset, --precisions, ... --batch-sizes
    p.add_argument("--device", default="auto", help="cpu, cuda:N or auto (default: a GPU if torch sees one)")
    add_arguments(p, BenchOptions, only=("warmup", "duration_s", "min_iterations"))
    add_arguments(p, BenchMatrix, only=("threads",))
    add_arguments(p, BenchOptions, only=("amp_dtype", "tf32"))
    add_arguments(p, BenchOptions, only=("gsd_m",))
    add_result_path_argument(p, "--result-dir", dest="result_dir", default="results/framework-bench",
                             help="default: %(default)s")
    add_arguments(p, BenchRun, only=("isolate", "timeout_s", "remeasure"))
    add_reuse_arguments(p, "rows of the device's CSV")
    p.add_argument("--dry-run", action="store_true", help="print the plan (with skip reasons) and exit")
    add_arguments(p, BenchRun, only=("progress",))
    add_arguments(p, BenchOptions, only=("seed",))
    return p


def main(argv: list[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    refuse_committed(args.result_dir, "--result-path")
    if args.warmup < 1 or args.duration_s <= 0 or args.min_iterations < 1:
        p.error("--warmup and --min-iterations must be >= 1, --duration > 0")

    import os

    from deployment_toolkit.results.bench_store import BenchCSV
    from deployment_toolkit.sources import resolve

    from ..framework_bench import (
        BenchMatrix,
        BenchOptions,
        BenchRun,
        default_device,
        device_slug,
        plan_run,
        probe_host,
        run_bench,
        summary_table,
    )

    for name in args.models:
        resolve(name, preset=args.preset)  # unknown model/preset or a bad source: a clear error before anything runs
    device = default_device() if args.device == "auto" else args.device
    opts = from_args(BenchOptions, args, device=device)
    configs = from_args(BenchMatrix, args).configs()
    if args.dry_run:
        caps = probe_host(device, check_compile=False)
        store = BenchCSV(Path(args.result_dir) / f"{device_slug(device)}.csv")
        plan = plan_run(configs, caps, store.read(), args.amp_dtype, args.remeasure)
        print(plan.summary() + f" ({store.path}; torch.compile not probed in a dry run)")
        for cfg in plan.todo:
            print(f"  measure  {cfg.label}")
        for cfg, reason in plan.unsupported:
            print(f"  skip     {cfg.label}: {reason}")
        for cfg in plan.done:
            print(f"  done     {cfg.label}")
        return 0

    load_before = os.getloadavg()
    run_config = {"models": args.models, "preset": args.preset, "precisions": args.precisions,
                  "compile_modes": args.compile_modes, "runtimes": args.runtimes,
                  "batch_sizes": list(args.batch_sizes), "threads": args.threads,
                  "load_average_before": [round(x, 2) for x in load_before]}
    run = from_args(BenchRun, args, reuse=args.reuse)
    csv_path, rows, plan = run_bench(configs, opts, args.result_dir, run, run_config=run_config)
    load_after = os.getloadavg()
    if rows:
        print(summary_table(rows))
    print(f"{plan.summary()}; wrote {csv_path} (load average before {load_before[0]:.2f}, "
          f"after {load_after[0]:.2f} on {os.cpu_count()} logical cores)")
    failed = [r for r in rows if r["status"] == "failed"]
    if failed:
        print(f"{len(failed)} configuration(s) failed (status=failed in the CSV; a rerun tries them again)",
              file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    cli.run(main)
