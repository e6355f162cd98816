"""`python -m deployment_toolkit doctor`: what this host has for each stage, and what to install."""
from __future__ import annotations

import ctypes.util
import importlib.metadata as md
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def check_server(start: bool = True) -> list[Check]:
    from .server.errors import ServerError
    from .server.local import LocalTritonServer, ServerConfig, find_installation

    try:
        inst = find_installation()
    except ServerError as err:
        return [Check("tritonserver", False, str(err), "pip install nvidia-pytriton==0.7.0")]
    from .server.libpython import stub_python

    stub = stub_python()
    checks = [Check("python backend stub", True, str(inst.stub)),
              Check("libpython the stub runs", stub.matches,
                    f"{stub.library} (Python {stub.library_version})" if stub.matches else stub.mismatch(),
                    "use a Python built with --enable-shared")]
    if not start:
        return [Check("tritonserver", True, str(inst.binary)), *checks]
    with tempfile.TemporaryDirectory() as repo:
        try:
            with LocalTritonServer(ServerConfig(Path(repo), start_timeout_s=60), inst) as server:
                version = server.metadata().get("version", "?")
            checks.insert(0, Check("tritonserver", True, f"{version} at {inst.binary} (started and answered /v2)"))
        except ServerError as err:
            checks.insert(0, Check("tritonserver", False, f"{inst.binary} did not start: {err}",
                                   "see the log lines above; reinstall nvidia-pytriton==0.7.0"))
    return checks


def check_perf_analyzer() -> Check:
    from .binaries import PerfAnalyzerNotFound, find_perf_analyzer, perf_environment

    try:
        binary = find_perf_analyzer()
    except PerfAnalyzerNotFound as err:
        return Check("perf_analyzer", False, str(err), "pip install 'tritonclient[all]==2.50.0'")
    proc = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, env=perf_environment())
    missing = [line.split()[0] for line in proc.stdout.splitlines() if "not found" in line]
    if missing:
        fix = []
        if any("b64" in m for m in missing):
            fix.append("apt-get install libb64-0d")
        if any("cudart" in m for m in missing):
            fix.append("pip install nvidia-cuda-runtime-cu12")
        return Check("perf_analyzer", False, f"{binary}: missing libraries {', '.join(missing)}", "; ".join(fix))
    return Check("perf_analyzer", True, f"{binary} (libb64, libcudart found)")


def check_python_packages() -> list[Check]:
    out = []
    numpy = _version("numpy")
    out.append(Check("numpy", bool(numpy) and numpy.startswith("1."), f"{numpy}",
                     "pip install 'numpy<2' (numpy 2 makes the Python backend return empty tensors)"))
    for dist, fix in (("torch", "pip install torch==2.13.0"), ("onnx", "pip install onnx"),
                      ("tritonclient", "pip install 'tritonclient[all]==2.50.0'"), ("timm", "pip install timm"),
                      ("monai", "pip install monai"), ("diffusers", "pip install diffusers")):
        v = _version(dist)
        out.append(Check(dist, v is not None, v or "not installed", fix))
    try:
        import onnxruntime as ort

        providers = ", ".join(ort.get_available_providers())
        out.append(Check("onnxruntime", True, f"{ort.__version__} (providers: {providers})"))
    except ImportError:
        out.append(Check("onnxruntime", False, "not installed", "pip install onnxruntime (or onnxruntime-gpu alone)"))
    from .export.tensorrt import tensorrt_available

    ok, why = tensorrt_available()
    out.append(Check("tensorrt", ok, "available" if ok else why, "pip install the `gpu` extra on a GPU host",
                     required=False))
    return out


def check_gpu() -> Check:
    smi = shutil.which("nvidia-smi")
    detail = "no NVIDIA GPU (CPU host: the Python backend serves ONNX Runtime / TorchScript on CPU)"
    if smi:
        proc = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                              capture_output=True, text=True)
        if proc.returncode == 0 and proc.stdout.strip():
            return Check("gpu", True, proc.stdout.strip().replace("\n", "; "), required=False)
    try:
        import torch

        if torch.cuda.is_available():
            return Check("gpu", True, f"{torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda})", required=False)
    except ImportError:
        pass
    if ctypes.util.find_library("cuda"):
        detail += "; libcuda is present but no device answers"
    return Check("gpu", False, detail, "GPU paths (TensorRT, CUDA shared memory) skip on this host", required=False)


def run_doctor(start_server: bool = True) -> int:
    checks = [*check_server(start_server), check_perf_analyzer(), *check_python_packages(), check_gpu()]
    width = max(len(c.name) for c in checks)
    print(f"python {sys.version.split()[0]} at {sys.executable}")
    for c in checks:
        mark = "ok " if c.ok else ("-- " if not c.required else "!! ")
        print(f"{mark} {c.name:<{width}}  {c.detail}")
        if not c.ok and c.fix:
            print(f"    {'':<{width}}  fix: {c.fix}")
    failed = [c.name for c in checks if c.required and not c.ok]
    print("\nall required parts present" if not failed else f"\nmissing: {', '.join(failed)}")
    return 1 if failed else 0
