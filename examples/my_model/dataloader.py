#!/usr/bin/env python3
"""Your data, the way the toolkit takes it (the DLE form): `get_dataloader_fn(**kwargs)` returns a callable
yielding `(ids, x, y_real)` batches; x and y_real map tensor names to numpy arrays, batch axis first.

This one reads the files a camera pipeline might leave: `<id>.npz` holding `image` (H x W x 3, float32) and
`label` (the class index), and turns each image channels-first as the model wants. The toolkit checks every
batch against the model's signature (tensor names, shapes, dtypes) before sending anything.

    python examples/my_model/dataloader.py --write-samples workspace/my_model/data --num-samples 64
    python triton/run_inference_on_triton.py --model-name my_model --manifest workspace/my_model/onnx \\
        --dataloader examples/my_model/dataloader.py --data-dir workspace/my_model/data \\
        --batch-size 8 --output-dir workspace/my_model/dump_triton --dump-labels

Keyword arguments the toolkit offers (a dataloader takes the ones it names): data_dir, batch_size, precision,
input_names, input_shapes, input_dtypes, output_names, and any --dataloader-arg KEY=VALUE.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def get_dataloader_fn(*, data_dir: str, batch_size: int, precision: str = "fp32", input_names=("image",)):
    files = sorted(Path(data_dir).glob("*.npz"))
    if not files:
        raise FileNotFoundError(f"no .npz samples in {data_dir}: write some with --write-samples")
    dtype = np.float16 if precision == "fp16" else np.float32
    name = input_names[0]  # the model's input, whatever its file calls it

    def _dataloader_fn():
        for start in range(0, len(files), batch_size):
            chunk = files[start:start + batch_size]
            images, labels = [], []
            for path in chunk:
                with np.load(path) as sample:
                    images.append(np.transpose(sample["image"], (2, 0, 1)))  # H x W x C -> C x H x W
                    labels.append(int(sample["label"]))
            ids = [p.stem for p in chunk]
            yield ids, {name: np.stack(images).astype(dtype)}, {"labels": np.asarray(labels, dtype=np.int64)}

    return _dataloader_fn


def write_samples(folder: Path, num: int, size: int = 32, seed: int = 1) -> None:
    """Noisy images with a bright 8 x 8 square in one quadrant; the label is the quadrant (0..3, row-major)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    half = size // 2
    for i in range(num):
        quadrant = int(rng.integers(0, 4))
        image = rng.normal(0.0, 0.3, size=(size, size, 3)).astype(np.float32)
        r0 = (quadrant // 2) * half + int(rng.integers(0, half - 8))
        c0 = (quadrant % 2) * half + int(rng.integers(0, half - 8))
        image[r0:r0 + 8, c0:c0 + 8] += 1.5
        np.savez(folder / f"sample_{i:04d}.npz", image=image, label=np.int64(quadrant))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="Write example samples for this dataloader.",
                                epilog="example:\n  python examples/my_model/dataloader.py --write-samples "
                                       "workspace/my_model/data --num-samples 64",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--write-samples", required=True, type=Path, metavar="DIR")
    p.add_argument("--num-samples", type=int, default=64)
    p.add_argument("--size", type=int, default=32, help="image side (the model's input size)")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    write_samples(a.write_samples, a.num_samples, a.size, a.seed)
    print(f"wrote {a.num_samples} samples to {a.write_samples}")
    sys.exit(0)
