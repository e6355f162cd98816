"""The embedded server: the real `tritonserver` binary shipped in the `nvidia-pytriton` wheel.

It runs on any Linux host (no Docker, no GPU): models are served by Triton's Python backend, which
runs the artifact with ONNX Runtime or TorchScript inside `model.py`. This module finds the binary,
assembles a backend directory with the stub for the running Python, binds every port to loopback,
waits for readiness by health check and stops cleanly.

Over 400 lines on purpose: one process's lifecycle (start, readiness, load, signals to its process group,
stop) whose cleanup paths must be read together; its calls to the server go through client.TritonClient.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ..cleanup import (GroupWatchdog, dying_with_parent, live_processes, python_backend_shm_prefix, regions_with_prefix,
                       remove_regions, signals_deferred, sweep_dead_runs, sweep_python_env_dirs)
from ..client import TritonClient
from .args import ServerArgs
from .libpython import stub_python
from .errors import (
    ModelLoadError,
    PortInUseError,
    ServerExitedError,
    ServerNotFoundError,
    ServerStartTimeout,
)
from .startup import DEFAULT_START_TIMEOUT_S, StartWatch, check_start_timeout, stderr_line
from ..config.fields import check_numbers, setting
from ..errors import UserFileNotFoundError, UserInputError
from ..spec import check_repository_path

log = logging.getLogger(__name__)
GROUP_GRACE_S = 2.0  # time the rest of the server's process group gets to exit on its own once the server is gone
# Lines of the server log that explain a failure.
# Lines every CPU-only start prints; they never explain a failure.
_BENIGN = ("Unable to allocate pinned system memory", "CudaDriverHelper has not been initialized",
           "successfully loaded")
_WHY_PATTERN = re.compile(r"^(E\d{4}|W\d{4}).*|.*(error|failed|Traceback|Exception|No module named).*", re.I)


@dataclass(frozen=True)
class TritonInstallation:
    """Where the pieces of the wheel's server live."""

    root: Path  # site-packages/pytriton/tritonserver
    binary: Path
    libs: Path  # site-packages/nvidia_pytriton.libs
    python_backend: Path
    stub: Path


def find_installation(python_version: str | None = None) -> TritonInstallation:
    """Locate tritonserver inside the installed nvidia-pytriton wheel, with actionable errors."""
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise ServerNotFoundError(
            "the embedded tritonserver comes with the nvidia-pytriton wheel, which is not installed in "
            f"{sys.prefix}: run `pip install nvidia-pytriton==0.7.0` (or `make install`)"
        )
    pkg = Path(list(spec.submodule_search_locations)[0])
    root = pkg / "tritonserver"
    binary = root / "bin" / "tritonserver"
    libs = pkg.parent / "nvidia_pytriton.libs"
    pyver = python_version or f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = root / "python_backend_stubs" / pyver / "triton_python_backend_stub"
    python_backend = root / "backends" / "python"
    for what, path in (("tritonserver binary", binary), ("python backend", python_backend)):
        if not path.exists():
            raise ServerNotFoundError(f"{what} not found at {path}: reinstall nvidia-pytriton==0.7.0")
    if not stub.exists():
        have = sorted(p.name for p in (root / "python_backend_stubs").iterdir())
        raise ServerNotFoundError(
            f"no Python backend stub for Python {pyver} in nvidia-pytriton (it has {', '.join(have)}): "
            "run the toolkit with one of those Python versions"
        )
    return TritonInstallation(root=root, binary=binary, libs=libs, python_backend=python_backend, stub=stub)


