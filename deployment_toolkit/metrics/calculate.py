"""Pick and compute the metrics for a dump, and judge them against thresholds.

Which metrics run (task from dump.json, overridable):

=============== ========================================= =============================================
task            vs labels (dump has labels/)              vs reference dump (--reference-dir)
=============== ========================================= =============================================
classification  top1_accuracy, top5_accuracy              top1_agreement, top5_overlap
segmentation    dice_mean, dice_class_<c>                 dice_agreement_mean, dice_agreement_class_<c>
denoising       label_psnr_mean, label_psnr_min           psnr_mean, psnr_min
embedding       (none)                                    (error statistics only)
regression      mae, rmse, max_abs_err, r2                (error statistics only)
generic         label_<error statistic>                   (error statistics only)
=============== ========================================= =============================================

`regression` and `generic` are for models outside the zoo (give --task): `generic` scores any numeric output
against a label of the same size with the error statistics below. A user's metrics file (`user_fn`, from
metrics.user.load_metrics_file) adds its own named values beside these, with the same labels; with it the
task may stay unknown, and then only its metrics (and the error statistics vs a reference) are computed.

Every reference comparison also reports the error statistics max_abs_err, mean_abs_err, max_rel_err,
rmse, cosine_mean, cosine_min (and near_zero_samples: how many samples agreed by the absolute tolerance `atol`
because both were within it of zero, metrics/regression.py) of the primary output; further outputs get the same statistics with the
tensor name appended, e.g. `max_abs_err[output__1]`. `num_samples` is always reported. The primary
output is the first one in dump.json unless `output=` names another; likewise the label tensor.
When the dump has no labels but the reference has, the reference's labels are used (paired by id).

Samples of different shapes (token logits of different lengths): the error statistics go sample by sample;
the per-task metrics get one stacked array when the samples share a shape, else one line naming two samples
that differ.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from ..data.dump import Dump, DumpMismatchError, align, load_dump
from ..data.ragged import stacked
from ..config import check_numbers, setting
from ..models.registry import TASKS
from ..results.rows import RowSchema, to_csv
from ..spec import atomic_write_text
from ..scores import (DEFAULT_ATOL, MetricInputError, as_float_pair, classification_label_metrics,
                      classification_reference_metrics, dice_scores, psnr_metrics)
from .regression import DEFAULT_REL_EPS, error_stats
from .thresholds import (Threshold,  # the thresholds' names, as callers import them from here
                          ThresholdsFailed, ThresholdsLike, ThresholdSyntaxError, UnknownMetricError,
                         check_thresholds, load_thresholds, parse_threshold, parse_thresholds)
from ..errors import UserError

# the zoo's tasks plus two for models outside it
METRIC_TASKS = (*TASKS, "regression", "generic")


class MetricsError(UserError, ValueError):
    """Metrics that cannot be computed as asked (unknown task or tensor, nothing to compare)."""


def _pick(tensors: Mapping[str, np.ndarray], name: str | None, what: str, where: str) -> str:
    if name is None:
        return next(iter(tensors))
    if name not in tensors:
        raise MetricsError(f"{what} {name!r} is not in {where}; it holds {', '.join(tensors)}")
    return name


def resolve_task(dump: Dump, reference: Dump | None, task: str | None, required: bool = True) -> str | None:
    """The task to score: `task`, else the one dump.json names; None only when not `required` (a user's
    metrics file alone needs none)."""
    if task is None:
        tasks = {d.task for d in (dump, reference) if d is not None and d.task}
        if len(tasks) > 1:
            raise DumpMismatchError(f"the dumps come from different tasks {sorted(tasks)}; compare runs of one model")
        if not tasks:
            if not required:
                return None
            raise MetricsError(f"{dump.directory}/dump.json names no task; pass --task ({', '.join(METRIC_TASKS)}) "
                               "or --metrics metrics.py")
        task = tasks.pop()
    if task not in METRIC_TASKS:
        raise MetricsError(f"unknown task {task!r}; choose one of {', '.join(METRIC_TASKS)}")
    return task


def regression_metrics(pred: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """mae, rmse, max_abs_err and r2 (1 - SS_res / SS_tot; NaN when the labels are constant)."""
    a, b = as_float_pair(_like(pred, y), y)
    diff = a - b
    ss_tot = float(np.sum((b - b.mean()) ** 2))
    return {
        "mae": float(np.mean(np.abs(diff))),
        "rmse": float(np.sqrt(np.mean(diff ** 2))),
        "max_abs_err": float(np.max(np.abs(diff))),
        "r2": 1.0 - float(np.sum(diff ** 2)) / ss_tot if ss_tot > 0 else math.nan,
    }


def _like(pred: np.ndarray, y: np.ndarray) -> np.ndarray:
    """A (N, 1) prediction scored against (N,) labels (or the reverse): same size, same rows."""
    if pred.shape != y.shape and pred.size == y.size and pred.shape[:1] == y.shape[:1]:
        return pred.reshape(y.shape)
    return pred


def _scored(context: str, fn: Callable[..., dict[str, float]], *args: Any, **kwargs: Any) -> dict[str, float]:
    try:
        return fn(*args, **kwargs)
    except MetricInputError as err:
        raise MetricsError(f"{context}: {err}") from err


def tolerance(text: str) -> float:
    """--atol's value: a finite number >= 0 (in the outputs' unit)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0 (same unit as the outputs), got {text}")
    return value


