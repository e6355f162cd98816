"""In-process predictors: the framework model a manifest came from, or its converted artifact."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from .runtimes.artifact import load_runtime, run_batched
from .sources.outputs import torch_callable
from .sources.trained import framework_model
from .spec import Manifest


def framework_predictor(model_path: str | Path, runtime: str = "framework", device: str = "cpu",
                        seed: int = 0) -> tuple[Callable, Manifest, str]:
    """Returns (predict(inputs) -> outputs, manifest, source name for the dump)."""
    manifest = Manifest.load(model_path)
    in_names = [t.name for t in manifest.inputs]
    out_names = [t.name for t in manifest.outputs]
    if runtime == "framework":
        model = framework_model(manifest, model_path, seed)
        return torch_callable(model, in_names, out_names, device, manifest.output_paths), manifest, "torch"
    rt = load_runtime(str(Path(model_path) / manifest.artifact), manifest.format, in_names, out_names,
                      device=device, precision=manifest.precision)
    name = {"onnx": "onnxruntime", "trt": "tensorrt"}.get(manifest.format, "torchscript")
    return (lambda inputs: run_batched(rt, inputs, manifest.max_batch_size or None)), manifest, name
