#!/usr/bin/env python3
"""Convert a registered model to TorchScript (trace/script), ONNX or TensorRT and verify it against the framework."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import deployment_toolkit  # noqa: E402,F401  (first: hides a module-name clash before torch loads)
from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.spec import FORMATS  # noqa: E402


def main() -> int:
    p = cli.parser(__doc__, """
        python triton/convert_model.py --model resnet50 --preset full --output-type onnx \\
            --output-path workspace/resnet50/onnx --onnx-opset 17 --max-batch-size 8
    """)
    p.add_argument("--model", required=True, help="registered model name (python -m deployment_toolkit models)")
    p.add_argument("--preset", default="small", help="small (CI size) or full (benchmark size)")
    p.add_argument("--output-type", required=True, choices=FORMATS, help="artifact format")
    p.add_argument("--output-path", required=True, help="directory for the artifact and manifest.json")
    p.add_argument("--onnx-opset", type=int, default=17)
    p.add_argument("--onnx-optimized", type=int, choices=(0, 1), default=0, help="1: simplify the ONNX graph (onnxslim)")
    p.add_argument("--max-batch-size", type=int, default=None, help="default: the preset's")
    p.add_argument("--precision", choices=("fp32", "fp16"), default="fp32")
    p.add_argument("--max-workspace-size", type=int, default=1 << 30, help="TensorRT workspace bytes")
    p.add_argument("--trt-min-batch", type=int, default=1)
    p.add_argument("--trt-opt-batch", type=int, default=None, help="default: max batch size")
    p.add_argument("--verify-batch-sizes", type=cli.int_list, default=(1, 2))
    p.add_argument("--no-verify", action="store_true", help="skip the framework comparison")
    p.add_argument("--verify-device", default="cpu",
                   help="cpu or cuda:N: where the framework and the artifact run for the comparison (default cpu)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    from deployment_toolkit.export import ConvertOptions, FormatUnavailable, VerificationError, convert

    opts = ConvertOptions(
        preset=args.preset, opset=args.onnx_opset, simplify=bool(args.onnx_optimized), precision=args.precision,
        max_batch_size=args.max_batch_size, trt_min_batch=args.trt_min_batch, trt_opt_batch=args.trt_opt_batch,
        trt_workspace_bytes=args.max_workspace_size, verify=not args.no_verify,
        verify_batch_sizes=args.verify_batch_sizes, verify_device=args.verify_device, seed=args.seed,
    )
    print(f"converting {args.model} ({args.preset}) to {args.output_type} ...", flush=True)
    try:
        manifest = convert(args.model, args.output_type, args.output_path, opts)
    except FormatUnavailable as err:
        print(f"skipped: {err}", file=sys.stderr)
        return 3
    except VerificationError as err:
        print(f"FAILED: {err}\n(manifest with the measured errors: {Path(args.output_path) / 'manifest.json'})",
              file=sys.stderr)
        return 1
    v = manifest.verification
    print(f"wrote {Path(args.output_path) / manifest.artifact} in {manifest.export_options['export_seconds']:.1f} s")
    if v:
        agree = ", ".join(f"{k}={val:.4f}" for k, val in v["agreement"].items())
        print(f"verified at batch sizes {v['batch_sizes']}: max abs err {v['max_abs_err']:.3g}, "
              f"max rel err {v['max_rel_err']:.3g}, {agree} -> {'OK' if v['passed'] else 'FAILED'}")
        shapes = v.get("input_shapes") or []
        if len(shapes) > 1:  # dynamic axes were also checked at a second size
            print("input shapes compared: " + "; ".join(
                ", ".join(f"{name} {dims}" for name, dims in s.items()) for s in shapes))
        for item in v.get("unchecked_shapes") or []:
            print(f"not compared at {item['input_shapes']}: {item['reason']}")
    return 0


if __name__ == "__main__":
    cli.run(main)
