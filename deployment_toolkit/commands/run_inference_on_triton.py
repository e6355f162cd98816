"""Send a data set through a model served by Triton and dump outputs (and ids, labels, inputs) as npz
shards that calculate_metrics.py compares with a framework dump or with labels."""
import math
import sys
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.errors import UserInputError  # noqa: E402
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

    from deployment_toolkit.data.batches import make_source
    from deployment_toolkit.client import OutputRequest, TritonClient, infer_many
    from deployment_toolkit.data.predict import write_dump
    from deployment_toolkit.data.user import parse_key_values
    from deployment_toolkit.spec import Manifest, ModelSignature

    with TritonClient(args.server_url, args.protocol) as client:
        client.require_ready(args.model_name, args.model_version)
        inputs, outputs, max_batch = client.signature(args.model_name, args.model_version)
    meta = {"model": args.model_name, "source": "triton", "extra": {"server_url": args.server_url,
                                                                     "protocol": args.protocol}}
    if args.manifest:
        manifest = Manifest.load(args.manifest)
        signature = manifest.signature
        meta.update(task=manifest.task, model=manifest.model)
    else:
        signature = ModelSignature(tuple(inputs), tuple(outputs))
    if max_batch and args.batch_size > max_batch:
        raise UserInputError(f"--batch-size {args.batch_size} exceeds the model's max_batch_size {max_batch}")
    precision = args.precision or (manifest.precision if args.manifest else "fp32")
    source = make_source(args.data_dir, signature, args.num_samples or 16, args.seed, dataloader=args.dataloader,
                         dataloader_args=parse_key_values(args.dataloader_arg), precision=precision,
                         limit=args.num_samples)
    if args.dataloader or args.data_dir != "synthetic":
        meta["extra"]["data"] = source.describe()
    requested = [OutputRequest(t.name, t.nbytes()) for t in signature.outputs]
    batches = list(source.batches(args.batch_size))
    labels = {i: (ids, inp, lab) for i, (ids, inp, lab) in enumerate(batches)}
    results = infer_many(args.server_url, args.model_name, ((i, b[1]) for i, b in enumerate(batches)), requested,
                         protocol=args.protocol, shared_memory=args.shared_memory, in_flight=args.in_flight,
                         version=args.model_version)
    rows = ((labels[i][0], labels[i][1], labels[i][2], out) for i, out in results)
    out = write_dump(rows, args.output_dir, meta, dump_inputs=args.dump_inputs, dump_labels=args.dump_labels,
                     total=math.ceil(sum(len(b[0]) for b in batches) / args.batch_size))
    print(f"dumped {sum(len(b[0]) for b in batches)} samples to {out}")
    return 0


if __name__ == "__main__":
    cli.run(main)
