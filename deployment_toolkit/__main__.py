"""`python -m deployment_toolkit {doctor,serve,models}`."""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import deployment_toolkit  # noqa: F401


def _serve(args) -> int:
    """Run the server until Ctrl-C / SIGTERM. The handlers are in place before the server process exists, so a
    signal at any moment (while it starts, while models load, while it serves) stops it and its stubs; if this
    process is SIGKILLed, the kernel kills the server (PR_SET_PDEATHSIG, see cleanup.die_with_parent)."""
    from .cli import EXIT_SIGTERM, install_sigterm_handler
    from .server.local import LocalTritonServer, ServerConfig

    restore = install_sigterm_handler()  # SIGTERM unwinds like Ctrl-C from here on
    stopped_by_signal = False
    server = None
    try:
        cfg = ServerConfig(
            model_repository=Path(args.model_repository), http_port=args.http_port, grpc_port=args.grpc_port,
            metrics_port=args.metrics_port, address=args.address, model_control_mode=args.model_control_mode,
            log_dir=Path(args.log_dir) if args.log_dir else None, log_verbose=args.log_verbose,
        )
        server = LocalTritonServer(cfg)
        server.start()
        print(f"tritonserver ready: HTTP {server.http_url}  gRPC {server.grpc_url}  metrics {server.metrics_url}\n"
              f"log: {server.log_path}   (Ctrl-C stops it)", flush=True)
        while server.is_alive():
            try:
                server.process.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
    except KeyboardInterrupt:
        stopped_by_signal = True
    except SystemExit as err:
        if err.code != EXIT_SIGTERM:
            raise
        stopped_by_signal = True
    finally:
        if server is not None:
            server.stop()
        restore()
    if stopped_by_signal:
        print("tritonserver stopped", file=sys.stderr)
        return 0
    print(f"tritonserver exited unexpectedly:\n{server.log_tail(20)}", file=sys.stderr)
    return 1


def _models(args) -> int:
    from .models import list_models

    for e in list_models(args.family):
        sig = e.signature("small")
        full = e.presets.get("full")
        shapes = ", ".join(f"{t.name}{list(t.shape)}" for t in (full.signature if full else sig).inputs)
        print(f"{e.family:<12} {e.name:<30} {e.task:<15} {e.metric:<7} {shapes}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m deployment_toolkit",
                                epilog="example:\n  python -m deployment_toolkit doctor\n"
                                       "  python -m deployment_toolkit serve --model-repository model_repository --http-port 8000 --grpc-port 8001",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("doctor", help="report what this host has and what to install")
    d.add_argument("--no-start", action="store_true", help="do not start the server to read its version")
    s = sub.add_parser("serve", help="run the embedded tritonserver on a model repository until Ctrl-C")
    s.add_argument("--model-repository", default="model_repository")
    s.add_argument("--http-port", type=int, default=8000)
    s.add_argument("--grpc-port", type=int, default=8001)
    s.add_argument("--metrics-port", type=int, default=8002)
    s.add_argument("--address", default="127.0.0.1", help="bind address (loopback by default)")
    s.add_argument("--model-control-mode", choices=("none", "poll", "explicit"), default="none")
    s.add_argument("--log-dir", default=None)
    s.add_argument("--log-verbose", type=int, default=0)
    m = sub.add_parser("models", help="list registered models")
    m.add_argument("--family", default=None)
    args = p.parse_args(argv)
    if args.command == "doctor":
        from .doctor import run_doctor

        return run_doctor(start_server=not args.no_start)
    from .cli import USER_ERRORS

    try:
        return _serve(args) if args.command == "serve" else _models(args)
    except USER_ERRORS as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
