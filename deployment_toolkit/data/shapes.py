"""Synthetic 2D segmentation data with exactly known masks: find the discs among other shapes.

Why this task: an accuracy check of a deployed segmentation model needs labelled data, and a download
is not always possible (air-gapped CI, these machines). Each 1-channel image holds 1-2 discs (class 1)
and 1-3 distractors (rotated rectangles and triangles, labelled background 0) on a background with a
random level, a linear gradient and Gaussian noise. Shapes get contrasts from the same range whatever
their kind, so no intensity threshold separates the classes: the model has to learn shape. The task is
binary on purpose, so it fits the registry's `unet2d` (2-class logits) without a new model entry.

Determinism: sample i of `make_split(n, seed)` depends only on (seed, i), not on n, so a split can be
grown without changing its first samples. Shapes never overlap and lie fully inside the image, so a
mask pixel is 1 exactly where a disc was drawn.
"""
from __future__ import annotations

import argparse
import logging
import math
import sys
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from ..errors import UserInputError
from ..spec import atomic_write

log = logging.getLogger(__name__)

CLASSES = ("background", "circle")  # label values 0, 1; rectangles and triangles are background
SHAPE_KINDS = ("circle", "rectangle", "triangle")
INPUT_KEY = "input__0"  # the registry's image models name their input this way
LABEL_KEY = "labels"
IDS_KEY = "ids"
_SHARD_RE = re.compile(r"^shapes_\d{5}\.npz$")


@dataclass(frozen=True)
class ShapesConfig:
    """Ranges every sample draws from (uniform, inclusive of the ends where it matters)."""

    size: int = 64
    circles: tuple[int, int] = (1, 2)  # per image; at least one, so every sample has foreground
    distractors: tuple[int, int] = (1, 3)
    radius: tuple[float, float] = (6.0, 12.0)  # bounding radius of any shape, pixels
    contrast: tuple[float, float] = (0.3, 0.8)  # added to the background inside a shape
    background: tuple[float, float] = (0.0, 0.4)
    gradient: float = 0.3  # largest background change across the image
    noise: tuple[float, float] = (0.02, 0.10)  # Gaussian sigma, drawn per image

    def __post_init__(self) -> None:
        if self.size < 4 * self.radius[1] or self.radius[0] < 2:
            raise UserInputError(f"size {self.size} is too small for radii {self.radius}: use size >= 4 x max radius")
        if self.circles[0] < 1:
            raise UserInputError("every image needs at least one circle (Dice of an empty target is undefined)")


@dataclass(frozen=True)
class Shape:
    kind: str
    center: tuple[float, float]  # (row, col)
    radius: float  # bounding radius: the shape lies inside this circle


@dataclass
class Sample:
    image: np.ndarray  # (H, W) float32
    mask: np.ndarray  # (H, W) int64: 1 on discs, 0 elsewhere
    drawn: np.ndarray  # (H, W) bool: pixels covered by any shape (discs and distractors)
    shapes: list[Shape]


def _rasterize(kind: str, center: tuple[float, float], radius: float, rng: np.random.Generator,
               yy: np.ndarray, xx: np.ndarray) -> np.ndarray:
    """Boolean mask of one shape, tested at pixel centres."""
    dy, dx = yy - center[0], xx - center[1]
    if kind == "circle":
        return dy * dy + dx * dx <= radius * radius
    if kind == "rectangle":  # rotated, corners on the bounding circle
        theta = rng.uniform(0, math.pi)
        half_diag_angle = rng.uniform(math.pi / 8, 3 * math.pi / 8)  # aspect ratio from 2.4:1 to 1:2.4
        a, b = radius * math.cos(half_diag_angle), radius * math.sin(half_diag_angle)
        u = dy * math.cos(theta) + dx * math.sin(theta)
        v = -dy * math.sin(theta) + dx * math.cos(theta)
        return (np.abs(u) <= a) & (np.abs(v) <= b)
    if kind == "triangle":  # vertices on the bounding circle, jittered around equilateral
        angles = rng.uniform(0, 2 * math.pi) + np.array([0, 2, 4]) * math.pi / 3 + rng.uniform(-0.4, 0.4, 3)
        vy, vx = center[0] + radius * np.sin(angles), center[1] + radius * np.cos(angles)
        inside = np.ones_like(yy, dtype=bool)
        for i in range(3):  # counter-clockwise vertices: the point is left of every edge
            j = (i + 1) % 3
            cross = (vx[j] - vx[i]) * (yy - vy[i]) - (vy[j] - vy[i]) * (xx - vx[i])
            inside &= cross >= 0
        return inside
    raise UserInputError(f"unknown shape kind {kind!r}; choose one of {SHAPE_KINDS}")


def _place(rng: np.random.Generator, placed: list[Shape], radius: float, size: int,
           tries: int = 200) -> tuple[float, float] | None:
    """A centre keeping the shape inside the image and 2 px away from every placed shape, or None."""
    lo, hi = radius + 1.0, size - radius - 2.0
    for _ in range(tries):
        c = (rng.uniform(lo, hi), rng.uniform(lo, hi))
        if all(math.dist(c, s.center) >= radius + s.radius + 2.0 for s in placed):
            return c
    return None


