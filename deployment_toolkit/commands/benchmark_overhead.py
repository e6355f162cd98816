"""Serving overhead, side by side in one run: in-process ONNX Runtime throughput vs the same ONNX model served
by the embedded Triton server (Python backend running ONNX Runtime, dynamic batching), best point of an online
sweep through perf_analyzer. Converts the model, writes one repository entry per serving variant (instances x
intra-op threads), starts the server, and per batch size times in-process, sweeps every variant, times
in-process again. Prints served / in-process; writes overhead.csv, served_points.csv, overhead.md and run.json
(with the per-stage breakdown and Triton's executed-batch statistics) to --result-path."""
import sys
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.results.run_folder import add_result_path_argument  # noqa: E402
from deployment_toolkit.committed import refuse_committed  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(__doc__, """
        deployment-toolkit bench-overhead --model resnet50 --preset full --batch-sizes 1,8 \\
            --concurrency 1,2,3,4 --variants 1x0 2x1 --inprocess-seconds 10 \\
            --measurement-interval 5000 --result-path results/overhead-resnet50-cpu
    """)
    from deployment_toolkit.perf.analyzer import add_perf_arguments, perf_options_from_args

    p.add_argument("--model", default="resnet50", help="a zoo name, timm:<arch>, a model.py with get_signature, an ONNX file or an artifact folder (the source its manifest records) (default: resnet50)")
    p.add_argument("--preset", default="full", help="default: full")
    p.add_argument("--batch-sizes", type=cli.int_list, default=(1, 8), help="client batch sizes (default 1,8)")
    p.add_argument("--concurrency", default="1:4:1", help="online sweep levels: start:end:step or a list (default 1:4:1)")
    p.add_argument("--variants", nargs="+", default=["1x0", "2x1"], metavar="INSTANCESxTHREADS",
                   help="serving variants, instances x intra-op threads, 0 = ONNX Runtime's default (default: 1x0 2x1)")
    p.add_argument("--inprocess-warmup", type=int, default=3, help="untimed in-process calls (default 3)")
    p.add_argument("--inprocess-seconds", type=float, default=10.0, help="timed in-process seconds, twice (default 10)")
    p.add_argument("--single-client-rounds", type=int, default=3,
                   help="rounds of in-process timing then served at concurrency 1, in turns on one server, per batch "
                        "(the single client's ratio; 0: none; default %(default)s)")
    p.add_argument("--max-queue-delay-us", type=int, default=0, help="dynamic batcher delay (default 0)")
    p.add_argument("--bar", type=float, default=0.8, help="acceptance bar for served / in-process (default 0.8)")
    p.add_argument("--workspace", default=None, help="ONNX artifact, repository, server log (default: workspace/overhead-<model>)")
    add_result_path_argument(p, help="default: results/overhead-<model>-cpu")
    p.add_argument("--server-start-timeout", "--server-timeout", type=float, default=300.0)
    p.add_argument("--private-shm", choices=("auto", "yes", "no"), default="auto",
                   help="run in a private /dev/shm (needs root): perf_analyzer's shared-memory files are named after "
                        "the tensors, so another perf_analyzer on the host can truncate them under this server; "
                        "auto = when possible and --shared-memory is system (default)")
    add_perf_arguments(p)
    args = p.parse_args(argv)
    if args.single_client_rounds < 0:
        p.error(f"--single-client-rounds {args.single_client_rounds}: give 0 (none) or more rounds")
    if args.data_dir is not None or args.dataloader is not None:
        p.error("--data-dir/--dataloader are not supported here: the in-process side of the comparison runs on "
                "random inputs, so the served side must too")

    import os
    import subprocess

    from deployment_toolkit.perf.private_shm import PRIVATE_SHM_ENV, private_shm_command, private_shm_reason

    system_shm = args.shared_memory in ("auto", "system")
    inside = os.environ.get(PRIVATE_SHM_ENV) == "1"
    if args.private_shm != "no" and system_shm and not inside:
        why_not = private_shm_reason()
        if why_not is None:
            cmd = private_shm_command([sys.executable, *sys.argv])
            return subprocess.call(cmd, env={**os.environ, PRIVATE_SHM_ENV: "1"})
        if args.private_shm == "yes":
            p.error(f"--private-shm yes: {why_not}")
        print(f"note: shared /dev/shm ({why_not}): a concurrent perf_analyzer using the same tensor names can "
              "disturb this run", file=sys.stderr)

    from deployment_toolkit.config import SharedMemory
    from deployment_toolkit.perf.online import parse_range
    from deployment_toolkit.perf.overhead import OverheadOptions, Variant, run_overhead, to_markdown

    from deployment_toolkit.sources import resolve

    slug = resolve(args.model, preset=args.preset).slug  # a bad model source: a clear error before anything runs
    perf = perf_options_from_args(args, shared_memory=SharedMemory.SYSTEM if args.shared_memory == "auto" else None)
    opts = OverheadOptions(
        model=args.model, preset=args.preset, batch_sizes=tuple(args.batch_sizes),
        concurrencies=tuple(parse_range(args.concurrency)), variants=tuple(Variant.parse(v) for v in args.variants),
        inprocess_warmup=args.inprocess_warmup, inprocess_seconds=args.inprocess_seconds,
        single_client_rounds=args.single_client_rounds, max_queue_delay_us=args.max_queue_delay_us, bar=args.bar,
        perf=perf,
        workspace=Path(args.workspace or f"workspace/overhead-{slug}"),
        server_start_timeout_s=args.server_start_timeout,
    )
    result_dir = Path(args.result_path or f"results/overhead-{slug}-cpu")
    refuse_committed(result_dir, "--result-path")
    result = run_overhead(opts, result_dir, run_config={"argv": sys.argv[1:], "private_shm": inside})
    print(to_markdown(result.rows, opts, _config(result)))
    print("wrote " + ", ".join(str(v) for v in result.paths.values()))
    low = [r for r in result.rows if r["reported"] and not r["ratio"] >= opts.bar]
    return 1 if low else 0


def _config(result) -> dict:
    from deployment_toolkit.results.runinfo import read_run_json

    return read_run_json(result.result_dir).get("config", {})


if __name__ == "__main__":
    cli.run(main)
