"""Convert a model (a zoo name, timm:<arch>, your model.py + checkpoint, or an ONNX/TorchScript file made elsewhere)
to TorchScript (trace/script), ONNX or TensorRT, verify it against its source and record its provenance."""
import argparse
import sys
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.config import add_arguments, from_args  # noqa: E402
from deployment_toolkit.export.convert import ConvertOptions  # noqa: E402
from deployment_toolkit.data.samples import VERIFY_SAMPLES  # noqa: E402
from deployment_toolkit.data.user import add_data_arguments  # noqa: E402
from deployment_toolkit.sources.cli import add_source_arguments  # noqa: E402
from deployment_toolkit.spec import FORMATS  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    p = cli.parser(__doc__, """
        deployment-toolkit convert --model resnet50 --preset full --output-type onnx \\
            --output-path workspace/resnet50/onnx --onnx-opset 17 --max-batch-size 8
        deployment-toolkit convert --input-path examples/my_model/model.py --input-type pyt \\
            --model-arg width=32 --checkpoint my_model.safetensors --output-type onnx --output-path workspace/my/onnx
    """)
    add_source_arguments(p)  # --manifest DIR: convert what an earlier artifact was made from into another format
    p.add_argument("--output-type", required=True, choices=FORMATS, help="artifact format")
    p.add_argument("--output-path", required=True, help="directory for the artifact and manifest.json")
    add_arguments(p, ConvertOptions)  # --preset, --onnx-opset, --precision, ... (export/convert.py)
    d = p.add_argument_group("real samples for the verification (besides random inputs)")
    d.add_argument("--data-dir", default=None, metavar="DIR",
                   help="a folder of .npy/.npz samples (layout: deployment_toolkit/data/user.py), or the data_dir "
                        "given to --dataloader")
    add_data_arguments(d)
    d.add_argument("--verify-samples", type=int, default=VERIFY_SAMPLES,
                   help="real samples compared at most (default %(default)s)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    from deployment_toolkit import api
    from deployment_toolkit.data.infer import with_data_inputs
    from deployment_toolkit.export import FormatUnavailable, VerificationError
    from deployment_toolkit.sources import resolve
    from deployment_toolkit.sources.cli import source_from_args

    from deployment_toolkit.data.samples import DataSpec

    verify_data = DataSpec.from_args(args).verification_batches(args.precision, args.verify_samples,
                                                                min(args.verify_batch_sizes or (1,)))
    opts = from_args(ConvertOptions, args, verify_data=verify_data)
    source = with_data_inputs(source_from_args(args, args.preset, args.max_batch_size), args, args.precision)
    resolved = resolve(source)
    print(f"converting {resolved.name} ({resolved.source.kind}, {args.preset}) to {args.output_type} ...", flush=True)
    try:
        manifest = api.convert(resolved, args.output_type, args.output_path, opts)  # dt.convert, the one door
    except FormatUnavailable as err:
        print(f"skipped: {err}", file=sys.stderr)
        return 3
    except VerificationError as err:
        print(f"FAILED: {err}\n(manifest with the measured errors: {Path(args.output_path) / 'manifest.json'})",
              file=sys.stderr)
        return 1
    _say_written(args, manifest)
    return 0


def _say_written(args, manifest) -> None:
    """What was written and how: the exporters that did not make it, the artifact, its outputs where they are not
    the model's plain ones, and what the verification compared (sizes, real samples) and found."""
    v = manifest.verification
    attempts = manifest.export_options.get("attempts") or []
    for a in attempts[:-1]:  # the exporters that did not make it, before the one that did
        print(f"  tried {a['exporter']}: {a['outcome']} ({a['seconds']:.1f} s) - {a['error']}")
    how = f" with {attempts[-1]['exporter']}" if attempts else ""
    print(f"wrote {Path(args.output_path) / manifest.artifact}{how} in {manifest.export_options['export_seconds']:.1f} s")
    if any(p != [i] and p for i, p in enumerate(manifest.output_paths.values())) or len(manifest.outputs) > 1:
        print("outputs: " + ", ".join(f"{t.name} {list(t.shape)} {t.dtype}" for t in manifest.outputs))
    if v:
        agree = ", ".join(f"{k}={val:.4f}" for k, val in v["agreement"].items())
        print(f"verified at batch sizes {v['batch_sizes']}: max abs err {v['max_abs_err']:.3g}, "
              f"max rel err {v['max_rel_err']:.3g}, {agree} -> {'OK' if v['passed'] else 'FAILED'}")
        shapes = v.get("input_shapes") or []
        if len(shapes) > 1:  # dynamic axes were also checked at a second size
            print("input shapes compared: " + "; ".join(
                ", ".join(f"{name} {dims}" for name, dims in s.items()) for s in shapes))
        if v.get("samples_checked"):
            print(f"also compared on {v['samples_checked']} real sample(s) from {args.dataloader or args.data_dir}")
        for item in v.get("unchecked_shapes") or []:
            print(f"not compared at {item['input_shapes']}: {item['reason']}")


if __name__ == "__main__":
    cli.run(main)
