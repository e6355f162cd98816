"""What the acceptance needs to know about the host before it runs: is there a CUDA GPU torch can use, what
exactly is it (name, driver, CUDA, clocks), and which optional parts import (TensorRT)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from importlib import metadata
from typing import Any
from deployment_toolkit.errors import UserError

# nvidia-smi fields recorded in run.json: clocks matter to every figure (a throttled or capped GPU is slower)
SMI_FIELDS = ("name", "uuid", "driver_version", "memory.total", "pstate", "clocks.sm", "clocks.mem",
              "clocks.max.sm", "clocks.max.mem", "power.limit", "temperature.gpu", "compute_cap", "mig.mode.current")
# libraries whose versions a GPU figure depends on (besides runinfo's)
LIBRARIES = ("torch", "triton", "tensorrt", "onnx", "onnxruntime", "onnxruntime-gpu", "timm", "monai", "diffusers",
             "numpy", "nvidia-pytriton", "tritonclient", "nvidia-cuda-runtime-cu12", "cuda-python",
             "triton-deployment-toolkit")


class NoGPU(UserError, RuntimeError):
    """This host cannot run the GPU acceptance (the message says why, in one line)."""


def _probe(code: str, timeout_s: float = 120.0) -> tuple[bool, str]:
    """Run `code` in a fresh interpreter (the parent never creates a CUDA context): (ok, last output line)."""
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout_s:.0f} s"
    lines = (proc.stdout if proc.returncode == 0 else proc.stderr or proc.stdout).strip().splitlines()
    return proc.returncode == 0, lines[-1] if lines else f"exit {proc.returncode}"


def require_cuda() -> str:
    """The GPU torch sees, or NoGPU with the reason (no nvidia-smi, no GPU listed, or a torch without CUDA)."""
    if not shutil.which("nvidia-smi"):
        raise NoGPU("no NVIDIA GPU on this host (nvidia-smi not found): the GPU acceptance needs a CUDA host")
    ok, line = _probe("import torch; assert torch.cuda.is_available(), "
                      "f'torch {torch.__version__} (CUDA build: {torch.version.cuda}) sees no CUDA device'; "
                      "print(torch.cuda.get_device_name(0))")
    if not ok:
        raise NoGPU(f"torch cannot use a GPU on this host: {line}")
    return line


def nvidia_smi() -> dict[str, Any]:
    """The first GPU's identity and clocks, and the driver's CUDA version (nvidia-smi's banner)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return {}
    try:
        out = subprocess.run([smi, f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        banner = subprocess.run([smi], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as err:
        return {"error": str(err)}
    info: dict[str, Any] = {}
    rows = [line for line in out.stdout.splitlines() if line.strip()]
    if out.returncode == 0 and rows:
        info = dict(zip(SMI_FIELDS, (v.strip() for v in rows[0].split(","))))
        info["count"] = len(rows)
    for token in banner.split("|"):
        if "CUDA Version:" in token:
            info["driver_cuda_version"] = token.split("CUDA Version:")[1].split()[0]
    return info


def torch_cuda() -> dict[str, Any]:
    ok, line = _probe("import json, torch; print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, "
                      "'cudnn': torch.backends.cudnn.version(), 'device': torch.cuda.get_device_name(0), "
                      "'capability': list(torch.cuda.get_device_capability(0)), "
                      "'bf16': torch.cuda.is_bf16_supported()}))")
    if not ok:
        return {"error": line}
    import json

    return json.loads(line)


def capabilities() -> dict[str, str]:
    """Optional parts: "" when usable, else why not (recorded as the skip reason of the steps that need it)."""
    ok, line = _probe("import tensorrt; print(tensorrt.__version__)")
    return {"tensorrt": "" if ok else f"`import tensorrt` fails: {line}"}


def library_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for dist in LIBRARIES:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return versions
