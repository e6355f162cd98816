"""Element-wise comparison of a run with a reference run of the same shape, in float64 (so fp16 outputs are not
judged with fp16 rounding); NaN or inf propagates (a NaN never passes a threshold).

Two rules decide whether two samples agree: the relative ones (cosine, relative error), and an absolute
tolerance for samples that are both (near) zero: a model whose outputs underflow gives ~1e-45 in one runtime
and 0 in another (flush-to-zero), which has no direction to compare. Such samples count as agreeing (cosine 1).
Samples of different shapes (data/ragged.py) are metrics/regression.py's: it lays them end to end and uses
`sample_cosines` here.
"""
from __future__ import annotations

import numpy as np

from ..errors import UserError

# Below float32's smallest normal number (1.2e-38) a runtime may flush to zero: a sample whose every value is
# within this of zero in both runs agrees whatever its direction.
DEFAULT_ATOL = float(np.finfo(np.float32).tiny)


class MetricInputError(UserError, ValueError):
    """Arrays that cannot be scored as asked (wrong shapes, non-integer labels, no samples)."""


def as_float_pair(pred: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both arrays as float64 with identical shapes and at least one sample."""
    a, b = np.asarray(pred), np.asarray(ref)
    if a.shape != b.shape:
        raise MetricInputError(f"output shape {a.shape} differs from reference shape {b.shape}")
    if a.ndim == 0 or a.shape[0] == 0:
        raise MetricInputError(f"need at least one sample (batch axis first), got shape {a.shape}")
    check_numeric(a, "output")
    check_numeric(b, "reference")
    return a.astype(np.float64, copy=False), b.astype(np.float64, copy=False)


def flat_float_pair(pred: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pred values, ref values, each sample's number of values), float64, of two arrays of the same shape."""
    a, b = as_float_pair(pred, ref)
    sizes = np.full(a.shape[0], int(np.prod(a.shape[1:])), dtype=np.int64)
    return a.reshape(-1), b.reshape(-1), sizes


def check_numeric(arr: np.ndarray, what: str) -> None:
    if arr.dtype.kind not in "biuf":
        raise MetricInputError(f"{what} dtype {arr.dtype} is not numeric; error statistics need numbers")


def sample_cosines(a: np.ndarray, b: np.ndarray, sizes: np.ndarray, atol: float) -> tuple[np.ndarray, int]:
    """Cosine per sample of flattened values (`sizes`: values per sample), and how many samples the absolute
    tolerance decided: both within `atol` of zero agree (1.0); one zero and one not are unrelated (0.0)."""
    n = sizes.size
    owner = np.repeat(np.arange(n), sizes)
    dot = np.bincount(owner, a * b, minlength=n)
    na = np.sqrt(np.bincount(owner, a * a, minlength=n))
    nb = np.sqrt(np.bincount(owner, b * b, minlength=n))
    peak_a = np.zeros(n)
    peak_b = np.zeros(n)
    with np.errstate(invalid="ignore", divide="ignore"):  # a NaN stays NaN: it never passes a threshold
        np.maximum.at(peak_a, owner, np.abs(a))
        np.maximum.at(peak_b, owner, np.abs(b))
        cos = dot / (na * nb)
    near_zero = (peak_a <= atol) & (peak_b <= atol)
    one_zero = ((na == 0) ^ (nb == 0)) & ~near_zero
    cos = np.where(near_zero, 1.0, np.where(one_zero, 0.0, cos))
    return np.clip(cos, -1.0, 1.0), int(near_zero.sum())  # rounding can push |cos| a hair past 1


__all__ = ["DEFAULT_ATOL", "MetricInputError", "as_float_pair", "check_numeric", "flat_float_pair", "sample_cosines"]
