"""timm image backbones (random weights). Small presets keep the architecture and shrink the input."""
from __future__ import annotations

from ..compat import import_timm
from ..spec import TensorSpec
from .registry import Preset, image_signature, register_model

NUM_CLASSES = 1000

# name -> (small input size, extra timm kwargs for the small preset)
# ViTs take any img_size divisible by the patch; Swin needs window_size to divide every stage's grid.
TIMM_MODELS: dict[str, tuple[int, dict]] = {
    "resnet18": (64, {}),
    "resnet50": (64, {}),
    "efficientnet_b0": (64, {}),
    "mobilenetv3_large_100": (64, {}),
    "convnext_tiny": (64, {}),
    "vit_small_patch16_224": (64, {"img_size": 64}),
    "vit_base_patch16_224": (64, {"img_size": 64}),
    "swin_tiny_patch4_window7_224": (64, {"img_size": 64, "window_size": 2}),
}


def _presets(size_small: int, small_kwargs: dict, channels: int = 3, full_size: int = 224) -> dict[str, Preset]:
    out = [TensorSpec("output__0", (NUM_CLASSES,))]
    return {
        "small": Preset("small", image_signature(channels, size_small, out), dict(small_kwargs), max_batch_size=8),
        "full": Preset("full", image_signature(channels, full_size, out), {}, max_batch_size=32),
    }


def _timm_builder(arch: str):
    def build(**kwargs):
        timm = import_timm()
        return timm.create_model(arch, pretrained=False, num_classes=NUM_CLASSES, **kwargs)

    build.__name__ = f"build_{arch}"
    return build


for _arch, (_size, _kwargs) in TIMM_MODELS.items():
    register_model(
        _arch,
        family="timm",
        task="classification",
        presets=_presets(_size, _kwargs),
        description=f"timm {_arch}, random weights, {NUM_CLASSES} classes",
    )(_timm_builder(_arch))
