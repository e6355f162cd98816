"""Task-level agreement between two outputs of the same model (framework vs converted/served), with the
same metric definitions and names as calculate_metrics.py uses against a reference dump."""
from __future__ import annotations

import numpy as np

from .classification import top1_agreement
from .denoising import psnr_metrics
from .elementwise import DEFAULT_ATOL, flat_float_pair, sample_cosines
from .segmentation import dice_scores


def task_agreement(task: str, ref: np.ndarray, got: np.ndarray) -> dict[str, float]:
    if task == "classification":
        return {"top1_agreement": top1_agreement(got, ref)}
    if task == "segmentation":
        return {"dice_agreement_mean": dice_scores(got, ref, target_is_prediction=True).mean}
    if task == "denoising":
        return psnr_metrics(got, ref)
    return {"cosine_min": float(np.min(sample_cosines(*flat_float_pair(got, ref), DEFAULT_ATOL)[0]))}
