"""Accuracy metrics over inference dumps: labels metrics per task and agreement with a reference run.

Pure numpy; `calculate_metrics` is the entry point used by triton/calculate_metrics.py. The per-task numbers are
deployment_toolkit.scores' (re-exported here), which the conversion's verification shares.
"""
from .calculate import (
    METRIC_TASKS,
    MetricOptions,
    MetricsError,
    Threshold,
    ThresholdsFailed,
    ThresholdSyntaxError,
    UnknownMetricError,
    calculate_metrics,
    check_thresholds,
    compute_metrics,
    format_table,
    load_thresholds,
    parse_threshold,
    parse_thresholds,
    write_metrics_csv,
)
from ..scores import (DEFAULT_ATOL, DiceResult, MetricInputError, dice_from_masks, dice_scores, psnr_metrics,
                      psnr_per_sample, top1_agreement, topk_accuracy, topk_overlap)
from .regression import cosine_per_sample, error_stats
from .user import BaseMetricsCalculator, MetricsFileError, load_metrics_file, user_metrics

__all__ = [
    "BaseMetricsCalculator",
    "DEFAULT_ATOL",
    "METRIC_TASKS",
    "MetricsFileError",
    "load_metrics_file",
    "user_metrics",
    "DiceResult",
    "MetricInputError",
    "MetricOptions",
    "MetricsError",
    "Threshold",
    "ThresholdSyntaxError",
    "ThresholdsFailed",
    "UnknownMetricError",
    "calculate_metrics",
    "check_thresholds",
    "compute_metrics",
    "cosine_per_sample",
    "dice_from_masks",
    "dice_scores",
    "error_stats",
    "format_table",
    "load_thresholds",
    "parse_threshold",
    "parse_thresholds",
    "psnr_metrics",
    "psnr_per_sample",
    "top1_agreement",
    "topk_accuracy",
    "topk_overlap",
    "write_metrics_csv",
]
