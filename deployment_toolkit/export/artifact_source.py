"""An artifact made elsewhere as a conversion's source: copied as-is into its own format (with the weights an ONNX
file keeps beside it), or built into a TensorRT engine from ONNX; any other route is refused before anything is
written."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from ..sources import ResolvedModel
from .errors import ConversionError
from .files import write_replacing
from .tensorrt import build_engine

if TYPE_CHECKING:
    from .convert import ConvertOptions


def from_artifact(resolved: ResolvedModel, fmt: str, artifact: Path, max_batch: int, opts: ConvertOptions) -> dict:
    """An artifact made elsewhere: copied as-is into the same format, or built into TensorRT from ONNX."""
    src_fmt = resolved.artifact_format
    same = fmt == src_fmt or (src_fmt in ("ts-trace", "ts-script") and fmt in ("ts-trace", "ts-script"))
    if same:
        side = onnx_external_files(resolved.artifact) if src_fmt == "onnx" else []
        for name in side:  # weights stored beside the ONNX file travel with it
            src = resolved.artifact.parent / name
            if not src.is_file():
                raise ConversionError(f"{resolved.artifact} keeps weights in {name}, which is not next to it")
            write_replacing(artifact.parent / name, lambda tmp, src=src: shutil.copyfile(src, tmp))
        write_replacing(artifact, lambda tmp: shutil.copyfile(resolved.artifact, tmp))
        return {"copied_from": str(resolved.artifact), "external_data": side}
    if src_fmt == "onnx" and fmt == "trt":
        return build_engine(resolved.artifact, resolved.signature, artifact, precision=opts.precision,
                            min_batch=opts.trt_min_batch, opt_batch=opts.trt_opt_batch or max(max_batch, 1),
                            max_batch=max(max_batch, 1), workspace_bytes=opts.trt_workspace_bytes)
    raise AssertionError("unreachable: check_route runs first")


def check_route(resolved: ResolvedModel, fmt: str) -> None:
    """An artifact source converts to its own format (a copy) or, from ONNX, to TensorRT; nothing else."""
    src_fmt = resolved.artifact_format
    reachable = ["ts-trace", "ts-script"] if src_fmt in ("ts-trace", "ts-script") else \
        [src_fmt] + (["trt"] if src_fmt == "onnx" else [])
    if fmt not in reachable:
        raise ConversionError(f"{resolved.name} is a {src_fmt} file: it can be deployed as {' or '.join(reachable)}, "
                              f"there is no conversion to {fmt}")


def onnx_external_files(path: Path) -> list[str]:
    """The external data files an ONNX model names (relative to it), in first-use order."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    names: dict[str, None] = {}
    for init in graph.initializer:
        if init.data_location == onnx.TensorProto.EXTERNAL:
            names.update({e.value: None for e in init.external_data if e.key == "location"})
    outside = [n for n in names if Path(n).is_absolute() or ".." in Path(n).parts]
    if outside:
        raise ConversionError(f"{path} names external data outside its folder: {outside}")
    return list(names)


__all__ = ["check_route", "from_artifact", "onnx_external_files"]
