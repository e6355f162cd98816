"""The model zoo's registry: one `register_model` call adds a model to every tool.

A family module adds entries (data: presets, signature, task, metric, builder); it never adds a
pipeline. Builders return an `nn.Module` in eval mode with random weights (nothing is downloaded).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ..spec import ModelSignature, TensorSpec
from ..errors import UserError

if TYPE_CHECKING:  # pragma: no cover
    import torch

TASKS = ("classification", "embedding", "segmentation", "denoising")
# metric that judges agreement between framework and converted/served outputs, per task by default
DEFAULT_METRIC = {"classification": "top1", "embedding": "cosine", "segmentation": "dice", "denoising": "psnr"}


class UnknownModelError(UserError, KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; we want plain text
        return str(self.args[0])


@dataclass(frozen=True)
class Preset:
    """One size of a model: `small` (CI converts and serves it in seconds) or `full` (benchmarks)."""

    name: str
    signature: ModelSignature
    build_kwargs: dict[str, Any] = field(default_factory=dict)
    max_batch_size: int = 8


@dataclass(frozen=True)
class ModelEntry:
    name: str
    family: str
    task: str
    metric: str
    builder: Callable[..., "torch.nn.Module"]
    presets: dict[str, Preset]
    description: str = ""
    # extra inputs a wrapper must close over when a format cannot take them (none so far)
    tags: tuple[str, ...] = ()

    def preset(self, name: str = "small") -> Preset:
        try:
            return self.presets[name]
        except KeyError as err:
            raise UnknownModelError(
                f"model {self.name!r} has no preset {name!r}; presets: {', '.join(self.presets)}"
            ) from err

    def signature(self, preset: str = "small") -> ModelSignature:
        return self.preset(preset).signature

    def build(self, preset: str = "small", seed: int = 0) -> "torch.nn.Module":
        import torch

        torch.manual_seed(seed)
        model = self.builder(**self.preset(preset).build_kwargs)
        return model.eval()


_REGISTRY: dict[str, ModelEntry] = {}


def register_model(
    name: str,
    *,
    family: str,
    task: str,
    presets: dict[str, Preset],
    metric: str | None = None,
    description: str = "",
    tags: tuple[str, ...] = (),
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: `@register_model("unet2d", family="segmentation", task="segmentation", presets=...)`."""
    if task not in TASKS:
        raise ValueError(f"{name}: unknown task {task!r}; choose one of {TASKS}")
    if "small" not in presets:
        raise ValueError(f"{name}: every model needs a 'small' preset for CI")

    def decorate(builder: Callable[..., Any]) -> Callable[..., Any]:
        if name in _REGISTRY:
            raise ValueError(f"model {name!r} is registered twice")
        _REGISTRY[name] = ModelEntry(
            name=name,
            family=family,
            task=task,
            metric=metric or DEFAULT_METRIC[task],
            builder=builder,
            presets=presets,
            description=description,
            tags=tags,
        )
        return builder

    return decorate


def image_signature(
    channels: int, size: int | tuple[int, ...], outputs: list[TensorSpec], input_name: str = "input__0"
) -> ModelSignature:
    """The common case: one image-like input (C, *spatial) and the given outputs."""
    spatial = (size, size) if isinstance(size, int) else tuple(size)
    return ModelSignature(inputs=(TensorSpec(input_name, (channels, *spatial)),), outputs=tuple(outputs))
