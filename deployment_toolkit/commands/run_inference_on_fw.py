"""Run the same data through the framework model (PyTorch eager) or a converted artifact in-process
(ONNX Runtime / TorchScript) and dump outputs in the same format as run_inference_on_triton.py."""
import sys
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.data.user import add_data_arguments  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(__doc__, """
        # the framework model the artifact came from (eager PyTorch, same random weights):
        deployment-toolkit infer-fw --model-path workspace/resnet50/onnx --runtime framework \\
            --data-dir synthetic --num-samples 32 --batch-size 8 --output-dir workspace/resnet50/dump_fw
    """)
    p.add_argument("--model-path", "--manifest", dest="model_path", required=True,
                   help="artifact folder written by convert_model.py: the framework model is rebuilt from its "
                        "manifest's source record (zoo name, timm arch, model.py + kwargs + checkpoint, source file)")
    p.add_argument("--runtime", choices=("framework", "artifact"), default="framework",
                   help="framework: eager PyTorch; artifact: the converted file with its runtime")
    p.add_argument("--device", default="cpu")
    p.add_argument("--data-dir", default="synthetic",
                   help="'synthetic', a folder of .npy/.npz samples (layout: deployment_toolkit/data/user.py), or "
                        "the data_dir given to --dataloader")
    add_data_arguments(p)
    p.add_argument("--num-samples", type=int, default=None,
                   help="samples to run: of synthetic data (default 16) or at most this many of your data (default all)")
    p.add_argument("--precision", default=None, help="given to --dataloader (default: the manifest's)")
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--output-dir", required=True)
    p.add_argument("--dump-labels", action="store_true")
    p.add_argument("--dump-inputs", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    from deployment_toolkit.data.batches import make_source
    from deployment_toolkit.data.predict import predict_batches, write_dump
    from deployment_toolkit.data.user import parse_key_values
    from deployment_toolkit.framework import framework_predictor

    predict, manifest, source_name = framework_predictor(args.model_path, args.runtime, args.device)
    source = make_source(args.data_dir, manifest.signature, args.num_samples or 16, args.seed,
                         dataloader=args.dataloader, dataloader_args=parse_key_values(args.dataloader_arg),
                         precision=args.precision or manifest.precision, limit=args.num_samples)
    meta = {"model": manifest.model, "task": manifest.task, "source": source_name,
            "extra": {"format": manifest.format, "preset": manifest.preset}}
    if args.dataloader or args.data_dir != "synthetic":
        meta["extra"]["data"] = source.describe()
    out = write_dump(predict_batches(source.batches(args.batch_size), predict), args.output_dir, meta,
                     dump_inputs=args.dump_inputs, dump_labels=args.dump_labels)
    print(f"dumped outputs of {source_name} to {out}")
    return 0


if __name__ == "__main__":
    cli.run(main)
