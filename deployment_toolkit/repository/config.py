"""Triton model configs built as Triton's own ModelConfig protobuf, validated, written as config.pbtxt.

`runtime="python"` serves the artifact through the Python backend (the embedded server on any host);
`runtime="native"` maps the artifact format to Triton's own backend (NGC container):
  ts-trace / ts-script -> pytorch_libtorch, onnx -> onnxruntime_onnx, trt -> tensorrt_plan.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from ..config import InstanceKind, setting
from ..config.fields import int_list
from ..spec import Manifest, SpecError, numpy_dtype
from ..errors import UserError

NATIVE_PLATFORM = {"ts-trace": "pytorch_libtorch", "ts-script": "pytorch_libtorch", "onnx": "onnxruntime_onnx",
                   "trt": "tensorrt_plan"}
MODEL_FORMATS = ("python", *NATIVE_PLATFORM)  # --model-format choices; python = Python backend runtime
ACCELERATORS = ("none", "cuda", "trt", "openvino")
# --instance-kind's spellings: `auto` is the toolkit's own choice (GPU where the host has one, else CPU)
INSTANCE_KIND_FLAGS = ("auto", "cpu", "gpu")


class ConfigError(UserError, ValueError):
    """A config Triton would reject, or one that contradicts the model."""


def instance_kind(value: InstanceKind | str) -> InstanceKind:
    """An instance kind from its flag spelling (auto, cpu, gpu) or Triton's (KIND_CPU, ...)."""
    if isinstance(value, InstanceKind):
        return value
    text = str(value)
    if text.lower() in INSTANCE_KIND_FLAGS:
        return InstanceKind(f"KIND_{text.upper()}")
    try:
        return InstanceKind(text)
    except ValueError:
        raise ConfigError("--instance-kind must be auto, cpu or gpu") from None


def kind_flag(kind: InstanceKind) -> str:
    """The --instance-kind spelling of `kind` (InstanceKind.GPU -> gpu)."""
    return kind.value.removeprefix("KIND_").lower()


class HostMismatchWarning(UserWarning):
    """A config written for another host (e.g. KIND_GPU on a host without a GPU)."""


class BatchingWarning(UserWarning):
    """Dynamic batching was asked for but left out of the config, because it would give wrong answers."""


