"""Model Analyzer side by side: run its quick search on the same model, budget and server binary, read what
it measured, and say exactly why when it cannot run.

Model Analyzer (`triton-model-analyzer`, an optional extra) pins packages that clash with this toolkit
(numpy 2, protobuf 6, tritonclient 2.7x without perf_analyzer), so it lives in its own virtualenv and is
called as a subprocess. It launches the same embedded `tritonserver` (local launch mode) with an environment
that carries the server's bundled libraries and the CUDA runtime (it hands that environment to
perf_analyzer too) and this venv's bin/ first on PATH (so the Python-backend stub finds our numpy<2 and
onnxruntime). Its results are read from its checkpoint, which it saves after every measurement, so a run
stopped at the time limit still reports what it found.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

DEFAULT_VENV = Path("/tmp/ma-venv")
INSTALL_HINT = ("install it in a separate virtualenv (it pins numpy 2 and protobuf 6, which break this one): "
                "`python3 -m venv /tmp/ma-venv && /tmp/ma-venv/bin/pip install triton-model-analyzer`, "
                "then pass --model-analyzer /tmp/ma-venv/bin/model-analyzer")
_ERROR = re.compile(r"Model Analyzer encountered an error:\s*(.*)", re.S)


@dataclass
class MAMeasurement:
    variant: str
    instances: int
    max_batch_size: int
    concurrency: int
    throughput: float
    p99_ms: float

    def label(self) -> str:
        return (f"{self.variant} ({self.instances} inst, max batch {self.max_batch_size}, "
                f"concurrency {self.concurrency})")


@dataclass
class MAResult:
    ran: bool
    wall_s: float = 0.0
    returncode: int | None = None
    timed_out: bool = False
    error: str = ""
    command: list[str] = field(default_factory=list)
    log_path: Path | None = None
    measurements: list[MAMeasurement] = field(default_factory=list)
    limit_minutes: float | None = None

    def best_within(self, budget_ms: float) -> MAMeasurement | None:
        ok = [m for m in self.measurements if m.p99_ms <= budget_ms]
        return max(ok, key=lambda m: m.throughput, default=None)

    @property
    def configs(self) -> int:
        return len({m.variant for m in self.measurements})


def find_model_analyzer(explicit: str | None = None, venv: Path = DEFAULT_VENV) -> Path | None:
    for candidate in (explicit, venv / "bin" / "model-analyzer", shutil.which("model-analyzer")):
        if candidate and Path(candidate).exists():
            return Path(candidate)
    return None


def ma_environment() -> dict[str, str]:
    """The server's environment (bundled libs, venv bin first on PATH) plus the CUDA runtime for perf_analyzer."""
    from ..binaries import perf_environment
    from ..server.local import find_installation, server_environment

    return perf_environment(server_environment(find_installation()))


@dataclass
class MARequest:
    """One Model Analyzer run: the model in its repository, the budget, the time limit and how it measures (the
    same server binary and perf_analyzer as our search). Its output repository holds a copy of the model per
    variant: keep it out of the results folder."""

    binary: Path | None  # the model-analyzer CLI (None: not installed, said in the result)
    model_name: str
    repository: Path
    work_dir: Path
    budget_ms: float
    max_minutes: float = 10.0
    cpu_only: bool = True
    search_mode: str = "quick"
    shared_memory: str = "none"
    output_shm_bytes: int | None = None
    output_repository: Path | None = None


def ma_config(request: MARequest, ports: tuple[int, int, int], backend_dir: Path,
              perf_analyzer: Path) -> dict[str, Any]:
    """Model Analyzer's YAML config: same model, budget, server binary and perf_analyzer as our search."""
    r = request
    http, grpc, metrics = ports
    pa_flags: dict[str, str] = {}
    if r.shared_memory != "none":
        pa_flags["shared-memory"] = r.shared_memory
        if r.output_shm_bytes:
            pa_flags["output-shared-memory-size"] = str(r.output_shm_bytes)
    model: dict[str, Any] = {"cpu_only": r.cpu_only}
    if pa_flags:
        model["perf_analyzer_flags"] = pa_flags
    return {
        "model_repository": str(r.repository),
        "profile_models": {r.model_name: model},
        "run_config_search_mode": r.search_mode,
        "latency_budget": int(max(1, round(r.budget_ms))),
        "client_protocol": "grpc",
        "triton_server_flags": {"backend-directory": str(backend_dir), "http-port": str(http),
                                "grpc-port": str(grpc), "metrics-port": str(metrics),
                                "http-address": "127.0.0.1", "grpc-address": "127.0.0.1",
                                "metrics-address": "127.0.0.1"},
        "triton_http_endpoint": f"127.0.0.1:{http}",
        "triton_grpc_endpoint": f"127.0.0.1:{grpc}",
        "triton_metrics_url": f"http://127.0.0.1:{metrics}/metrics",
        "perf_analyzer_path": str(perf_analyzer),
        "output_model_repository_path": str(r.output_repository or r.work_dir / "output_repository"),
        "override_output_model_repository": True,
        "export_path": str(r.work_dir / "export"),
        "checkpoint_directory": str(r.work_dir / "checkpoints"),
        "triton_output_path": str(r.work_dir / "tritonserver.log"),
    }


