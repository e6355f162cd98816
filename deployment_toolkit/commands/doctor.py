"""Report what this host has (tritonserver, perf_analyzer, libraries, GPU) and what to install."""
from __future__ import annotations

from .. import cli


def build_parser():
    d = cli.parser(__doc__, """
        deployment-toolkit doctor
        deployment-toolkit doctor --no-start   # do not start the server to read its version
    """)
    d.add_argument("--no-start", action="store_true", help="do not start the server to read its version")
    return d


def main(argv: list[str] | None = None) -> int:
    from ..doctor import run_doctor

    args = build_parser().parse_args(argv)
    return run_doctor(start_server=not args.no_start)


if __name__ == "__main__":
    cli.run(main)