@dataclass
class ConfigOptions:
    """How a model's config.pbtxt is written; the fields with a flag are the config command's flags (config.setting),
    their defaults written here once. What Triton would refuse (0 instances, a negative delay, a preferred size past
    max_batch_size) is refused by build_config, for the command and dt.deploy alike."""

    model_name: str = setting(flag="--model-name", help="the model's name in the repository and on the server")
    runtime: str = "python"  # python | native (the config command derives it from --model-format)
    max_batch_size: int | None = setting(None, flag="--max-batch-size", low=0, type=int,
                                         help="default: the manifest's")
    dynamic_batching: bool = setting(True, flag="--no-dynamic-batching", action="store_false",
                                     help="leave dynamic batching out of the config")
    preferred_batch_sizes: tuple[int, ...] = setting((), flag="--preferred-batch-sizes", type=int_list, low=1,
                                                     show_default=False, metavar="SIZES",
                                                     help="the dynamic batcher's preferred sizes, e.g. 4,8 (none by "
                                                          "default)")
    max_queue_delay_us: int = setting(0, flag="--max-queue-delay-us", unit="us",
                                      help="how long the batcher may hold a request to fill a batch")
    preserve_ordering: bool = False
    instances: int = setting(1, flag="--number-of-model-instances", aliases=("--instances",), help="model instances per device")
    instance_kind: InstanceKind = setting(InstanceKind.AUTO, flag="--instance-kind", type=str,
                                          choices=INSTANCE_KIND_FLAGS, metavar="{auto,cpu,gpu}", show_default=False,
                                          help="auto (the default): GPU if this host has one")  # Triton's spellings taken too
    gpu_ids: tuple[int, ...] = setting((), flag="--gpu-ids", type=int_list, low=0, show_default=False,
                                      metavar="IDS", help="GPUs the instances go on, e.g. 0,1 (default: all)")
    backend_accelerator: str = setting("none", flag="--backend-accelerator", choices=ACCELERATORS,
                                       help="the runtime's execution accelerator on the server")
    precision: str | None = setting(None, flag="--precision", choices=("fp32", "fp16"),
                                    help="default: the manifest's")
    trt_workspace_bytes: int = setting(1 << 30, flag="--max-workspace-size", low=1, unit="bytes",
                                       help="ONNX Runtime TensorRT accelerator workspace")
    capture_cuda_graph: bool = setting(False, flag="--capture-cuda-graph", type=int, choices=(0, 1),
                                       to_value=bool, help="1: capture CUDA graphs (TensorRT)")
    intra_op_threads: int = setting(0, flag="--intra-op-threads", low=0,
                                    help="runtime threads per instance (0: runtime default)")
    warmup_batch_sizes: tuple[int, ...] = setting((), flag="--warmup-batch-sizes", type=int_list, low=1,
                                                  show_default=False, metavar="SIZES",
                                                  help="batch sizes the server warms the model up with at load "
                                                       "(none by default)")
    response_cache: bool = setting(False, flag="--response-cache", action="store_true",
                                   help="turn on Triton's response cache for this model")
    version_policy: str = setting("latest", flag="--version-policy", help="latest | all | specific:1,2")
    host_has_gpu: bool | None = None  # None: detect
    # inputs whose rows must be equal within a batch; None: the manifest inputs marked `batch_uniform`
    batch_uniform_inputs: tuple[str, ...] | None = setting(
        None, flag="--batch-uniform-inputs", type=lambda t: tuple(n.strip() for n in t.split(",") if n.strip()),
        metavar="NAMES", help="inputs that describe a whole request (rows equal within a batch), comma separated; "
        "requests that differ in them are never batched together. Default: the inputs the model registry marks "
        "(e.g. dofa_vit's wavelengths__1); '' for none")
    extra_parameters: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.instance_kind = instance_kind(self.instance_kind)


# what an NVIDIA driver puts on a host (or in a container given GPUs), and WSL2's GPU device
NVIDIA_DRIVER_PATHS = ("/dev/nvidiactl", "/proc/driver/nvidia", "/dev/dxg")


def host_has_gpu() -> bool:
    """Whether torch sees a CUDA GPU here. With no NVIDIA driver on the host torch cannot see one, so that case is
    answered without importing torch (about 3 CPU-seconds in every command that writes a config on a CPU host)."""
    if not any(Path(p).exists() for p in NVIDIA_DRIVER_PATHS):
        return False
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:  # pragma: no cover
        return False


def batch_uniform_inputs(manifest: Manifest, opts: ConfigOptions) -> tuple[str, ...]:
    """Inputs that describe a whole request, not a sample (e.g. DOFA's band wavelengths, read once per
    batch): requests that differ in them must never be merged into one batch. By default the manifest
    inputs marked `batch_uniform`."""
    if opts.batch_uniform_inputs is None:
        return tuple(t.name for t in manifest.inputs if t.batch_uniform)
    names = {t.name for t in manifest.inputs}
    unknown = [n for n in opts.batch_uniform_inputs if n not in names]
    if unknown:
        raise ConfigError(f"batch-uniform input(s) {unknown} are not inputs of {manifest.model}; "
                          f"its inputs are {sorted(names)}")
    return tuple(opts.batch_uniform_inputs)


def _native_merges_unsafely(manifest: Manifest, opts: ConfigOptions, max_batch: int) -> tuple[str, ...]:
    """The batch-uniform inputs a native backend's dynamic batching would mix (empty: batching is safe).

    Triton's own backends concatenate queued requests blindly, so two requests with other wavelengths
    would share one batch and all but the first get wrong answers; the Python runtime groups them instead.
    """
    if opts.runtime != "native" or max_batch <= 0 or not opts.dynamic_batching:
        return ()
    return batch_uniform_inputs(manifest, opts)


