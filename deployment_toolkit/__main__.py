"""`python -m deployment_toolkit {doctor,serve,models}`."""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path

import deployment_toolkit  # noqa: F401


def _serve(args) -> int:
    from .server.local import LocalTritonServer, ServerConfig

    cfg = ServerConfig(
        model_repository=Path(args.model_repository), http_port=args.http_port, grpc_port=args.grpc_port,
        metrics_port=args.metrics_port, address=args.address, model_control_mode=args.model_control_mode,
        log_dir=Path(args.log_dir) if args.log_dir else None, log_verbose=args.log_verbose,
    )
    server = LocalTritonServer(cfg)
    server.start()
    print(f"tritonserver ready: HTTP {server.http_url}  gRPC {server.grpc_url}  metrics {server.metrics_url}\n"
          f"log: {server.log_path}   (Ctrl-C stops it)", flush=True)
    stop = {"now": False}

    def handler(*_):
        stop["now"] = True

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    try:
        while not stop["now"] and server.is_alive():
            try:
                server.process.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
    finally:
        alive = server.is_alive()
        server.stop()
    if not alive and not stop["now"]:
        print(f"tritonserver exited unexpectedly:\n{server.log_tail(20)}", file=sys.stderr)
        return 1
    return 0


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
