"""The verified artifacts a search serves: reused from the workspace when they match, converted otherwise.

A format that cannot be produced on this host (e.g. TensorRT without a GPU) or that fails verification
is reported and left out, never served: the search only measures artifacts that agree with the framework.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from ..export.reuse import reusable_artifact
from ..results.identity import file_digest
from ..sources import ModelSource, ResolvedModel, resolve
from ..spec import Manifest
from .trials import FormatInfo

_log = logging.getLogger(__name__)


def artifact_digest(directory: Path, manifest: Manifest) -> str:
    """Content hash of the artifact: a re-export invalidates the checkpointed points of that format."""
    return (manifest.artifact_sha256 or file_digest(directory / manifest.artifact))[:16]


def prepare_formats(model: "str | ModelSource | ResolvedModel", preset: str, formats: list[str],
                    workspace: str | Path, log: Callable[[str], None] = _log.info) -> list[FormatInfo]:
    """One FormatInfo per requested format, each with a verified artifact or the reason it has none. `model`:
    any model source (a reference string is resolved with `preset`); `log` gets the progress lines."""
    from ..export import ConvertOptions, FormatUnavailable, convert
    from ..export.errors import ConversionError

    if not isinstance(model, ResolvedModel):
        model = resolve(model, preset=preset) if isinstance(model, str) else resolve(model)
    out = []
    for fmt in formats:
        directory = Path(workspace) / fmt
        reuse = reusable_artifact(directory, model, fmt, preset)
        manifest = reuse.manifest
        log(f"{fmt}: {reuse.reason}")
        if manifest is None:
            log(f"{fmt}: converting {model.name} ({preset}) into {directory} ...")
            try:
                manifest = convert(model, fmt, directory, ConvertOptions(preset=preset))
            except FormatUnavailable as err:
                out.append(FormatInfo(fmt, error=f"format unavailable on this host: {err}"))
                continue
            except ConversionError as err:  # includes VerificationError
                out.append(FormatInfo(fmt, error=f"conversion or verification failed: {err}"))
                continue
        out.append(FormatInfo(fmt, manifest, directory, artifact_digest(directory, manifest)))
    return out
