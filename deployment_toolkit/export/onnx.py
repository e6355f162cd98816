"""PyTorch -> ONNX with a dynamic batch axis (and any other dynamic axes of the signature)."""
from __future__ import annotations

import warnings
from pathlib import Path

from ..spec import ModelSignature
from .errors import ConversionError


def export_onnx(model, signature: ModelSignature, example_args: tuple, path: Path, *, opset: int = 17,
                simplify: bool = False, dynamic_batch: bool = True) -> dict:
    import torch

    dynamic_axes = {}
    for spec in (*signature.inputs, *signature.outputs):
        axes = {0: "batch"} if dynamic_batch else {}
        axes.update({i + 1: f"{spec.name}_d{i + 1}" for i, d in enumerate(spec.shape) if d == -1})
        if axes:
            dynamic_axes[spec.name] = axes
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            # The legacy (TorchScript-based) exporter writes one self-contained file and handles every
            # family here; dynamo=True splits weights into a side .data file.
            torch.onnx.export(
                model,
                example_args,
                str(path),
                input_names=[t.name for t in signature.inputs],
                output_names=[t.name for t in signature.outputs],
                dynamic_axes=dynamic_axes,
                opset_version=opset,
                do_constant_folding=True,
                dynamo=False,
            )
    except Exception as err:  # torch raises many types here; the message is what matters
        raise ConversionError(f"ONNX export failed (opset {opset}): {type(err).__name__}: {err}") from err
    options = {"opset": opset, "simplified": False, "dynamic_axes": dynamic_axes}
    if simplify:
        import onnx
        import onnxslim

        slim = onnxslim.slim(onnx.load(str(path)))
        onnx.save(slim, str(path))
        options["simplified"] = True
    return options
