"""In-process throughput bench: models x precision x torch.compile x batch size x runtime, no server.

Why: it is the ceiling every served number is compared with ("how much of the framework's speed does
serving keep?"), and it answers which precision / compile mode / runtime to deploy before anything is
configured. The method follows calebrob6/throughput-bench (seeds/004): warm-up iterations, then a timed
duration of back-to-back calls on a pre-allocated batch; throughput, mean/p50/p95/p99 latency and peak
memory; the batch is halved on out-of-memory; results go to a per-device CSV that a rerun extends
(completed configurations are skipped); geospatial models get km^2/s coverage columns.

Peak memory is CUDA `max_memory_allocated` on a GPU (the torch allocator: weights + activations), and
the peak-RSS growth of the process during the timed calls on CPU (activations + runtime workspace; the
weights were resident before): the `peak_mem_metric` column says which. The CPU number is a lower bound
when earlier work in the same process left freed heap pages resident (malloc keeps them): `--isolate all`
measures every group in a fresh process; `peak_rss_mb` is the whole process' peak for context.
"""
from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from ..runs.identity import RunIdentity, host_identity, library_versions, toolkit_version
from ..runs.ledger import reconcile
from ..spec import atomic_write_text
from ..errors import UserInputError

PRECISIONS = ("fp32", "fp16", "bf16", "amp")
COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune")
RUNTIMES = ("eager", "torchscript", "onnxruntime")
STATUS_OK, STATUS_SKIPPED, STATUS_FAILED = "ok", "skipped", "failed"

# What identifies a configuration in the CSV (a rerun skips rows with these values).
KEY_COLUMNS = ("model", "preset", "runtime", "precision", "compile_mode", "requested_batch_size", "threads_requested")
BASE_COLUMNS = (
    "timestamp", *KEY_COLUMNS, "status", "reason", "family", "device", "batch_size", "input_shape",
    "throughput", "unit", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "iterations", "timed_s", "warmup",
    "first_call_s", "prepare_s", "peak_mem_mb", "peak_mem_metric", "peak_rss_mb", "threads", "amp_dtype", "tf32",
    "loadavg_1m", "loadavg_5m", "background_cpu", "tile_px", "identity",
)
COVERAGE_PREFIX = "km2_per_s_at_"


# ---------------------------------------------------------------------------------------------- configurations

@dataclass(frozen=True, order=True)
class BenchConfig:
    """One measured point. `batch_size` is the requested size (halved on OOM: the row's batch_size says)."""

    model: str
    preset: str
    runtime: str
    precision: str
    compile_mode: str
    batch_size: int
    threads: int = 0  # 0: the runtime's default

    @property
    def key(self) -> tuple[str, ...]:
        return (self.model, self.preset, self.runtime, self.precision, self.compile_mode, str(self.batch_size),
                str(self.threads))

    @property
    def group(self) -> tuple[str, ...]:
        """Configurations sharing one prepared model (all batch sizes of a runtime/precision/compile)."""
        return self.key[:5] + (str(self.threads),)

    @property
    def label(self) -> str:
        comp = "" if self.compile_mode == "none" else f" compile={self.compile_mode}"
        return f"{self.model}/{self.preset} {self.runtime} {self.precision}{comp} b{self.batch_size}"


def enumerate_configs(models: Sequence[str], precisions: Sequence[str] = PRECISIONS,
                      compile_modes: Sequence[str] = ("none", "default"), batch_sizes: Sequence[int] = (1, 8),
                      runtimes: Sequence[str] = RUNTIMES, preset: str = "full", threads: int = 0) -> list[BenchConfig]:
    """Every combination, grouped so one prepared model serves all its batch sizes in a row.

    torch.compile is a transformation of the eager module, so compile modes other than `none` are paired
    with the eager runtime only (TorchScript and ONNX Runtime have their own graph compilers).
    """
    for name, values, allowed in (("precision", precisions, PRECISIONS), ("compile mode", compile_modes, COMPILE_MODES),
                                  ("runtime", runtimes, RUNTIMES)):
        bad = [v for v in values if v not in allowed]
        if bad:
            raise UserInputError(f"unknown {name} {bad}; choose from {', '.join(allowed)}")
    if any(b < 1 for b in batch_sizes):
        raise UserInputError("batch sizes must be >= 1")
    out: list[BenchConfig] = []
    for model in dict.fromkeys(models):
        for runtime in dict.fromkeys(runtimes):
            for precision in dict.fromkeys(precisions):
                for mode in dict.fromkeys(compile_modes):
                    if mode != "none" and runtime != "eager":
                        continue
                    for batch in sorted(set(batch_sizes)):
                        out.append(BenchConfig(model, preset, runtime, precision, mode, batch, threads))
    return out


