"""Zoo names: the registry's entries, as before (random weights unless --checkpoint)."""
from __future__ import annotations

from ..models import UnknownModelError, get_model
from .base import ModelSource, ResolvedModel, register_source
from .common import with_checkpoint


@register_source("zoo")
def resolve_zoo(source: ModelSource) -> ResolvedModel:
    try:
        entry = get_model(source.ref)
        preset = entry.preset(source.preset)
    except UnknownModelError as err:
        from .base import SourceError

        raise SourceError(f"{err} (other sources: timm:<arch>, --input-path model.py|model.onnx|model.pt)") from None

    def build(seed: int):
        return with_checkpoint(entry.build(source.preset, seed=seed), source, entry.name)

    return ResolvedModel(
        source=source, name=entry.name, family=entry.family, task=entry.task, metric=entry.metric,
        signature=preset.signature, max_batch_size=source.max_batch_size if source.max_batch_size is not None else preset.max_batch_size, builder=build,
    )
