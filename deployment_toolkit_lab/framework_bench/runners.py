"""A configuration ready to call: the model built in its precision and wrapped in its runtime (eager, torch.compile,
TorchScript or ONNX Runtime, exported with deployment_toolkit.export)."""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from deployment_toolkit.config import setting
from .configs import BenchConfig
from .host import HostCaps, amp_dtype_for, slugify


@dataclass
class BenchOptions:
    """How every configuration is measured (recorded in the hardware JSON); each default written once (the bench
    command's flags are built from these fields)."""

    device: str = "cpu"  # the command's --device auto resolves to this
    # untimed calls (the first one, which compiles, is timed separately)
    warmup: int = setting(10, flag="--warmup", help="untimed calls per configuration")
    # timed seconds per configuration (at least min_iterations calls)
    duration_s: float = setting(30.0, flag="--duration", help="timed seconds per configuration")
    min_iterations: int = setting(3, flag="--min-iterations", help="timed calls at least")
    gsd_m: tuple[float, ...] = setting((10.0,), flag="--gsd-m", type=float, nargs="+", metavar="M",
                                       help="ground sample distances (m) for the geospatial km^2/s columns")
    amp_dtype: str = setting("auto", flag="--amp-dtype", choices=("auto", "fp16", "bf16"),
                             help="autocast dtype for amp (auto: bf16 on CPU, fp16 on CUDA)")
    tf32: bool = setting(True, flag="--no-tf32", action="store_false",  # TF32 on Ampere+: the seed's default
                         help="keep fp32 matmuls/convs in full fp32 on Ampere+ GPUs")
    seed: int = setting(0, flag="--seed", help="seed of the random weights and example inputs")
    onnx_opset: int = 17

    def __post_init__(self) -> None:
        self.gsd_m = tuple(self.gsd_m)  # a flag's list: the run identity hashes these options as a tuple


@dataclass
class Prepared:
    """A runtime ready to call on inputs made by `make_inputs(batch)`."""

    run: Callable[[Any], Any]
    make_inputs: Callable[[int], Any]
    threads: str
    prepare_s: float
    input_shape: tuple[int, ...]
    family: str
    unit: str
    sync: Callable[[], None] = lambda: None
    cleanup: Callable[[], None] = lambda: None


def _torch_dtype(precision: str):
    import torch

    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "amp": torch.float32}[precision]


def _unit(task: str, shape: Sequence[int]) -> str:
    if task == "denoising":
        return "samples/s"
    return "volumes/s" if len(shape) == 4 else "images/s"


@dataclass
class _Built:
    """The model built for one configuration on its device and in its precision, with what every runtime wraps it
    with: example inputs, autocast for amp, and the device's sync."""

    cfg: BenchConfig
    opts: BenchOptions
    t0: float
    device: Any  # torch.device
    entry: Any  # the resolved model source
    dtype: Any
    amp_dtype: Any
    model: Any

    @property
    def signature(self) -> Any:
        return self.entry.signature

    def torch_inputs(self, batch: int) -> tuple:
        import torch

        arrays = self.signature.examples(batch, seed=self.opts.seed)
        out = []
        for spec in self.signature.inputs:
            t = torch.from_numpy(arrays[spec.name]).to(self.device)
            out.append(t.to(self.dtype) if t.is_floating_point() else t)
        return tuple(out)

    def autocast(self) -> Any:
        import torch

        return torch.autocast(self.device.type, dtype=self.amp_dtype) if self.cfg.precision == "amp" else \
            contextlib.nullcontext()

    def common(self) -> dict[str, Any]:
        """The Prepared fields every runtime shares."""
        import torch

        shape = self.signature.inputs[0].concrete_shape
        sync = (lambda: torch.cuda.synchronize(self.device)) if self.device.type == "cuda" else (lambda: None)
        return dict(input_shape=tuple(shape), family=self.entry.family, unit=_unit(self.entry.task, shape), sync=sync)

    def prepared(self, run: Callable[[Any], Any], threads: str) -> Prepared:
        return Prepared(run, self.torch_inputs, threads, time.perf_counter() - self.t0, **self.common())


