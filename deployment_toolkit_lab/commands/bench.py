"""`deployment-toolkit-lab bench`: the framework bench. Its command line stays in the toolkit's command layer
(deployment_toolkit/commands/run_framework_benchmark.py, not a subcommand there) because gpu-check runs it as its
framework stages; the lab lists it."""
from deployment_toolkit.commands.run_framework_benchmark import main

__all__ = ["main"]
