"""In-process framework throughput bench (no server): models x precision (fp32/fp16/bf16/amp) x torch.compile
mode x batch size x runtime (torch eager, TorchScript, ONNX Runtime). Warm-up calls, then a timed duration;
throughput, mean/p50/p95/p99 latency and peak memory (CUDA max allocated on a GPU, peak-RSS growth on CPU);
the batch is halved on out-of-memory; combinations the host cannot run are recorded as skipped with the
reason. Rows go to <result-dir>/<device_slug>.csv (+ <device_slug>_hardware.json); a rerun skips completed
configurations. Geospatial models get km^2/s coverage columns at each --gsd-m."""
import sys
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.results.run_folder import add_result_path_argument  # noqa: E402
from deployment_toolkit.results.ledger import add_reuse_arguments  # noqa: E402
from deployment_toolkit.committed import refuse_committed  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(__doc__, """
        deployment-toolkit bench --models resnet50 s2_resnet50 --preset full \\
            --precisions fp32 bf16 amp --compile-modes none default --batch-sizes 1,8 \\
            --runtimes eager torchscript onnxruntime --warmup 5 --duration 5 --gsd-m 10 30
    """)
    from deployment_toolkit.perf.framework import COMPILE_MODES, PRECISIONS, RUNTIMES, BenchRun, Isolation

    p.add_argument("--models", nargs="+", default=["resnet50"],
                   help="models: each a zoo name, timm:<arch>, a model.py with get_signature, an ONNX file or an artifact folder (the source its manifest records) (default: resnet50)")
    p.add_argument("--preset", default="full", help="model preset (default: full)")
    p.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS))
    p.add_argument("--compile-modes", nargs="+", choices=COMPILE_MODES, default=["none", "default"],
                   help="torch.compile modes, eager runtime only (default: none default)")
    p.add_argument("--runtimes", nargs="+", choices=RUNTIMES, default=list(RUNTIMES))
    p.add_argument("--batch-sizes", type=cli.int_list, default=(1, 8), help="e.g. 1,8,32 (halved on OOM)")
    p.add_argument("--device", default="auto", help="cpu, cuda:N or auto (default: a GPU if torch sees one)")
    p.add_argument("--warmup", type=int, default=10, help="untimed calls per configuration (default 10)")
    p.add_argument("--duration", type=float, default=30.0, help="timed seconds per configuration (default 30)")
    p.add_argument("--min-iterations", type=int, default=3, help="timed calls at least (default 3)")
    p.add_argument("--threads", type=int, default=0, help="torch / ONNX Runtime intra-op threads (0: their default)")
    p.add_argument("--amp-dtype", choices=("auto", "fp16", "bf16"), default="auto",
                   help="autocast dtype for amp (auto: bf16 on CPU, fp16 on CUDA)")
    p.add_argument("--no-tf32", action="store_true", help="keep fp32 matmuls/convs in full fp32 on Ampere+ GPUs")
    p.add_argument("--gsd-m", type=float, nargs="+", default=[10.0],
                   help="ground sample distances (m) for the geospatial km^2/s columns (default 10)")
    add_result_path_argument(p, "--result-dir", dest="result_dir", default="results/framework-bench",
                             help="default: %(default)s")
    p.add_argument("--isolate", choices=Isolation.values(), default=BenchRun.isolate.value,
                   help="run torch.compile groups (or all groups) in a child process with --config-timeout")
    p.add_argument("--config-timeout", type=float, default=BenchRun.timeout_s,
                   help="seconds one isolated configuration may take, compile included (default 900)")
    p.add_argument("--remeasure", action="store_true", help="measure completed configurations again")
    add_reuse_arguments(p, "rows of the device's CSV")
    p.add_argument("--dry-run", action="store_true", help="print the plan (with skip reasons) and exit")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    refuse_committed(args.result_dir, "--result-path")
    if args.warmup < 1 or args.duration <= 0 or args.min_iterations < 1:
        p.error("--warmup and --min-iterations must be >= 1, --duration > 0")

    import os

    from deployment_toolkit.perf.framework import (
        BenchOptions,
        BenchRun,
        default_device,
        device_slug,
        enumerate_configs,
        plan_run,
        probe_host,
        run_bench,
        summary_table,
    )
    from deployment_toolkit.results.bench_store import BenchCSV

    from deployment_toolkit.sources import resolve

    for name in args.models:
        resolve(name, preset=args.preset)  # unknown model/preset or a bad source: a clear error before anything runs
    device = default_device() if args.device == "auto" else args.device
    opts = BenchOptions(device=device, warmup=args.warmup, duration_s=args.duration, min_iterations=args.min_iterations,
                        gsd_m=tuple(args.gsd_m), amp_dtype=args.amp_dtype, tf32=not args.no_tf32, seed=args.seed)
    configs = enumerate_configs(args.models, args.precisions, args.compile_modes, args.batch_sizes, args.runtimes,
                                preset=args.preset, threads=args.threads)
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
    run = BenchRun(isolate=args.isolate, timeout_s=args.config_timeout, remeasure=args.remeasure,
                   progress=not args.no_progress, reuse=args.reuse)
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
