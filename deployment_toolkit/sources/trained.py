"""A zoo model with weights the toolkit trained itself (the accuracy demo's U-Net), and the framework model any
manifest came from: both are ways the one door (sources) turns a manifest into an nn.Module."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UserError, UserFileNotFoundError
from ..models import get_model
from ..spec import Manifest

if TYPE_CHECKING:  # pragma: no cover
    from torch import nn


class TrainingError(UserError, ValueError):
    """Training or export cannot go ahead as asked (wrong model kind, data that does not fit, bad weights)."""


def segmentation_entry(model: str):
    entry = get_model(model)
    if entry.task != "segmentation":
        raise TrainingError(f"model {model!r} is a {entry.task} model; train_segmentation needs a segmentation model")
    return entry


def build_trained(model_name: str, preset: str, weights: str | Path) -> "nn.Module":
    """The registry's model with trained weights loaded (strict: every tensor must fit)."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    weights = Path(weights)
    if not weights.is_file():
        raise UserFileNotFoundError(f"no weights at {weights}: train first with triton/train_segmentation.py")
    with safe_open(str(weights), framework="pt") as fh:
        tag = fh.metadata() or {}
    if tag.get("model", model_name) != model_name or tag.get("preset", preset) != preset:
        raise TrainingError(f"{weights} was trained for {tag.get('model')}/{tag.get('preset')}, not "
                            f"{model_name}/{preset}: pass --model {tag.get('model')} --preset {tag.get('preset')}")
    model = segmentation_entry(model_name).build(preset)
    try:
        model.load_state_dict(load_file(str(weights)), strict=True)
    except RuntimeError as err:
        raise TrainingError(f"{weights} does not fit {model_name}/{preset}: {err}") from err
    return model.eval()


def framework_model(manifest: Manifest, model_dir: str | Path, seed: int = 0) -> "nn.Module":
    """The PyTorch model an artifact came from, rebuilt from the manifest's provenance record (zoo name, timm
    arch, model.py + kwargs + checkpoint, or the source artifact), with the trained weights the manifest names
    (export_options["weights"], a safetensors file next to the artifact) when it has them."""
    weights = manifest.export_options.get("weights")
    if weights:
        return build_trained(manifest.model, manifest.preset, Path(model_dir) / weights)
    from . import rebuild

    return rebuild(manifest).build(seed)