def _dims(shape) -> list[int]:
    return [int(d) for d in shape]


def build_config(manifest: Manifest, opts: ConfigOptions) -> mc.ModelConfig:
    """Everything comes from the manifest; options only add serving choices. Raises ConfigError."""
    if opts.runtime not in ("python", "native"):
        raise ConfigError(f"runtime must be python or native, got {opts.runtime!r}")
    max_batch = manifest.max_batch_size if opts.max_batch_size is None else opts.max_batch_size
    precision = opts.precision or manifest.precision
    gpu = host_has_gpu() if opts.host_has_gpu is None else opts.host_has_gpu
    _check(manifest, opts, max_batch, precision, gpu)

    cfg = mc.ModelConfig(name=opts.model_name, max_batch_size=max_batch)
    if opts.runtime == "python":
        cfg.backend = "python"
    else:
        cfg.platform = NATIVE_PLATFORM[manifest.format]
        cfg.default_model_filename = manifest.artifact
    _tensors(cfg, manifest)
    _batching(cfg, manifest, opts, max_batch)
    kind = _instance_kind(opts, gpu)
    group = cfg.instance_group.add()
    group.count = opts.instances
    group.kind = mc.ModelInstanceGroup.Kind.Value(kind.value)
    if kind is InstanceKind.GPU and opts.gpu_ids:
        group.gpus.extend(opts.gpu_ids)
    _version_policy(cfg, opts.version_policy)
    _optimization(cfg, manifest, opts, precision)
    _parameters(cfg, manifest, opts, precision)
    for batch in opts.warmup_batch_sizes:
        _warmup(cfg, manifest, batch)
    if opts.response_cache:
        cfg.response_cache.enable = True
    return cfg


def _tensors(cfg: mc.ModelConfig, manifest: Manifest) -> None:
    """The inputs and outputs as the manifest's signature names them, in the wire's dims."""
    for spec, coll in [(t, cfg.input) for t in manifest.inputs] + [(t, cfg.output) for t in manifest.outputs]:
        tensor = coll.add()
        tensor.name = spec.name
        tensor.data_type = mc.DataType.Value(f"TYPE_{spec.triton_dtype}")
        tensor.dims.extend(_dims(spec.wire_shape))
        if not spec.shape:  # a scalar per sample: [1] on the wire (Triton needs dims), [] to the model
            tensor.reshape.SetInParent()


def _batching(cfg: mc.ModelConfig, manifest: Manifest, opts: ConfigOptions, max_batch: int) -> None:
    """Dynamic batching, left out (with a warning) where a native backend would merge requests whose
    batch-uniform inputs differ."""
    unsafe = _native_merges_unsafely(manifest, opts, max_batch)
    if unsafe:
        warnings.warn(
            f"dynamic batching left out of {opts.model_name}'s config: input(s) {', '.join(unsafe)} must be equal "
            f"across a batch, and the native {cfg.platform} backend would merge requests that differ in them "
            "(wrong answers). Each request now runs as sent; to batch across requests, serve it with "
            "--model-format python, whose runtime only merges requests with identical values",
            BatchingWarning, stacklevel=3)  # said at build_config's caller
    if max_batch > 0 and opts.dynamic_batching and not unsafe:
        db = cfg.dynamic_batching
        db.preferred_batch_size.extend(opts.preferred_batch_sizes)
        db.max_queue_delay_microseconds = opts.max_queue_delay_us
        db.preserve_ordering = opts.preserve_ordering


