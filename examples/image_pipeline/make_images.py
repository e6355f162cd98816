#!/usr/bin/env python3
"""Write a few small images (JPEG and PNG, different sizes) for the image pipeline example: coloured shapes on a
background, drawn with PIL from a seed, so nothing is downloaded and every run writes the same files."""
from __future__ import annotations

import argparse
import random
from pathlib import Path

from PIL import Image, ImageDraw

SIZES = ((96, 80), (64, 64), (120, 90), (50, 70), (200, 150), (80, 80))


def draw(seed: int, size: tuple[int, int]) -> Image.Image:
    rng = random.Random(seed)
    image = Image.new("RGB", size, tuple(rng.randrange(256) for _ in range(3)))
    pen = ImageDraw.Draw(image)
    for _ in range(4):
        x0, y0 = rng.randrange(size[0] // 2), rng.randrange(size[1] // 2)
        box = (x0, y0, x0 + rng.randrange(8, size[0] // 2 + 8), y0 + rng.randrange(8, size[1] // 2 + 8))
        colour = tuple(rng.randrange(256) for _ in range(3))
        (pen.ellipse if rng.random() < 0.5 else pen.rectangle)(box, fill=colour)
    return image


def write_images(folder: Path, count: int = 6) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for i in range(count):
        path = folder / f"image_{i:02d}.{'jpg' if i % 2 == 0 else 'png'}"
        draw(i, SIZES[i % len(SIZES)]).save(path, **({"quality": 90} if path.suffix == ".jpg" else {}))
        written.append(path)
    return written


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--output", type=Path, default=Path("workspace/image_pipeline/images"), help="folder to write")
    p.add_argument("--count", type=int, default=6)
    args = p.parse_args()
    for path in write_images(args.output, args.count):
        print(path)


if __name__ == "__main__":
    main()
