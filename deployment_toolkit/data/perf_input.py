"""perf_analyzer `--input-data` JSON built from the user's real samples; the digest a run records of it is the
run identity's (`results.identity.input_data_digest`, re-exported here).

Format (perf_analyzer's "Real Input Data"): `{"data": [entry, ...]}`, one entry per batch-1 sample, each
`{input name: {"content": {"b64": <little-endian row-major bytes>}, "shape": [per-sample dims]}}`; BYTES
inputs list their strings as content. perf_analyzer sends the entries round-robin (and fills a batch of
`-b N` from consecutive entries), so a measured point sees the data set's mix of sizes and values. The
shape is always written, so dynamic axes need no `--shape` flag; a scalar per sample (a diffusion timestep) is
written with shape [1], the dims its config declares (TensorSpec.wire_shape).
"""
from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from ..results.identity import file_digest, input_data_digest  # noqa: F401  (re-exported: the run identity's digest)
from ..spec import TensorSpec, atomic_write_text
from .user import DataError, UserData

DEFAULT_PERF_SAMPLES = 16  # entries in the JSON: enough for a real mix, small enough to load fast


def sample_entry(inputs: Mapping[str, np.ndarray], specs: Iterable[TensorSpec]) -> dict[str, Any]:
    """One `data` entry: every input of one sample (no batch axis)."""
    entry: dict[str, Any] = {}
    for spec in specs:
        arr = np.asarray(inputs[spec.name])
        shape = [int(d) for d in (arr.shape if spec.shape else spec.wire_shape)]
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


def build_perf_input(data: UserData, directory: str | Path, max_samples: int = DEFAULT_PERF_SAMPLES) -> Path:
    """Write the JSON into `directory` under a name carrying its digest (`input_data_<sha12>.json`), so a run
    fingerprint holding the path changes whenever the data does; returns that path."""
    directory = Path(directory)
    tmp = write_perf_input_data(data, directory / ".input_data.pending.json", max_samples)
    final = directory / f"input_data_{file_digest(tmp)[:12]}.json"
    tmp.replace(final)
    return final


__all__ = ["DEFAULT_PERF_SAMPLES", "build_perf_input", "input_data_digest", "sample_entry", "write_perf_input_data"]