def backend_directory(inst: TritonInstallation, cache_root: Path | None = None) -> Path:
    """A backend directory holding `python/` = the Python backend plus the stub for this Python.

    Built once per installation (keyed by its path) and reused; built in a temporary folder and
    renamed so that concurrent servers never see half a directory.
    """
    cache_root = cache_root or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "deployment_toolkit"
    key = hashlib.sha1(f"{inst.root}:{inst.stub}".encode()).hexdigest()[:12]
    target = cache_root / f"backends-{key}"
    if (target / "python" / "triton_python_backend_stub").exists():
        return target
    cache_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=cache_root, prefix=".backends-"))
    shutil.copytree(inst.python_backend, tmp / "python")
    shutil.copy2(inst.stub, tmp / "python" / "triton_python_backend_stub")
    try:
        tmp.rename(target)
    except OSError:  # another process won the race
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def free_ports(count: int, host: str = "127.0.0.1") -> tuple[int, ...]:
    """`count` distinct free ports. Every socket stays bound until all are picked: ports picked one after another
    can repeat (the kernel hands a just-released port out again), and a server given one port twice for gRPC and
    metrics refuses to start."""
    with contextlib.ExitStack() as held:
        socks = [held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for s in socks:
            s.bind((host, 0))
        return tuple(s.getsockname()[1] for s in socks)


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether tritonserver could bind `port`: it binds with SO_REUSEADDR (libevhtp and gRPC both set it), so
    a socket of a just-stopped server in TIME-WAIT does not count, only a live listener or bound socket does."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def server_environment(inst: TritonInstallation) -> dict[str, str]:
    """The environment tritonserver (and its Python stub) need, independent of the user's shell.

    The stub finds its Python environment by searching PATH for `python`: the directory of this
    interpreter goes first so models see this environment's numpy/onnxruntime/torch.
    The stub links libpython by name: the interpreter's own library folder goes first on the linker's path, so the
    stub runs the user's Python build, not the system's (server.libpython).
    """
    env = dict(os.environ)
    stub = stub_python()
    if stub.mismatch():
        log.warning(stub.mismatch())
    own = [str(stub.libdir)] if stub.libdir is not None else []
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (*own, str(inst.libs), env.get("LD_LIBRARY_PATH", "")) if p)
    env["PATH"] = os.pathsep.join(p for p in (str(Path(sys.executable).parent), env.get("PATH", "")) if p)
    return env


MAX_PORT = 65535
MODEL_CONTROL_MODES = ("none", "poll", "explicit")


@dataclass
class ServerConfig:
    """How the embedded tritonserver is started; the fields with a flag are `serve`'s flags (config.setting)."""

    model_repository: Path = setting(flag="--model-repository", type=Path, help="the model repository to serve")
    http_port: int = setting(0, flag="--http-port", low=0, high=MAX_PORT, help="HTTP port (0 picks a free one)")
    grpc_port: int = setting(0, flag="--grpc-port", low=0, high=MAX_PORT, help="gRPC port (0 picks a free one)")
    metrics_port: int = setting(0, flag="--metrics-port", low=0, high=MAX_PORT,
                                help="Prometheus metrics port (0 picks a free one)")
    address: str = setting("127.0.0.1", flag="--address", help="bind address (loopback by default)")
    model_control_mode: str = setting("none", flag="--model-control-mode", choices=MODEL_CONTROL_MODES,
                                      help="none: every model at start; poll: follow the repository; explicit: "
                                           "load through the API")
    load_models: tuple[str, ...] = ()  # with explicit mode: models loaded at start
    repository_poll_secs: int = 5
    log_dir: Path | None = setting(None, flag="--log-dir", type=Path, metavar="DIR",
                                   help="where tritonserver.log goes (default: a new temporary folder)")
    log_verbose: int = setting(0, flag="--log-verbose", low=0, help="tritonserver's verbose log level")
    exit_on_error: bool = True
    strict_readiness: bool = True
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S  # --server-timeout (server/startup.py)
    progress: bool = True  # a start that takes more than a few seconds says on stderr which models are loading
    extra_args: tuple[str, ...] = ()
    backend_config: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_numbers(self)  # a port of 70000 or -1 is one line naming the flag, from the command and the API
        if self.model_control_mode not in MODEL_CONTROL_MODES:
            raise UserInputError(f"--model-control-mode {self.model_control_mode!r}: expected one of "
                                 f"{', '.join(MODEL_CONTROL_MODES)}")


