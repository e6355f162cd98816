"""N replicas behind a real load balancer on one host: does the fleet carry N x one replica's capacity?

N embedded tritonservers (LocalTritonServer, one model each) and nginx in front of them as a gRPC load balancer
(`grpc_pass` to an upstream of the N servers; per request round robin, HTTP/2 to both sides). Only inference
calls are balanced: metadata, config and statistics go to the first replica, because perf_analyzer compares
statistics snapshots every window and fails ("failed to find the requested model version") when two come from
different servers; its server-side breakdown through the balancer is therefore the first replica's only. nginx listens on
127.0.0.1 only; its config, pid file, logs and temp folders live in a temp folder (never the system's) and it is
stopped (SIGQUIT, then SIGKILL) on the way out, whatever happened.

The check measures open-loop capacity (capacity.search) twice: one replica alone (straight to its server, the
others idle), then the fleet through nginx, seeded at N x the first. Shared memory cannot cross a balancer, so
both use none. CPU seconds of every part (servers with their Python-backend stubs, nginx, perf_analyzer) are
read from /proc around each point, so the report can say how much of a shortfall is the host's cores: on one
host the replicas share the cores, the balancer and the load generator take their share too.
"""
from __future__ import annotations

import math
import os
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from .capacity import DEFAULT_RESOLUTION, Search, search
from .ratepoint import Target, measure
from .ratestore import RateStore
from .request import FleetCheckSpec
from ..errors import UserError, UserInputError

NGINX_HINT = ("install Debian's nginx (`apt-get update && apt-get install -y nginx`, or `make system-deps` as "
              "root; it is never started as a system service here)")


class NginxMissing(UserError, ValueError):
    """nginx is not installed; the message says how to install it."""


class BalancerError(UserError, ValueError):
    """nginx did not start or does not answer; the message has its error log."""


def find_nginx(binary: str | Path | None = None) -> Path:
    """The nginx to run: `binary` when given (it must exist), else nginx on PATH or in /usr/sbin."""
    if binary is not None:
        if Path(binary).is_file():
            return Path(binary)
        raise NginxMissing(f"nginx not found at {binary}: {NGINX_HINT}")
    for candidate in (shutil.which("nginx"), "/usr/sbin/nginx"):
        if candidate and Path(candidate).exists():
            return Path(candidate)
    raise NginxMissing(f"nginx not found on PATH nor in /usr/sbin: {NGINX_HINT}")


def nginx_config(upstreams: Sequence[str], port: int, prefix: Path, error_log: Path | None = None) -> str:
    """An nginx.conf for a gRPC balancer on 127.0.0.1:port over `upstreams` (host:port), all paths in prefix
    (the error log where given)."""
    servers = "\n".join(f"        server {u};" for u in upstreams)
    temp = "\n".join(f"    {k}_temp_path {prefix / (k + '_temp')};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return f"""# written by deployment_toolkit.sizing.fleet: a gRPC load balancer on loopback
worker_processes 1;
daemon off;
pid {prefix / 'nginx.pid'};
error_log {error_log or prefix / 'error.log'} warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
{temp}
    client_max_body_size 0;
    client_body_buffer_size 16m;
    upstream triton {{
{servers}
        keepalive 64;
    }}
    upstream first {{
        server {upstreams[0]};
        keepalive 8;
    }}
    server {{
        listen 127.0.0.1:{port} http2;
        grpc_read_timeout 300s;
        grpc_send_timeout 300s;
        # inference is balanced; metadata, config and statistics come from one replica, so a client that compares
        # statistics snapshots (perf_analyzer, every window) sees one consistent server
        location = /inference.GRPCInferenceService/ModelInfer {{
            grpc_pass grpc://triton;
        }}
        location = /inference.GRPCInferenceService/ModelStreamInfer {{
            grpc_pass grpc://triton;
        }}
        location / {{
            grpc_pass grpc://first;
        }}
    }}
}}
"""


class NginxBalancer:
    """`with NginxBalancer(["127.0.0.1:8001", ...]) as lb: lb.url` - started and stopped by us."""

    def __init__(self, upstreams: Sequence[str], port: int = 0, binary: str | Path | None = None,
                 log_dir: str | Path | None = None):
        from ..server.local import free_ports

        self.upstreams = list(upstreams)
        self.binary = find_nginx(binary)
        self.port = port or free_ports(1)[0]
        self.prefix = Path(tempfile.mkdtemp(prefix="nginx-grpc-lb-"))
        self.log_dir = Path(log_dir).resolve() if log_dir else None  # nginx reads relative paths from its prefix
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def error_log(self) -> Path:
        """In log_dir when given (kept), else in the temp prefix (removed on stop)."""
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            return self.log_dir / "nginx-error.log"
        return self.prefix / "error.log"

    def start(self, timeout_s: float = 15.0) -> "NginxBalancer":
        conf = self.prefix / "nginx.conf"
        for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.prefix / f"{k}_temp").mkdir(exist_ok=True)
        conf.write_text(nginx_config(self.upstreams, self.port, self.prefix, self.error_log))
        cmd = [str(self.binary), "-p", str(self.prefix), "-c", str(conf), "-e", str(self.error_log)]
        test = subprocess.run([*cmd, "-t"], capture_output=True, text=True, timeout=30)
        if test.returncode != 0:
            raise BalancerError(f"nginx rejected its config {conf}: {(test.stderr or test.stdout).strip()}")
        self.process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while not _listening(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                log = self.error_log.read_text()[-2000:] if self.error_log.exists() else ""
                self.stop()
                raise BalancerError(f"nginx did not start listening on {self.url}: {log.strip() or 'no error log'}")
            time.sleep(0.05)  # polling interval of the port check
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        proc = self.process
        if proc is not None and proc.poll() is None:
            _signal_group(proc.pid, signal.SIGQUIT)  # graceful: finish in-flight requests
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self.process = None
        shutil.rmtree(self.prefix, ignore_errors=True)

    def cpu_seconds(self) -> float:
        return group_cpu_seconds(self.process.pid) if self.process else 0.0

    def __enter__(self) -> "NginxBalancer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


# ---- CPU accounting ------------------------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def group_cpu_seconds(pgid: int, proc: Path = Path("/proc")) -> float:
    """User + system CPU seconds of every live process in a process group (a server and its backend stubs)."""
    total = 0
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        # after the command: state(0) ppid(1) pgrp(2) ... utime(11) stime(12)
        if len(fields) > 12 and int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])
    return total / _TICK


def client_cpu_seconds() -> float:
    """CPU seconds of the finished children of this process (the perf_analyzer runs)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


