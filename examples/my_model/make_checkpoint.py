#!/usr/bin/env python3
"""Train examples/my_model/model.py briefly on synthetic images and save the weights as safetensors.

The task: which quadrant of a noisy 32x32 image holds a bright square. A few hundred steps on the CPU
reach high accuracy, so a deployed copy has real (not random) weights to agree with.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch



def _load_model_py():
    """model.py beside this file, loaded by path (a module named `model` may already be imported)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("my_model_example", Path(__file__).resolve().parent / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_model_py = _load_model_py()
IMAGE_SIZE, NUM_CLASSES, get_model = _model_py.IMAGE_SIZE, _model_py.NUM_CLASSES, _model_py.get_model


def synthetic_batch(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Images with a bright 8x8 square in one quadrant (the label) on noise."""
    x = rng.normal(0.0, 0.3, size=(n, 3, IMAGE_SIZE, IMAGE_SIZE)).astype(np.float32)
    y = rng.integers(0, NUM_CLASSES, size=n)
    half = IMAGE_SIZE // 2
    for i, q in enumerate(y):
        r0 = (q // 2) * half + rng.integers(0, half - 8)
        c0 = (q % 2) * half + rng.integers(0, half - 8)
        x[i, :, r0:r0 + 8, c0:c0 + 8] += 1.5
    return x, y.astype(np.int64)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="example:\n  python examples/my_model/make_checkpoint.py "
                                       "--output workspace/my_model/weights.safetensors --steps 200")
    p.add_argument("--output", required=True, help="the .safetensors file to write")
    p.add_argument("--width", type=int, default=16, help="get_model's width (pass the same --model-arg width=...)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    from safetensors.torch import save_file

    torch.manual_seed(args.seed)
    torch.set_num_threads(2)
    rng = np.random.default_rng(args.seed)
    model = get_model(width=args.width)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()
    for step in range(args.steps):
        x, y = synthetic_batch(32, rng)
        loss = loss_fn(model(torch.from_numpy(x)), torch.from_numpy(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    x, y = synthetic_batch(256, np.random.default_rng(args.seed + 1))
    with torch.no_grad():
        acc = float((model(torch.from_numpy(x)).argmax(1).numpy() == y).mean())
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp))
    tmp.replace(out)
    print(f"wrote {out} after {args.steps} steps (final loss {loss.item():.3f}, held-out accuracy {acc:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
