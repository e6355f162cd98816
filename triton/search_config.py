#!/usr/bin/env python3
"""Search the serving config (instances, runtime threads, max batch, preferred batch sizes, queue delay,
format) that gives the most throughput within a p99 budget on this host, measured on the real server."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import deployment_toolkit  # noqa: E402,F401  (first: hides the triton/ folder from torch before it loads)
from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.search.cli import main  # noqa: E402

if __name__ == "__main__":
    cli.run(main)
