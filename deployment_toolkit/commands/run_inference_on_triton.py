"""Send a data set through a model served by Triton and dump outputs (and ids, labels, inputs) as npz
shards that calculate_metrics.py compares with a framework dump or with labels."""
from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.data.user import add_data_arguments  # noqa: E402


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
    p.add_argument("--protocol", choices=("grpc", "http"), default="grpc")
    p.add_argument("--model-name", required=True)
    p.add_argument("--model-version", default="")
    p.add_argument("--manifest", default=None, help="manifest.json of the served artifact (default: ask the server)")
    p.add_argument("--data-dir", default="synthetic",
                   help="'synthetic', a folder of .npy/.npz samples (layout: deployment_toolkit/data/user.py), or "
                        "the data_dir given to --dataloader")
    add_data_arguments(p)
    p.add_argument("--num-samples", type=int, default=None,
                   help="samples to run: of synthetic data (default 16) or at most this many of your data (default all)")
    p.add_argument("--precision", default=None, help="given to --dataloader (default: the manifest's, else fp32)")
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--in-flight", type=int, default=2, help="requests outstanding at once")
    p.add_argument("--shared-memory", choices=("none", "system"), default="none")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--dump-labels", action="store_true")
    p.add_argument("--dump-inputs", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    from deployment_toolkit.data.user import parse_key_values
    from deployment_toolkit.inference import DataSpec, triton_dump

    data = DataSpec(args.data_dir, args.dataloader, parse_key_values(args.dataloader_arg), args.num_samples, args.seed)
    dump = triton_dump(args.server_url, args.model_name, args.output_dir, data, manifest=args.manifest,
                       protocol=args.protocol, model_version=args.model_version, batch_size=args.batch_size,
                       in_flight=args.in_flight, shared_memory=args.shared_memory, precision=args.precision,
                       dump_labels=args.dump_labels, dump_inputs=args.dump_inputs)
    print(f"dumped {dump.samples} samples to {dump.path}")
    return 0


if __name__ == "__main__":
    cli.run(main)
