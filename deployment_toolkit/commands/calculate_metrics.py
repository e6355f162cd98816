"""Compute accuracy metrics of an inference dump, optionally against a reference dump, into a CSV.

Thin CLI over deployment_toolkit.metrics; exit status 0 = all bounds met, 1 = a metric missed its
bound, 2 = the dumps or thresholds cannot be used (mismatched samples/tensors, empty dump, typo).
"""
import sys
from pathlib import Path


import argparse  # noqa: E402

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.config import add_arguments, from_args  # noqa: E402
from deployment_toolkit.data.dump import DumpError, DumpMismatchError, load_dump  # noqa: E402
from deployment_toolkit.metrics import (  # noqa: E402
    METRIC_TASKS,
    MetricInputError,
    MetricOptions,
    MetricsFileError,
    MetricsError,
    ThresholdSyntaxError,
    UnknownMetricError,
    check_thresholds,
    compute_metrics,
    format_table,
    load_metrics_file,
    parse_threshold,
    parse_thresholds,
    write_metrics_csv,
)

EPILOG = """\
metrics per task (vs labels | vs --reference-dir):
  classification  top1_accuracy, top5_accuracy    | top1_agreement, top5_overlap
  segmentation    dice_mean, dice_class_<c>       | dice_agreement_mean, dice_agreement_class_<c>
  denoising       label_psnr_mean, label_psnr_min | psnr_mean, psnr_min
  embedding       -                               | error statistics only
  regression      mae, rmse, max_abs_err, r2      | error statistics only
  generic         label_<error statistic>         | error statistics only
  every reference comparison adds max_abs_err, mean_abs_err, max_rel_err, rmse, cosine_mean, cosine_min and
  near_zero_samples (samples that agreed because both were within --atol of zero)
  samples of different shapes (token ids of different lengths) are compared sample by sample

your own metrics (the DLE form), beside the built-in ones and against the dump's labels:
  deployment-toolkit metrics --metrics examples/my_model/metrics.py \\
      --dump-dir ${SHARED_DIR}/accuracy_dump --csv ${SHARED_DIR}/accuracy_metrics.csv
  metrics.py defines class MetricsCalculator with calc(self, *, ids, y_pred, x, y_real) -> dict of floats
  (or a function calc(...)) over the whole dump, or calc_sample(*, id, y_pred, x, y_real) called once per
  sample (each metric reported as its mean over samples); see deployment_toolkit/metrics/user.py

thresholds file (YAML; quote the bounds):
  top1_agreement: ">=0.99"
  max_abs_err: "<=1e-3"

exit status: 0 ok, 1 a metric missed its bound, 2 unusable input (mismatched dumps, unknown metric,
  a metrics file that does not load or raises)

example:
  deployment-toolkit metrics \\
      --dump-dir ${SHARED_DIR}/accuracy_dump \\
      --reference-dir ${SHARED_DIR}/reference_dump \\
      --csv ${SHARED_DIR}/accuracy_metrics.csv \\
      --threshold 'top1_agreement>=0.99' --threshold 'max_abs_err<=1e-3'
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--dump-dir", required=True, type=Path, help="dump written by run_inference_on_triton.py")
    p.add_argument("--reference-dir", type=Path, help="dump of the reference run (e.g. the framework) to compare with")
    p.add_argument("--task", choices=METRIC_TASKS,
                   help="override the task recorded in dump.json; regression and generic for models outside the zoo")
    p.add_argument("--metrics", type=Path, metavar="FILE",
                   help="your metrics.py (class MetricsCalculator with calc(*, ids, y_pred, x, y_real), the DLE form)")
    p.add_argument("--csv", required=True, type=Path, help="where to write the one-row metrics CSV")
    bounds = p.add_mutually_exclusive_group()
    bounds.add_argument("--thresholds", type=Path, help="YAML file mapping metric names to bounds")
    bounds.add_argument("--threshold", action="append", default=[], metavar="NAME>=VALUE",
                        help="a bound such as 'dice_mean>=0.9' (ops >=, <=, >, <, ==); repeatable")
    add_arguments(p, MetricOptions)  # --output, --label, --include-background, --num-classes, --data-range, --atol
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.thresholds is not None:
            thresholds = parse_thresholds(args.thresholds)
        else:
            thresholds = [parse_threshold(t) for t in args.threshold]
        user_fn = load_metrics_file(args.metrics) if args.metrics is not None else None
        dump = load_dump(args.dump_dir)
        reference = load_dump(args.reference_dir) if args.reference_dir is not None else None
        metrics = compute_metrics(dump, reference, args.task, from_args(MetricOptions, args), user_fn=user_fn)
        write_metrics_csv(metrics, args.csv)
        print(format_table(metrics, thresholds))
        print(f"\nwrote {args.csv}")
        failures = check_thresholds(metrics, thresholds)
    except DumpMismatchError as err:
        print(f"error: the dumps cannot be compared: {err}", file=sys.stderr)
        return 2
    except (DumpError, MetricsError, MetricInputError, MetricsFileError, ThresholdSyntaxError,
            UnknownMetricError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if failures:
        print(f"\n{len(failures)} metric(s) out of bounds:", file=sys.stderr)
        for line in failures:
            print(f"  FAIL {line}", file=sys.stderr)
        return 1
    if thresholds:
        print(f"all {len(thresholds)} threshold(s) met")
    return 0


if __name__ == "__main__":
    cli.run(main)
