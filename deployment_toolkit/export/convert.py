"""One entry point for every format: build the registered model, export, verify, write the manifest."""
from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..models import get_model
from ..spec import ARTIFACT_NAMES, FORMATS, Manifest
from .errors import ConversionError, FormatUnavailable, VerificationError
from .files import copy_artifact_files
from .onnx import export_onnx
from .tensorrt import build_engine, tensorrt_available
from .torchscript import export_torchscript
from .verify import torch_callable, verify


@dataclass
class ConvertOptions:
    preset: str = "small"
    opset: int = 17
    simplify: bool = False
    precision: str = "fp32"  # fp32 | fp16 (TensorRT, TorchScript, ONNX)
    max_batch_size: int | None = None  # default: the preset's
    trt_min_batch: int = 1
    trt_opt_batch: int | None = None  # default: max batch
    trt_workspace_bytes: int = 1 << 30
    verify: bool = True
    verify_batch_sizes: tuple[int, ...] = (1, 2)
    verify_device: str = "cpu"  # where framework and artifact run for verification (cuda:0 on GPU hosts)
    seed: int = 0
    onnx_external_data_threshold: int | None = None  # default: onnx.EXTERNAL_DATA_THRESHOLD_BYTES (2 GB)


def _versions() -> dict[str, str]:
    import onnx
    import onnxruntime
    import torch

    return {"torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}


def convert(model_name: str, fmt: str, output_dir: str | Path, options: ConvertOptions | None = None) -> Manifest:
    """Convert `model_name` to `fmt` in `output_dir` (artifact + manifest.json). Raises ConversionError,
    FormatUnavailable (host lacks the format) or VerificationError (outputs disagree; manifest still written)."""
    import torch

    opts = options or ConvertOptions()
    if fmt not in FORMATS:
        raise ConversionError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    entry = get_model(model_name)
    preset = entry.preset(opts.preset)
    if fmt == "trt":  # before building the model and exporting ONNX for an engine this host cannot build
        ok, why = tensorrt_available()
        if not ok:
            raise FormatUnavailable(why)
    signature = preset.signature
    max_batch = opts.max_batch_size if opts.max_batch_size is not None else preset.max_batch_size
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    artifact = out / ARTIFACT_NAMES[fmt]

    t0 = time.perf_counter()
    model = entry.build(opts.preset, seed=opts.seed)
    examples = signature.examples(min(2, max(max_batch, 1)), seed=opts.seed)
    example_args = tuple(torch.from_numpy(examples[t.name]) for t in signature.inputs)
    onnx_options = dict(opset=opts.opset, simplify=opts.simplify,
                        external_data_threshold=opts.onnx_external_data_threshold)
    if fmt == "onnx":
        export_options = export_onnx(model, signature, example_args, artifact, fp16=opts.precision == "fp16",
                                     **onnx_options)
    elif fmt in ("ts-trace", "ts-script"):
        export_options = export_torchscript(model, example_args, artifact, mode=fmt.split("-")[1])
    else:  # trt: through a temporary ONNX file
        with tempfile.TemporaryDirectory() as tmp:
            onnx_path = Path(tmp) / "model.onnx"
            export_onnx(model, signature, example_args, onnx_path, **onnx_options)
            export_options = build_engine(
                onnx_path, signature, artifact, precision=opts.precision, min_batch=opts.trt_min_batch,
                opt_batch=opts.trt_opt_batch or max_batch, max_batch=max(max_batch, 1),
                workspace_bytes=opts.trt_workspace_bytes,
            )
    export_seconds = time.perf_counter() - t0

    manifest = Manifest(
        model=entry.name, preset=opts.preset, family=entry.family, task=entry.task, metric=entry.metric,
        format=fmt, artifact=artifact.name, signature=signature, max_batch_size=max_batch,
        precision=opts.precision, export_options={**export_options, "export_seconds": round(export_seconds, 3)},
        versions=_versions(), artifact_files=[artifact.name, *export_options.get("external_data", [])],
    )
    if opts.verify:
        device = "cuda:0" if fmt == "trt" and opts.verify_device == "cpu" else opts.verify_device
        result = verify_artifact(manifest, out, model=model, batch_sizes=opts.verify_batch_sizes, seed=opts.seed,
                                 device=device)
        manifest.verification = {**result.to_dict(), "device": device}
        manifest.save(out)
        if not result.passed:
            raise VerificationError(f"{entry.name} as {fmt}: verification failed: {result.message}")
    else:
        manifest.save(out)
    return manifest


def verify_artifact(manifest: Manifest, directory: str | Path, model=None, batch_sizes=(1, 2), seed: int = 0,
                    device: str | None = None):
    """Compare the artifact in `directory` with the framework model it came from, both on `device`
    (default: cpu, or cuda:0 for a TensorRT plan)."""
    from ..repository.python_runtime.runtimes import load_runtime

    from ..framework import framework_model

    model = model if model is not None else framework_model(manifest, directory, seed)
    in_names = [t.name for t in manifest.inputs]
    out_names = [t.name for t in manifest.outputs]
    device = device or ("cuda:0" if manifest.format == "trt" else "cpu")
    runtime = load_runtime(str(Path(directory) / manifest.artifact), manifest.format, in_names, out_names,
                           device=device, precision=manifest.precision)
    sizes = tuple(b for b in batch_sizes if manifest.max_batch_size == 0 or b <= manifest.max_batch_size) or (1,)
    return verify(torch_callable(model, in_names, out_names, device=device), runtime, manifest.signature, manifest.task,
                  precision=manifest.precision, batch_sizes=sizes, seed=seed)


def copy_artifact(src_dir: str | Path, dst_dir: str | Path) -> Manifest:
    """Copy every file of the artifact + manifest (e.g. into a model repository version directory)."""
    manifest = Manifest.load(src_dir)
    dst = Path(dst_dir)
    dst.mkdir(parents=True, exist_ok=True)
    copy_artifact_files(manifest, src_dir, dst)
    manifest.save(dst)
    return manifest
