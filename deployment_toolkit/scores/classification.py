"""Classification metrics: accuracy against labels, agreement against a reference run's logits.

Scores are (N, C) logits or probabilities; trailing singleton axes ((N, C, 1, 1) from conv heads) are
dropped. When C < k, top-k uses k = C (so top5 of a 3-class model is trivially 1.0) to keep the
metric columns the same for every model.
"""
from __future__ import annotations

import numpy as np

from .elementwise import MetricInputError


def as_scores(scores: np.ndarray, what: str = "scores") -> np.ndarray:
    """(N, C) float scores from (N, C, 1, ..., 1)."""
    arr = np.asarray(scores)
    while arr.ndim > 2 and arr.shape[-1] == 1:
        arr = arr[..., 0]
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise MetricInputError(f"{what}: expected (N, num_classes) scores, got shape {np.shape(scores)}")
    return arr


def as_class_labels(labels: np.ndarray, num_samples: int) -> np.ndarray:
    """(N,) int64 class indices from (N,), (N, 1) or one-hot (N, C) labels."""
    arr = np.asarray(labels)
    if arr.ndim == 2 and arr.shape[1] > 1:
        arr = arr.argmax(axis=1)  # one-hot / soft labels
    arr = arr.reshape(arr.shape[0], -1) if arr.ndim > 1 else arr
    if arr.ndim == 2:
        if arr.shape[1] != 1:
            raise MetricInputError(f"labels: expected one class index per sample, got shape {np.shape(labels)}")
        arr = arr[:, 0]
    if arr.shape[0] != num_samples:
        raise MetricInputError(f"labels: {arr.shape[0]} labels for {num_samples} samples")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise MetricInputError("labels: float labels must hold integral class indices")
    elif arr.dtype.kind not in "iub":
        raise MetricInputError(f"labels: dtype {arr.dtype} is not a class index")
    return arr.astype(np.int64)


def topk_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """(N, k) indices of the k largest scores per row (order within the k not defined)."""
    k = min(k, scores.shape[1])
    return np.argpartition(-scores, kth=k - 1, axis=1)[:, :k]


def topk_accuracy(scores: np.ndarray, labels: np.ndarray, k: int = 1) -> float:
    """Fraction of samples whose label is among the k best scores (k clamped to the class count)."""
    scores = as_scores(scores)
    labels = as_class_labels(labels, scores.shape[0])
    if k == 1:
        return float(np.mean(scores.argmax(axis=1) == labels))
    return float(np.mean(np.any(topk_indices(scores, k) == labels[:, None], axis=1)))


def top1_agreement(scores: np.ndarray, reference: np.ndarray) -> float:
    """Fraction of samples where both runs pick the same class (argmax; ties go to the lowest index)."""
    a, b = as_scores(scores), as_scores(reference, "reference")
    _same_shape(a, b)
    return float(np.mean(a.argmax(axis=1) == b.argmax(axis=1)))


def topk_overlap(scores: np.ndarray, reference: np.ndarray, k: int = 5) -> float:
    """Mean over samples of |top-k(a) ∩ top-k(b)| / k: 1.0 when both runs rank the same k classes first."""
    a, b = as_scores(scores), as_scores(reference, "reference")
    _same_shape(a, b)
    ta, tb = np.sort(topk_indices(a, k), axis=1), np.sort(topk_indices(b, k), axis=1)
    hits = (ta[:, :, None] == tb[:, None, :]).any(axis=2).sum(axis=1)
    return float(np.mean(hits / ta.shape[1]))


def classification_label_metrics(scores: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    return {"top1_accuracy": topk_accuracy(scores, labels, 1), "top5_accuracy": topk_accuracy(scores, labels, 5)}


def classification_reference_metrics(scores: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    return {"top1_agreement": top1_agreement(scores, reference), "top5_overlap": topk_overlap(scores, reference, 5)}


def _same_shape(a: np.ndarray, b: np.ndarray) -> None:
    if a.shape != b.shape:
        raise MetricInputError(f"scores shape {a.shape} differs from reference shape {b.shape}")
