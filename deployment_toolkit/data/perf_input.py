"""perf_analyzer `--input-data` JSON built from the user's real samples, and the digest a run records of it.

Format (perf_analyzer's "Real Input Data"): `{"data": [entry, ...]}`, one entry per batch-1 sample, each
`{input name: {"content": {"b64": <little-endian row-major bytes>}, "shape": [per-sample dims]}}`; BYTES
inputs list their strings as content. perf_analyzer sends the entries round-robin (and fills a batch of
`-b N` from consecutive entries), so a measured point sees the data set's mix of sizes and values. The
shape is always written, so dynamic axes need no `--shape` flag.
"""
from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from ..spec import TensorSpec, atomic_write_text
from .user import DataError, UserData

DEFAULT_PERF_SAMPLES = 16  # entries in the JSON: enough for a real mix, small enough to load fast


def sample_entry(inputs: Mapping[str, np.ndarray], specs: Iterable[TensorSpec]) -> dict[str, Any]:
    """One `data` entry: every input of one sample (no batch axis)."""
    entry: dict[str, Any] = {}
    for spec in specs:
        arr = np.asarray(inputs[spec.name])
        shape = [int(d) for d in arr.shape]
        if arr.dtype.kind in "OSU":
            entry[spec.name] = {"content": [v.decode() if isinstance(v, bytes) else str(v) for v in arr.ravel()],
                                "shape": shape}
        else:
            data = np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("<"), copy=False)).tobytes()
            entry[spec.name] = {"content": {"b64": base64.b64encode(data).decode("ascii")}, "shape": shape}
    return entry


def write_perf_input_data(data: UserData, path: str | Path, max_samples: int = DEFAULT_PERF_SAMPLES) -> Path:
    """Write up to `max_samples` validated samples of `data` as a perf_analyzer JSON file (atomically)."""
    if max_samples < 1:
        raise DataError(f"--perf-samples must be >= 1, got {max_samples}")
    entries = [sample_entry(x, data.signature.inputs) for _, x in data.samples(max_samples)]
    if not entries:
        raise DataError(f"{data.dataloader or data.data_dir} yielded no samples for perf_analyzer")
    atomic_write_text(path, json.dumps({"data": entries}) + "\n")
    return Path(path)


def input_data_digest(path: str | Path) -> str:
    """sha256 of an `--input-data` file (hex), or of a perf_analyzer input directory's files (names and bytes,
    in name order); 'random'/'zero' are their own identity. Two runs with equal digests sent equal data."""
    text = str(path)
    if text in ("random", "zero"):
        return text
    p = Path(path)
    h = hashlib.sha256()
    if p.is_dir():
        for f in sorted(q for q in p.iterdir() if q.is_file()):
            h.update(f.name.encode() + b"\0")
            h.update(f.read_bytes())
        return h.hexdigest()
    if not p.is_file():
        raise FileNotFoundError(f"--input-data {path} does not exist")
    with open(p, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def build_perf_input(data: UserData, directory: str | Path, max_samples: int = DEFAULT_PERF_SAMPLES) -> Path:
    """Write the JSON into `directory` under a name carrying its digest (`input_data_<sha12>.json`), so a run
    fingerprint holding the path changes whenever the data does; returns that path."""
    directory = Path(directory)
    tmp = write_perf_input_data(data, directory / ".input_data.pending.json", max_samples)
    final = directory / f"input_data_{input_data_digest(tmp)[:12]}.json"
    tmp.replace(final)
    return final


__all__ = ["DEFAULT_PERF_SAMPLES", "build_perf_input", "input_data_digest", "sample_entry", "write_perf_input_data"]
