#!/usr/bin/env python3
"""The text pipeline end to end on CPU: train the tokenizer (tokenizer.json, beside preprocess.py), write a few
UTF-8 texts, then one command converts model.py (a small BERT for sequence classification, random weights) to
ONNX, runs preprocess.py -> the model -> postprocess.py in-process on the texts, writes the ensemble, serves it on
the embedded tritonserver, compares it with the in-process run text by text, measures it with perf_analyzer on
the raw strings and times it against its steps in-process."""
from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def command(workspace: Path, result: Path, fast: bool) -> list[str]:
    return [sys.executable, "-m", "deployment_toolkit", "deploy-pipeline", "--input-path", str(HERE / "model.py"),
            "--preprocess", str(HERE / "preprocess.py"), "--postprocess", str(HERE / "postprocess.py"),
            "--raw-data", str(workspace / "texts"), "--name", "sentiment", "--workspace", str(workspace),
            "--result-path", str(result), "--concurrency", "1" if fast else "1,2,4",
            "--measurement-interval", "500" if fast else "3000", "--speed-rounds", "2" if fast else "5"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--workspace", type=Path, default=ROOT / "workspace" / "text_pipeline")
    p.add_argument("--result-path", type=Path, default=ROOT / "results" / "local" / "text_pipeline")
    p.add_argument("--fast", action="store_true", help="one perf point with short windows (CI)")
    args = p.parse_args()
    subprocess.run([sys.executable, str(HERE / "make_tokenizer.py")], check=True)
    subprocess.run([sys.executable, str(HERE / "make_texts.py"), "--output", str(args.workspace / "texts")], check=True)
    argv = command(args.workspace, args.result_path, args.fast)
    print("$", shlex.join(argv), flush=True)
    return subprocess.run(argv, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
