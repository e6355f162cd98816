"""Per-sample data for a model served one whole batch per request (export.coupling: CLIP's [B, B] logits couple the
samples of a batch, so it is served with max_batch_size 0 and its inputs' leading axis is the request's samples).

The user's data is per sample all the same (one image and its caption per file): a file whose arrays are one rank
below the whole-request inputs is one sample, and the samples are stacked into requests of up to `request_samples`
samples of one shape (rebatch: no padding, every answer exact). Each request is one row of the dumps and one entry
of perf_analyzer's input data, its id the samples' ids joined with '+'. Its capacity counts samples: a request of
k samples is k inferences (samples_per_request), as perf_analyzer counts a client batch of k.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from ..spec import ModelSignature, TensorSpec
from .rebatch import Batch, rebatch

DEFAULT_REQUEST_SAMPLES = 8  # samples stacked into one request, unless the data spec says otherwise
JOIN = "+"


def sample_signature(signature: ModelSignature) -> ModelSignature | None:
    """The per-sample form of a whole-request signature (every input's leading axis varying: the samples), None
    for any other."""
    if not signature.inputs or not all(t.shape[:1] == (-1,) for t in signature.inputs):
        return None
    inputs = tuple(TensorSpec(t.name, t.shape[1:], t.dtype,
                              example_shape=t.concrete_shape[1:] if -1 in t.shape[1:] else None,
                              batch_uniform=t.batch_uniform, value_range=t.value_range) for t in signature.inputs)
    return ModelSignature(inputs, signature.outputs)


def _first_file(folder: Path) -> Path | None:
    files = sorted(p for p in folder.iterdir() if p.suffix in (".npy", ".npz") and not p.name.startswith(".")) \
        if folder.is_dir() else []
    return next((p for p in files if not p.name.endswith("_y.npy")), None)


def holds_samples(folder: str | Path, signature: ModelSignature) -> bool:
    """Whether the folder's files hold one sample each of a whole-request signature (most inputs one rank below
    it), judged on its first file; a folder of whole requests, or any other signature: False."""
    per_sample = sample_signature(signature)
    first = _first_file(Path(folder))
    if per_sample is None or first is None:
        return False
    try:
        if first.suffix == ".npy":
            arrays = {per_sample.inputs[0].name: np.load(first, mmap_mode="r", allow_pickle=False)}
        else:
            with np.load(first, allow_pickle=False) as npz:
                arrays = {t.name: npz[t.name] for t in per_sample.inputs if t.name in npz.files}
    except (OSError, ValueError):
        return False  # read_folder says what is wrong with it
    votes = [arrays[t.name].ndim == len(t.shape) for t in per_sample.inputs if t.name in arrays]
    return bool(votes) and 2 * sum(votes) >= len(votes)


def stacked_requests(samples: Iterable[Batch], request_samples: int, limit: int | None = None) -> Iterator[Batch]:
    """Batches of samples (validated against the per-sample signature) as whole requests: up to `request_samples`
    samples of one shape stacked, the request's id their ids joined; at most `limit` samples in all."""
    for ids, x, y in rebatch(samples, request_samples, limit):
        yield np.array([JOIN.join(str(i) for i in ids.tolist())]), x, y


def samples_per_request(manifest: Any, input_data: str | Path | None = None) -> float:
    """Inferences per request of a model served one whole batch per request (its manifest's `batch_coupled`): the
    mean leading size of the first input over perf_analyzer's `--input-data` entries (the stacked samples), else its
    example's; 1.0 for any other model (perf_analyzer's own count of a client batch applies)."""
    coupled: Mapping[str, str] = getattr(manifest, "batch_coupled", None) or {}
    signature = getattr(manifest, "signature", manifest)
    if not coupled or sample_signature(signature) is None:
        return 1.0
    first = signature.inputs[0]
    sizes = []
    if input_data is not None and Path(input_data).is_file():
        try:
            entries = json.loads(Path(input_data).read_text()).get("data", [])
        except (OSError, ValueError, AttributeError):
            entries = []
        for entry in entries if isinstance(entries, list) else []:
            shape = entry.get(first.name, {}).get("shape") if isinstance(entry.get(first.name), dict) else None
            if shape:
                sizes.append(int(shape[0]))
    return float(np.mean(sizes)) if sizes else float(first.concrete_shape[0])


__all__ = ["DEFAULT_REQUEST_SAMPLES", "holds_samples", "sample_signature", "samples_per_request", "stacked_requests"]