# ---------------------------------------------------------------------------------------------- host capabilities

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
    from ..runinfo import cpu_info

    info = cpu_info()
    return f"cpu-{slugify(info['model'])}-{info['usable_cores']}c"


# ---------------------------------------------------------------------------------------------- arithmetic

def tile_pixels(shape: Sequence[int]) -> tuple[int, int] | None:
    """(H, W) of a per-sample image shape (C, H, W); None for anything that is not a 2-D image."""
    return (int(shape[-2]), int(shape[-1])) if len(shape) == 3 else None


def coverage_km2_per_s(throughput: float, tile_hw: tuple[int, int], gsd_m: float) -> float:
    """Area mapped per second: tiles/s x (H x GSD) x (W x GSD) m^2 / 1e6 (non-overlapping tiles)."""
    return throughput * (tile_hw[0] * gsd_m) * (tile_hw[1] * gsd_m) / 1e6


def coverage_column(gsd_m: float) -> str:
    return f"{COVERAGE_PREFIX}{gsd_m:g}m"


def latency_stats(seconds: Sequence[float], batch: int) -> dict[str, float]:
    """Throughput from the total timed wall time; latency percentiles per call, in ms."""
    arr = np.asarray(seconds, dtype=np.float64)
    total = float(arr.sum())
    p50, p95, p99 = (float(v) * 1e3 for v in np.percentile(arr, [50, 95, 99]))
    return {"throughput": batch * len(arr) / total if total > 0 else math.nan, "mean_ms": float(arr.mean()) * 1e3,
            "p50_ms": p50, "p95_ms": p95, "p99_ms": p99, "iterations": len(arr), "timed_s": total}


def is_oom(err: BaseException) -> bool:
    """Out of memory in any runtime: CUDA's OutOfMemoryError, MemoryError, or the allocators' messages."""
    if isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError":
        return True
    msg = str(err).lower()
    return any(s in msg for s in ("out of memory", "can't allocate memory", "cannot allocate memory",
                                  "failed to allocate memory", "bad_alloc"))


def with_batch_halving(measure: Callable[[int], Any], batch: int, on_oom: Callable[[int, BaseException], None] | None = None
                       ) -> tuple[Any, int]:
    """measure(batch), halving the batch on out-of-memory until it fits; raises the last OOM at batch 1."""
    while True:
        try:
            return measure(batch), batch
        except Exception as err:  # noqa: BLE001 - only OOM is handled, everything else propagates
            if not is_oom(err) or batch <= 1:
                raise
            if on_oom is not None:
                on_oom(batch, err)
            batch //= 2


# ---------------------------------------------------------------------------------------------- memory