# ---- the check ------------------------------------------------------------------------------------

@dataclass
class Measured:
    """A capacity search and the CPU seconds per inference at its capacity point."""

    search: Search
    cpu: dict[str, float] = field(default_factory=dict)  # part -> CPU seconds over the capacity point
    wall_s: float = math.nan

    @property
    def capacity(self) -> float | None:
        return self.search.capacity

    def per_inference(self, part: str) -> float:
        best = self.search.best
        if best is None or part not in self.cpu or not self.wall_s:
            return math.nan
        return self.cpu[part] / (best.answered * self.wall_s)

    def cores(self) -> float:
        return sum(self.cpu.values()) / self.wall_s if self.wall_s else math.nan


@dataclass
class FleetCheck:
    replicas: int
    cores: int
    single: Measured
    fleet: Measured
    slo_ms: float
    balancer: str = "nginx"

    @property
    def ideal(self) -> float | None:
        c = self.single.capacity
        return None if c is None else self.replicas * c

    @property
    def efficiency(self) -> float | None:
        return None if not self.ideal or self.fleet.capacity is None else self.fleet.capacity / self.ideal

    @property
    def cores_bound(self) -> float | None:
        """Inferences/s the host's cores allow the fleet: cores / CPU seconds per inference of everything that
        runs for one request (the server's share from one replica alone, nginx's and the client's from the fleet
        run)."""
        per = (self.single.per_inference("servers") + self.fleet.per_inference("balancer")
               + self.fleet.per_inference("client"))
        return None if math.isnan(per) or per <= 0 else self.cores / per

    def shortfall_split(self) -> tuple[float, float, float] | None:
        """(shortfall, the part the cores explain, the rest) in inferences/s."""
        if self.ideal is None or self.fleet.capacity is None:
            return None
        short = max(0.0, self.ideal - self.fleet.capacity)
        bound = self.cores_bound
        cores = 0.0 if bound is None else min(short, max(0.0, self.ideal - bound))
        return short, cores, short - cores

    def text(self) -> str:
        s, f = self.single, self.fleet
        if s.capacity is None or f.capacity is None:
            which = "one replica alone" if s.capacity is None else f"the fleet of {self.replicas}"
            bad = s.search if s.capacity is None else f.search
            return f"**Fleet check**: {which} met no rate: {bad.unreachable_text()}."
        lines = [
            f"**Fleet check**: {self.replicas} replicas behind nginx (gRPC, round robin) on one {self.cores}-core host: "
            f"the fleet carried **{f.capacity:,.1f} inferences/s** in open loop at p99 <= {self.slo_ms:g} ms, against "
            f"{self.replicas} x {s.capacity:,.1f} = {self.ideal:,.1f} for one replica alone ({self.efficiency:.0%}).",
        ]
        split = self.shortfall_split()
        fmt = lambda d: ", ".join(f"{k} {v:.2f} s" for k, v in d.items())  # noqa: E731
        lines.append(f"CPU at the capacity points: one replica alone {fmt(s.cpu)} over {s.wall_s:.1f} s "
                     f"({s.cores():.2f} cores busy); the fleet {fmt(f.cpu)} over {f.wall_s:.1f} s "
                     f"({f.cores():.2f} cores busy).")
        if split:
            short, cores, rest = split
            bound = self.cores_bound
            if short <= 0:
                lines.append("No shortfall: the fleet carried N x one replica.")
            else:
                lines.append(
                    f"Shortfall {short:,.1f} inferences/s. The cores allow about {bound:,.1f} inferences/s here "
                    f"(servers {s.per_inference('servers') * 1e3:.2f} ms CPU per inference, nginx "
                    f"{f.per_inference('balancer') * 1e3:.2f} ms, perf_analyzer {f.per_inference('client') * 1e3:.2f} "
                    f"ms, on {self.cores} cores): {cores:,.1f} inferences/s ({cores / short:.0%}) of the shortfall is "
                    f"the shared cores, {rest:,.1f} ({rest / short:.0%}) is the rest (balancer hop, scheduling, "
                    "noise). On separate hosts, each replica has its own cores: N x one replica is the figure to plan "
                    "with, the balancer's own cost excepted.")
        return "  \n".join(lines)


