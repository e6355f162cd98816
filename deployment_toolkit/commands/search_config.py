"""Search the serving config (instances, runtime threads, max batch, preferred batch sizes, queue delay,
format) that gives the most throughput within a p99 budget on this host, measured on the real server."""
from deployment_toolkit import cli
from deployment_toolkit.search.cli import main

if __name__ == "__main__":
    cli.run(main)
