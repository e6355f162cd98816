"""One resolver for every tool that takes a model.

    source = parse_reference("timm:regnety_040", preset="small", checkpoint="w.safetensors")
    resolved = resolve(source)          # signature, max batch, task, name, builder
    model = resolved.build(seed=0)      # nn.Module in eval mode with the checkpoint loaded
    model = create_model("my_model/model.py", model_args={"width": 32}, checkpoint_path="w.safetensors")
    resolved = rebuild(Manifest.load(artifact_dir))   # what a converted artifact came from, from its provenance

References: a zoo name, `timm:<arch>`, a `model.py` (get_model), `package.module:function`, an ONNX /
TorchScript / TensorRT file, or an artifact folder holding a manifest.json (its recorded source).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..spec import MANIFEST_NAME, Manifest
from .base import (_RESOLVERS, ARTIFACT_KINDS, KINDS, ModelSource, ResolvedModel, Resolver, SourceError, display_name,
                   register_source, sha256_file, slugify)

INPUT_TYPES = {"pyt": "python", "python": "python", "onnx": "onnx", "ts": "ts", "trt": "trt"}
_SUFFIX_KIND = {".py": "python", ".onnx": "onnx", ".pt": "ts", ".ts": "ts", ".torchscript": "ts", ".plan": "trt",
                ".engine": "trt"}
MODEL_FILE_SUFFIXES = tuple(_SUFFIX_KIND)  # a reference ending so names a file (read relative to where it was given)

__all__ = ["KINDS", "MODEL_FILE_SUFFIXES", "ModelSource", "ResolvedModel", "SourceError", "check_reference",
           "create_model", "parse_reference",
           "rebuild", "register_source", "resolve", "resolve_reference", "sha256_file", "short_name", "slugify",
           "source_of"]


def resolver_for(kind: str) -> Resolver:
    """The resolver registered for `kind`. Here, not in base.py: the kinds' modules import base to register."""
    from . import artifacts, python, timm_source, zoo  # noqa: F401  (importing registers the kinds)

    try:
        return _RESOLVERS[kind]
    except KeyError:
        raise SourceError(f"no resolver for model source kind {kind!r}") from None


def _is_zoo_name(ref: str) -> bool:
    from ..models import UnknownModelError, get_model

    try:
        get_model(ref)
        return True
    except UnknownModelError:
        return False


def check_reference(ref: str, kwargs: dict[str, Any] | None = None) -> None:
    """A zoo name or timm:<arch> the toolkit does not know raises SourceError (with the closest names) now, before
    any model is built; other references are checked where they are read (their files, their imports)."""
    source = parse_reference(ref, kwargs=dict(kwargs or {}))
    if source.kind == "timm":
        from .timm_source import check_arch

        check_arch(source.ref, dict(source.kwargs))
    elif source.kind == "zoo":
        from ..models import UnknownModelError, check_zoo_name

        try:
            check_zoo_name(source.ref)
        except UnknownModelError as err:
            raise SourceError(f"{err} (other sources: timm:<arch>, model.py, an ONNX/TorchScript file)") from None


def parse_reference(ref: str, input_type: str | None = None, **fields: Any) -> ModelSource:
    """A ModelSource from a reference string (see the module docstring); `fields` fill the other
    ModelSource fields (preset, kwargs, checkpoint, input_shapes, task, max_batch_size, ...)."""
    from .python import is_module_ref

    if input_type is not None:
        if input_type not in INPUT_TYPES:
            raise SourceError(f"unknown --input-type {input_type!r}; choose one of pyt, onnx, ts, trt")
        kind = INPUT_TYPES[input_type]
    elif ref.startswith("timm:"):
        kind, ref = "timm", ref[len("timm:"):]
    elif Path(ref).suffix in _SUFFIX_KIND and not is_module_ref(ref):
        kind = _SUFFIX_KIND[Path(ref).suffix]
    elif is_module_ref(ref):
        kind = "python"
    elif "/" in ref or (Path(ref).exists() and not _is_zoo_name(ref)):
        raise SourceError(f"cannot tell what {ref} is: pass --input-type pyt|onnx|ts|trt (or a zoo name, timm:<arch>)")
    else:
        kind = "zoo"
    if kind == "python" and is_module_ref(ref):
        pass
    elif kind not in ("zoo", "timm"):
        ref = str(Path(ref).expanduser().resolve())
    if fields.get("checkpoint"):
        fields["checkpoint"] = str(Path(fields["checkpoint"]).expanduser().resolve())
    return ModelSource(kind=kind, ref=ref, **fields)


