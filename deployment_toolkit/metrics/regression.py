"""Element-wise error statistics between a run and a reference run (any task, embeddings above all).

The comparison itself (float64, the relative and the absolute rule, the cosine per sample) is
scores/elementwise.py's, shared with the conversion's verification; here it also covers samples of different
shapes (data/ragged.py), compared sample by sample: the element statistics run over every element of every
sample, the cosine per sample. `near_zero_samples` says how many samples the absolute rule decided.
"""
from __future__ import annotations

import numpy as np

from ..data.ragged import RaggedError, flat_pair, is_ragged
from ..scores.elementwise import (DEFAULT_ATOL, MetricInputError, check_numeric, flat_float_pair,
                                  sample_cosines)

# Relative error is |a - r| / max(|r|, eps): near-zero reference values are measured against eps
# instead of blowing up to inf.
DEFAULT_REL_EPS = 1e-6


def _flat_float_pair(pred: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pred values, ref values, each sample's number of values), float64, checked sample by sample."""
    if not (is_ragged(np.asarray(pred)) or is_ragged(np.asarray(ref))):
        return flat_float_pair(pred, ref)
    try:
        a, b, starts = flat_pair(np.asarray(pred), np.asarray(ref))
    except RaggedError as err:
        raise MetricInputError(str(err)) from None
    if not len(starts):
        raise MetricInputError("need at least one sample")
    check_numeric(a, "output")
    check_numeric(b, "reference")
    sizes = np.diff(np.append(starts, a.size))
    return a.astype(np.float64, copy=False), b.astype(np.float64, copy=False), sizes


def cosine_per_sample(pred: np.ndarray, ref: np.ndarray, atol: float = DEFAULT_ATOL) -> np.ndarray:
    """Cosine similarity of each sample's flattened output with the reference's (scores.elementwise: the rules)."""
    return sample_cosines(*_flat_float_pair(pred, ref), atol)[0]


def error_stats(pred: np.ndarray, ref: np.ndarray, rel_eps: float = DEFAULT_REL_EPS,
                atol: float = DEFAULT_ATOL) -> dict[str, float]:
    """max_abs_err, mean_abs_err, max_rel_err, rmse, cosine_mean, cosine_min of pred vs ref, and
    near_zero_samples: how many samples agreed by the absolute tolerance rather than by direction."""
    a, b, sizes = _flat_float_pair(pred, ref)
    diff = np.abs(a - b)
    rel = diff / np.maximum(np.abs(b), rel_eps)
    cos, near_zero = sample_cosines(a, b, sizes, atol)
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
