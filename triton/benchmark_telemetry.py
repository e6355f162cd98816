#!/usr/bin/env python3
"""`deployment-toolkit bench-telemetry`: what scraping the server's metrics costs; the command is
deployment_toolkit/commands/benchmark_telemetry.py."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout runs without `pip install`
from deployment_toolkit.__main__ import run_script  # noqa: E402

if __name__ == "__main__":
    run_script("bench-telemetry")
