"""Offline scenario: perf_analyzer over client batch sizes at concurrency 1 (static batching).

Writes results/<run>/offline.csv (ms), offline.md ("Full tabular data"), raw/ perf_analyzer CSVs and logs,
run.json and the report. Rerunning the same command resumes where it stopped.
"""
import sys
from pathlib import Path


import argparse  # noqa: E402

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.perf.analyzer import add_perf_arguments  # noqa: E402
from deployment_toolkit.perf.online import parse_range  # noqa: E402
from deployment_toolkit.commands.perf_sweep import add_target_arguments, run_cli  # noqa: E402

EXAMPLE = """example:
  deployment-toolkit perf-offline \\
      --server-url 127.0.0.1:8001 --protocol grpc \\
      --model-name resnet50 --manifest workspace/resnet50/manifest.json \\
      --input-data random --batch-sizes 1,2,4,8 \\
      --number-of-model-instances 1 --shared-memory system \\
      --result-path results/resnet50-cpu
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, epilog=EXAMPLE,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_target_arguments(parser)
    parser.add_argument("--batch-sizes", default="1,2,4,8",
                        help="a list like 1,2,4,8 or start:end:step (default: %(default)s)")
    parser.add_argument("--concurrency", type=int, default=1, help="concurrent requests (default: %(default)s)")
    add_perf_arguments(parser)
    args = parser.parse_args(argv)
    try:
        sizes = parse_range(args.batch_sizes)
    except ValueError as err:
        parser.error(str(err))
    return run_cli("offline", args, sizes, args.concurrency)


if __name__ == "__main__":
    cli.run(main)  # SIGTERM/Ctrl-C unwind: perf_analyzer children are killed
