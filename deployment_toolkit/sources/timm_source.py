"""`timm:<arch>`: any architecture timm.list_models() knows, random weights unless --checkpoint.

Presets follow the zoo's timm family: `small` shrinks the input to 64 px (CI size), `full` uses the
architecture's default input size; --input-size, --in-chans and --num-classes override.
"""
from __future__ import annotations

import difflib
import functools
import importlib.util
import re
from pathlib import Path
from typing import Any

from ..compat import import_timm
from ..spec import ModelSignature, TensorSpec
from .base import ModelSource, ResolvedModel, SourceError, register_source
from .common import task_and_metric, with_checkpoint

SMALL_SIZE = 64
MAX_BATCH = {"small": 8, "full": 32}
OVERRIDES = ("num_classes", "in_chans", "input_size")


def _default_size(timm, arch: str) -> int:
    try:
        cfg = timm.models.get_pretrained_cfg(arch)
        size = getattr(cfg, "input_size", None) if cfg is not None else None
    except Exception:  # an arch without a pretrained cfg
        size = None
    return int(size[-1]) if size else 224


_REGISTERED = re.compile(r"@register_model\s*\n\s*def\s+(\w+)\s*\(")
_DEPRECATIONS = re.compile(r"register_model_deprecations\(\s*__name__\s*,\s*\{(.*?)\}\s*\)", re.S)
_DEPRECATED_KEY = re.compile(r"['\"]([\w.\-]+)['\"]\s*:")


@functools.lru_cache(maxsize=1)
def _architectures() -> tuple[frozenset[str], frozenset[str]] | None:
    """timm's architectures and deprecated names read from its source, without importing it (importing timm
    imports torch: 8 CPU-s here, 20 s on a busy host); None when timm's files are not where they should be. Every
    timm architecture is a function under `@register_model` (the same 1,371 as timm.list_models() in timm 1.0)."""
    spec = importlib.util.find_spec("timm")
    if spec is None or spec.origin is None:
        return None
    names: set[str] = set()
    deprecated: set[str] = set()
    for path in (Path(spec.origin).parent / "models").rglob("*.py"):
        text = path.read_text(encoding="utf-8", errors="replace")
        names.update(_REGISTERED.findall(text))
        for block in _DEPRECATIONS.findall(text):
            deprecated.update(_DEPRECATED_KEY.findall(block))
    return (frozenset(names), frozenset(deprecated)) if names else None


def _known(arch: str) -> bool:
    """Whether timm knows `arch` (a pretrained tag `arch.tag` included), from its source when it can be read, else
    by importing it."""
    known = _architectures()
    if known is None:
        return import_timm().is_model(arch)
    names, deprecated = known
    return arch.split(".")[0] in names or arch in deprecated


def check_arch(arch: str, kwargs: dict, timm: Any = None) -> None:
    """An architecture timm knows, with only the overrides it takes (SourceError, one line): said before a model is
    built, so a deployment's typo is found on read, within a second. `timm`: the imported module, which then
    answers itself (a model about to be built)."""
    if not (timm.is_model(arch) if timm is not None else _known(arch)):
        known = _architectures() if timm is None else None
        close = difflib.get_close_matches(arch, sorted(known[0]) if known else import_timm().list_models(), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise SourceError(f"timm does not know the architecture {arch!r}.{hint} (timm.list_models() lists them)")
    unknown = sorted(set(kwargs) - set(OVERRIDES))
    if unknown:
        raise SourceError(f"timm:{arch} takes --num-classes, --in-chans and --input-size, not {unknown}")


@register_source("timm")
def resolve_timm(source: ModelSource) -> ResolvedModel:
    timm = import_timm()
    arch = source.ref
    check_arch(arch, dict(source.kwargs), timm)
    if source.preset not in MAX_BATCH:
        raise SourceError(f"timm:{arch} has presets small and full, not {source.preset!r}")
    num_classes = int(source.kwargs.get("num_classes", 1000))
    in_chans = int(source.kwargs.get("in_chans", 3))
    default = _default_size(timm, arch)
    size = int(source.kwargs.get("input_size") or (SMALL_SIZE if source.preset == "small" else default))
    extra = {} if size == default else {"img_size": size}

    def create():
        try:
            return timm.create_model(arch, pretrained=False, num_classes=num_classes, in_chans=in_chans, **extra)
        except TypeError:  # a convnet takes any size and no img_size argument
            if not extra:
                raise
            return timm.create_model(arch, pretrained=False, num_classes=num_classes, in_chans=in_chans)

    def build(seed: int):
        import torch

        torch.manual_seed(seed)
        try:
            model = create()
        except Exception as err:
            raise SourceError(f"timm.create_model({arch!r}) failed: {type(err).__name__}: {err}") from err
        return with_checkpoint(model, source, f"timm:{arch}")

    inputs = (TensorSpec("input__0", (in_chans, size, size)),)
    if num_classes > 0:
        outputs: tuple[TensorSpec, ...] = (TensorSpec("output__0", (num_classes,)),)
    else:  # pooled features: their width is the model's
        from .common import probe_outputs

        outputs = probe_outputs(build(0), inputs, 1)
    task, metric = task_and_metric(source, outputs, "classification" if num_classes > 0 else "embedding")
    return ResolvedModel(
        source=source, name=f"timm:{arch}", family="timm", task=task, metric=metric,
        signature=ModelSignature(inputs=inputs, outputs=outputs),
        max_batch_size=source.max_batch_size or MAX_BATCH[source.preset], builder=build,
        versions={"timm": timm.__version__},
    )
