"""The network a pipeline serves: an artifact folder as given (made by convert_model.py), or any other model
reference converted and verified into the workspace, reused there when the one rule for reuse
(export.reuse.reusable_artifact) says it was made from this very source."""
from __future__ import annotations

import logging
from pathlib import Path

from ..export import ConvertOptions, convert
from ..export.reuse import reusable_artifact
from ..sources import ModelSource, resolve
from ..sources.base import slugify
from ..spec import MANIFEST_NAME

log = logging.getLogger(__name__)


def is_artifact_folder(model: "str | Path | ModelSource") -> bool:
    return not isinstance(model, ModelSource) and (Path(model) / MANIFEST_NAME).is_file()


def prepare_artifact(model: "str | Path | ModelSource", workspace: str | Path, fmt: str = "onnx",
                     options: ConvertOptions | None = None) -> Path:
    """The artifact folder to serve: `model` itself when it is one, else its conversion in `workspace`."""
    if is_artifact_folder(model):
        log.info("serving the artifact in %s", model)
        return Path(model)
    opts = options or ConvertOptions()
    resolved = resolve(model) if isinstance(model, ModelSource) else resolve(str(model), preset=opts.preset)
    directory = Path(workspace) / f"{slugify(resolved.name)}_{opts.preset}_{fmt}_{opts.precision}"
    reuse = reusable_artifact(directory, resolved, fmt, opts.preset, precision=opts.precision,
                              min_max_batch_size=opts.max_batch_size, require_verified=opts.verify)
    log.info("%s", reuse.reason)
    if not reuse:
        log.info("converting %s to %s in %s ...", resolved.name, fmt, directory)
        convert(resolved, fmt, directory, opts)
    return directory


__all__ = ["is_artifact_folder", "prepare_artifact"]