def _parameters(cfg: mc.ModelConfig, manifest: Manifest, opts: ConfigOptions, precision: str) -> None:
    """The config's string parameters: the Python backend's artifact, format, precision, accelerator, threads and
    batch-uniform inputs, or a native backend's intra-op thread count; the user's extra ones first."""
    params = dict(opts.extra_parameters)
    if opts.runtime == "python":
        params.update({"artifact": manifest.artifact, "format": manifest.format, "precision": precision,
                       "accelerator": opts.backend_accelerator})
        if opts.intra_op_threads:
            params["intra_op_threads"] = str(opts.intra_op_threads)
        uniform = batch_uniform_inputs(manifest, opts)
        if uniform or opts.batch_uniform_inputs is not None:  # model.py falls back to the manifest without it
            params["batch_uniform_inputs"] = ",".join(uniform)
    elif opts.intra_op_threads:
        key = "intra_op_thread_count" if manifest.format == "onnx" else "INTRA_OP_THREAD_COUNT"
        params[key] = str(opts.intra_op_threads)
    for key, value in params.items():
        cfg.parameters[key].string_value = str(value)


def _check(manifest: Manifest, opts: ConfigOptions, max_batch: int, precision: str, gpu: bool) -> None:
    if max_batch < 0:
        raise ConfigError("--max-batch-size must be >= 0")
    if max_batch and manifest.batch_coupled:  # export.coupling: merged requests would mix
        raise ConfigError(f"{manifest.model}'s outputs {', '.join(manifest.batch_coupled)} depend on the other samples "
                          f"of a batch, so requests must not be merged: drop --max-batch-size {max_batch} (served with "
                          "max_batch_size 0, each request one whole batch)")
    if manifest.max_batch_size and max_batch > manifest.max_batch_size and manifest.format == "trt":
        raise ConfigError(f"--max-batch-size {max_batch} exceeds the TensorRT engine's profile max "
                          f"{manifest.max_batch_size}: rebuild the engine with a larger max batch")
    bad = [b for b in opts.preferred_batch_sizes if b < 1 or b > max_batch]
    if bad:
        raise ConfigError(f"preferred batch sizes {bad} are outside 1..max_batch_size ({max_batch})")
    if opts.preferred_batch_sizes and (max_batch == 0 or not opts.dynamic_batching):
        raise ConfigError("preferred batch sizes need dynamic batching and max_batch_size > 0")
    unsafe = _native_merges_unsafely(manifest, opts, max_batch)
    if unsafe and opts.preferred_batch_sizes:
        raise ConfigError(
            f"preferred batch sizes need dynamic batching, which the native backend cannot do safely for this model: "
            f"input(s) {', '.join(unsafe)} must be equal across a batch and it would merge requests that differ. "
            "Drop --preferred-batch-sizes (or pass --no-dynamic-batching), or serve with --model-format python, "
            "whose runtime only merges requests with identical values")
    if opts.max_queue_delay_us < 0:
        raise ConfigError("--max-queue-delay-us must be >= 0")
    if opts.instances < 1:
        raise ConfigError("--number-of-model-instances must be >= 1")
    if opts.backend_accelerator not in ACCELERATORS:
        raise ConfigError(f"--backend-accelerator must be one of {ACCELERATORS}")
    native = opts.runtime == "native"
    fmt = manifest.format
    if opts.backend_accelerator in ("trt", "openvino") and fmt != "onnx":
        raise ConfigError(f"--backend-accelerator {opts.backend_accelerator} is an ONNX Runtime execution accelerator; "
                          f"the model format is {fmt}")
    if opts.backend_accelerator == "openvino" and opts.instance_kind is InstanceKind.GPU:
        raise ConfigError("the OpenVINO accelerator runs on CPU instances; use --instance-kind cpu")
    if opts.capture_cuda_graph and not (native and fmt == "trt"):
        raise ConfigError("--capture-cuda-graph is a TensorRT backend option: it needs --model-format trt with the "
                          "native backend")
    if fmt == "trt" and not native:
        if not gpu:
            warnings.warn("a TensorRT plan served by the Python runtime needs a GPU host", HostMismatchWarning, stacklevel=3)
    if precision != manifest.precision and fmt == "trt":
        raise ConfigError(f"precision {precision} contradicts the TensorRT engine, built in {manifest.precision}")
    if precision not in ("fp32", "fp16"):
        raise ConfigError(f"--precision must be fp32 or fp16, got {precision!r}")
    if opts.instance_kind not in (InstanceKind.AUTO, InstanceKind.CPU, InstanceKind.GPU):
        raise ConfigError("--instance-kind must be auto, cpu or gpu")
    if fmt == "trt" and opts.instance_kind is InstanceKind.CPU:
        raise ConfigError("a TensorRT engine runs on GPU instances only; use --instance-kind gpu")
    if opts.instance_kind is InstanceKind.GPU and not gpu:
        warnings.warn("instance kind GPU on a host without a GPU: this config is for another host and will not load "
                      "here", HostMismatchWarning, stacklevel=3)
    if opts.backend_accelerator in ("cuda", "trt") and not gpu:
        warnings.warn(f"--backend-accelerator {opts.backend_accelerator} needs a GPU host; this one has none",
                      HostMismatchWarning, stacklevel=3)
    for spec in manifest.inputs:
        try:
            numpy_dtype(spec.triton_dtype)
        except SpecError as err:
            raise ConfigError(str(err)) from err


