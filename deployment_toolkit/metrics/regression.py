"""Element-wise error statistics between a run and a reference run (any task, embeddings above all).

All maths runs in float64 so fp16 outputs are not judged with fp16 rounding. NaN or inf anywhere
propagates into the statistics (a NaN never passes a threshold), so a broken conversion cannot hide.
"""
from __future__ import annotations

import numpy as np
from ..errors import UserError

# Relative error is |a - r| / max(|r|, eps): near-zero reference values are measured against eps
# instead of blowing up to inf.
DEFAULT_REL_EPS = 1e-6


class MetricInputError(UserError, ValueError):
    """Arrays that cannot be scored as asked (wrong shapes, non-integer labels, no samples)."""


def as_float_pair(pred: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both arrays as float64 with identical shapes and at least one sample."""
    a, b = np.asarray(pred), np.asarray(ref)
    if a.shape != b.shape:
        raise MetricInputError(f"output shape {a.shape} differs from reference shape {b.shape}")
    if a.ndim == 0 or a.shape[0] == 0:
        raise MetricInputError(f"need at least one sample (batch axis first), got shape {a.shape}")
    for arr, what in ((a, "output"), (b, "reference")):
        if arr.dtype.kind not in "biuf":
            raise MetricInputError(f"{what} dtype {arr.dtype} is not numeric; error statistics need numbers")
    return a.astype(np.float64, copy=False), b.astype(np.float64, copy=False)


def cosine_per_sample(pred: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Cosine similarity of each sample's flattened output with the reference's. Two all-zero samples
    count as identical (1.0); one zero and one non-zero as unrelated (0.0)."""
    a, b = as_float_pair(pred, ref)
    a, b = a.reshape(a.shape[0], -1), b.reshape(b.shape[0], -1)
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    dot = np.einsum("ij,ij->i", a, b)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = dot / (na * nb)
    both_zero = (na == 0) & (nb == 0)
    one_zero = (na == 0) ^ (nb == 0)
    cos = np.where(both_zero, 1.0, np.where(one_zero, 0.0, cos))
    return np.clip(cos, -1.0, 1.0)  # rounding can push |cos| a hair past 1


def error_stats(pred: np.ndarray, ref: np.ndarray, rel_eps: float = DEFAULT_REL_EPS) -> dict[str, float]:
    """max_abs_err, mean_abs_err, max_rel_err, rmse, cosine_mean, cosine_min of pred vs ref."""
    a, b = as_float_pair(pred, ref)
    diff = np.abs(a - b)
    rel = diff / np.maximum(np.abs(b), rel_eps)
    cos = cosine_per_sample(a, b)
    return {
        "max_abs_err": float(np.max(diff)),
        "mean_abs_err": float(np.mean(diff)),
        "max_rel_err": float(np.max(rel)),
        "rmse": float(np.sqrt(np.mean((a - b) ** 2))),
        "cosine_mean": float(np.mean(cos)),
        "cosine_min": float(np.min(cos)),
    }
