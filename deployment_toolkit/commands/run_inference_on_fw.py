"""Run the same data through the framework model (PyTorch eager) or a converted artifact in-process
(ONNX Runtime / TorchScript) and dump outputs in the same format as run_inference_on_triton.py."""

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.config import add_arguments, from_args  # noqa: E402
from deployment_toolkit.data.user import add_data_arguments  # noqa: E402
from deployment_toolkit.inference import FrameworkDumpSettings  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(__doc__, """
        # the framework model the artifact came from (eager PyTorch, same random weights):
        deployment-toolkit infer-fw --model-path workspace/resnet50/onnx --runtime framework \\
            --data-dir synthetic --num-samples 32 --batch-size 8 --output-dir workspace/resnet50/dump_fw
    """)
    p.add_argument("--model-path", "--manifest", dest="model_path", required=True,
                   help="artifact folder written by convert_model.py: the framework model is rebuilt from its "
                        "manifest's source record (zoo name, timm arch, model.py + kwargs + checkpoint, source file)")
    p.add_argument("--data-dir", default="synthetic",
                   help="'synthetic', a folder of .npy/.npz samples (layout: deployment_toolkit/data/user.py), or "
                        "the data_dir given to --dataloader")
    add_data_arguments(p)
    p.add_argument("--num-samples", type=int, default=None,
                   help="samples to run: of synthetic data (default 16) or at most this many of your data (default all)")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--seed", type=int, default=0)
    add_arguments(p, FrameworkDumpSettings)  # --runtime, --device, --batch-size, --precision, --dump-labels, ...
    args = p.parse_args(argv)

    from deployment_toolkit.data.samples import DataSpec
    from deployment_toolkit.inference import framework_dump

    dump = framework_dump(args.model_path, args.output_dir, DataSpec.from_args(args),
                          from_args(FrameworkDumpSettings, args))
    print(f"dumped outputs of {dump.source} to {dump.path}")
    return 0


if __name__ == "__main__":
    cli.run(main)