def prepare(cfg: BenchConfig, opts: BenchOptions, workdir: Path) -> Prepared:
    """Build the model in the configuration's precision and wrap it in the configuration's runtime."""
    built = _build(cfg, opts, time.perf_counter())
    if cfg.runtime == "eager":
        return _eager(built)
    example = built.torch_inputs(min(2, max(built.entry.max_batch_size, 1)))
    if cfg.runtime == "torchscript":
        return _torchscript(built, example, workdir)
    return _onnx(built, example, workdir)


def _build(cfg: BenchConfig, opts: BenchOptions, t0: float) -> _Built:
    """The device's settings (TF32, cuDNN autotuning, threads), then the model from any source, in its precision."""
    import torch

    from deployment_toolkit.sources import resolve

    device = torch.device(opts.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = opts.tf32
        torch.backends.cudnn.allow_tf32 = opts.tf32
        torch.backends.cudnn.benchmark = True
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    entry = resolve(cfg.model, preset=cfg.preset)  # any model source (zoo, timm:<arch>, model.py, artifact folder)
    dtype = _torch_dtype(cfg.precision)
    amp_dtype = _torch_dtype(amp_dtype_for(HostCaps(device=opts.device), opts.amp_dtype))
    model = entry.build(opts.seed).to(device=device, dtype=dtype)
    return _Built(cfg, opts, t0, device, entry, dtype, amp_dtype, model)


def _eager(built: _Built) -> Prepared:
    """The module as it is, or through torch.compile in the configuration's mode."""
    import torch

    cfg, model = built.cfg, built.model
    threads = f"torch {torch.get_num_threads()}"
    module = model
    if cfg.compile_mode != "none":
        module = torch.compile(model, mode=None if cfg.compile_mode == "default" else cfg.compile_mode, dynamic=False)

    def run_eager(args: tuple):
        with torch.inference_mode(), built.autocast():
            return module(*args)

    return built.prepared(run_eager, threads)


def _torchscript(built: _Built, example: tuple, workdir: Path) -> Prepared:
    """The model traced to TorchScript (amp: the autocast casts are recorded into the trace) and loaded back."""
    import torch

    from deployment_toolkit.export.torchscript import export_torchscript

    cfg = built.cfg
    threads = f"torch {torch.get_num_threads()}"
    path = workdir / f"{slugify(cfg.model)}-{cfg.preset}-{cfg.precision}.pt"
    with built.autocast():  # amp: the autocast casts are recorded into the trace
        export_torchscript(built.model, example, path, mode="trace")
    module = torch.jit.load(str(path), map_location=built.device).eval()

    def run_ts(args: tuple):
        with torch.inference_mode():
            return module(*args)

    return built.prepared(run_ts, threads)


def _onnx(built: _Built, example: tuple, workdir: Path) -> Prepared:
    """The model exported to ONNX and run by ONNX Runtime on numpy inputs in the configuration's precision (the
    torch model is dropped once exported: only the session is measured)."""
    from deployment_toolkit.export.onnx import export_onnx
    from deployment_toolkit.runtimes.artifact import OnnxRuntime

    cfg, opts, signature = built.cfg, built.opts, built.signature
    common = built.common()
    path = workdir / f"{slugify(cfg.model)}-{cfg.preset}-{cfg.precision}.onnx"
    export_onnx(built.model, signature, example, path, opset=opts.onnx_opset)
    built.model = None
    session = OnnxRuntime(str(path), device=opts.device, threads=cfg.threads)
    intra = session.session.get_session_options().intra_op_num_threads
    np_dtype = {"fp16": np.float16}.get(cfg.precision, np.float32)

    def numpy_inputs(batch: int) -> dict:
        arrays = signature.examples(batch, seed=opts.seed)
        return {k: np.ascontiguousarray(v.astype(np_dtype) if np.issubdtype(v.dtype, np.floating) else v)
                for k, v in arrays.items()}

    return Prepared(session, numpy_inputs, f"ort {intra or 'default'}", time.perf_counter() - built.t0,
                    **{**common, "sync": lambda: None})