def _file_of(source: ModelSource) -> Path | None:
    if source.kind in ("zoo", "timm"):
        return None
    if source.kind == "python":
        from .python import is_module_ref, load_module

        if is_module_ref(source.ref):
            file = load_module(source.ref)[2]
            return file if file.is_file() else None
    return Path(source.ref)


def _pin(path: Path, recorded: str | None, what: str) -> str:
    """The file's sha256; a file that changed since it was recorded is an error (the artifact came from the
    recorded bytes, so a rebuild from other bytes would verify or serve something else)."""
    if path.is_dir():
        files = sorted(p.name for p in path.iterdir() if p.suffix in (".safetensors", ".pt", ".pth", ".bin"))
        raise SourceError(f"{what} {path} is a folder: pass the file itself"
                          + (f", e.g. {path / files[0]}" if files else " (no .safetensors/.pt/.pth file in it)"))
    if not path.is_file():
        raise SourceError(f"{what} {path} does not exist" + (" any more (recorded in the manifest)" if recorded else ""))
    digest = sha256_file(path)
    if recorded and digest != recorded:
        raise SourceError(f"{what} {path} changed since the artifact was made (sha256 {digest[:12]}..., recorded "
                          f"{recorded[:12]}...): restore it or convert again")
    return digest


def resolve(source: ModelSource | str, **fields: Any) -> ResolvedModel:
    """Resolve a source (or a reference string, parsed with `fields`) through the kind's registered resolver,
    pinning the sha256 of its file and checkpoint in the record."""
    if isinstance(source, str):
        return resolve_reference(source, **fields)
    if source.ref.startswith("<live "):
        raise SourceError(f"this artifact was converted from a live nn.Module ({source.ref[6:-1]}), which records no "
                          "file to rebuild it from: convert it from a model.py or package.module:function to use the "
                          "framework model in later steps")
    file = _file_of(source)
    if file is not None:
        source.sha256 = _pin(file, source.sha256, "model file" if source.kind == "python" else f"{source.kind} file")
    if source.outputs and source.kind != "python":
        raise SourceError(f"--outputs selects among a model.py's structured outputs; a {source.kind} source serves "
                          "the outputs it has")
    if source.checkpoint:
        source.checkpoint_sha256 = _pin(Path(source.checkpoint), source.checkpoint_sha256, "checkpoint")
    return resolver_for(source.kind)(source)


def resolve_reference(ref: str, input_type: str | None = None, **fields: Any) -> ResolvedModel:
    """Like resolve(), also taking an artifact folder (its manifest's recorded source)."""
    if input_type is None and Path(ref).is_dir() and ((Path(ref) / MANIFEST_NAME).is_file() or not _is_zoo_name(ref)):
        if not (Path(ref) / MANIFEST_NAME).is_file():
            raise SourceError(f"{ref} is a folder without a {MANIFEST_NAME}: pass an artifact folder written by "
                              "convert_model.py, or a model file with --input-type")
        return rebuild(Manifest.load(ref))
    return resolve(parse_reference(ref, input_type, **fields))


def short_name(ref: str) -> str:
    """A file- and Triton-safe name for a reference without resolving it (workspace folders, served names):
    the zoo name, `timm_<arch>`, the model file's stem (its folder's name for model.py), an artifact folder's name."""
    if Path(ref).is_dir():
        return slugify(Path(ref).resolve().name)
    try:
        return slugify(display_name(parse_reference(ref)))
    except SourceError:
        return slugify(ref)


def source_of(manifest: Manifest) -> ModelSource:
    """The manifest's provenance record; manifests written before it had one came from the zoo."""
    if manifest.source:
        return ModelSource.from_dict(manifest.source)
    return ModelSource(kind="zoo", ref=manifest.model, preset=manifest.preset)


def rebuild(manifest: Manifest) -> ResolvedModel:
    """Resolve what `manifest`'s artifact was made from (same files, checked by sha256; same kwargs)."""
    return resolve(source_of(manifest))


def create_model(ref: str, *, preset: str = "small", checkpoint_path: str | None = None, seed: int = 0,
                 model_args: dict[str, Any] | None = None, input_type: str | None = None, **fields: Any):
    """timm.create_model's shape for every source: the framework model in eval mode, weights loaded."""
    return resolve_reference(ref, input_type, preset=preset, checkpoint=checkpoint_path,
                             kwargs=dict(model_args or {}), **fields).build(seed)
