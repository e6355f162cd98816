#!/usr/bin/env python3
"""Two models as one fleet on CPU: write the image pipeline's raw samples, then `deployment-toolkit plan
--deployment deployment.yaml` (a classifier behind image decoding and top-5 labels, and a second network): each
searched under its SLO, capacities held k of k, the layout chosen by cost, the fleet confirmed under both models'
traffic at once, plan.md and the Kubernetes manifests per replica group."""
from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FAST = ["--max-minutes", "1.5", "--measurement-interval", "500", "--max-trials", "3", "--noise-repeats", "1",
        "--refine-steps", "0", "--max-configs", "1", "--capacity-trials", "1", "--open-loop-window-ms", "500",
        "--retests", "1", "--confirm-trials", "1", "--confirm-window-ms", "1000"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--result-path", type=Path, default=ROOT / "results" / "local" / "plan-shop")
    p.add_argument("--fast", action="store_true", help="short searches and windows, one re-test (CI)")
    args = p.parse_args()
    subprocess.run([sys.executable, str(ROOT / "examples" / "image_pipeline" / "make_images.py"), "--output",
                    str(ROOT / "workspace" / "plan-shop" / "images")], check=True)
    argv = [sys.executable, "-m", "deployment_toolkit", "plan", "--deployment", str(HERE / "deployment.yaml"),
            "--preset", "small", "--max-concurrency", "4", "--result-path", str(args.result_path),
            *(FAST if args.fast else ["--max-minutes", "4"])]
    print("$", shlex.join(argv), flush=True)
    return subprocess.run(argv, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
