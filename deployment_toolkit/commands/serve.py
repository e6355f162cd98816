"""Run the embedded tritonserver on a model repository until Ctrl-C or SIGTERM (loopback by default)."""
from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .. import cli
from ..cleanup import signals_deferred

if TYPE_CHECKING:
    from ..server.local import ServerConfig

SERVE_FLAGS = ("model_repository", "http_port", "grpc_port", "metrics_port", "address", "model_control_mode",
               "log_dir", "log_verbose")
USUAL_PORTS = {"http_port": 8000, "grpc_port": 8001, "metrics_port": 8002}  # tritonserver's own defaults


def build_parser():
    from ..config import add_arguments
    from ..server.local import ServerConfig
    from ..server.startup import add_server_timeout

    s = cli.parser(__doc__, """
        deployment-toolkit serve --model-repository model_repository --http-port 8000 --grpc-port 8001
        deployment-toolkit serve --model-repository model_repository --server-timeout 600   # a model that loads slowly
    """)
    # ServerConfig's flags; this command serves on Triton's usual ports (the Python API picks free ones)
    add_arguments(s, ServerConfig, only=SERVE_FLAGS, model_repository=Path("model_repository"), **USUAL_PORTS)
    add_server_timeout(s)
    return s


def main(argv: list[str] | None = None) -> int:
    """Run the server until Ctrl-C / SIGTERM. The handlers are in place before this command imports or starts
    anything, so a signal at any moment (while the client libraries import, while the server starts, while models
    load, while it serves) stops it and its stubs and exits 0; the imports and the spawn hold the signal until they
    are done (cleanup.signals_deferred). If this process is SIGKILLed, the kernel kills the server
    (PR_SET_PDEATHSIG, see cleanup.dying_with_parent)."""
    restore = cli.install_sigterm_handler()  # SIGTERM unwinds like Ctrl-C from here on
    stopped_by_signal = False
    server = None
    try:
        # the stack stops the server after a stop signal was caught, so that signal handling is quiet first
        with contextlib.ExitStack() as stack:
            try:
                with signals_deferred():  # a stop signal while these import is raised after them, in this frame
                    args = build_parser().parse_args(argv)
                    from ..server.local import LocalTritonServer

                server = stack.enter_context(LocalTritonServer(_config(args)))
                print(f"tritonserver ready: HTTP {server.http_url}  gRPC {server.grpc_url}  metrics "
                      f"{server.metrics_url}\nlog: {server.log_path}   (Ctrl-C stops it)", flush=True)
                while server.is_alive():
                    # a stop signal while waiting is held and raised here, in this frame: raised wherever the
                    # interpreter happened to be (a garbage-collector callback of the import system) it was printed
                    # as "Exception ignored" and lost, and serve kept running
                    with signals_deferred():
                        try:
                            server.process.wait(timeout=0.5)
                        except subprocess.TimeoutExpired:
                            pass
            except KeyboardInterrupt:
                stopped_by_signal = _stopping()
            except SystemExit as err:
                if err.code != cli.EXIT_SIGTERM:
                    raise
                stopped_by_signal = _stopping()
    finally:
        if not stopped_by_signal:
            restore()
    if stopped_by_signal:
        print("tritonserver stopped", file=sys.stderr)
        return 0
    print(f"tritonserver exited unexpectedly:\n{server.log_tail(20)}", file=sys.stderr)
    return 1


def _stopping() -> bool:
    """Stopping: from here to the exit, a further or late stop signal changes nothing. A second Ctrl-C, or one a
    library thread delivered late, raised a KeyboardInterrupt after the stop was done, and Python ended the process
    by SIGINT (exit -2) instead of 0 (seen once in 40 tries of the start-up race test)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    return True


def _config(args: argparse.Namespace) -> "ServerConfig":
    """The server the flags describe."""
    from ..config import from_args
    from ..server.local import ServerConfig

    return from_args(ServerConfig, args, start_timeout_s=args.server_timeout)


if __name__ == "__main__":
    cli.run(main)
