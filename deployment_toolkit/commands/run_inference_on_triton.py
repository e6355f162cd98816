"""Send a data set through a model served by Triton and dump outputs (and ids, labels, inputs) as npz
shards that calculate_metrics.py compares with a framework dump or with labels."""
from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.config import add_arguments, from_args  # noqa: E402
from deployment_toolkit.data.user import add_data_arguments  # noqa: E402
from deployment_toolkit.inference import TritonDumpSettings  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(__doc__, """
        deployment-toolkit infer --server-url 127.0.0.1:8001 --model-name resnet50 \\
            --manifest workspace/resnet50/onnx/manifest.json --data-dir synthetic --num-samples 32 \\
            --batch-size 8 --output-dir workspace/resnet50/dump_triton --dump-labels
        # your data, the DLE way (labels from the dataloader's y_real):
        deployment-toolkit infer --model-name my_model --manifest workspace/my_model/manifest.json \
            --dataloader examples/my_model/dataloader.py --data-dir examples/my_model/data --batch-size 4 \
            --output-dir workspace/my_model/dump_triton --dump-labels
    """)
    p.add_argument("--server-url", default="127.0.0.1:8001")
    p.add_argument("--model-name", required=True)
    p.add_argument("--data-dir", default="synthetic",
                   help="'synthetic', a folder of .npy/.npz samples (layout: deployment_toolkit/data/user.py), or "
                        "the data_dir given to --dataloader")
    add_data_arguments(p)
    p.add_argument("--num-samples", type=int, default=None,
                   help="samples to run: of synthetic data (default 16) or at most this many of your data (default all)")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--seed", type=int, default=0)
    add_arguments(p, TritonDumpSettings)  # --batch-size, --precision, --dump-labels, --protocol, --in-flight, ...
    args = p.parse_args(argv)

    from deployment_toolkit.data.samples import DataSpec
    from deployment_toolkit.inference import triton_dump

    dump = triton_dump(args.server_url, args.model_name, args.output_dir, DataSpec.from_args(args),
                       from_args(TritonDumpSettings, args))
    print(f"dumped {dump.samples} samples to {dump.path}")
    return 0


if __name__ == "__main__":
    cli.run(main)
