"""Samples of different shapes: token ids and waveforms of different lengths, a detector's boxes per image.

In memory a tensor whose samples share one shape is one array with the batch axis first, as everywhere else;
a tensor whose samples differ is a one-dimensional object array holding one array per sample (so indexing by
sample, `len`, and id alignment work the same on both). Code that needs one stacked array asks `stacked()`,
which says in one line which samples differ; code that can go sample by sample iterates the array.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from ..errors import UserError


class RaggedError(UserError, ValueError):
    """Samples of different shapes where one stacked array is needed, or of different ranks or dtypes."""


def is_ragged(arr: np.ndarray) -> bool:
    """True for the object array of per-sample arrays that `from_chunks` builds."""
    return arr.dtype == object and arr.ndim == 1 and arr.size > 0 and isinstance(arr[0], np.ndarray)


def from_chunks(chunks: Sequence[np.ndarray]) -> np.ndarray:
    """Batches (batch axis first) as one array: concatenated when their per-sample shapes agree, else ragged."""
    if not any(is_ragged(c) for c in chunks) and len({c.shape[1:] for c in chunks}) <= 1:
        return np.concatenate(chunks)
    return from_samples(row for chunk in chunks for row in chunk)


def from_samples(rows: Iterable[np.ndarray]) -> np.ndarray:
    """Per-sample arrays as a ragged (object) array; assigning element by element keeps numpy from broadcasting."""
    rows = list(rows)
    out = np.empty(len(rows), dtype=object)
    for i, row in enumerate(rows):
        out[i] = np.asarray(row)
    return out


def sample_shapes(arr: np.ndarray) -> list[tuple[int, ...]]:
    if is_ragged(arr):
        return [row.shape for row in arr]
    return [arr.shape[1:]] * arr.shape[0]


def differing(arr: np.ndarray, ids: Sequence | None = None) -> str:
    """'(6, 1000) for sample a, (8, 1000) for sample b': the first two shapes that differ, for messages."""
    shapes = sample_shapes(arr)
    first = shapes[0]
    other = next(i for i, s in enumerate(shapes) if s != first)
    name = (lambda i: repr(ids[i])) if ids is not None else str
    return f"{first} for sample {name(0)}, {shapes[other]} for sample {name(other)}"


def stacked(arr: np.ndarray, what: str, ids: Sequence | None = None, hint: str = "") -> np.ndarray:
    """`arr` as one array with the batch axis first; RaggedError naming two differing samples if it cannot be."""
    if not is_ragged(arr):
        return arr
    if len(set(sample_shapes(arr))) == 1:
        return np.stack(list(arr))
    raise RaggedError(f"{what}: samples differ in shape ({differing(arr, ids)}){'; ' + hint if hint else ''}")


def flat_pair(a: np.ndarray, b: np.ndarray, what: str = "output") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two tensors sample by sample as (a values, b values, sample starts): every sample flattened and laid end
    to end, so element-wise statistics cover ragged samples; RaggedError where one sample's shapes differ."""
    sa, sb = sample_shapes(a), sample_shapes(b)
    if len(sa) != len(sb):
        raise RaggedError(f"{what}: {len(sa)} samples vs {len(sb)} in the reference")
    bad = next((i for i, (x, y) in enumerate(zip(sa, sb)) if x != y), None)
    if bad is not None:
        raise RaggedError(f"{what}: sample {bad} has shape {sa[bad]}, {sb[bad]} in the reference")
    sizes = np.array([int(np.prod(s)) for s in sa], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    flat = [np.concatenate([np.ravel(r) for r in x]) if is_ragged(x) else np.ravel(x) for x in (a, b)]
    return flat[0], flat[1], starts


__all__ = ["RaggedError", "is_ragged", "from_chunks", "from_samples", "sample_shapes", "differing",
           "stacked", "flat_pair"]
