"""Train a registered segmentation model (default: unet2d, small preset) on an npz folder within a time
budget, report Dice on a held-out folder, and export the trained model to ONNX verified against PyTorch."""
import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from deployment_toolkit import cli  # noqa: E402

if TYPE_CHECKING:  # pragma: no cover
    from deployment_toolkit.train import TrainConfig, TrainedExport

# Idle OpenMP threads sleep instead of spinning: on a busy 2-core host spinning made a training step 3-10x
# slower (measured). Read once when torch loads, so it is set before the first torch import.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _parser() -> argparse.ArgumentParser:
    p = cli.parser(__doc__, """
        python -m deployment_toolkit.data.shapes --output-dir workspace/shapes/train --num-samples 3000 --seed 0
        python -m deployment_toolkit.data.shapes --output-dir workspace/shapes/heldout --num-samples 256 --seed 1
        deployment-toolkit train --train-dir workspace/shapes/train \\
            --heldout-dir workspace/shapes/heldout --output-dir workspace/shapes/model \\
            --export-dir workspace/shapes/onnx --max-seconds 150
    """)
    from deployment_toolkit.train import TrainConfig, TrainedExport

    # the defaults are TrainConfig's and TrainedExport's, written once there (train may not import config, so
    # these flags are declared here, not built from the fields)
    p.add_argument("--train-dir", required=True, type=Path, help="npz folder with input__0, labels, ids")
    p.add_argument("--heldout-dir", type=Path, help="npz folder scored after training (Dice vs labels)")
    p.add_argument("--output-dir", required=True, type=Path, help="where weights.safetensors and training.json go")
    p.add_argument("--export-dir", type=Path, help="also write model.onnx + manifest.json (+ a copy of the weights)")
    p.add_argument("--model", default=TrainConfig.model, help="registered segmentation model")
    p.add_argument("--preset", default=TrainConfig.preset)
    p.add_argument("--batch-size", type=int, default=TrainConfig.batch_size)
    p.add_argument("--lr", type=float, default=TrainConfig.lr,
                   help="Adam learning rate, cosine-annealed over the budget")
    p.add_argument("--max-seconds", type=float, default=TrainConfig.max_seconds, help="training time budget")
    p.add_argument("--max-steps", type=int, default=TrainConfig.max_steps)
    p.add_argument("--seed", type=int, default=TrainConfig.seed)
    p.add_argument("--threads", type=int, default=TrainConfig.threads, help="torch intra-op threads")
    p.add_argument("--no-augment", action="store_true", help="no random flips/transposes")
    p.add_argument("--onnx-opset", type=int, default=TrainedExport.opset)
    p.add_argument("--max-batch-size", type=int, default=TrainedExport.max_batch_size,
                   help="of the export (default: the preset's)")
    p.add_argument("--no-progress", action="store_true")
    return p


def settings_from_args(args: argparse.Namespace) -> "tuple[TrainConfig, TrainedExport]":
    """The training run and the export the parsed flags ask for."""
    from deployment_toolkit.train import TrainConfig, TrainedExport

    cfg = TrainConfig(model=args.model, preset=args.preset, batch_size=args.batch_size, lr=args.lr,
                      max_seconds=args.max_seconds, max_steps=args.max_steps, seed=args.seed,
                      threads=args.threads, augment=not args.no_augment, progress=not args.no_progress)
    return cfg, TrainedExport(opset=args.onnx_opset, max_batch_size=args.max_batch_size)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    from deployment_toolkit import train as tr
    from deployment_toolkit.export import VerificationError

    cfg, export = settings_from_args(args)
    try:
        tr.train_segmentation(args.train_dir, args.output_dir, cfg, args.heldout_dir, args.export_dir, export)
    except VerificationError as err:
        print(f"FAILED: {err}\n(manifest with the measured errors: {args.export_dir / 'manifest.json'})",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    cli.run(main)
