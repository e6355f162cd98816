#!/usr/bin/env python3
"""`deployment-toolkit plan`: from a model to a confirmed fleet plan; the command is
deployment_toolkit/commands/plan_fleet.py."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout runs without `pip install`
from deployment_toolkit.__main__ import run_script  # noqa: E402

if __name__ == "__main__":
    run_script("plan")
