"""What this host can run: the precisions its kernels support, ONNX Runtime's providers, whether torch.compile
works (probed in a child process), and the device's name for file names."""
from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from deployment_toolkit.errors import UserInputError
from .configs import BenchConfig


@dataclass(frozen=True)
class HostCaps:
    """What the host can run; filled by `probe_host`, plain data so tests can build any host."""

    device: str = "cpu"  # cpu | cuda:N
    bf16: bool = True  # the device computes bf16 (CUDA: compute capability >= 8.0)
    fp16_error: str | None = None  # why fp16 kernels fail on this device (None: they run)
    bf16_error: str | None = None
    ort_providers: tuple[str, ...] = ("CPUExecutionProvider",)
    compile_error: str | None = None  # why torch.compile cannot run here (None: it can)

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")


def amp_dtype_for(caps: HostCaps, requested: str = "auto") -> str:
    """torch.autocast's dtype: the device's own default (CPU bf16, CUDA fp16) unless asked otherwise."""
    if requested != "auto":
        return requested
    return "fp16" if caps.cuda else "bf16"


def skip_reason(cfg: BenchConfig, caps: HostCaps, amp_dtype: str = "auto") -> str | None:
    """Why this host cannot (meaningfully) run `cfg`, or None. The reason goes into the CSV as is."""
    if cfg.compile_mode != "none":
        if cfg.runtime != "eager":
            return "torch.compile applies to the eager runtime only"
        if caps.compile_error:
            return f"torch.compile unavailable here: {caps.compile_error}"
    compute = amp_dtype_for(caps, amp_dtype) if cfg.precision == "amp" else cfg.precision
    if compute == "bf16" and caps.cuda and not caps.bf16:
        return "bf16 needs a GPU of compute capability >= 8.0 (Ampere or newer)"
    if compute == "bf16" and caps.bf16_error:
        return f"torch has no working bf16 kernels here: {caps.bf16_error}"
    if compute == "fp16" and caps.fp16_error:
        return f"torch has no working fp16 kernels here: {caps.fp16_error}"
    if cfg.runtime == "onnxruntime":
        if cfg.precision == "amp":
            return "amp is torch.autocast; ONNX Runtime runs the exported graph in the precision it was exported in"
        if cfg.precision == "bf16":
            return "ONNX Runtime has no bf16 kernels for Conv/MatMul (it refuses to load a bf16 graph)"
        if caps.cuda and "CUDAExecutionProvider" not in caps.ort_providers:
            return ("onnxruntime here has no CUDAExecutionProvider (onnxruntime-gpu, in an environment without "
                    "onnxruntime)")
        if cfg.precision == "fp16" and not caps.cuda:
            return ("ONNX Runtime's CPU provider has no fp16 Conv/MatMul kernels on x86: it wraps them in fp32 "
                    "casts, so the number would not be fp16 (fp16 needs the CUDA or TensorRT provider)")
    return None


_COMPILE_PROBE = """
import torch
f = torch.compile(lambda x: torch.relu(x) * 2 + 1)
x = torch.randn(64, device={device!r})
assert torch.allclose(f(x), torch.relu(x) * 2 + 1)
print("compile-ok")
"""


def probe_compile(device: str = "cpu", timeout_s: float = 300.0) -> str | None:
    """Compile a tiny function in a child process: None when torch.compile works, else why not.

    A child because inductor shells out to the C compiler (a slim image without `as` or the libc headers
    fails there) and a first compile can hang on a starved machine; the timeout bounds both.
    """
    with tempfile.TemporaryDirectory(prefix="compile-probe-") as tmp:  # cwd away from the repo's triton/ folder
        try:
            proc = subprocess.run([sys.executable, "-c", _COMPILE_PROBE.format(device=device)], cwd=tmp,
                                  capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return f"a test compile did not finish within {timeout_s:.0f} s"
    if proc.returncode == 0 and "compile-ok" in proc.stdout:
        return None
    lines = [ln.strip() for ln in (proc.stderr or proc.stdout).strip().splitlines() if ln.strip()]
    hint = ""
    text = "\n".join(lines)
    if "cannot execute 'as'" in text or "libc_nonshared" in text or "crti.o" in text:
        hint = " (install binutils and the libc headers: apt-get install binutils libc6-dev)"
    return (lines[-1][:300] if lines else f"exit code {proc.returncode}") + hint


def _kernel_error(device: str, dtype_name: str) -> str | None:
    """Run a tiny conv + linear in `dtype_name` on `device`: None when it works, else the error."""
    import torch

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype_name]
    try:
        net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 2))
        net = net.to(device=device, dtype=dtype).eval()
        with torch.inference_mode():
            net(torch.randn(1, 3, 8, 8, device=device, dtype=dtype))
    except Exception as err:  # noqa: BLE001 - any failure means "cannot run this precision"
        return f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
    return None


def probe_host(device: str, check_compile: bool = True, compile_timeout_s: float = 300.0) -> HostCaps:
    import onnxruntime as ort
    import torch

    cuda = device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise UserInputError(f"--device {device}: torch sees no CUDA device here")
    bf16 = bool(torch.cuda.is_bf16_supported()) if cuda else True
    return HostCaps(
        device=device, bf16=bf16, fp16_error=_kernel_error(device, "fp16"),
        bf16_error=_kernel_error(device, "bf16") if bf16 else None,
        ort_providers=tuple(ort.get_available_providers()),
        compile_error=probe_compile(device, compile_timeout_s) if check_compile else None,
    )


def default_device() -> str:
    import torch

    return "cuda:0" if torch.cuda.is_available() else "cpu"


def slugify(text: str) -> str:
    text = re.sub(r"\((r|tm|c)\)", "", text.lower())
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")


def device_slug(device: str) -> str:
    """File name of the device's CSV: the GPU's name, or the CPU model plus usable cores (both matter)."""
    if device.startswith("cuda"):
        import torch

        index = int(device.split(":")[1]) if ":" in device else 0
        return slugify(torch.cuda.get_device_name(index))
    from deployment_toolkit.results.runinfo import cpu_info

    info = cpu_info()
    return f"cpu-{slugify(info['model'])}-{info['usable_cores']}c"
