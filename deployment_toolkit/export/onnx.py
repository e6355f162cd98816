"""PyTorch -> ONNX with a dynamic batch axis (and any other dynamic axes of the signature).

One protobuf message cannot pass 2 GB, so a larger model (e.g. the full `sd_unet`, ~3.4 GB) is saved as
`model.onnx` (the graph) plus ONE external data file `model.onnx.data` next to it, referenced by a relative
location: ONNX Runtime and Triton load it from wherever both files are copied together. `export_onnx`
reports the side file in its options, and convert lists it in the manifest's `artifact_files`.
"""
from __future__ import annotations

import os
import tempfile
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

from ..spec import ModelSignature, default_file_mode
from .errors import ConversionError

# Above this many bytes of weights the model is saved with external data (protobuf's limit is 2**31 - 1).
# A module constant (and export_onnx's `external_data_threshold`) so tests can force the mode on a tiny model.
EXTERNAL_DATA_THRESHOLD_BYTES = 2**31 - 1


def external_data_name(path: Path) -> str:
    """The external data file of the ONNX model at `path`: `model.onnx` -> `model.onnx.data`."""
    return f"{Path(path).name}.data"


def dynamic_axes_of(signature: ModelSignature, dynamic_batch: bool = True) -> dict[str, dict[int, str]]:
    """torch.onnx's dynamic_axes: the batch axis, and every -1 of the signature as its own named dim. Without a
    batch axis (max_batch_size 0) the signature's shapes are the tensors' whole shapes, so axis i is shape[i]."""
    dynamic_axes = {}
    first = 1 if dynamic_batch else 0
    for spec in (*signature.inputs, *signature.outputs):
        axes = {0: "batch"} if dynamic_batch else {}
        axes.update({i + first: f"{spec.name}_d{i + first}" for i, d in enumerate(spec.shape) if d == -1})
        if axes:
            dynamic_axes[spec.name] = axes
    return dynamic_axes


EXPORTERS = ("torchscript", "dynamo")  # tried in this order by --onnx-exporter auto


@dataclass(frozen=True)
class OnnxSettings:
    """How one ONNX export runs (convert's routes build it from ConvertOptions)."""

    opset: int = 17
    simplify: bool = False  # onnxslim over the exported graph
    dynamic_batch: bool = True  # False: max_batch_size 0, the signature's shapes are whole tensors
    external_data_threshold: int | None = None  # default EXTERNAL_DATA_THRESHOLD_BYTES
    fp16: bool = False
    exporter: str = "torchscript"  # one of EXPORTERS


def _dynamic_shapes(signature: ModelSignature, dynamic_axes: dict[str, dict[int, str]]) -> dict:
    """torch.export's form of `dynamic_axes` for a forward(*args) (sources.outputs.flat_module): Dim.AUTO on
    every dynamic axis, so that export itself finds which of them must be equal (a sequence axis shared by
    input_ids and attention_mask) instead of failing on two names for one size."""
    import torch

    auto = torch.export.Dim.AUTO
    return {"args": tuple({axis: auto for axis in dynamic_axes.get(t.name, {})} or None for t in signature.inputs)}


def _param_bytes(model) -> int:
    return sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))


def _torch_export(model, signature: ModelSignature, example_args: tuple, path: Path, opset: int,
                  dynamic_axes: dict, exporter: str = "torchscript", threshold: int = EXTERNAL_DATA_THRESHOLD_BYTES
                  ) -> None:
    import torch

    common = dict(input_names=[t.name for t in signature.inputs], output_names=[t.name for t in signature.outputs],
                  opset_version=opset)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            if exporter == "torchscript":
                # Past 2 GB it writes one file per tensor beside `path`; export_onnx gathers them into one.
                torch.onnx.export(model, example_args, str(path), dynamic_axes=dynamic_axes,
                                  do_constant_folding=True, dynamo=False, **common)
            elif exporter == "dynamo":
                # one file unless the weights pass protobuf's limit; then export_onnx gathers the side file
                torch.onnx.export(model, example_args, str(path), dynamic_shapes=_dynamic_shapes(signature, dynamic_axes),
                                  dynamo=True, external_data=_param_bytes(model) > threshold, **common)
            else:
                raise ConversionError(f"unknown ONNX exporter {exporter!r}; choose one of {', '.join(EXPORTERS)}")
    except ConversionError:
        raise
    except Exception as err:  # torch raises many types here; the message is what matters
        raise ConversionError(f"ONNX export ({exporter} exporter, opset {opset}) failed: {type(err).__name__}: "
                              f"{err}") from err