def _proc_status_kib(field_name: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class PeakMemory:
    """Peak memory over a block: CUDA max allocated, or the process' peak-RSS growth on CPU.

    On Linux the RSS high-water mark is reset through /proc/self/clear_refs ("5"), so each configuration
    gets its own peak even in a long-lived process; without that, ru_maxrss growth is a lower bound.
    """

    def __init__(self, device: str):
        self.device = device
        self.metric = "cuda_max_allocated" if device.startswith("cuda") else "rss_peak_delta"
        self.baseline_kib = 0

    def start(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            return
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
            self.baseline_kib = _proc_status_kib("VmRSS") or 0
        except OSError:
            import resource

            self.metric = "ru_maxrss_delta (lower bound)"
            self.baseline_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    def peak_mb(self) -> float:
        if self.device.startswith("cuda"):
            import torch

            return torch.cuda.max_memory_allocated(self.device) / 2**20
        if self.metric == "rss_peak_delta":
            peak = _proc_status_kib("VmHWM") or 0
        else:
            import resource

            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return max(0, peak - self.baseline_kib) / 1024

    def peak_rss_mb(self) -> float:
        """The process' whole peak RSS during the block (libraries and weights included); NaN off Linux."""
        if self.metric != "rss_peak_delta":
            return math.nan
        return (_proc_status_kib("VmHWM") or 0) / 1024


# ---------------------------------------------------------------------------------------------- runners

@dataclass
class BenchOptions:
    """How every configuration is measured (recorded in the hardware JSON)."""

    device: str = "cpu"
    warmup: int = 10  # untimed calls (the first one, which compiles, is timed separately)
    duration_s: float = 30.0  # timed seconds per configuration (at least min_iterations calls)
    min_iterations: int = 3
    gsd_m: tuple[float, ...] = (10.0,)
    amp_dtype: str = "auto"  # auto (CPU bf16, CUDA fp16) | fp16 | bf16
    tf32: bool = True  # fp32 matmuls/convs in TF32 on Ampere+ GPUs (the seed's default)
    seed: int = 0
    onnx_opset: int = 17


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


def prepare(cfg: BenchConfig, opts: BenchOptions, workdir: Path) -> Prepared:
    """Build the model in the configuration's precision and wrap it in the configuration's runtime."""
    import torch

    from ..sources import resolve

    t0 = time.perf_counter()
    device = torch.device(opts.device)
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = opts.tf32
        torch.backends.cudnn.allow_tf32 = opts.tf32
        torch.backends.cudnn.benchmark = True
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    entry = resolve(cfg.model, preset=cfg.preset)  # any model source (zoo, timm:<arch>, model.py, artifact folder)
    signature = entry.signature
    dtype = _torch_dtype(cfg.precision)
    caps_like = HostCaps(device=opts.device)
    amp = cfg.precision == "amp"
    amp_dtype = _torch_dtype(amp_dtype_for(caps_like, opts.amp_dtype))
    model = entry.build(opts.seed).to(device=device, dtype=dtype)

    def torch_inputs(batch: int) -> tuple:
        arrays = signature.examples(batch, seed=opts.seed)
        out = []
        for spec in signature.inputs:
            t = torch.from_numpy(arrays[spec.name]).to(device)
            out.append(t.to(dtype) if t.is_floating_point() else t)
        return tuple(out)

    def autocast():
        return torch.autocast(device.type, dtype=amp_dtype) if amp else contextlib.nullcontext()

    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    common = dict(input_shape=tuple(signature.inputs[0].concrete_shape), family=entry.family,
                  unit=_unit(entry.task, signature.inputs[0].concrete_shape), sync=sync)
    torch_threads = f"torch {torch.get_num_threads()}"

    if cfg.runtime == "eager":
        module = model
        if cfg.compile_mode != "none":
            module = torch.compile(model, mode=None if cfg.compile_mode == "default" else cfg.compile_mode,
                                   dynamic=False)

        def run_eager(args: tuple):
            with torch.inference_mode(), autocast():
                return module(*args)

        return Prepared(run_eager, torch_inputs, torch_threads, time.perf_counter() - t0, **common)

    example = torch_inputs(min(2, max(entry.max_batch_size, 1)))
    if cfg.runtime == "torchscript":
        from ..export.torchscript import export_torchscript

        path = workdir / f"{slugify(cfg.model)}-{cfg.preset}-{cfg.precision}.pt"
        with autocast():  # amp: the autocast casts are recorded into the trace
            export_torchscript(model, example, path, mode="trace")
        module = torch.jit.load(str(path), map_location=device).eval()

        def run_ts(args: tuple):
            with torch.inference_mode():
                return module(*args)

        return Prepared(run_ts, torch_inputs, torch_threads, time.perf_counter() - t0, **common)

    from ..export.onnx import export_onnx
    from ..repository.python_runtime.runtimes import OnnxRuntime

    path = workdir / f"{slugify(cfg.model)}-{cfg.preset}-{cfg.precision}.onnx"
    export_onnx(model, signature, example, path, opset=opts.onnx_opset)
    del model
    session = OnnxRuntime(str(path), device=opts.device, threads=cfg.threads)
    intra = session.session.get_session_options().intra_op_num_threads
    np_dtype = {"fp16": np.float16}.get(cfg.precision, np.float32)

    def numpy_inputs(batch: int) -> dict:
        arrays = signature.examples(batch, seed=opts.seed)
        return {k: np.ascontiguousarray(v.astype(np_dtype) if np.issubdtype(v.dtype, np.floating) else v)
                for k, v in arrays.items()}

    return Prepared(session, numpy_inputs, f"ort {intra or 'default'}", time.perf_counter() - t0,
                    **{**common, "sync": lambda: None})


# ---------------------------------------------------------------------------------------------- measuring

def _loadavg() -> tuple[float, float]:
    try:
        one, five, _ = os.getloadavg()
        return round(one, 2), round(five, 2)
    except OSError:
        return math.nan, math.nan


def base_row(cfg: BenchConfig, device: str, status: str, reason: str = "") -> dict[str, Any]:
    one, five = _loadavg()
    return {
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "model": cfg.model, "preset": cfg.preset,
        "runtime": cfg.runtime, "precision": cfg.precision, "compile_mode": cfg.compile_mode,
        "requested_batch_size": cfg.batch_size, "threads_requested": cfg.threads, "status": status,
        "reason": reason, "device": device, "loadavg_1m": one, "loadavg_5m": five,
    }


def measure(prepared: Prepared, cfg: BenchConfig, opts: BenchOptions, log: Callable[[str], None]) -> dict[str, Any]:
    """Time one configuration (halving the batch on OOM) and return its CSV row."""
    from ..export.speed import time_interleaved  # the colleague's per-call timer with a background-CPU probe

    def at(batch: int) -> dict[str, Any]:
        inputs = prepared.make_inputs(batch)
        memory = PeakMemory(opts.device)
        memory.start()

        def call():
            prepared.run(inputs)
            prepared.sync()

        t0 = time.perf_counter()
        call()  # the first call compiles (torch.compile, cuDNN autotune, ORT's first run): timed on its own
        first = time.perf_counter() - t0
        timing = time_interleaved({"run": call}, warmup=max(opts.warmup - 1, 0), iterations=sys.maxsize,
                                  min_iterations=max(opts.min_iterations, 1), max_seconds=opts.duration_s)["run"]
        stats = latency_stats(timing.seconds, batch)
        return {**stats, "first_call_s": first, "peak_mem_mb": memory.peak_mb(), "peak_mem_metric": memory.metric,
                "peak_rss_mb": memory.peak_rss_mb(),
                "background_cpu": timing.background_cpu}

    def on_oom(batch: int, err: BaseException) -> None:
        log(f"{cfg.label}: out of memory at batch {batch} ({str(err).splitlines()[0][:120]}); trying {batch // 2}")
        gc_device(opts.device)

    values, batch = with_batch_halving(at, cfg.batch_size, on_oom)
    row = base_row(cfg, opts.device, STATUS_OK, "" if batch == cfg.batch_size else
                   f"out of memory at batch {cfg.batch_size}: halved to {batch}")
    row.update(values)
    row.update({"family": prepared.family, "batch_size": batch, "input_shape": "x".join(map(str, prepared.input_shape)),
                "unit": prepared.unit, "warmup": opts.warmup, "prepare_s": prepared.prepare_s,
                "threads": prepared.threads, "tf32": _tf32_label(cfg, opts),
                "amp_dtype": amp_dtype_for(HostCaps(device=opts.device), opts.amp_dtype) if cfg.precision == "amp" else ""})
    add_coverage(row, opts.gsd_m)
    return row


def _tf32_label(cfg: BenchConfig, opts: BenchOptions) -> str:
    if not opts.device.startswith("cuda") or cfg.precision not in ("fp32", "amp") or cfg.runtime == "onnxruntime":
        return "n/a"
    return "on" if opts.tf32 else "off"


def add_coverage(row: dict[str, Any], gsds: Iterable[float]) -> dict[str, Any]:
    """km^2/s columns for a geospatial row with a measured throughput (tile size from its input shape)."""
    if row.get("family") != "geospatial" or row.get("status") != STATUS_OK:
        return row
    shape = [int(d) for d in str(row.get("input_shape", "")).split("x") if d]
    tile = tile_pixels(shape)
    throughput = _float(row.get("throughput"))
    if tile is None or math.isnan(throughput):
        return row
    row["tile_px"] = f"{tile[0]}x{tile[1]}"
    for gsd in gsds:
        row[coverage_column(gsd)] = coverage_km2_per_s(throughput, tile, gsd)
    return row


def gc_device(device: str) -> None:
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def run_group(configs: Sequence[BenchConfig], opts: BenchOptions, emit: Callable[[dict[str, Any]], None],
              log: Callable[[str], None]) -> None:
    """Prepare the group's model once and measure each batch size; every outcome is emitted as a row."""
    if not configs:
        return
    with tempfile.TemporaryDirectory(prefix="framework-bench-") as tmp:
        try:
            prepared = prepare(configs[0], opts, Path(tmp))
        except Exception as err:  # noqa: BLE001 - a failed export/build fails the group, not the bench
            reason = f"prepare failed: {type(err).__name__}: {_first_line(err)}"
            for cfg in configs:
                emit(base_row(cfg, opts.device, STATUS_FAILED, reason))
            return
        for cfg in configs:
            try:
                emit(measure(prepared, cfg, opts, log))
            except Exception as err:  # noqa: BLE001
                emit(base_row(cfg, opts.device, STATUS_FAILED, f"{type(err).__name__}: {_first_line(err)}"))
                gc_device(opts.device)
        prepared.cleanup()
        del prepared
        gc_device(opts.device)


def _first_line(err: BaseException) -> str:
    lines = [ln for ln in str(err).strip().splitlines() if ln.strip()]
    return lines[0][:300] if lines else ""


def _worker(configs: list[BenchConfig], opts: BenchOptions, conn) -> None:
    """Child-process entry: run a group, send each row through the pipe."""
    import deployment_toolkit  # noqa: F401  (hides the repo's triton/ scripts folder from torch)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    run_group(configs, opts, conn.send, log)
    conn.send(None)
    conn.close()


def run_group_isolated(configs: Sequence[BenchConfig], opts: BenchOptions, emit: Callable[[dict[str, Any]], None],
                       timeout_s: float, target: Callable = _worker, context: str = "spawn") -> None:
    """run_group in a child process: a configuration that takes longer than `timeout_s` (a torch.compile
    that never ends) or kills its process (the kernel's OOM killer) fails alone, the bench goes on."""
    import multiprocessing as mp

    ctx = mp.get_context(context)
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target, args=(list(configs), opts, child), daemon=True)
    proc.start()
    child.close()
    pending = list(configs)
    reason = ""
    try:
        while pending:
            if not parent.poll(timeout_s):
                reason = f"timed out after {timeout_s:.0f} s (torch.compile or the timed run did not finish)"
                break
            try:
                row = parent.recv()
            except EOFError:
                code = proc.join(5) or proc.exitcode
                reason = ("worker killed by SIGKILL (the kernel's OOM killer?)" if code == -9
                          else f"worker exited with code {code}")
                break
            if row is None:
                break
            pending = [c for c in pending if c.key != _row_key(row)]
            emit(row)
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(10)
        parent.close()
    for i, cfg in enumerate(pending):
        emit(base_row(cfg, opts.device, STATUS_FAILED, reason if i == 0 else f"not run: {reason} at batch "
                      f"{pending[0].batch_size}"))


def _row_key(row: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(row.get(c, "")) for c in KEY_COLUMNS)


# ---------------------------------------------------------------------------------------------- the CSV

def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _cell(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


class BenchCSV:
    """The per-device results CSV. Every write rewrites the whole file through a temp file and a rename
    under an exclusive lock: readers never see half a row, concurrent benches never lose each other's rows,
    and a rerun replaces a configuration's row instead of repeating it."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """An exclusive flock on the CSV's folder: no lock file is left among the committed results."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def read(self) -> list[dict[str, str]]:
        if not self.path.exists():
            return []
        with open(self.path, newline="") as fh:
            return [r for r in csv.DictReader(fh) if r.get("model") and r.get("model") != "model"]

    def upsert(self, rows: Iterable[dict[str, Any]]) -> None:
        new = list(rows)
        if not new:
            return
        with self._locked():
            existing = self.read()
            keys = {_row_key(r) for r in new}
            merged = [r for r in existing if _row_key(r) not in keys] + new
            atomic_write_text(self.path, rows_to_csv(merged))


def rows_to_csv(rows: Sequence[dict[str, Any]]) -> str:
    extra = sorted({c for r in rows for c in r if c not in BASE_COLUMNS},
                   key=lambda c: (not c.startswith(COVERAGE_PREFIX), _float(c[len(COVERAGE_PREFIX):-1]), c))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=[*BASE_COLUMNS, *extra], lineterminator="\n", restval="")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: _cell(v) for k, v in r.items()})
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------- the bench