def draw_sample(rng: np.random.Generator, config: ShapesConfig = ShapesConfig()) -> Sample:
    """One image, its mask and what was drawn where."""
    size = config.size
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    n_circles = int(rng.integers(config.circles[0], config.circles[1] + 1))
    n_other = int(rng.integers(config.distractors[0], config.distractors[1] + 1))
    kinds = ["circle"] * n_circles + list(rng.choice(["rectangle", "triangle"], size=n_other))

    angle = rng.uniform(0, 2 * math.pi)
    ramp = ((yy - size / 2) * math.sin(angle) + (xx - size / 2) * math.cos(angle)) / size
    image = rng.uniform(*config.background) + rng.uniform(0, config.gradient) * ramp
    mask = np.zeros((size, size), dtype=np.int64)
    drawn = np.zeros((size, size), dtype=bool)
    shapes: list[Shape] = []
    for kind in kinds:  # circles first: the first one always fits in an empty image
        radius = rng.uniform(*config.radius)
        center = _place(rng, shapes, radius, size)
        if center is None:
            continue  # a crowded image keeps fewer distractors
        pixels = _rasterize(kind, center, radius, rng, yy, xx)
        image = image + rng.uniform(*config.contrast) * pixels
        drawn |= pixels
        if kind == "circle":
            mask[pixels] = 1
        shapes.append(Shape(kind, center, radius))
    image = image + rng.normal(0.0, rng.uniform(*config.noise), size=image.shape)
    return Sample(image=image.astype(np.float32), mask=mask, drawn=drawn, shapes=shapes)


def make_split(n: int, seed: int, config: ShapesConfig = ShapesConfig()) -> tuple[np.ndarray, np.ndarray]:
    """(images float32 (N, 1, H, W), masks int64 (N, H, W)); sample i depends only on (seed, i)."""
    if n < 1:
        raise UserInputError(f"a split needs at least one sample, got n={n}")
    images = np.empty((n, 1, config.size, config.size), dtype=np.float32)
    masks = np.empty((n, config.size, config.size), dtype=np.int64)
    for i, child in enumerate(np.random.SeedSequence(seed).spawn(n)):
        sample = draw_sample(np.random.default_rng(child), config)
        images[i, 0], masks[i] = sample.image, sample.mask
    return images, masks


def write_npz_folder(folder: str | Path, images: np.ndarray, masks: np.ndarray, shard_size: int = 256,
                     first_id: int = 0) -> list[Path]:
    """Write shards `shapes_00000.npz` ... with `input__0`, `labels` and int64 `ids` (data.batches.FolderSource).

    Old shards of ours in `folder` are replaced; any other .npy/.npz file there is refused, because
    FolderSource would read it into the same data set.
    """
    if images.ndim != 4 or masks.ndim != 3 or len(images) != len(masks) or images.shape[2:] != masks.shape[1:]:
        raise UserInputError(f"expected images (N, C, H, W) and masks (N, H, W) of one size, got {images.shape} "
                         f"and {masks.shape}")
    if shard_size < 1:
        raise UserInputError(f"shard_size must be >= 1, got {shard_size}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    foreign = [p.name for p in folder.iterdir() if p.suffix in (".npy", ".npz") and not _SHARD_RE.match(p.name)]
    if foreign:
        raise FileExistsError(f"{folder} holds other data files ({', '.join(sorted(foreign)[:3])}); "
                              "they would be read as part of this data set: choose an empty folder")
    for old in folder.iterdir():
        if _SHARD_RE.match(old.name):
            old.unlink()
    ids = np.arange(first_id, first_id + len(images), dtype=np.int64)
    paths = []
    for k, start in enumerate(range(0, len(images), shard_size)):
        sl = slice(start, start + shard_size)
        path = folder / f"shapes_{k:05d}.npz"
        _atomic_savez(path, {INPUT_KEY: images[sl].astype(np.float32), LABEL_KEY: masks[sl].astype(np.int64),
                             IDS_KEY: ids[sl]})
        paths.append(path)
    return paths


def _atomic_savez(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Through spec.atomic_write: an interrupted run never leaves a truncated shard that reads as data."""
    atomic_write(path, lambda fh: np.savez_compressed(fh, **arrays))


def generate(output_dir: str | Path, num_samples: int, seed: int, size: int = ShapesConfig.size,
             shard_size: int = 256) -> list[Path]:
    """Write a seeded split as .npz shards; the shards' paths."""
    images, masks = make_split(num_samples, seed, ShapesConfig(size=size))
    paths = write_npz_folder(output_dir, images, masks, shard_size)
    log.info(f"wrote {num_samples} samples ({size}x{size}, seed {seed}) in {len(paths)} shard(s) to {output_dir}; "
             f"disc pixels: {masks.mean():.1%}")
    return paths


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description="Write a seeded split of the synthetic shapes data set as .npz shards.",
        epilog="example:\n  python -m deployment_toolkit.data.shapes --output-dir workspace/shapes/heldout "
               "--num-samples 256 --seed 1",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--output-dir", required=True, type=Path)
    p.add_argument("--num-samples", type=int, default=256)
    p.add_argument("--seed", type=int, default=0, help="use different seeds for training and held-out splits")
    p.add_argument("--size", type=int, default=ShapesConfig.size, help="image side in pixels (multiple of 16)")
    p.add_argument("--shard-size", type=int, default=256)
    args = p.parse_args(argv)
    generate(args.output_dir, args.num_samples, args.seed, args.size, args.shard_size)
    return 0


if __name__ == "__main__":
    logging.basicConfig(format="%(message)s", level=logging.INFO, stream=sys.stdout)  # the "wrote ..." line
    raise SystemExit(main())
