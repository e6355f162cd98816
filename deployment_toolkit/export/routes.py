"""Which exporters make each format, in the order they are tried (Model Navigator's habit: several paths per
format, the one that worked recorded), all fed the same flattened model and the same example inputs.

ONNX: the TorchScript-based exporter, then the torch.export-based one (`--onnx-exporter auto`); TorchScript:
trace, or script (a model whose output needs flattening is scripted, then wrapped by a traced flattener, which
keeps the scripted control flow); TensorRT: an ONNX file made by the same ONNX chain, then the engine build.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from ..compat import missing_op_hint
from ..sources.outputs import call, flat_module, leaves, left_out, paths_of, pick
from ..spec import ModelSignature
from ..watchdog import user_stage
from .errors import ConversionError
from .onnx import EXPORTERS, OnnxSettings, export_onnx
from .tensorrt import build_engine
from .torchscript import export_torchscript

ONNX_EXPORTER_CHOICES = ("auto", *EXPORTERS)
Route = tuple[str, Callable[[], dict]]


@dataclass
class ExportExample:
    """The model as every exporter gets it: the user's module, its flattened wrapper, example inputs in
    signature order, and the path of each served output in the model's own output (for the manifest); what the
    dry run returned: the served tensors, and what was left out of the output because it is no tensor (a cache)."""

    model: Any
    flat: Any
    signature: ModelSignature
    args: tuple
    paths: dict[str, list]
    max_batch: int
    outputs: tuple = ()
    left_out: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, model, signature: ModelSignature, max_batch: int, seed: int,
           known_paths: dict[str, list] | None = None) -> "ExportExample":
        """One dry run on the examples: it finds the output paths and fails early, in one line, on a model that
        cannot run on its own signature."""
        import torch

        examples = signature.examples(min(2, max_batch) if max_batch else 0, seed=seed)
        args = tuple(torch.from_numpy(examples[t.name]) for t in signature.inputs)
        in_names = [t.name for t in signature.inputs]
        out_names = [t.name for t in signature.outputs]
        try:
            with torch.no_grad(), user_stage("running the model on its example inputs"):
                out = call(model, args, in_names)
        except Exception as err:
            raise ConversionError(f"the model fails on its example inputs "
                                  f"({', '.join(f'{n} {list(a.shape)}' for n, a in zip(in_names, args))}): "
                                  f"{type(err).__name__}: {(str(err).splitlines() or [''])[0][:200]}"
                                  + (f"; {missing_op_hint(err)}" if missing_op_hint(err) else "")) from err
        paths = paths_of(out, out_names, known_paths)
        served = tuple(pick(out, tuple(paths[n])) for n in out_names)
        return cls(model, flat_module(model, in_names, out_names, paths), signature, args, paths, max_batch, served,
                   left_out(leaves(out, avoid=in_names), out_names))

    @property
    def needs_flattening(self) -> bool:
        """False for a model returning a tensor or a flat tuple in the served order (scripted as it is)."""
        names = [t.name for t in self.signature.outputs]
        return self.paths != ({names[0]: []} if len(names) == 1 else {}) and \
            self.paths != {n: [i] for i, n in enumerate(names)}


def onnx_exporters(choice: str) -> tuple[str, ...]:
    if choice == "auto":
        return EXPORTERS
    if choice not in EXPORTERS:
        raise ConversionError(f"unknown --onnx-exporter {choice!r}; choose one of {', '.join(ONNX_EXPORTER_CHOICES)}")
    return (choice,)


def export_routes(fmt: str, ex: ExportExample, artifact: Path, opts, max_batch: int) -> list[Route]:
    """(name, export function returning the manifest's export options) for `fmt`, in the order to try."""
    onnx = OnnxSettings(opset=opts.opset, simplify=opts.simplify, dynamic_batch=bool(max_batch),
                        external_data_threshold=opts.onnx_external_data_threshold)
    if fmt == "onnx":
        return [(name, lambda name=name: export_onnx(ex.flat, ex.signature, ex.args, artifact, replace(
            onnx, fp16=opts.precision == "fp16", exporter=name)))
                for name in onnx_exporters(opts.onnx_exporter)]
    if fmt == "ts-trace":
        return [("trace", lambda: export_torchscript(ex.flat, ex.args, artifact, mode="trace"))]
    if fmt == "ts-script":
        wrap = (lambda scripted: flat_module(scripted, [t.name for t in ex.signature.inputs],
                                             [t.name for t in ex.signature.outputs], ex.paths)) \
            if ex.needs_flattening else None
        return [("script", lambda: export_torchscript(ex.model, ex.args, artifact, mode="script", wrap=wrap))]
    if fmt == "trt":
        def engine(name: str) -> dict:
            with tempfile.TemporaryDirectory() as tmp:
                onnx_path = Path(tmp) / "model.onnx"
                export_onnx(ex.flat, ex.signature, ex.args, onnx_path, replace(onnx, exporter=name))
                return build_engine(onnx_path, ex.signature, artifact, precision=opts.precision,
                                    min_batch=opts.trt_min_batch, opt_batch=opts.trt_opt_batch or max_batch,
                                    max_batch=max(max_batch, 1), workspace_bytes=opts.trt_workspace_bytes)

        return [(f"{name}+tensorrt", lambda name=name: engine(name)) for name in onnx_exporters(opts.onnx_exporter)]
    raise ConversionError(f"unknown format {fmt!r}")