@dataclass
class Plan:
    """What a run will do: configurations already in the CSV, ones the host cannot run, the rest."""

    done: list[BenchConfig] = field(default_factory=list)
    unsupported: list[tuple[BenchConfig, str]] = field(default_factory=list)
    todo: list[BenchConfig] = field(default_factory=list)

    def summary(self) -> str:
        return (f"{len(self.done) + len(self.unsupported) + len(self.todo)} configurations: skipping "
                f"{len(self.done)} completed, {len(self.unsupported)} unsupported on this host, "
                f"{len(self.todo)} to measure")


def plan_run(configs: Sequence[BenchConfig], caps: HostCaps, existing: Iterable[dict[str, Any]],
             amp_dtype: str = "auto", remeasure: bool = False) -> Plan:
    """Completed = measured rows, and skipped rows whose reason still holds (a host that gained a C
    compiler measures its torch.compile rows). Failed rows are tried again."""
    status = {_row_key(r): r.get("status") for r in existing}
    plan = Plan()
    for cfg in configs:
        stored = status.get(tuple(str(v) for v in cfg.key))
        reason = skip_reason(cfg, caps, amp_dtype)
        if stored == STATUS_OK and not remeasure:  # a measurement is never overwritten by a skip
            plan.done.append(cfg)
        elif reason is not None:
            if stored == STATUS_SKIPPED and not remeasure:
                plan.done.append(cfg)
            else:
                plan.unsupported.append((cfg, reason))
        else:
            plan.todo.append(cfg)
    return plan


