#!/usr/bin/env python3
"""The image pipeline end to end on CPU: write a few JPEG/PNG images, then one command converts timm's resnet18
(random weights, 10 classes) to ONNX, runs preprocess.py -> the model -> postprocess.py in-process on the images,
writes the ensemble, serves it on the embedded tritonserver, compares it with the in-process run image by image,
measures it with perf_analyzer on the image bytes and times it against its steps in-process."""
from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def command(workspace: Path, result: Path, fast: bool) -> list[str]:
    return [sys.executable, "-m", "deployment_toolkit", "deploy-pipeline", "--model", "timm:resnet18",
            "--num-classes", "10", "--preprocess", str(HERE / "preprocess.py"),
            "--postprocess", str(HERE / "postprocess.py"), "--raw-data", str(workspace / "images"),
            "--name", "classifier", "--workspace", str(workspace), "--result-path", str(result),
            "--concurrency", "1" if fast else "1,2,4", "--measurement-interval", "500" if fast else "3000",
            "--speed-rounds", "2" if fast else "5"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--workspace", type=Path, default=ROOT / "workspace" / "image_pipeline")
    p.add_argument("--result-path", type=Path, default=ROOT / "results" / "local" / "image_pipeline")
    p.add_argument("--fast", action="store_true", help="one perf point with short windows (CI)")
    args = p.parse_args()
    subprocess.run([sys.executable, str(HERE / "make_images.py"), "--output", str(args.workspace / "images")],
                   check=True)
    argv = command(args.workspace, args.result_path, args.fast)
    print("$", shlex.join(argv), flush=True)
    return subprocess.run(argv, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
