"""Build report.md, report.html and plots for a results folder; with a second folder, also compare them.

The comparison (per-point throughput and p99 deltas of RUN_B against RUN, absolute and %) is printed and
saved as RUN_B/compare.md.
"""
import sys
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.committed import refuse_committed  # noqa: E402
from deployment_toolkit.report.build import build_report, compare_runs  # noqa: E402

EXAMPLE = """
  deployment-toolkit report results/local/resnet50-cpu
  deployment-toolkit report results/local/resnet50-cpu results/local/resnet50-2-instances   # + compare.md in the second
"""


def main(argv=None) -> int:
    parser = cli.parser(__doc__, EXAMPLE)
    parser.add_argument("run", type=Path, help="results folder (with online.csv and/or offline.csv, run.json)")
    parser.add_argument("run_b", type=Path, nargs="?", help="second results folder to compare against the first")
    args = parser.parse_args(argv)
    for run in filter(None, (args.run, args.run_b)):  # a report rewrites report.md/html (and compare.md) there
        refuse_committed(run, "a results folder report.py writes into")
    try:
        for run in filter(None, (args.run, args.run_b)):
            paths = build_report(run)
            print(f"{run}: {paths['report.md']}, {paths['report.html']}")
        if args.run_b:
            print(compare_runs(args.run, args.run_b))
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    cli.run(main)