def groups_of(configs: Sequence[BenchConfig]) -> list[list[BenchConfig]]:
    out: dict[tuple[str, ...], list[BenchConfig]] = {}
    for cfg in configs:
        out.setdefault(cfg.group, []).append(cfg)
    return list(out.values())


def write_hardware_json(path: Path, config: dict[str, Any], caps: HostCaps,
                        identity: RunIdentity | None = None) -> Path:
    """`<device_slug>_hardware.json`: runinfo's machine/versions/git record plus what torch sees; `runs`
    keeps every measuring run's command, config and git state (the CSV collects rows of many runs)."""
    import json

    import torch

    from .. import runinfo

    meta = runinfo.run_metadata(config)
    try:
        previous = json.loads(path.read_text()).get("runs", []) if path.exists() else []
    except (OSError, ValueError):
        previous = []
    meta["runs"] = [*previous, {k: meta[k] for k in ("timestamp", "command", "git", "config")}][-100:]
    meta["torch_runtime"] = {
        "threads": torch.get_num_threads(), "interop_threads": torch.get_num_interop_threads(),
        "mkldnn": torch.backends.mkldnn.is_available(), "host_caps": asdict(caps),
        "loadavg": list(_loadavg()),
    }
    if caps.cuda:
        props = torch.cuda.get_device_properties(caps.device)
        meta["torch_runtime"]["cuda"] = {"name": props.name, "capability": f"{props.major}.{props.minor}",
                                         "memory_gib": round(props.total_memory / 2**30, 1),
                                         "torch_cuda": torch.version.cuda}
    atomic_write_text(path, json.dumps(meta, indent=2, default=str) + "\n")
    if identity is not None:  # the folder's run.json, like every results folder: the latest run, every identity
        meta["identities"] = runinfo.read_run_json(path.parent).get("identities", {})
    runinfo.write_run_json(path.parent, meta)
    if identity is not None:
        from ..runs.ledger import register

        register(path.parent, identity, meta)
    return path