def _needs_external_data(export_dir: Path, threshold: int) -> bool:
    """torch already split the weights (more than one file), or they pass `threshold` bytes."""
    files = [p for p in export_dir.iterdir() if p.is_file()]
    return len(files) > 1 or sum(p.stat().st_size for p in files) > threshold


def _save(proto, path: Path, external: bool) -> list[str]:
    """Save `proto` at `path` (a fresh directory: onnx appends to an existing data file); returns the files."""
    import onnx

    if not external:
        onnx.save(proto, str(path))
        return [path.name]
    data = external_data_name(path)
    onnx.save(proto, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=data)
    return [path.name, data] if (path.parent / data).exists() else [path.name]


def _install(staged: Path, path: Path, files: list[str]) -> None:
    """Move the staged files into place by rename (side files first, the model last), and remove a stale
    data file of an earlier export. Renaming leaves a hard-linked copy (a model repository) untouched."""
    mode = default_file_mode()  # onnx writes external data as 0600; a server in a container must read it
    for name in reversed(files):
        os.chmod(staged / name, mode)
        os.replace(staged / name, path.parent / name)
    stale = path.parent / external_data_name(path)
    if stale.name not in files:
        stale.unlink(missing_ok=True)


def export_onnx(model, signature: ModelSignature, example_args: tuple, path: Path,
                settings: OnnxSettings | None = None, *, opset: int | None = None) -> dict:
    """Export to `path`; returns the options for the manifest, `external_data` listing the side files (none
    unless the weights pass the settings' `external_data_threshold`, default EXTERNAL_DATA_THRESHOLD_BYTES).
    `opset`: the settings' opset, for a caller that sets nothing else.

    fp16: weights and compute in float16 with float32 inputs/outputs kept (ONNX Runtime's float16 converter,
    `keep_io_types`), so the signature, clients and perf_analyzer data stay as they are."""
    s = settings or OnnxSettings()
    if opset is not None:
        s = replace(s, opset=opset)
    opset, simplify, fp16, exporter = s.opset, s.simplify, s.fp16, s.exporter
    threshold = EXTERNAL_DATA_THRESHOLD_BYTES if s.external_data_threshold is None else s.external_data_threshold
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    dynamic_axes = dynamic_axes_of(signature, s.dynamic_batch)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".onnx-export-") as tmp:
        raw_dir, staged = Path(tmp) / "torch", Path(tmp) / "staged"
        raw_dir.mkdir()
        staged.mkdir()
        raw = raw_dir / path.name
        _torch_export(model, signature, example_args, raw, opset, dynamic_axes, exporter, threshold)
        external = _needs_external_data(raw_dir, threshold)
        if simplify or external or fp16:
            import onnx

            proto = onnx.load(str(raw))  # with torch's per-tensor files, if any
            if simplify:
                import onnxslim

                proto = onnxslim.slim(proto)
            if fp16:
                from onnxruntime.transformers.float16 import convert_float_to_float16

                proto = convert_float_to_float16(proto, keep_io_types=True)
            files = _save(proto, staged / path.name, external)
        else:
            os.replace(raw, staged / path.name)
            files = [path.name]
        _install(staged, path, files)
    return {"exporter": exporter, "opset": opset, "simplified": simplify, "dynamic_axes": dynamic_axes, "external_data": files[1:],
            **({"float16": "weights and compute, float32 I/O"} if fp16 else {})}
