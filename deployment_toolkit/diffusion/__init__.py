"""Diffusion sampling around one-step denoisers: pure numpy, so it runs in-process and in a Triton Python backend."""
from .samplers import (
    SAMPLERS,
    DDIMOptions,
    Denoiser,
    EDMOptions,
    chunked,
    ddim_sample,
    edm_heun_sample,
    edm_preconditioning,
    evaluations,
    get_sampler,
    options_for,
)

__all__ = [
    "SAMPLERS",
    "DDIMOptions",
    "Denoiser",
    "EDMOptions",
    "chunked",
    "ddim_sample",
    "edm_heun_sample",
    "edm_preconditioning",
    "evaluations",
    "get_sampler",
    "options_for",
]
