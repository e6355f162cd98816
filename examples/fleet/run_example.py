#!/usr/bin/env python3
"""Twelve models as one fleet on CPU: write the scorers, raw samples and traffic (make_fleet.py), then
`deployment-toolkit plan --deployment deployment.yaml` with short searches: each model searched under its SLO, its
capacity held, the solver's packing (peaks that do not coincide share replicas), the shared groups measured under
their mixed traffic, each group confirmed, plan.md with the solver's bound and every stage's time."""
from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SHORT = ["--preset", "small", "--formats", "onnx", "--max-minutes", "1", "--max-configs", "1",
         "--max-concurrency", "4", "--measurement-interval", "500", "--max-trials", "3", "--noise-repeats", "1",
         "--refine-steps", "0", "--capacity-trials", "1", "--capacity-resolution", "0.1",
         "--open-loop-window-ms", "500", "--retests", "1", "--confirm-trials", "1", "--confirm-window-ms", "1000",
         "--no-progress"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="example:\n  python examples/fleet/run_example.py "
                                       "--result-path results/local/plan-fleet\n"
                                       "  python examples/fleet/run_example.py --result-path results/plan-fleet-cpu "
                                       "--workspace workspace/plan-fleet-cpu --update-committed")
    p.add_argument("--result-path", type=Path, default=ROOT / "results" / "local" / "plan-fleet")
    args, rest = p.parse_known_args()  # the rest goes to `plan` as given (--workspace, --update-committed, ...)
    subprocess.run([sys.executable, str(HERE / "make_fleet.py")], check=True)
    argv = [sys.executable, "-m", "deployment_toolkit", "plan", "--deployment", str(HERE / "deployment.yaml"),
            "--result-path", str(args.result_path), *SHORT, *rest]
    print("$", shlex.join(argv), flush=True)
    return subprocess.run(argv, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
