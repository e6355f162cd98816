"""The verified artifacts a search serves: reused from the workspace when they match, converted otherwise.

A format that cannot be produced on this host (e.g. TensorRT without a GPU) or that fails verification
is reported and left out, never served: the search only measures artifacts that agree with the framework.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from ..sources import ModelSource, ResolvedModel, resolve
from ..spec import Manifest
from .engine import FormatInfo


def artifact_digest(directory: Path, manifest: Manifest) -> str:
    """Content hash of the artifact: a re-export invalidates the checkpointed points of that format."""
    h = hashlib.sha256()
    with open(directory / manifest.artifact, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def _usable(manifest: Manifest, resolved: ResolvedModel, preset: str, fmt: str) -> bool:
    """A verified artifact of this format made from this very source (same files by sha256, same kwargs and
    checkpoint); manifests without provenance match by zoo name."""
    v = manifest.verification or {}
    same_source = manifest.source == resolved.source.to_dict() if manifest.source else \
        resolved.source.kind == "zoo" and manifest.model == resolved.name
    return (same_source and manifest.preset == preset and manifest.format == fmt
            and bool(v.get("passed", False)))


def prepare_formats(model: "str | ModelSource | ResolvedModel", preset: str, formats: list[str],
                    workspace: str | Path, log=print) -> list[FormatInfo]:
    """One FormatInfo per requested format, each with a verified artifact or the reason it has none. `model`:
    any model source (a reference string is resolved with `preset`)."""
    from ..export import ConvertOptions, FormatUnavailable, convert
    from ..export.errors import ConversionError

    if not isinstance(model, ResolvedModel):
        model = resolve(model, preset=preset) if isinstance(model, str) else resolve(model)
    out = []
    for fmt in formats:
        directory = Path(workspace) / fmt
        manifest = None
        if (directory / "manifest.json").exists():
            found = Manifest.load(directory)
            if _usable(found, model, preset, fmt) and (directory / found.artifact).exists():
                manifest = found
                log(f"{fmt}: reusing the verified artifact in {directory}")
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