@dataclass(frozen=True)
class MetricOptions:
    """Which tensors are scored and how, besides the task; each default written once (the metrics command's flags
    are built from these fields)."""

    output: str | None = setting(None, flag="--output", help="output tensor scored by the task metric (default: the "
                                                              "first)")
    label: str | None = setting(None, flag="--label", help="label tensor (default: the first)")
    include_background: bool = setting(False, flag="--include-background", action="store_true",
                                       help="average Dice over class 0 too")
    num_classes: int | None = setting(None, flag="--num-classes", low=1,
                                      help="segmentation class count when outputs are masks")
    data_range: float | None = setting(None, flag="--data-range", low=0, low_open=True,
                                       help="PSNR data range (default: reference max-min per sample)")
    atol: float = setting(DEFAULT_ATOL, flag="--atol", type=tolerance, metavar="VALUE", show_default=False,
                          help="samples whose values are all within VALUE of zero in both dumps agree (cosine 1, "
                               f"counted in near_zero_samples); default {DEFAULT_ATOL:.3g}, float32's smallest "
                               "normal number, below which runtimes flush to zero")
    rel_eps: float = DEFAULT_REL_EPS  # the relative error's floor (metrics/regression.py)

    def __post_init__(self) -> None:
        check_numbers(self)


def compute_metrics(dump: Dump, reference: Dump | None = None, task: str | None = None,
                    options: MetricOptions | None = None, *,
                    user_fn: Callable[..., Any] | None = None) -> dict[str, float]:
    """The metrics of loaded dumps (see the module doc for names). Mismatched dumps raise DumpMismatchError.
    `user_fn`: the user's metrics file (metrics.user.load_metrics_file), its values beside the built-in ones."""
    o = options or MetricOptions()
    task = resolve_task(dump, reference, task, required=user_fn is None)
    out_name = _pick(dump.outputs, o.output, "output", f"{dump.directory} outputs")
    metrics: dict[str, float] = {"num_samples": float(dump.num_samples)}

    aligned = align(dump, reference, "outputs") if reference is not None else None
    labels = dump.labels
    if not labels and reference is not None and reference.labels and aligned is not None:
        labels = {n: v[aligned.b_index] for n, v in reference.labels.items()}

    def whole(arr: np.ndarray, what: str) -> np.ndarray:  # the per-task metrics score one stacked array
        return stacked(arr, what, dump.ids.tolist(), hint=f"the {task} metrics need one shape per sample; the error "
                       "statistics (--task generic) and a --metrics file's calc_sample go sample by sample")

    if labels and task != "embedding":
        metrics.update(_label_metrics(dump, labels, out_name, task, o, whole))
    if aligned is not None:
        metrics.update(_reference_metrics(dump, reference, aligned, out_name, task, o, whole))
    if user_fn is not None:
        from .user import user_metrics

        own = user_metrics(user_fn, dump, labels)
        clash = sorted(set(own) & set(metrics))
        if clash:
            raise MetricsError(f"{getattr(user_fn, 'name', 'calc')} returns {clash}, names the built-in metrics "
                               "already use; rename them in your metrics file")
        metrics.update(own)

    if len(metrics) == 1:
        why = "the embedding task has no label metrics" if task == "embedding" else f"{dump.directory} has no labels"
        raise MetricsError(f"nothing to compute: {why}; pass --reference-dir with a framework run's dump")
    return metrics


Whole = Callable[[np.ndarray, str], np.ndarray]  # a tensor's samples as one stacked array, or one line why not


