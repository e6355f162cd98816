"""Does an artifact folder's manifest still describe its artifact? (issue 38 item 3)

A manifest edited to lie (an output shape, the digest) or another model.onnx copied in passed config, serve and
inference with exit 0: the server advertised the manifest's [-1, 7] and returned the file's [N, 4], and the run
identity recorded the false digest. Before a model is configured, its artifact's digest is compared with the one
recorded at conversion, and an ONNX file's own tensor names, dtypes and fixed dims with the manifest's signature.
"""
from __future__ import annotations

from pathlib import Path

from ..results.identity import file_digest
from ..sources.artifacts import onnx_dims
from ..spec import Manifest, SpecError


def artifact_mismatch(manifest: Manifest, directory: str | Path) -> str | None:
    """Why `manifest` does not describe the artifact in `directory`, or None when it does (or cannot be told)."""
    path = Path(directory) / manifest.artifact
    if not path.is_file():
        return f"{path} is missing"
    if manifest.artifact_sha256:
        digest = file_digest(path)
        if digest != manifest.artifact_sha256:
            return (f"{path.name} has sha256 {digest[:12]}..., the manifest records {manifest.artifact_sha256[:12]}... "
                    "from its conversion: the file was replaced or edited since")
    if manifest.format == "onnx":
        return _onnx_mismatch(manifest, path)
    return None


def _onnx_mismatch(manifest: Manifest, path: Path) -> str | None:
    import onnx

    try:
        graph = onnx.load(str(path), load_external_data=False).graph
    except Exception:  # noqa: BLE001 - cannot be told here: the digest (when recorded) or the server's load says
        return None
    lead = 1 if manifest.max_batch_size > 0 else 0  # the file's batch axis, not in the manifest's shapes
    declared = {v.name: onnx_dims(v) for v in (*graph.input, *graph.output)}
    for spec in (*manifest.inputs, *manifest.outputs):
        if spec.name not in declared:
            return f"{path.name} has no tensor {spec.name!r}, which the manifest names"
        dims, dtype = declared[spec.name]
        file_shape = dims[lead:]
        shape = spec.shape
        if dtype != spec.dtype or len(file_shape) != len(shape) or any(
                a != b and a != -1 and b != -1 for a, b in zip(file_shape, shape)):
            return (f"{spec.name} is {dtype} {file_shape} per sample in {path.name}, {spec.dtype} {list(shape)} in the "
                    "manifest")
    return None


def check_artifact(manifest: Manifest, directory: str | Path) -> None:
    """SpecError (one line, exit 2) when the manifest no longer describes its artifact."""
    why = artifact_mismatch(manifest, directory)
    if why:
        raise SpecError(f"{Path(directory) / 'manifest.json'} does not describe its artifact: {why}; convert the model "
                        "again (convert_model.py) rather than editing either")


__all__ = ["artifact_mismatch", "check_artifact"]
