"""The model-source contract: a JSON-able record of where a model comes from, and what resolving it gives.

Modelled on timm's `create_model` + registry: a source kind (zoo, timm, python, onnx, ts, trt) is one
resolver function registered under its name; adding a kind adds data to the registry, never a pipeline.
The record (`ModelSource`) is what the manifest keeps as provenance, so every later stage rebuilds the
framework model from it instead of looking a name up in the zoo.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..results.identity import file_digest as sha256_file  # noqa: F401  (re-exported: the one file digest)
from ..spec import ModelSignature
from ..errors import UserError

if TYPE_CHECKING:  # pragma: no cover
    import torch

KINDS = ("zoo", "timm", "python", "onnx", "ts", "trt")
ARTIFACT_KINDS = {"onnx": "onnx", "ts": "ts-trace", "trt": "trt"}  # source kind -> manifest format
DEFAULT_MAX_BATCH = 8


class SourceError(UserError, ValueError):
    """The model source cannot be used as given; the message names the cause and the fix (exit code 2)."""


@dataclass
class ModelSource:
    """Where a model comes from: the provenance record stored in the manifest under `source`.

    kind: zoo | timm | python | onnx | ts | trt. ref: the zoo name, the timm arch, an absolute file path
    (model.py or an artifact) or `package.module:function`. sha256: of that file (python file, module file or
    artifact). kwargs: the factory's keyword arguments (--model-arg) or the timm overrides (num_classes,
    in_chans, input_size). input_shapes: per-sample shapes for inputs the source cannot describe itself
    (`{name: [dims]}` or `{name: {shape, dtype, example_shape, value_range}}`; a model.py without
    get_signature, a TorchScript file). data_inputs: the same, learnt from the user's data (--dataloader /
    --data-dir), used when neither --input-shape nor get_signature describes the inputs. outputs: the output
    names to serve (--outputs), in that order; empty: every tensor the model returns."""

    kind: str
    ref: str
    preset: str = "small"
    kwargs: dict[str, Any] = field(default_factory=dict)
    sha256: str | None = None
    checkpoint: str | None = None
    checkpoint_sha256: str | None = None
    ignore_unknown_parameters: bool = False
    input_shapes: dict[str, list[int]] = field(default_factory=dict)
    task: str | None = None
    max_batch_size: int | None = None
    outputs: list[str] = field(default_factory=list)
    data_inputs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SourceError(f"unknown model source kind {self.kind!r}; choose one of {', '.join(KINDS)}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ModelSource":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    @property
    def slug(self) -> str:
        """A file-system-safe short name (workspace folders, result folders)."""
        return slugify(display_name(self))


def display_name(source: ModelSource) -> str:
    if source.kind == "zoo":
        return source.ref
    if source.kind == "timm":
        return f"timm:{source.ref}"
    if source.kind == "python" and ":" in source.ref and not Path(source.ref).suffix == ".py":
        return source.ref
    return Path(source.ref).stem if Path(source.ref).stem != "model" else Path(source.ref).parent.name or "model"


def slugify(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "model"


@dataclass
class ResolvedModel:
    """What a source resolves to: the manifest's descriptive fields plus a way to build the framework model.

    `builder(seed)` returns the model in eval mode with the checkpoint loaded. For artifact sources the
    "framework model" is the source artifact itself run by its own runtime (`artifact` set), the reference
    a converted or copied artifact is verified against."""

    source: ModelSource
    name: str
    family: str
    task: str
    metric: str
    signature: ModelSignature
    max_batch_size: int
    builder: Callable[[int], "torch.nn.Module"]
    artifact: Path | None = None
    artifact_format: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    # {output name: path into the model's structured output} (sources.outputs); empty: outputs in order
    output_paths: dict[str, list] = field(default_factory=dict)

    def build(self, seed: int = 0) -> "torch.nn.Module":
        return self.builder(seed)

    @property
    def is_artifact(self) -> bool:
        return self.artifact is not None

    @property
    def slug(self) -> str:
        return slugify(self.name)


Resolver = Callable[[ModelSource], ResolvedModel]
_RESOLVERS: dict[str, Resolver] = {}


def register_source(kind: str) -> Callable[[Resolver], Resolver]:
    """Decorator: `@register_source("timm")` makes `resolve()` hand sources of that kind to the function."""
    def decorate(fn: Resolver) -> Resolver:
        _RESOLVERS[kind] = fn
        return fn

    return decorate
