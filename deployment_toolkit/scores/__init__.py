"""Per-task numbers over arrays, pure numpy: classification top-k and agreement, Dice, PSNR, element-wise error and
cosine (`elementwise`), and the task-level agreement of two runs of one model (`agreement`). Below both `export`,
whose verification records the agreement of a conversion, and `metrics`, which computes the same numbers over
dumps (ragged samples, labels, thresholds): one definition of each, imported by both."""
from .agreement import task_agreement
from .classification import (as_class_labels, as_scores, classification_label_metrics, classification_reference_metrics,
                             top1_agreement, topk_accuracy, topk_overlap)
from .denoising import psnr_metrics, psnr_per_sample
from .elementwise import DEFAULT_ATOL, MetricInputError, as_float_pair, flat_float_pair, sample_cosines
from .segmentation import DiceResult, dice_from_masks, dice_scores

__all__ = ["DEFAULT_ATOL", "DiceResult", "MetricInputError", "as_class_labels", "as_float_pair", "as_scores",
           "classification_label_metrics", "classification_reference_metrics", "dice_from_masks", "dice_scores",
           "flat_float_pair", "psnr_metrics", "psnr_per_sample", "sample_cosines", "task_agreement", "top1_agreement",
           "topk_accuracy", "topk_overlap"]