def _instance_kind(opts: ConfigOptions, gpu: bool) -> InstanceKind:
    if opts.instance_kind is InstanceKind.AUTO:
        return InstanceKind.GPU if gpu else InstanceKind.CPU
    return opts.instance_kind


def _version_policy(cfg: mc.ModelConfig, policy: str) -> None:
    if policy == "latest":
        cfg.version_policy.latest.num_versions = 1
    elif policy == "all":
        cfg.version_policy.all.SetInParent()
    elif policy.startswith("specific:"):
        versions = [int(v) for v in policy.split(":", 1)[1].split(",") if v]
        if not versions:
            raise ConfigError("version policy specific: needs versions, e.g. specific:1,2")
        cfg.version_policy.specific.versions.extend(versions)
    else:
        raise ConfigError(f"version policy must be latest, all or specific:N[,M], got {policy!r}")


def _optimization(cfg: mc.ModelConfig, manifest: Manifest, opts: ConfigOptions, precision: str) -> None:
    if opts.runtime != "native":
        return
    accel = opts.backend_accelerator
    if manifest.format == "onnx" and accel == "trt":
        a = cfg.optimization.execution_accelerators.gpu_execution_accelerator.add()
        a.name = "tensorrt"
        a.parameters["precision_mode"] = "FP16" if precision == "fp16" else "FP32"
        a.parameters["max_workspace_size_bytes"] = str(opts.trt_workspace_bytes)
    elif manifest.format == "onnx" and accel == "openvino":
        cfg.optimization.execution_accelerators.cpu_execution_accelerator.add().name = "openvino"
    if manifest.format == "trt" and opts.capture_cuda_graph:
        cfg.optimization.cuda.graphs = True


def _warmup(cfg: mc.ModelConfig, manifest: Manifest, batch: int) -> None:
    w = cfg.model_warmup.add()
    w.name = f"warmup_batch_{batch}"
    w.batch_size = batch if cfg.max_batch_size > 0 else 1
    for spec in manifest.inputs:
        data = w.inputs[spec.name]
        data.data_type = mc.DataType.Value(f"TYPE_{spec.triton_dtype}")
        data.dims.extend(_dims(spec.concrete_shape or spec.wire_shape))  # warmup data has the config's dims
        data.random_data = True


def to_text(cfg: mc.ModelConfig) -> str:
    return text_format.MessageToString(cfg)


def parse_text(text: str) -> mc.ModelConfig:
    try:
        return text_format.Parse(text, mc.ModelConfig())
    except text_format.ParseError as err:
        raise ConfigError(f"not a valid Triton model config: {err}") from err


def read_config(path: str | Path) -> mc.ModelConfig:
    return parse_text(Path(path).read_text())
