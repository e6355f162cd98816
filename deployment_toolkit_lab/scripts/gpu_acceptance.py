#!/usr/bin/env python3
"""`deployment-toolkit-lab gpu-check`: this script keeps the name it had in triton/ and its flags; the command is
deployment_toolkit_lab/commands/gpu_check.py."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # a checkout runs without `pip install`
from deployment_toolkit_lab.__main__ import run_script  # noqa: E402

if __name__ == "__main__":
    run_script("gpu-check")
