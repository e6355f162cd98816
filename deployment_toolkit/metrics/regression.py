"""Element-wise error statistics between a run and a reference run (any task, embeddings above all).

All maths runs in float64 so fp16 outputs are not judged with fp16 rounding. NaN or inf anywhere
propagates into the statistics (a NaN never passes a threshold), so a broken conversion cannot hide.
Samples of different shapes (data/ragged.py) are compared sample by sample: the element statistics run over
every element of every sample, the cosine per sample.

Two rules decide whether two samples agree: the relative ones (cosine, relative error), and an absolute
tolerance for samples that are both (near) zero: a model whose outputs underflow gives ~1e-45 in one runtime
and 0 in another (flush-to-zero), which has no direction to compare. Such samples count as agreeing (cosine 1)
and `near_zero_samples` says how many the absolute rule decided.
"""
from __future__ import annotations

import numpy as np

from ..data.ragged import RaggedError, flat_pair, is_ragged
from ..errors import UserError

# Relative error is |a - r| / max(|r|, eps): near-zero reference values are measured against eps
# instead of blowing up to inf.
DEFAULT_REL_EPS = 1e-6
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
    _numeric(a, "output")
    _numeric(b, "reference")
    return a.astype(np.float64, copy=False), b.astype(np.float64, copy=False)


def _flat_float_pair(pred: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pred values, ref values, each sample's number of values), float64, checked sample by sample."""
    if is_ragged(np.asarray(pred)) or is_ragged(np.asarray(ref)):
        try:
            a, b, starts = flat_pair(np.asarray(pred), np.asarray(ref))
        except RaggedError as err:
            raise MetricInputError(str(err)) from None
        if not len(starts):
            raise MetricInputError("need at least one sample")
        _numeric(a, "output")
        _numeric(b, "reference")
        sizes = np.diff(np.append(starts, a.size))
    else:
        a, b = as_float_pair(pred, ref)
        sizes = np.full(a.shape[0], int(np.prod(a.shape[1:])), dtype=np.int64)
        a, b = a.reshape(-1), b.reshape(-1)
    return a.astype(np.float64, copy=False), b.astype(np.float64, copy=False), sizes


def _numeric(arr: np.ndarray, what: str) -> None:
    if arr.dtype.kind not in "biuf":
        raise MetricInputError(f"{what} dtype {arr.dtype} is not numeric; error statistics need numbers")


def _cosines(a: np.ndarray, b: np.ndarray, sizes: np.ndarray, atol: float) -> tuple[np.ndarray, int]:
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


def cosine_per_sample(pred: np.ndarray, ref: np.ndarray, atol: float = DEFAULT_ATOL) -> np.ndarray:
    """Cosine similarity of each sample's flattened output with the reference's (module doc: the two rules)."""
    return _cosines(*_flat_float_pair(pred, ref), atol)[0]


def error_stats(pred: np.ndarray, ref: np.ndarray, rel_eps: float = DEFAULT_REL_EPS,
                atol: float = DEFAULT_ATOL) -> dict[str, float]:
    """max_abs_err, mean_abs_err, max_rel_err, rmse, cosine_mean, cosine_min of pred vs ref, and
    near_zero_samples: how many samples agreed by the absolute tolerance rather than by direction."""
    a, b, sizes = _flat_float_pair(pred, ref)
    diff = np.abs(a - b)
    rel = diff / np.maximum(np.abs(b), rel_eps)
    cos, near_zero = _cosines(a, b, sizes, atol)
    empty = diff.size == 0  # every sample of zero size (an empty detection list): nothing differs
    return {
        "max_abs_err": 0.0 if empty else float(np.max(diff)),
        "mean_abs_err": 0.0 if empty else float(np.mean(diff)),
        "max_rel_err": 0.0 if empty else float(np.max(rel)),
        "rmse": 0.0 if empty else float(np.sqrt(np.mean((a - b) ** 2))),
        "cosine_mean": float(np.mean(cos)),
        "cosine_min": float(np.min(cos)),
        "near_zero_samples": float(near_zero),
    }
