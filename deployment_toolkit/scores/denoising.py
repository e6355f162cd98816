"""PSNR of a denoiser's output against a reference run at the same seed (or against clean labels).

PSNR = 10 log10(range^2 / MSE), per sample, in dB. `range` is `data_range` when given (e.g. 2.0 for
[-1, 1] images, 255 for uint8); otherwise the reference sample's max - min, so the score does not
depend on how the model scales its outputs. A constant reference sample (range 0) falls back to 1.0.
Identical samples give +inf; psnr_mean is then +inf too, which passes any `>=` bound.
"""
from __future__ import annotations

import numpy as np

from ..errors import UserInputError
from .elementwise import as_float_pair


def psnr_per_sample(pred: np.ndarray, ref: np.ndarray, data_range: float | None = None) -> np.ndarray:
    a, b = as_float_pair(pred, ref)
    a, b = a.reshape(a.shape[0], -1), b.reshape(b.shape[0], -1)
    mse = np.mean((a - b) ** 2, axis=1)
    if data_range is not None:
        if not data_range > 0:
            raise UserInputError(f"data_range must be positive, got {data_range}")
        rng = np.full(a.shape[0], float(data_range))
    else:
        rng = b.max(axis=1) - b.min(axis=1)
        rng = np.where(rng > 0, rng, 1.0)
    with np.errstate(divide="ignore"):
        return 10.0 * np.log10(rng**2 / mse)


def psnr_metrics(
    pred: np.ndarray, ref: np.ndarray, data_range: float | None = None, prefix: str = "psnr"
) -> dict[str, float]:
    values = psnr_per_sample(pred, ref, data_range)
    return {f"{prefix}_mean": float(np.mean(values)), f"{prefix}_min": float(np.min(values))}