def bench_identity(opts: BenchOptions) -> RunIdentity:
    """What defines a bench row (runs.identity): the host and its GPUs, the libraries, the toolkit and how each
    configuration is timed. The configuration itself is the row's key."""
    return RunIdentity(host=host_identity(), server_version=None, model_config=None, artifact_digest=None,
                       perf_options=asdict(opts), input_data="random", toolkit_version=toolkit_version(),
                       libraries=library_versions(), extra={"kind": "framework-bench"})


def _coverage_text(row: dict[str, Any]) -> str:
    """`km2/s at 10 m: 1.2e+03; at 30 m: ...` for geospatial rows (the columns add_coverage wrote)."""
    parts = []
    for key, value in row.items():
        if key.startswith("km2_per_s_at_") and not math.isnan(_float(value)):
            parts.append(f"{_float(value):.3g} at {key[len('km2_per_s_at_'):]}")
    return "; ".join(parts)


def summary_table(rows: Sequence[dict[str, Any]]) -> str:
    """A compact markdown table of rows (the terminal, and <device>.md beside the CSV)."""
    head = "| model | runtime | precision | compile | batch | throughput | p50 ms | p99 ms | peak MB | km²/s | status |"
    out = [head, "|" + "---|" * 11]
    for r in rows:
        tp = _float(r.get("throughput"))
        cells = [r.get("model"), r.get("runtime"), r.get("precision"), r.get("compile_mode"),
                 r.get("batch_size") or r.get("requested_batch_size"),
                 "" if math.isnan(tp) else f"{tp:.2f} {r.get('unit', '')}",
                 *(("" if math.isnan(_float(r.get(k))) else f"{_float(r.get(k)):.1f}") for k in ("p50_ms", "p99_ms",
                                                                                                   "peak_mem_mb")),
                 _coverage_text(r), r.get("status") + (f": {r.get('reason')}" if r.get("reason") else "")]
        out.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(out)


