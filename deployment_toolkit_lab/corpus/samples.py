"""The corpus's samples: what each architecture's user would hand over as a data folder, made with a seed.

Token ids of different lengths with their attention mask, normalised images, recordings of different durations,
log-mel features, whole requests of image-caption pairs; a maker takes (count, seed) and gives one dict of arrays
per sample, so the corpus writes them as a user's folder of .npz files.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

Sample = dict[str, np.ndarray]
SampleMaker = Callable[[int, int], list[Sample]]

LENGTHS = (12, 16, 20, 24)
VOCAB = 512
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def text(
    count: int, seed: int, *, vocab: int = VOCAB, pad_id: int = 0, mask: bool = True, token_types: bool = False
) -> list[Sample]:
    """Token ids whose length cycles through LENGTHS so the sequence axis is seen as dynamic; the attention mask
    is ones then right padding (at least half ones), and padded positions hold the pad id as a tokenizer writes."""
    out = []
    for index in range(count):
        rng = np.random.default_rng(seed + index)
        length = LENGTHS[index % len(LENGTHS)]
        real = int(rng.integers((length + 1) // 2, length, endpoint=True))
        ids = rng.integers(3, vocab, size=length, dtype=np.int64)
        ids[real:] = pad_id
        sample = {"input_ids": ids}
        if mask:
            sample["attention_mask"] = (np.arange(length) < real).astype(np.int64)
        if token_types:
            types = np.zeros(length, dtype=np.int64)
            types[int(rng.integers(1, real)) : real] = 1
            sample["token_type_ids"] = types
        out.append(sample)
    return out


def images(count: int, seed: int, *, shape: tuple[int, ...], name: str = "x", normalize: bool = True) -> list[Sample]:
    """Pixels in [0, 1], ImageNet-normalized unless the model normalizes them itself (torchvision detection);
    channels lead, so a video (3, T, H, W) is normalized the same way."""
    out = []
    for index in range(count):
        pixels = np.random.default_rng(seed + index).random(shape, dtype=np.float32)
        if normalize:
            stats = (3,) + (1,) * (len(shape) - 1)
            pixels = (pixels - IMAGENET_MEAN.reshape(stats)) / IMAGENET_STD.reshape(stats)
        out.append({name: pixels.astype(np.float32)})
    return out


def waveforms(count: int, seed: int, *, length: int | tuple[int, ...], name: str = "input_values") -> list[Sample]:
    """16 kHz tones plus noise, zero-mean and unit-variance as Wav2Vec2FeatureExtractor(do_normalize=True) gives;
    a tuple of lengths cycles, as recordings of different durations do."""
    lengths = length if isinstance(length, tuple) else (length,)
    out = []
    for index in range(count):
        size = lengths[index % len(lengths)]
        t = np.arange(size, dtype=np.float32) / 16_000
        rng = np.random.default_rng(seed + index)
        wave = sum(rng.uniform(0.1, 0.5) * np.sin(2 * np.pi * rng.uniform(100, 2000) * t) for _ in range(3))
        wave = wave + rng.normal(0, 0.01, size)
        out.append({name: ((wave - wave.mean()) / (wave.std() + 1e-7)).astype(np.float32)})
    return out


def log_mel(count: int, seed: int, *, bins: int, frames: int) -> list[Sample]:
    """Whisper-style log-mel features, which its extractor scales to roughly [-1, 1.5]."""
    out = []
    for index in range(count):
        features = np.random.default_rng(seed + index).normal(0, 0.4, (bins, frames)).clip(-1, 1.5)
        out.append({"input_features": features.astype(np.float32)})
    return out


def floats(count: int, seed: int, *, shapes: dict[str, tuple[int, ...]]) -> list[Sample]:
    """Standard-normal features, the scale a normalized input has."""
    out = []
    for index in range(count):
        rng = np.random.default_rng(seed + index)
        out.append({name: rng.standard_normal(shape, dtype=np.float32) for name, shape in shapes.items()})
    return out


def seq2seq(count: int, seed: int) -> list[Sample]:
    """Source token ids of different lengths with their mask, and a decoder prefix of 6 ids (teacher forcing)."""
    out = text(count, seed)
    for index, sample in enumerate(out):
        sample["decoder_input_ids"] = np.random.default_rng(seed + 1000 + index).integers(3, VOCAB, 6, dtype=np.int64)
    return out


def image_text_pairs(count: int, seed: int) -> list[Sample]:
    """Whole requests of 2 images and 2 captions (ids mark a batch), for a model that scores every image against
    every caption of its request."""
    out = []
    for index in range(count):
        rng = np.random.default_rng(seed + index)
        pixels = images(2, seed + 10 * index, shape=(3, 32, 32), name="pixel_values")
        out.append({"ids": np.array([f"r{index}a", f"r{index}b"]), "input_ids": rng.integers(3, VOCAB, (2, 8)),
                    "attention_mask": np.ones((2, 8), np.int64),
                    "pixel_values": np.stack([p["pixel_values"] for p in pixels])})
    return out


def masks(count: int, seed: int) -> list[Sample]:
    """uint8 padding masks of different lengths: ones, then zeros."""
    out = []
    for index in range(count):
        length = LENGTHS[index % len(LENGTHS)]
        real = int(np.random.default_rng(seed + index).integers(length // 2, length + 1))
        out.append({"mask": (np.arange(length) < real).astype(np.uint8)})
    return out


def sample_maker(maker: Callable[..., list[Sample]], **kwargs: Any) -> SampleMaker:
    """A picklable (count, seed) sample maker, so entries can cross process boundaries."""
    return functools.partial(maker, **kwargs)
