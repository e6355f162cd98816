"""Re-cut the user's batches into batches of the asked size, grouping samples of one shape.

Samples of different shapes (token ids of different lengths) cannot share a batch without padding, and padding
changes a model's answer unless its own mask covers it. So a batch holds samples whose every input and label has
the same per-sample shape: no padding, every answer exact. A shape seen once goes out alone once the samples
held for grouping pass a bound, so memory stays bounded whatever the data.
"""
from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np

Batch = tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]  # ids, inputs, labels (as data.user)
HELD_BATCHES = 4  # samples held for grouping: this many batches' worth (at least MIN_HELD)
MIN_HELD = 64

ShapeKey = tuple[tuple[str, tuple[int, ...]], ...]


def shape_key(batch: Batch) -> ShapeKey:
    """The per-sample shapes of a batch's inputs and labels: samples with one key can share a batch."""
    return tuple((f"{section}:{name}", tuple(arr.shape[1:]))
                 for section, tensors in (("x", batch[1]), ("y", batch[2])) for name, arr in sorted(tensors.items()))


def _take(batch: Batch, start: int, stop: int | None = None) -> Batch:
    cut = slice(start, stop)
    return batch[0][cut], {k: v[cut] for k, v in batch[1].items()}, {k: v[cut] for k, v in batch[2].items()}


def _join(parts: list[Batch]) -> Batch:
    if len(parts) == 1:
        return parts[0]
    return (np.concatenate([p[0] for p in parts]),
            {k: np.concatenate([p[1][k] for p in parts]) for k in parts[0][1]},
            {k: np.concatenate([p[2][k] for p in parts]) for k in parts[0][2]})


class _Bucket:
    """Samples of one shape waiting to fill a batch."""

    def __init__(self) -> None:
        self.parts: list[Batch] = []
        self.held = 0

    def add(self, batch: Batch) -> None:
        self.parts.append(batch)
        self.held += len(batch[0])

    def cut(self, n: int) -> Batch:
        whole = _join(self.parts)
        out, rest = _take(whole, 0, n), _take(whole, n)
        self.parts = [rest] if len(rest[0]) else []
        self.held = len(rest[0])
        return out


def rebatch(batches: Iterable[Batch], batch_size: int, limit: int | None) -> Iterator[Batch]:
    """Batches of `batch_size` samples of one shape (a shape's last batch may be smaller), at most `limit`
    samples in all. Samples of one shape keep their order; shapes come out in the order they fill up. Every
    batch must carry the same label names (the caller checks)."""
    buckets: dict[ShapeKey, _Bucket] = {}
    given = 0
    max_held = max(MIN_HELD, HELD_BATCHES * batch_size)
    for batch in batches:
        if limit is not None:
            room = limit - given - sum(b.held for b in buckets.values())
            if room <= 0:
                break
            if len(batch[0]) > room:
                batch = _take(batch, 0, room)
        bucket = buckets.setdefault(shape_key(batch), _Bucket())
        bucket.add(batch)
        while bucket.held >= batch_size:
            out = bucket.cut(batch_size)
            given += len(out[0])
            yield out
        while sum(b.held for b in buckets.values()) > max_held:  # the oldest shape goes out as it is
            oldest = next(b for b in buckets.values() if b.held)
            out = oldest.cut(oldest.held)
            given += len(out[0])
            yield out
    for bucket in buckets.values():
        if bucket.held:
            yield bucket.cut(bucket.held)
