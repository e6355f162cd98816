"""Online scenario: perf_analyzer over a range of concurrent client requests at batch 1 (dynamic batching).

Writes results/<run>/online.csv (ms), online.md ("Full tabular data"), raw/ perf_analyzer CSVs and logs,
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
  deployment-toolkit perf-online \\
      --server-url 127.0.0.1:8001 --protocol grpc \\
      --model-name resnet50 --manifest workspace/resnet50/manifest.json \\
      --input-data random --concurrency 1:8:1 \\
      --number-of-model-instances 1 --shared-memory system \\
      --result-path results/resnet50-cpu
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, epilog=EXAMPLE,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_target_arguments(parser)
    parser.add_argument("--concurrency", default="1:8:1",
                        help="start:end:step (end included) or a list like 1,2,4,8 (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=1, help="client batch size (default: %(default)s)")
    add_perf_arguments(parser)
    args = parser.parse_args(argv)
    try:
        levels = parse_range(args.concurrency)
    except ValueError as err:
        parser.error(str(err))
    return run_cli("online", args, levels, args.batch_size)


if __name__ == "__main__":
    cli.run(main)  # SIGTERM/Ctrl-C unwind: perf_analyzer children are killed
