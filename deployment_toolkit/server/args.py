"""tritonserver's command line, written once: the embedded server, the NGC container script and the Kubernetes
Deployment all take their arguments from `ServerArgs.argv()`.

Why one builder: the three used to spell the flags apart (the manifests asked for strict readiness, the embedded
server and the script did not; only the embedded server said `--exit-on-error`), so a model that loaded in one
failed to be ready in another. `CONTAINER_DEFAULTS` is what every container start adds beyond the repository, the
ports and the control mode; `scripts/docker/triton_inference_server.sh` carries the same list (its
`SERVER_DEFAULTS` line, checked by tests/unit/server/test_server_args.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

CONTAINER_PORTS = (("http", 8000), ("grpc", 8001), ("metrics", 8002))  # tritonserver's own defaults
CONTROL_MODES = ("none", "poll", "explicit")


@dataclass(frozen=True)
class ServerArgs:
    """What a tritonserver process is started with. `address=None` leaves the interfaces to tritonserver (all of
    them: right inside a container, whose ports the runtime publishes); the embedded server binds loopback."""

    model_repository: str
    http_port: int | None = None  # None: tritonserver's default (CONTAINER_PORTS)
    grpc_port: int | None = None
    metrics_port: int | None = None
    address: str | None = None
    model_control_mode: str = "none"
    load_models: tuple[str, ...] = ()
    repository_poll_secs: int = 5
    strict_readiness: bool = True  # ready means every model is ready, not only the server process
    exit_on_error: bool = True  # a model that fails to load stops the start instead of serving the rest
    log_verbose: int = 0
    backend_directory: str | None = None
    backend_config: tuple[tuple[str, str, str], ...] = ()  # (backend, key, value)
    allow_gpu_metrics: bool | None = None  # None: tritonserver's default (on where there is a GPU)
    extra: tuple[str, ...] = field(default_factory=tuple)  # the user's own flags, last so that they win

    def __post_init__(self) -> None:
        if self.model_control_mode not in CONTROL_MODES:
            raise ValueError(f"model_control_mode must be one of {', '.join(CONTROL_MODES)}, "
                             f"got {self.model_control_mode!r}")

    def argv(self) -> list[str]:
        """The flags, without the binary's name."""
        args = [f"--model-repository={self.model_repository}"]
        if self.backend_directory:
            args.append(f"--backend-directory={self.backend_directory}")
        for proto, port in (("http", self.http_port), ("grpc", self.grpc_port), ("metrics", self.metrics_port)):
            if self.address is not None:
                args.append(f"--{proto}-address={self.address}")
            if port is not None:
                args.append(f"--{proto}-port={port}")
        args.append(f"--model-control-mode={self.model_control_mode}")
        if self.model_control_mode == "poll":
            args.append(f"--repository-poll-secs={self.repository_poll_secs}")
        args.extend(f"--load-model={name}" for name in self.load_models)
        args.extend(container_defaults(self.strict_readiness, self.exit_on_error, self.log_verbose))
        if self.allow_gpu_metrics is not None:
            args.append(f"--allow-gpu-metrics={_bool(self.allow_gpu_metrics)}")
        args.extend(f"--backend-config={backend},{key}={value}" for backend, key, value in self.backend_config)
        args.extend(self.extra)
        return args


def _bool(value: bool) -> str:
    return "true" if value else "false"


def container_defaults(strict_readiness: bool = True, exit_on_error: bool = True, log_verbose: int = 0) -> list[str]:
    """The flags every start carries besides the repository, the ports and the control mode."""
    return [f"--strict-readiness={_bool(strict_readiness)}", f"--exit-on-error={_bool(exit_on_error)}",
            f"--log-verbose={log_verbose}"]


CONTAINER_DEFAULTS = tuple(container_defaults())
