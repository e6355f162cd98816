"""Diffusion denoisers exported "as one step" (random weights); the sampling loop lives outside the artifact.

`sd_unet` is a diffusers `UNet2DConditionModel` built from a config dict (nothing from the hub), wrapped so
that forward(sample, timestep, encoder_hidden_states) returns the raw network output as a plain tensor.
The loop — `deployment_toolkit.diffusion.samplers` — is pure numpy around a `denoise(sample, t, cond)`
callable, so the same artifact serves every sampler and step count:

- DDIM: the network is an epsilon predictor, `t` is the training timestep in [0, 999];
- EDM Heun (CorrDiff style): the samplers apply Karras et al.'s preconditioning around the same raw
  network, D(x; sigma) = c_skip x + c_out F(c_in x, c_noise), so `t` is c_noise = ln(sigma) / 4. A served
  model that already contains the preconditioning (CorrDiff's EDMPrecond) is used with `precondition=False`.

The timestep is an input of shape (1,) per sample (not a scalar) because Triton batches every input
along axis 0; the tools fill it with `value` (a fixed mid-schedule timestep) instead of random numbers.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..compat import import_torchvision
from ..spec import ModelSignature, TensorSpec
from .registry import Preset, register_model

LATENT_CHANNELS = 4
EXAMPLE_TIMESTEP = 500.0  # what perf / accuracy tools feed as timestep__1

# A tiny UNet that converts and runs in well under a second on 2 CPU cores.
SMALL_UNET: dict[str, Any] = dict(
    sample_size=16,
    in_channels=LATENT_CHANNELS,
    out_channels=LATENT_CHANNELS,
    down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
    up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
    block_out_channels=(32, 64),
    layers_per_block=1,
    cross_attention_dim=32,
    attention_head_dim=8,
    norm_num_groups=8,
)
# Stable Diffusion 1.x UNet geometry (~860 M params, 64x64 latents, CLIP ViT-L/14 text states): benchmarks only.
FULL_UNET: dict[str, Any] = dict(
    sample_size=64,
    in_channels=LATENT_CHANNELS,
    out_channels=LATENT_CHANNELS,
    down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
    up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"),
    block_out_channels=(320, 640, 1280, 1280),
    layers_per_block=2,
    cross_attention_dim=768,
    attention_head_dim=8,
    norm_num_groups=32,
)


class OneStepDenoiser(nn.Module):
    """One network evaluation with Triton-friendly I/O: timestep (B, 1) in, noise prediction tensor out
    (diffusers returns an output dataclass, which exporters and the Python backend cannot pass on)."""

    def __init__(self, unet: nn.Module) -> None:
        super().__init__()
        self.unet = unet

    def forward(self, sample: torch.Tensor, timestep: torch.Tensor,
                encoder_hidden_states: torch.Tensor) -> torch.Tensor:
        return self.unet(sample, timestep.reshape(-1), encoder_hidden_states, return_dict=False)[0]


def _signature(size: int, tokens: int, dim: int) -> ModelSignature:
    return ModelSignature(
        inputs=(
            TensorSpec("sample__0", (LATENT_CHANNELS, size, size)),
            TensorSpec("timestep__1", (1,), value=[EXAMPLE_TIMESTEP]),
            TensorSpec("encoder_hidden_states__2", (tokens, dim)),
        ),
        outputs=(TensorSpec("output__0", (LATENT_CHANNELS, size, size)),),
    )


@register_model(
    "sd_unet",
    family="diffusion",
    task="denoising",
    metric="psnr",
    presets={
        "small": Preset("small", _signature(16, 8, 32), {"config": SMALL_UNET}, max_batch_size=8),
        "full": Preset("full", _signature(64, 77, 768), {"config": FULL_UNET}, max_batch_size=8),
    },
    description="diffusers UNet2DConditionModel exported as one denoising step: (latent, timestep, text states) "
    "-> noise prediction. Small: 2 blocks (32, 64), 16x16 latents, 8x32 states; full: Stable Diffusion 1.x "
    "geometry (860 M params, 64x64 latents, 77x768 states). Samplers (DDIM, EDM Heun with the EDM "
    "preconditioning applied around this network) are in deployment_toolkit.diffusion.samplers",
    tags=("one-step", "sampler:ddim", "sampler:edm_heun"),
)
def build_sd_unet(config: dict[str, Any]) -> nn.Module:
    import_torchvision()  # diffusers imports torchvision; see compat
    from diffusers import UNet2DConditionModel

    return OneStepDenoiser(UNet2DConditionModel(**config))