class LocalTritonServer:
    """`with LocalTritonServer(ServerConfig(repo)) as server: server.grpc_url ...`"""

    def __init__(self, config: ServerConfig, installation: TritonInstallation | None = None):
        self.config = config
        self.installation = installation or find_installation()
        self.process: subprocess.Popen | None = None
        self._watchdog: GroupWatchdog | None = None
        self._log_fh = None
        self.http_port = config.http_port
        self.grpc_port = config.grpc_port
        self.metrics_port = config.metrics_port
        self.log_path: Path | None = None
        self._log_start = 0  # the log's size before this start: a reused --log-dir holds earlier runs
        # the Python backend's /dev/shm regions carry this prefix, so they can be removed when the server is gone
        self.shm_prefix = config.backend_config.get("shm-region-prefix-name") or python_backend_shm_prefix()

    # ---- addresses -------------------------------------------------------------------------
    @property
    def http_url(self) -> str:
        return f"{self._client_host}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{self._client_host}:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self._client_host}:{self.metrics_port}/metrics"

    @property
    def _client_host(self) -> str:
        return "127.0.0.1" if self.config.address in ("0.0.0.0", "127.0.0.1") else self.config.address

    # ---- lifecycle -------------------------------------------------------------------------
    def command(self) -> list[str]:
        cfg = self.config
        args = ServerArgs(
            model_repository=str(Path(cfg.model_repository).resolve()),
            http_port=self.http_port, grpc_port=self.grpc_port, metrics_port=self.metrics_port,
            address=cfg.address, model_control_mode=cfg.model_control_mode, load_models=tuple(cfg.load_models),
            repository_poll_secs=cfg.repository_poll_secs, strict_readiness=cfg.strict_readiness,
            exit_on_error=cfg.exit_on_error, log_verbose=cfg.log_verbose,
            backend_directory=str(backend_directory(self.installation)),
            backend_config=tuple(("python", k, v)
                                 for k, v in {"shm-region-prefix-name": self.shm_prefix, **cfg.backend_config}.items()),
            allow_gpu_metrics=False, extra=tuple(cfg.extra_args))
        return [str(self.installation.binary), *args.argv()]

    def start(self) -> "LocalTritonServer":
        cfg = self.config
        repo = check_repository_path(cfg.model_repository)  # a path the Python backend cannot use, said up front
        if not repo.is_dir():
            raise UserFileNotFoundError(f"model repository {repo} does not exist: run triton/config_model_on_triton.py first")
        check_start_timeout(cfg.start_timeout_s, "start_timeout_s")
        sweep_dead_runs()  # regions of this toolkit's runs that were killed before they could clean up
        sweep_python_env_dirs()  # ... and the Python backend's folders of servers that were killed
        self._claim_ports()
        log_dir = Path(cfg.log_dir) if cfg.log_dir else Path(tempfile.mkdtemp(prefix="tritonserver-"))
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / "tritonserver.log"
        self._log_fh = open(self.log_path, "ab")
        self._log_start = self._log_fh.tell()
        try:
            # A Ctrl-C or SIGTERM inside Popen (after the fork, before it returns) would lose the handle that
            # stop() needs: held until self.process and the watchdog are set, then delivered.
            with signals_deferred():
                self.process = subprocess.Popen(
                    dying_with_parent(self.command()),  # if we are SIGKILLed, the kernel kills the server
                    stdout=self._log_fh,
                    stderr=subprocess.STDOUT,
                    env=server_environment(self.installation),
                    start_new_session=True,  # Ctrl-C in the terminal goes to us; we stop the server cleanly
                )
                self._watchdog = GroupWatchdog(self.process.pid)  # ... and the watchdog its stubs
            self.wait_ready(cfg.start_timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _claim_ports(self) -> None:
        attrs = ("http_port", "grpc_port", "metrics_port")
        fixed = {getattr(self, a) for a in attrs} - {0}
        wanted = sum(getattr(self, a) == 0 for a in attrs)
        # distinct from each other and from the ports given
        picked = iter(p for p in (free_ports(wanted + len(fixed)) if wanted else ()) if p not in fixed)
        for attr in attrs:
            port = getattr(self, attr)
            if port == 0:
                setattr(self, attr, next(picked))
            elif not port_is_free(port, self.config.address if self.config.address != "0.0.0.0" else "127.0.0.1"):
                flag = "--" + attr.replace("_", "-")
                raise PortInUseError(
                    f"port {port} ({attr.replace('_port', '')}) is already in use on {self.config.address}: "
                    f"stop whatever holds it (`ss -ltnp | grep :{port}`) or pass another {flag} (0 picks a free one)"
                )

    def wait_ready(self, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> None:
        """Poll /v2/health/ready, saying every few seconds which models are loading and for how long (a slow load
        must not look like a hang); fail fast with the log's reasons if the process exits; past `timeout_s`, say
        whether a model was still loading or failed, and how to give the start longer."""
        watch = StartWatch(self.log_path, timeout_s, stderr_line if self.config.progress else None,
                           offset=self._log_start)
        with self.client() as client:
            while True:
                code = self.process.poll() if self.process else None
                if code is not None:
                    self._raise_exited(code)
                if client.ready():
                    return
                watch.poll(lambda: _index_if_answering(client))
                if watch.expired():
                    watch.refresh_index(lambda: _index_if_answering(client))
                    raise ServerStartTimeout(watch.timeout_message(
                        self.log_path, explain_lines(self.log_text(), watch.models.failed), self.log_tail(20)))
                time.sleep(0.1)  # polling interval of the health check, not a fixed wait

    def _raise_exited(self, code: int) -> None:
        log = self.log_text()
        failed = sorted(set(re.findall(r"failed to load '([^']+)'", log)))
        why = "\n".join(explain_lines(log)) or self.log_tail(20)
        if "address already in use" in log.lower() or "failed to start" in log.lower() and "bind" in log.lower():
            raise PortInUseError(f"tritonserver could not bind its ports ({self.http_port}/{self.grpc_port}/"
                                 f"{self.metrics_port}):\n{why}")
        if failed:
            raise ModelLoadError(
                f"tritonserver exited (code {code}) because model(s) {', '.join(failed)} failed to load. "
                f"From the server log ({self.log_path}):\n{why}",
                models=failed,
            )
        raise ServerExitedError(f"tritonserver exited with code {code} (log: {self.log_path}):\n{why}")

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM, then SIGKILL to the server's whole process group, also when the server already died.

        The server leads its own group (start_new_session), and its Python-backend stubs are in it: a
        stub whose server crashed or was killed is an orphan that keeps its memory, so the group gets a
        SIGKILL whenever anything in it outlives the server (after `GROUP_GRACE_S`).
        """
        proc = self.process
        with signals_deferred():  # a second Ctrl-C / SIGTERM waits until the group is gone
            if proc is not None:
                pgid = proc.pid
                if proc.poll() is None:
                    signal_group(pgid, signal.SIGTERM)
                    try:
                        proc.wait(timeout=timeout_s)
                    except subprocess.TimeoutExpired:
                        pass
                # still running after timeout_s, or (server gone) a stub that does not exit on its own
                if proc.poll() is None or not wait_group_gone(pgid, GROUP_GRACE_S):
                    signal_group(pgid, signal.SIGKILL)
                proc.wait(timeout=10)
                wait_group_gone(pgid, 10.0)
                # the Python backend unlinks its regions on a clean exit only; after a kill they stay
                remove_regions(regions_with_prefix(self.shm_prefix))
                sweep_python_env_dirs()  # its /tmp/python_env_* too when it was killed: no live server can own it
            if self._watchdog is not None:
                self._watchdog.release()
                self._watchdog = None
        if self._log_fh is not None:
            self._log_fh.close()
            self._log_fh = None

    def is_alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> "LocalTritonServer":
        if self.process is None:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def client(self, protocol: str = "http") -> TritonClient:
        """A client on this server (HTTP by default: the process manager's own calls); the caller closes it."""
        return TritonClient(self.http_url if protocol == "http" else self.grpc_url, protocol, timeout_s=30.0)

    def metadata(self) -> dict:
        """Server metadata: name, version (the binary has no --version flag), extensions."""
        with self.client() as client:
            return client.server_metadata()

    # ---- models ----------------------------------------------------------------------------
    def repository_index(self) -> list[dict]:
        with self.client() as client:
            return client.repository_index()

    def model_ready(self, name: str, version: str = "") -> bool:
        with self.client() as client:
            return client.ready(name, version)

    def require_models(self, names: Iterable[str]) -> None:
        """Raise ModelLoadError quoting the server's reasons for any model that is not ready."""
        missing = [n for n in names if not self.model_ready(n)]
        if not missing:
            return
        reasons = {e.get("name"): e.get("reason", "") for e in self.repository_index()}
        log = self.log_text()
        lines = [f"  {n}: {reasons.get(n) or 'not in the repository index'}" for n in missing]
        why = "\n".join(explain_lines(log, missing)) or self.log_tail(20)
        raise ModelLoadError(
            "model(s) not ready: " + ", ".join(missing) + "\n" + "\n".join(lines) + f"\nServer log ({self.log_path}):\n{why}",
            models=missing,
        )

    def load_model(self, name: str) -> None:
        self._repository_call(name, "load")
        self.require_models([name])

    def unload_model(self, name: str) -> None:
        self._repository_call(name, "unload")

    def _repository_call(self, name: str, action: str) -> None:
        with self.client() as client:
            try:
                client.load(name) if action == "load" else client.unload(name)
            except Exception as err:  # noqa: BLE001 - tritonclient's error carries the server's reason
                raise ModelLoadError(
                    f"{action} of model {name!r} failed: {str(err).strip() or type(err).__name__}\n"
                    + "\n".join(explain_lines(self.log_text(), [name])),
                    models=[name],
                ) from err

    # ---- log -------------------------------------------------------------------------------
    def log_text(self) -> str:
        if self._log_fh is not None:
            self._log_fh.flush()
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


def _index_if_answering(client: TritonClient) -> list[dict] | None:
    """The repository index, or None while the server does not answer (it loads its models before it listens)."""
    try:
        return client.repository_index() if client.live() else None
    except Exception:  # noqa: BLE001 - a server that stops answering mid-start is reported by the health check
        return None


def signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to every process of group `pgid`; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):  # gone (PermissionError: the id now names someone else's group)
        return False
    return True


def group_members(pgid: int) -> list[int]:
    """Live processes of group `pgid` (zombies excluded: they hold nothing and only wait to be reaped)."""
    if not Path("/proc").is_dir():  # not Linux: the group exists while signal 0 reaches it
        return [pgid] if signal_group(pgid, 0) else []
    return [pid for pid, _, fields in live_processes() if len(fields) > 2 and int(fields[2]) == pgid]


def wait_group_gone(pgid: int, timeout_s: float) -> bool:
    """Poll until no live process is left in group `pgid`; False if some still are after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while group_members(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)  # polling interval, not a fixed wait
    return True


def explain_lines(log: str, models: Iterable[str] = (), limit: int = 25) -> list[str]:
    """The log lines that say why something failed: error lines, tracebacks, and lines naming `models`."""
    names = [m for m in models if m]
    out: list[str] = []
    for line in log.splitlines():
        if _WHY_PATTERN.match(line) or any(f"'{m}'" in line or f'"{m}"' in line for m in names):
            if any(b in line for b in _BENIGN):
                continue
            out.append(line.rstrip())
    return out[-limit:]

