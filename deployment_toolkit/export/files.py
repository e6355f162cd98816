"""The files an artifact consists of, and copying them together (into a model repository version directory).

Most artifacts are one file. An ONNX model above the protobuf limit (2 GB, e.g. the full `sd_unet`) keeps its
weights in a side file (`model.onnx.data`); a copy without it fails to load, so every copy goes through here.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

from ..spec import Manifest


def onnx_external_files(path: str | Path) -> list[str]:
    """External data files an ONNX model points to (relative to its directory), without loading the weights."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return sorted({e.value for t in model.graph.initializer for e in t.external_data if e.key == "location"})


def artifact_files(manifest: Manifest, directory: str | Path) -> list[str]:
    """The manifest's `artifact_files`; for an ONNX manifest written before that field existed (compat), the
    artifact plus the external data files it points to."""
    if manifest.artifact_files or manifest.format != "onnx":
        return manifest.files
    return [manifest.artifact, *onnx_external_files(Path(directory) / manifest.artifact)]


def link_or_copy(src: Path, dst: Path) -> None:
    """Hard link when possible (the full denoiser's weights are 3.4 GB), else copy. Exporters replace their
    files instead of rewriting them in place, so a link never sees a later export."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.unlink(missing_ok=True)
    try:
        os.link(src, dst)
    except OSError:  # another filesystem, or links not allowed there
        shutil.copy2(src, dst)


def copy_artifact_files(manifest: Manifest, src_dir: str | Path, dst_dir: str | Path) -> list[str]:
    """Copy every file of the artifact from `src_dir` to `dst_dir`; returns their names. Raises
    FileNotFoundError naming the first missing one (a half-copied artifact would fail later, at load time)."""
    src, dst = Path(src_dir), Path(dst_dir)
    names = artifact_files(manifest, src)
    missing = [n for n in names if not (src / n).is_file()]
    if missing:
        raise FileNotFoundError(f"artifact file(s) {missing} listed for {manifest.model} are missing from {src}: "
                                "reconvert with triton/convert_model.py")
    for name in names:
        link_or_copy(src / name, dst / name)
    return names


def write_replacing(path: str | Path, write: Callable[[Path], None]) -> None:
    """Call `write` on a temporary name beside `path`, then rename it over `path`: a hard-linked copy of the
    old file (in a model repository) keeps its content instead of being rewritten in place."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # not mkstemp: the artifact keeps the umask's mode
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
