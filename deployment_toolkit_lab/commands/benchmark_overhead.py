"""Serving overhead, side by side in one run: in-process ONNX Runtime throughput vs the same ONNX model served
by the embedded Triton server (Python backend running ONNX Runtime, dynamic batching), best point of an online
sweep through perf_analyzer. Converts the model, writes one repository entry per serving variant (instances x
intra-op threads), starts the server, and per batch size times in-process, sweeps every variant, times
in-process again. Prints served / in-process; writes overhead.csv, served_points.csv, overhead.md and run.json
(with the per-stage breakdown and Triton's executed-batch statistics) to --result-path."""
import argparse
import sys
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.config import add_arguments, from_args  # noqa: E402
from deployment_toolkit.results.run_folder import add_result_path_argument  # noqa: E402
from deployment_toolkit.committed import refuse_committed  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    p = cli.parser(__doc__, """
        deployment-toolkit-lab bench-overhead --model resnet50 --preset full --batch-sizes 1,8 \\
            --concurrency 1,2,3,4 --variants 1x0 2x1 --inprocess-seconds 10 \\
            --measurement-interval 5000 --result-path results/overhead-resnet50-cpu
    """)
    from deployment_toolkit.perf.analyzer import add_perf_arguments
    from ..overhead.bench import OverheadOptions

    # --model ... --bar: the run's settings, each default written once in OverheadOptions
    add_arguments(p, OverheadOptions, skip=("server_start_timeout_s",))
    p.add_argument("--workspace", default=None, help="ONNX artifact, repository, server log (default: workspace/overhead-<model>)")
    add_result_path_argument(p, help="default: results/overhead-<model>-cpu")
    add_arguments(p, OverheadOptions, only=("server_start_timeout_s",))
    p.add_argument("--private-shm", choices=("auto", "yes", "no"), default="auto",
                   help="run in a private /dev/shm (needs root): perf_analyzer's shared-memory files are named after "
                        "the tensors, so another perf_analyzer on the host can truncate them under this server; "
                        "auto = when possible and --shared-memory is system (default)")
    add_perf_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    if args.single_client_rounds < 0:
        p.error(f"--single-client-rounds {args.single_client_rounds}: give 0 (none) or more rounds")
    if args.data_dir is not None or args.dataloader is not None:
        p.error("--data-dir/--dataloader are not supported here: the in-process side of the comparison runs on "
                "random inputs, so the served side must too")

    import os
    import subprocess

    from ..overhead.private_shm import PRIVATE_SHM_ENV, private_shm_command, private_shm_reason

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
    from deployment_toolkit.perf.analyzer import perf_options_from_args
    from ..overhead.bench import OverheadOptions, run_overhead, to_markdown

    from deployment_toolkit.sources import resolve

    slug = resolve(args.model, preset=args.preset).slug  # a bad model source: a clear error before anything runs
    perf = perf_options_from_args(args, shared_memory=SharedMemory.SYSTEM if args.shared_memory == "auto" else None)
    opts = from_args(OverheadOptions, args, perf=perf, workspace=Path(args.workspace or f"workspace/overhead-{slug}"))
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
