"""The one rule for reusing a converted artifact from the workspace instead of converting again.

An artifact is reused only when its manifest says it was made from this very source (the provenance record:
kind, reference, file and checkpoint digests, kwargs), in this format, preset and precision, for at least the
batch size asked, by the same exporting libraries and toolkit version, and, unless not required, verified;
and when its file still has the digest recorded at export (an edited or truncated artifact is converted again).
Every tool that keeps artifacts in a workspace (config search, overhead benchmark, diffusion deployment) asks
here; the answer says why not, so the log can tell the user.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..results.identity import file_digest, toolkit_version
from ..sources import ResolvedModel
from ..spec import MANIFEST_NAME, Manifest, SpecError
from .convert import _versions

TOOLKIT_VERSION_KEY = "toolkit"


@dataclass(frozen=True)
class Reuse:
    manifest: Manifest | None
    reason: str  # why it is reused, or why not

    def __bool__(self) -> bool:
        return self.manifest is not None


def reusable_artifact(directory: str | Path, resolved: ResolvedModel, fmt: str, preset: str, *,
                      precision: str = "fp32", min_max_batch_size: int | None = None,
                      require_verified: bool = True) -> Reuse:
    directory = Path(directory)
    if not (directory / MANIFEST_NAME).exists():
        return Reuse(None, f"no artifact in {directory}")
    try:
        m = Manifest.load(directory)
    except (SpecError, ValueError, KeyError) as err:
        return Reuse(None, f"{directory / MANIFEST_NAME} is unreadable ({err})")
    same_source = m.source == resolved.source.to_dict() if m.source else \
        resolved.source.kind == "zoo" and m.model == resolved.name
    checks = [
        (same_source, "it was made from another model source"),
        ((m.format, m.preset, m.precision) == (fmt, preset, precision),
         f"it is {m.format}/{m.preset}/{m.precision}, not {fmt}/{preset}/{precision}"),
        (min_max_batch_size is None or m.max_batch_size >= min_max_batch_size,
         f"its max batch size {m.max_batch_size} is below {min_max_batch_size}"),
        (not require_verified or bool((m.verification or {}).get("passed")), "it was not verified"),
        (_same_versions(m), "it was exported by other library or toolkit versions"),
    ]
    for ok, why in checks:
        if not ok:
            return Reuse(None, f"not reusing {directory}: {why}")
    missing = [f for f in m.files if not (directory / f).is_file()]
    if missing:
        return Reuse(None, f"not reusing {directory}: files {missing} are missing")
    if m.artifact_sha256 and file_digest(directory / m.artifact) != m.artifact_sha256:
        return Reuse(None, f"not reusing {directory}: {m.artifact} changed since it was exported")
    return Reuse(m, f"reusing the {'verified ' if require_verified else ''}artifact in {directory}")


def _same_versions(m: Manifest) -> bool:
    """The libraries that wrote and checked the artifact (torch, onnx, onnxruntime) and the toolkit version;
    manifests from before the toolkit version was recorded compare the libraries only."""
    now = {**_versions(), TOOLKIT_VERSION_KEY: toolkit_version()}
    recorded = m.versions or {}
    keys = ("torch", "onnx", "onnxruntime") + ((TOOLKIT_VERSION_KEY,) if TOOLKIT_VERSION_KEY in recorded else ())
    return all(recorded.get(k) == now.get(k) for k in keys)
