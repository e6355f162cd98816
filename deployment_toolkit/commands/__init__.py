"""One module per `deployment-toolkit` subcommand, each with `main(argv) -> int` (and its argparse parser).

The table of subcommands is deployment_toolkit/__main__.py::COMMANDS; the triton/*.py scripts are shims over it.
"""