def run_bench(configs: Sequence[BenchConfig], opts: BenchOptions, result_dir: str | Path, *,
              caps: HostCaps | None = None, isolate: str = "compile", timeout_s: float = 900.0,
              remeasure: bool = False, progress: bool = True, run_config: dict[str, Any] | None = None,
              log: Callable[[str], None] | None = None, reuse: str = "auto") -> tuple[Path, list[dict[str, Any]], Plan]:
    """Measure what is missing from `<result_dir>/<device_slug>.csv`; returns (csv path, this run's rows, plan).

    Rows are reused only under this run's identity (`bench_identity`); a CSV holding rows of another identity is
    moved aside first (runs.ledger; `reuse`: auto | resume | fresh).

    isolate: `compile` runs torch.compile groups in a child process with `timeout_s` per configuration,
    `all` every group, `none` nothing (fastest; a hang or an OOM kill then stops the bench).
    """
    if isolate not in ("compile", "all", "none"):
        raise ValueError("isolate must be compile, all or none")
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    slug = device_slug(opts.device)
    result_dir = Path(result_dir)
    store = BenchCSV(result_dir / f"{slug}.csv")
    identity = bench_identity(opts)
    hw_path = result_dir / f"{slug}_hardware.json"
    reconcile(result_dir, store.path.name, store.read(), identity, reuse,
              [store.path, store.path.with_suffix(".md"), hw_path], say=log)  # moves the CSV aside if it must
    measured = {_row_key(r) for r in store.read() if r.get("status") == STATUS_OK}
    needs_compile = any(c.compile_mode != "none" and (remeasure or tuple(map(str, c.key)) not in measured)
                        for c in configs)
    if caps is None:
        log("probing the host (fp16/bf16 kernels, ONNX Runtime providers"
            + (", torch.compile)" if needs_compile else ")") + " ...")
        caps = probe_host(opts.device, check_compile=needs_compile)
        if caps.compile_error and needs_compile:
            log(f"torch.compile is unavailable: {caps.compile_error}")
    plan = plan_run(configs, caps, store.read(), opts.amp_dtype, remeasure)
    log(plan.summary() + f" ({store.path})")
    hw_config = {**(run_config or {}), "options": asdict(opts), "isolate": isolate, "timeout_s": timeout_s}
    if plan.todo or plan.unsupported or not hw_path.exists():  # a run that measures nothing leaves it alone
        write_hardware_json(hw_path, hw_config, caps, identity)

    run_rows: list[dict[str, Any]] = []
    skipped_rows = [{**base_row(cfg, opts.device, STATUS_SKIPPED, reason), "identity": identity.id}
                    for cfg, reason in plan.unsupported]
    store.upsert(skipped_rows)
    run_rows += skipped_rows

    bar = None
    if progress and plan.todo:
        from tqdm import tqdm

        bar = tqdm(total=len(plan.todo), desc="framework bench", unit="config", dynamic_ncols=True)
        log = _bar_log(bar)

    def emit(row: dict[str, Any]) -> None:
        row = {**row, "identity": identity.id}
        store.upsert([row])
        run_rows.append(row)
        if row["status"] == STATUS_OK:
            msg = (f"{row['model']} {row['runtime']} {row['precision']} compile={row['compile_mode']} "
                   f"b{row['batch_size']}: {row['throughput']:.2f} {row['unit']}, p50 {row['p50_ms']:.1f} ms, "
                   f"peak {row['peak_mem_mb']:.0f} MB ({row['peak_mem_metric']})")
        else:
            msg = f"{row['model']} {row['runtime']} {row['precision']} b{row['requested_batch_size']}: " \
                  f"{row['status']}: {row['reason']}"
        log(msg)
        if bar is not None:
            bar.update(1)

    try:
        for group in groups_of(plan.todo):
            if bar is not None:
                bar.set_postfix_str(group[0].label.rsplit(" b", 1)[0])
            if isolate == "all" or (isolate == "compile" and group[0].compile_mode != "none"):
                run_group_isolated(group, opts, emit, timeout_s)
            else:
                run_group(group, opts, emit, log)
    finally:
        if bar is not None:
            bar.close()
        write_summary(store.path, store.read())
    return store.path, run_rows, plan


