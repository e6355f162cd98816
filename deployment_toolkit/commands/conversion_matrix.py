"""Convert and verify every registered model in every format (TorchScript trace/script, ONNX, TensorRT):
one CSV row per model x format with status (ok / failed / skipped), reason, errors vs the framework, the
task's agreement metric and export time. Resumable: a rerun skips the rows the CSV already holds.
Writes <output>.csv, <output>.md (tables) and run.json next to it."""
import sys
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.results.ledger import add_reuse_arguments  # noqa: E402
from deployment_toolkit.spec import FORMATS  # noqa: E402
from deployment_toolkit.committed import refuse_committed  # noqa: E402


def _names(text: str) -> list[str]:
    return [x for x in text.replace(" ", ",").split(",") if x]


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(__doc__, """
        deployment-toolkit conversion-matrix --output results/conversion-matrix-small-cpu/conversion_matrix.csv
        deployment-toolkit conversion-matrix --output results/seg/conversion_matrix.csv --family segmentation \\
            --formats onnx,ts-trace --keep-artifacts workspace/matrix
    """)
    p.add_argument("--output", required=True, help="CSV path, e.g. results/<run>/conversion_matrix.csv")
    p.add_argument("--models", type=_names, default=None, help="comma-separated model names (default: all)")
    p.add_argument("--family", default=None, help="only models of this family (timm, geospatial, segmentation, ...)")
    p.add_argument("--formats", type=_names, default=list(FORMATS), help=f"comma-separated, from {','.join(FORMATS)}")
    p.add_argument("--full", action="store_true", help="full (benchmark-size) presets instead of small ones: slow")
    p.add_argument("--keep-artifacts", default=None, metavar="DIR", help="keep artifacts in DIR/<model>/<preset>/<format>")
    p.add_argument("--isolate", choices=("auto", "yes", "no"), default="auto",
                   help="convert each cell in a fresh process (auto: only with --full)")
    p.add_argument("--onnx-opset", type=int, default=17)
    p.add_argument("--verify-batch-sizes", type=cli.int_list, default=(1, 2))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true", help="no progress bar (CI logs)")
    add_reuse_arguments(p, "rows of the CSV")
    args = p.parse_args(argv)
    refuse_committed(args.output, "--output")

    from deployment_toolkit.export import ConvertOptions
    from deployment_toolkit.export.matrix import run_matrix

    result = run_matrix(
        args.models, args.formats, None, args.output, full=args.full, family=args.family,
        keep_artifacts=args.keep_artifacts, progress=not args.no_progress,
        isolate={"auto": None, "yes": True, "no": False}[args.isolate],
        options=ConvertOptions(opset=args.onnx_opset, verify_batch_sizes=args.verify_batch_sizes, seed=args.seed),
        reuse=args.reuse,
    )
    counts = result.counts()
    print(f"{len(result.rows)} rows ({result.new} new, {result.resumed} resumed): "
          + ", ".join(f"{n} {s}" for s, n in counts.items()))
    print(f"wrote {result.csv_path}, {result.markdown_path}" + (f", {result.run_json_path}" if result.run_json_path else ""))
    return 0


if __name__ == "__main__":
    cli.run(main)