def _probe(servers: Sequence[Any], balancer: NginxBalancer | None) -> Callable[[], dict[str, float]]:
    def read() -> dict[str, float]:
        out = {"servers": sum(group_cpu_seconds(s.process.pid) for s in servers if s.process),
               "client": client_cpu_seconds()}
        if balancer is not None:
            out["balancer"] = balancer.cpu_seconds()
        return out
    return read


def _measured(s: Search) -> Measured:
    best = s.best
    cpu = dict(best.row.get("cpu") or {}) if best else {}
    wall = float(best.row.get("wall_s") or math.nan) if best else math.nan
    return Measured(s, cpu, wall)


def check_fleet(spec: FleetCheckSpec, target: Target, seed_rate: float, slo_ms: float, out_dir: str | Path,
                resolution: float = DEFAULT_RESOLUTION, log_dir: str | Path | None = None) -> FleetCheck:
    """Start `spec.replicas` servers on `spec.model_repository` (only target.model_name loaded) and nginx in front;
    measure one replica alone, then the fleet; stop everything. `seed_rate` (requests/s) seeds the single-replica
    search. Points are measured fresh (their CPU seconds belong to this run) and recorded in <out_dir>/fleet.csv."""
    from dataclasses import replace

    from ..server.local import LocalTritonServer, ServerConfig
    from .ratestore import FreshStore

    n, repository, max_points, nginx = spec.replicas or 0, spec.model_repository, spec.max_points, spec.nginx
    if n < 2:
        raise UserInputError(f"--confirm-fleet {n}: a fleet behind a balancer needs at least 2 replicas")
    find_nginx(nginx)  # fail before starting servers
    out_dir = Path(out_dir)
    store = FreshStore(RateStore(out_dir, "fleet.csv"))
    if target.options.shared_memory != "none":
        target = replace(target, options=replace(target.options, shared_memory="none"))
    logs = Path(log_dir) if log_dir else out_dir / "fleet-logs"
    with ExitStack() as stack:
        servers = []
        for i in range(n):
            cfg = ServerConfig(model_repository=Path(repository), model_control_mode="explicit",
                               load_models=(target.model_name,), log_dir=logs / f"replica{i + 1}")
            servers.append(stack.enter_context(LocalTritonServer(cfg)))
        lb = stack.enter_context(NginxBalancer([s.grpc_url for s in servers], binary=nginx, log_dir=logs))
        one = replace(target, url=servers[0].grpc_url, config=f"{target.config}/replica-alone",
                      cpu_probe=_probe(servers, lb))
        single = search(lambda r: measure(one, r, store, out_dir, tag="alone_"), seed_rate, slo_ms, target.batch,
                        resolution, max_points)
        fleet_seed = (single.capacity / target.batch * n) if single.capacity else seed_rate * n
        many = replace(target, url=lb.url, config=f"{target.config}/fleet-{n}-nginx", cpu_probe=_probe(servers, lb))
        fleet = search(lambda r: measure(many, r, store, out_dir, tag=f"fleet{n}_"), fleet_seed, slo_ms,
                       target.batch, resolution, max_points)
    return FleetCheck(n, usable_cores(), _measured(single), _measured(fleet), slo_ms)
