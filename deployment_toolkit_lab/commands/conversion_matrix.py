"""Convert and verify every registered model in every format (TorchScript trace/script, ONNX, TensorRT):
one CSV row per model x format with status (ok / failed / skipped), reason, errors vs the framework, the
task's agreement metric and export time. Resumable: a rerun skips the rows the CSV already holds.
Writes <output>.csv, <output>.md (tables) and run.json next to it."""
from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.config import add_arguments, from_args  # noqa: E402
from deployment_toolkit.export.convert import ConvertOptions  # noqa: E402
from ..matrix import MatrixSettings  # noqa: E402
from deployment_toolkit.results.ledger import add_reuse_arguments  # noqa: E402
from deployment_toolkit.committed import refuse_committed  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(__doc__, """
        deployment-toolkit-lab conversion-matrix --output results/conversion-matrix-small-cpu/conversion_matrix.csv
        deployment-toolkit-lab conversion-matrix --output results/seg/conversion_matrix.csv --family segmentation \\
            --formats onnx,ts-trace --keep-artifacts workspace/matrix
    """)
    p.add_argument("--output", required=True, help="CSV path, e.g. results/<run>/conversion_matrix.csv")
    add_arguments(p, MatrixSettings)  # --models, --family, --formats, --full, --keep-artifacts, --isolate, ...
    add_arguments(p, ConvertOptions, only=("opset", "verify_batch_sizes", "seed"))
    add_reuse_arguments(p, "rows of the CSV")
    args = p.parse_args(argv)
    refuse_committed(args.output, "--output")

    from ..matrix import run_matrix

    result = run_matrix(from_args(MatrixSettings, args, output_csv=args.output, reuse=args.reuse,
                                  options=from_args(ConvertOptions, args)))
    counts = result.counts()
    print(f"{len(result.rows)} rows ({result.new} new, {result.resumed} resumed): "
          + ", ".join(f"{n} {s}" for s, n in counts.items()))
    print(f"wrote {result.csv_path}, {result.markdown_path}" + (f", {result.run_json_path}" if result.run_json_path else ""))
    return 0


if __name__ == "__main__":
    cli.run(main)