def write_summary(csv_path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    """`<device>.md` beside `<device>.csv`: every configuration measured on the device, as a table to read."""
    path = Path(csv_path).with_suffix(".md")
    text = (f"# Framework bench: {Path(csv_path).stem}\n\nIn-process throughput per configuration (all rows of "
            f"`{Path(csv_path).name}`; machine in `{Path(csv_path).stem}_hardware.json`). Throughput = batch / "
            "mean seconds per call; km²/s: coverage at each ground sample distance (geospatial models).\n\n"
            + summary_table(rows) + "\n")
    atomic_write_text(path, text)
    return path


def _bar_log(bar) -> Callable[[str], None]:
    def log(msg: str) -> None:
        bar.write(msg, file=sys.stderr)

    return log


__all__ = [
    "PRECISIONS", "COMPILE_MODES", "RUNTIMES", "BenchConfig", "BenchOptions", "BenchCSV", "HostCaps", "Plan",
    "enumerate_configs", "skip_reason", "plan_run", "probe_host", "probe_compile", "device_slug", "tile_pixels",
    "coverage_km2_per_s", "coverage_column", "add_coverage", "latency_stats", "is_oom", "with_batch_halving",
    "run_bench", "run_group", "run_group_isolated", "rows_to_csv", "summary_table", "write_summary",
]