def _label_metrics(dump: Dump, labels: Mapping[str, np.ndarray], out_name: str, task: str | None,
                   o: MetricOptions, whole: Whole) -> dict[str, float]:
    """The task's metrics of the primary output against the labels (accuracy, Dice, PSNR, regression errors, or
    the error statistics for `generic`)."""
    lab_name = _pick(labels, o.label, "label", "the labels")
    pred, y = dump.outputs[out_name], labels[lab_name]
    ctx = f"{out_name} vs labels {lab_name}"
    if task in ("classification", "segmentation", "denoising", "regression"):
        pred, y = whole(dump.outputs[out_name], f"output {out_name}"), whole(y, f"label {lab_name}")
    if task == "classification":
        return _scored(ctx, classification_label_metrics, pred, y)
    if task == "segmentation":
        return _scored(ctx, lambda: dice_scores(
            pred, y, num_classes=o.num_classes, include_background=o.include_background).as_metrics("dice"))
    if task == "denoising":
        return _scored(ctx, psnr_metrics, pred, y, o.data_range, prefix="label_psnr")
    if task == "regression":
        return _scored(ctx, regression_metrics, pred, y)
    if task == "generic":
        stats = _scored(ctx, lambda: error_stats(_like(pred, y), y, o.rel_eps, o.atol))
        return {f"label_{k}": v for k, v in stats.items()}
    return {}


def _reference_metrics(dump: Dump, reference: Dump, aligned: Any, out_name: str, task: str | None,
                       o: MetricOptions, whole: Whole) -> dict[str, float]:
    """Agreement with the reference dump, paired by id: the task's agreement metrics, then the error statistics
    of the primary output and of every further output (named `<statistic>[<output>]`)."""
    pred, ref = dump.outputs[out_name], aligned.b[out_name]
    ctx = f"{out_name} vs reference {reference.directory}"
    if task in ("classification", "segmentation", "denoising"):
        pred, ref = whole(pred, f"output {out_name}"), whole(ref, f"reference output {out_name}")
    metrics: dict[str, float] = {}
    if task == "classification":
        metrics.update(_scored(ctx, classification_reference_metrics, pred, ref))
    elif task == "segmentation":
        metrics.update(_scored(ctx, lambda: dice_scores(
            pred, ref, num_classes=o.num_classes, include_background=o.include_background,
            target_is_prediction=True).as_metrics("dice_agreement")))
    elif task == "denoising":
        metrics.update(_scored(ctx, psnr_metrics, pred, ref, o.data_range, prefix="psnr"))
    metrics.update(_scored(ctx, error_stats, pred, ref, o.rel_eps, o.atol))
    for name in aligned.a:
        if name != out_name:
            stats = _scored(f"{name} vs reference", error_stats, aligned.a[name], aligned.b[name], o.rel_eps, o.atol)
            metrics.update({f"{k}[{name}]": v for k, v in stats.items()})
    return metrics


def calculate_metrics(
    dump_dir: str | Path,
    reference_dir: str | Path | None = None,
    task: str | None = None,
    thresholds: ThresholdsLike | None = None,
    options: MetricOptions | None = None,
) -> dict[str, float]:
    """Load the dump(s), compute the task's metrics, and when thresholds are given raise
    ThresholdsFailed (carrying the metrics) if any is missed."""
    parsed = parse_thresholds(thresholds)  # a malformed bound fails before the (slow) loading
    dump = load_dump(dump_dir)
    reference = load_dump(reference_dir) if reference_dir is not None else None
    metrics = compute_metrics(dump, reference, task, options)
    failures = check_thresholds(metrics, parsed)
    if failures:
        raise ThresholdsFailed(failures, metrics)
    return metrics


def write_metrics_csv(metrics: Mapping[str, float], path: str | Path) -> Path:
    """One header row of metric names and one row of values (the DLE accuracy_metrics.csv shape), each value
    written in full (repr), through the row store's one CSV writer."""
    schema = RowSchema(columns=tuple(metrics))
    atomic_write_text(path, to_csv(schema, [{k: repr(float(v)) for k, v in metrics.items()}]))
    return Path(path)


def format_table(metrics: Mapping[str, float], thresholds: Iterable[Threshold] = ()) -> str:
    """A readable table; with thresholds, each bounded metric shows its bound and ok/FAIL."""
    bounds: dict[str, list[Threshold]] = {}
    for t in thresholds:
        bounds.setdefault(t.metric, []).append(t)
    rows = [("metric", "value", "bound", "status")]
    for name, value in metrics.items():
        ts = bounds.get(name, [])
        status = "" if not ts else ("ok" if all(t.passes(float(value)) for t in ts) else "FAIL")
        rows.append((name, f"{float(value):.6g}", ", ".join(t.text for t in ts), status))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