def ma_command(binary: Path, config_path: Path, server_binary: Path) -> list[str]:
    return [str(binary), "profile", "-f", str(config_path), "--triton-launch-mode", "local",
            "--triton-server-path", str(server_binary)]


def read_checkpoint(checkpoint_dir: Path) -> list[MAMeasurement]:
    """Every measurement in Model Analyzer's latest checkpoint (`<n>.ckpt`, JSON)."""
    files = sorted(checkpoint_dir.glob("*.ckpt"), key=lambda p: int(p.stem) if p.stem.isdigit() else -1)
    if not files:
        return []
    data = json.loads(files[-1].read_text())
    out: list[MAMeasurement] = []
    results = data.get("ResultManager.results", {}).get("_results", {})
    for variants in results.values():
        for variant, entry in variants.items():
            run_config, measurements = entry[0], entry[1]
            variant_cfg = (run_config.get("_model_run_configs") or [{}])[0].get("_model_config_variant", {})
            mc = variant_cfg.get("model_config", {})
            instances = sum(int(g.get("count", 1)) for g in mc.get("instanceGroup", [])) or 1
            max_batch = int(mc.get("maxBatchSize", 0))
            for m in measurements.values():
                for mm in m.get("_model_config_measurements", []):
                    tags = {k: v[1]["_value"] for k, v in mm.get("_non_gpu_data_from_tag", {}).items()}
                    conc = mm.get("_model_specific_pa_params", {}).get("concurrency-range")
                    if "perf_throughput" in tags and "perf_latency_p99" in tags and conc is not None:
                        out.append(MAMeasurement(variant, instances, max_batch, int(conc),
                                                 float(tags["perf_throughput"]), float(tags["perf_latency_p99"])))
    return out


def explain_failure(output: str, returncode: int | None) -> str:
    """The line of Model Analyzer's output that says why it stopped."""
    m = _ERROR.search(output)
    if m:
        return " ".join(m.group(1).split())[:800]
    tail = [line for line in output.strip().splitlines() if line.strip()][-8:]
    return f"exit code {returncode}: " + " | ".join(tail)[-800:]


def run_model_analyzer(request: MARequest) -> MAResult:
    """Run Model Analyzer's profile with a time limit; never raises for its failures, reports them."""
    import yaml

    from ..binaries import find_perf_analyzer
    from ..server.local import backend_directory, find_installation, free_port

    if request.binary is None:
        return MAResult(ran=False, error=f"Model Analyzer is not installed: {INSTALL_HINT}")
    work_dir = request.work_dir.resolve()  # it runs in work_dir: no relative paths
    request = replace(request, work_dir=work_dir, repository=request.repository.resolve(),
                      output_repository=(request.output_repository or work_dir / "output_repository").resolve())
    binary, max_minutes = request.binary, request.max_minutes
    work_dir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(request.output_repository, ignore_errors=True)
    for stale in ("checkpoints", "export"):
        shutil.rmtree(work_dir / stale, ignore_errors=True)
    (work_dir / "export").mkdir()
    inst = find_installation()
    ports = (free_port(), free_port(), free_port())
    while len(set(ports)) < 3:
        ports = (free_port(), free_port(), free_port())
    cfg = ma_config(request, ports, backend_directory(inst), find_perf_analyzer())
    config_path = work_dir / "model_analyzer.yaml"
    config_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    cmd = ma_command(binary, config_path, inst.binary)
    log_path = work_dir / "model_analyzer.log"
    result = MAResult(ran=True, command=cmd, log_path=log_path)
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=ma_environment(), cwd=work_dir,
                                start_new_session=True)  # its own group: the server it launches goes down with it
        try:
            result.returncode = proc.wait(timeout=max_minutes * 60.0)
        except subprocess.TimeoutExpired:
            result.timed_out = True
            _stop_group(proc)
        except KeyboardInterrupt:
            _stop_group(proc)
            raise
    result.wall_s = time.monotonic() - t0
    output = log_path.read_text(errors="replace")
    result.measurements = read_checkpoint(work_dir / "checkpoints")
    if result.timed_out:
        result.error = (f"stopped at the {max_minutes:g} min limit before its search finished "
                        f"({len(result.measurements)} measurements in its checkpoint)")
    elif result.returncode != 0:
        result.error = explain_failure(output, result.returncode)
    return result


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGINT to Model Analyzer alone (it finishes the current measurement and saves its checkpoint; a SIGINT
    to its perf_analyzer would cut that measurement short and record a bogus point), then the whole group."""
    try:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=180)
    except subprocess.TimeoutExpired:
        pass
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)  # the tritonserver it launched, if still there
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue


__all__ = ["MARequest", "MAResult", "MAMeasurement", "find_model_analyzer", "ma_config", "ma_command", "ma_environment",
           "read_checkpoint", "explain_failure", "run_model_analyzer", "INSTALL_HINT"]
