"""Medical-imaging segmentation networks from MONAI (random weights): a 2D U-Net and a 3D nnU-Net.

MONAI instead of nnU-Net's own `dynamic-network-architectures`: that package downgrades timm and its
PlainConvUNet cannot be scripted, while MONAI installs in seconds with no extra dependencies.
Outputs are per-class logits (classes, *spatial); the metric is Dice on the argmax / thresholded masks.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from ..spec import TensorSpec
from .registry import Preset, image_signature, register_model

if TYPE_CHECKING:  # pragma: no cover
    from torch import nn

FAMILY = dict(family="segmentation", task="segmentation", metric="dice")


def _presets(channels: int, classes: int, small: tuple[tuple[int, ...], dict], full: tuple[tuple[int, ...], dict],
             max_batch: tuple[int, int]) -> dict[str, Preset]:
    def preset(name: str, spatial: tuple[int, ...], kwargs: dict, batch: int) -> Preset:
        out = [TensorSpec("output__0", (classes, *spatial))]
        return Preset(name, image_signature(channels, spatial, out), dict(kwargs), max_batch_size=batch)

    return {"small": preset("small", *small, max_batch[0]), "full": preset("full", *full, max_batch[1])}


# --------------------------------------------------------------------------- 2D U-Net

UNET2D_CLASSES = 2


@register_model(
    "unet2d",
    presets=_presets(
        1,
        UNET2D_CLASSES,
        small=((64, 64), {"features": (8, 8, 16, 32, 64, 8)}),
        full=((572, 572), {}),
        max_batch=(8, 8),
    ),
    description="MONAI BasicUNet (2D, 4 stride-2 levels), 1 channel in, 2-class logits out. Full preset at the "
    "original U-Net paper's 572x572: 572 is not a multiple of 2^4, but BasicUNet's up-path (UpCat) "
    "replicate-pads odd sizes (572->286->143->71->35 and back), so the output is 572x572 too (checked); "
    "the pads are fixed by the input size, so traced/ONNX artifacts are exact for that size only",
    **FAMILY,
)
def build_unet2d(features: Sequence[int] = (32, 32, 64, 128, 256, 32)) -> "nn.Module":
    from monai.networks.nets import BasicUNet

    return BasicUNet(spatial_dims=2, in_channels=1, out_channels=UNET2D_CLASSES, features=tuple(features))


# --------------------------------------------------------------------------- 3D nnU-Net (BraTS)

BRATS_CHANNELS = 4  # T1, T1ce, T2, FLAIR
BRATS_CLASSES = 3  # nnU-Net's BraTS regions: whole tumour, tumour core, enhancing tumour (sigmoid per region)


@register_model(
    "nnunet3d",
    presets=_presets(
        BRATS_CHANNELS,
        BRATS_CLASSES,
        small=((32, 32, 32), {"levels": 4, "filters": (8, 16, 32, 64)}),
        full=((128, 128, 128), {}),
        max_batch=(4, 2),
    ),
    description="MONAI DynUNet in nnU-Net's BraTS 3D configuration: 4 MRI channels in, 3 region logits out, "
    "kernels 3^3 x6, strides 1 then 2 x5, filters 32..320, instance norm, no residual blocks, deep "
    "supervision off (31 M params; ~10 s per 128^3 volume eager on 2 CPU cores). Small: 4 levels, 8..64 filters",
    **FAMILY,
)
def build_nnunet3d(levels: int = 6, filters: Sequence[int] | None = None) -> "nn.Module":
    from monai.networks.nets import DynUNet

    strides = [[1, 1, 1]] + [[2, 2, 2]] * (levels - 1)
    return DynUNet(
        spatial_dims=3,
        in_channels=BRATS_CHANNELS,
        out_channels=BRATS_CLASSES,
        kernel_size=[[3, 3, 3]] * levels,
        strides=strides,
        upsample_kernel_size=strides[1:],
        filters=list(filters) if filters is not None else None,  # None: min(2**(5+i), 320), nnU-Net's rule
        norm_name=("INSTANCE", {"affine": True}),
        res_block=False,
        deep_supervision=False,
    )
