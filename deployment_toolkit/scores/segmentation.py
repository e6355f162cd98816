"""Dice for segmentation: predictions (logits or masks) against label masks or a reference run.

Conventions (explicit because NVIDIA DLE's nnU-Net Dice shifted class indices by one):
- `dice_class_<c>` is class index c of the class axis (axis 1 of logits, value c in a mask): no shift.
  Class 0 is the background.
- `dice_mean` averages classes 1..C-1 by default (`include_background=False`); with a single class,
  or `include_background=True`, class 0 is averaged too. dice_class_0 is always reported.
- Dice is computed per sample and per class, then averaged over samples (the usual nnU-Net / MONAI
  reading). A class absent from both the prediction and the target of a sample scores 1.0 for that
  sample: predicting nothing where there is nothing is agreement, and it keeps every value finite.
- Float predictions with a class axis are logits/probabilities: argmax over axis 1; a single-channel
  float output is a binary logit: class 1 where it exceeds `binary_threshold` (0.0; use 0.5 for
  probabilities). Integer/bool predictions are masks; an axis 1 of size 1 is squeezed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .elementwise import MetricInputError


@dataclass
class DiceResult:
    per_sample: np.ndarray  # (N, C): Dice of every class in every sample
    include_background: bool

    @property
    def num_classes(self) -> int:
        return int(self.per_sample.shape[1])

    @property
    def per_class(self) -> np.ndarray:
        return self.per_sample.mean(axis=0)

    @property
    def mean_classes(self) -> list[int]:
        """Classes averaged into `mean`."""
        start = 0 if self.include_background or self.num_classes == 1 else 1
        return list(range(start, self.num_classes))

    @property
    def mean(self) -> float:
        return float(self.per_class[self.mean_classes].mean())

    def as_metrics(self, prefix: str = "dice") -> dict[str, float]:
        out = {f"{prefix}_mean": self.mean}
        out.update({f"{prefix}_class_{c}": float(v) for c, v in enumerate(self.per_class)})
        return out


def _check_integral(arr: np.ndarray, what: str) -> np.ndarray:
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise MetricInputError(f"{what}: float masks must hold integral class indices")
    elif arr.dtype.kind not in "iub":
        raise MetricInputError(f"{what}: dtype {arr.dtype} is not a mask or logits")
    return arr.astype(np.int64)


def prediction_to_mask(
    pred: np.ndarray, binary_threshold: float = 0.0, what: str = "prediction"
) -> tuple[np.ndarray, int | None]:
    """(mask (N, *spatial) int64, number of classes if the prediction carried a class axis, else None)."""
    arr = np.asarray(pred)
    if arr.ndim < 2 or arr.shape[0] == 0:
        raise MetricInputError(f"{what}: expected (N, C, *spatial) logits or (N, *spatial) masks, got {arr.shape}")
    if arr.dtype.kind == "f":
        if arr.ndim < 3:
            raise MetricInputError(f"{what}: float output {arr.shape} has no spatial axes; expected (N, C, *spatial)")
        if arr.shape[1] == 1:
            return (arr[:, 0] > binary_threshold).astype(np.int64), 2
        return arr.argmax(axis=1).astype(np.int64), int(arr.shape[1])
    if arr.ndim >= 3 and arr.shape[1] == 1:
        arr = arr[:, 0]
    return _check_integral(arr, what), None


def target_to_mask(target: np.ndarray, mask_shape: tuple[int, ...], what: str = "labels") -> np.ndarray:
    """Label masks as (N, *spatial) int64 from (N, *spatial), (N, 1, *spatial) or one-hot (N, C, *spatial)."""
    arr = np.asarray(target)
    if arr.shape == mask_shape:
        return _check_integral(arr, what)
    if arr.ndim == len(mask_shape) + 1 and arr.shape[0] == mask_shape[0] and arr.shape[2:] == mask_shape[1:]:
        if arr.shape[1] == 1:
            return _check_integral(arr[:, 0], what)
        return arr.argmax(axis=1).astype(np.int64)  # one-hot
    raise MetricInputError(f"{what} shape {arr.shape} does not match the prediction masks {mask_shape}")


def dice_from_masks(
    pred: np.ndarray, target: np.ndarray, num_classes: int, include_background: bool = False
) -> DiceResult:
    """Per-sample, per-class Dice 2|P∩T| / (|P| + |T|) of two (N, *spatial) integer masks."""
    if pred.shape != target.shape:
        raise MetricInputError(f"mask shapes differ: {pred.shape} vs {target.shape}")
    for arr, what in ((pred, "prediction"), (target, "target")):
        if arr.size and (arr.min() < 0 or arr.max() >= num_classes):
            raise MetricInputError(
                f"{what} mask holds class {int(arr.min() if arr.min() < 0 else arr.max())} outside 0..{num_classes - 1}"
            )
    n = pred.shape[0]
    p, t = pred.reshape(n, -1), target.reshape(n, -1)
    offset = (np.arange(n, dtype=np.int64) * num_classes)[:, None]

    def counts(values: np.ndarray, where: np.ndarray | None = None) -> np.ndarray:
        flat = (values + offset)[where] if where is not None else (values + offset).ravel()
        return np.bincount(flat, minlength=n * num_classes).reshape(n, num_classes).astype(np.float64)

    tp = counts(p, p == t)
    denom = counts(p) + counts(t)
    with np.errstate(invalid="ignore", divide="ignore"):
        dice = np.where(denom > 0, 2.0 * tp / denom, 1.0)  # absent in both -> 1.0 (see module doc)
    return DiceResult(per_sample=dice, include_background=include_background)


def dice_scores(
    pred: np.ndarray,
    target: np.ndarray,
    *,
    num_classes: int | None = None,
    include_background: bool = False,
    binary_threshold: float = 0.0,
    target_is_prediction: bool = False,
) -> DiceResult:
    """Dice of `pred` (logits or masks) against `target` (label masks, or with
    `target_is_prediction=True` another run's logits/masks, e.g. the reference dump)."""
    p_mask, p_classes = prediction_to_mask(pred, binary_threshold)
    if target_is_prediction:
        t_mask, t_classes = prediction_to_mask(target, binary_threshold, what="reference")
        if t_mask.shape != p_mask.shape:
            raise MetricInputError(f"reference masks {t_mask.shape} do not match the prediction masks {p_mask.shape}")
    else:
        t_mask, t_classes = target_to_mask(target, p_mask.shape), None
    known = {c for c in (p_classes, t_classes) if c is not None}
    if len(known) > 1:
        raise MetricInputError(f"prediction and reference have different class counts: {sorted(known)}")
    if num_classes is None:
        num_classes = known.pop() if known else int(max(p_mask.max(), t_mask.max())) + 1
    return dice_from_masks(p_mask, t_mask, num_classes, include_background)
