"""What a multistream stream (perf/multistream.py) sends, made before its clock starts: its arrivals and its data.

The arrivals are schedule.make_schedule's, as a perf_analyzer point of the same windows writes them. Random or zero
data is drawn as perf.analyzer.command.write_input_data_json draws its one entry (so a point driven either way sends
the same numbers), and a perf_analyzer --input-data file is read as perf_analyzer reads it (batch-1 entries, each
repeated to fill a batch; {"b64"|"content", "shape"} or plain lists of numbers).
"""
from __future__ import annotations

import base64
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import UserInputError
from ..spec import TensorSpec
from .analyzer.schedule import make_schedule, schedule_length_s

if TYPE_CHECKING:
    from .multistream import Stream


def schedule_seconds(window_ms: int, max_windows: int) -> float:
    """The schedule's length: every window with slack, the length a perf_analyzer point of the same windows writes
    (so the seed gives the same intervals file, not only the same arrivals); cycled if a run outlasts it."""
    return schedule_length_s(max_windows * window_ms / 1000.0)


def intended_offsets_ns(stream: "Stream", window_ms: int, max_windows: int) -> np.ndarray:
    """Intended send times (ns from the shared start) of every request the run may send: those before the end of
    its last possible window, the schedule cycled as perf_analyzer cycles its file."""
    arrivals = make_schedule(stream.rate, schedule_seconds(window_ms, max_windows), stream.distribution, stream.seed)
    end_ns = int(max_windows) * int(window_ms) * 1_000_000
    n = len(arrivals.intervals_us)
    while True:
        offsets = arrivals.offsets_ns(n)
        if offsets[-1] >= end_ns:
            return offsets[offsets < end_ns]
        n *= 2


def request_arrays(stream: "Stream") -> list[dict[str, np.ndarray]]:
    """The arrays of every distinct request, built once: one for random or zero data (drawn as
    write_input_data_json draws its one entry: the same numbers perf_analyzer would send), else one per entry of
    the --input-data file, each sample repeated to the batch as perf_analyzer fills a batch; requests cycle
    through them."""
    if stream.input_data in ("random", "zero"):
        rng = np.random.default_rng(0)
        samples = [{t.name: _wire(t, t.example(0, rng, stream.input_data)) for t in stream.inputs}]
    else:
        samples = [_entry_sample(stream, entry, i) for i, entry in enumerate(_entries(stream))]
    return [{name: _batched(stream, a) for name, a in sample.items()} for sample in samples]


def _wire(spec: TensorSpec, sample: np.ndarray) -> np.ndarray:
    """A sample in the shape Triton takes (a scalar per sample travels as [1])."""
    return sample.reshape(spec.wire_shape) if sample.ndim == 0 or not spec.concrete_shape else sample


def _batched(stream: "Stream", sample: np.ndarray) -> np.ndarray:
    if not stream.batched:
        return np.ascontiguousarray(sample)
    return np.ascontiguousarray(np.broadcast_to(sample, (int(stream.batch), *sample.shape)))


def _entries(stream: "Stream") -> list[dict[str, Any]]:
    path = Path(stream.input_data)
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise UserInputError(f"stream {stream.model_name}: cannot read its input data {path}: "
                             f"{err.strerror or err}") from err
    except ValueError as err:
        raise UserInputError(f"stream {stream.model_name}: {path} is not JSON: {err}") from err
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise UserInputError(f"stream {stream.model_name}: {path} needs a non-empty \"data\" list of entries "
                             "(one object per sample, as write_input_data_json writes)")
    return entries


def _entry_sample(stream: "Stream", entry: dict[str, Any], index: int) -> dict[str, np.ndarray]:
    """One --input-data entry as arrays: {"b64", "shape"}, {"content", "shape"} or a plain (nested) list."""
    sample = {}
    for spec in stream.inputs:
        if spec.name not in entry:
            raise UserInputError(f"stream {stream.model_name}: entry {index} of {stream.input_data} has no input "
                                 f"{spec.name!r}")
        value = entry[spec.name]
        shape = value.get("shape") if isinstance(value, dict) else None
        dtype = object if np.dtype(spec.dtype).kind in "OSU" else np.dtype(spec.dtype)
        if isinstance(value, dict) and isinstance(value.get("content"), dict) and "b64" in value["content"]:
            value = {**value, "b64": value["content"]["b64"]}  # a BYTES tensor as the toolkit's pipelines write it
        if isinstance(value, dict) and "b64" in value:
            raw = base64.b64decode(value["b64"])
            arr = _bytes_elements(raw, stream, spec.name) if dtype is object else np.frombuffer(raw, dtype=dtype)
        elif isinstance(value, dict) and "content" in value:
            arr = np.asarray(value["content"], dtype=dtype)
        elif isinstance(value, (list, int, float, str)):
            arr = np.asarray(value, dtype=dtype)
        else:
            raise UserInputError(f"stream {stream.model_name}: entry {index} input {spec.name!r}: expected "
                                 "{\"b64\"|\"content\", \"shape\"} or a list of numbers")
        if shape is None and not spec.is_dynamic and arr.size == math.prod(spec.wire_shape):
            shape = spec.wire_shape
        try:
            sample[spec.name] = arr.reshape([int(d) for d in shape]) if shape is not None else arr
        except ValueError as err:
            raise UserInputError(f"stream {stream.model_name}: entry {index} input {spec.name!r}: {arr.size} "
                                 f"values do not fill shape {list(shape)}") from err
    return sample


def _bytes_elements(raw: bytes, stream: "Stream", name: str) -> np.ndarray:
    """A BYTES tensor's elements from Triton's serialized form (each a 4-byte little-endian length, then that many
    bytes), as perf_analyzer reads a base64 entry of a BYTES input (raw image bytes, a serialized string)."""
    elements, i = [], 0
    while i < len(raw):
        n = int.from_bytes(raw[i:i + 4], "little")
        if i + 4 + n > len(raw):
            raise UserInputError(f"stream {stream.model_name}: input {name!r}: its base64 data is not a serialized "
                                 "BYTES tensor (4-byte length, then the bytes, per element)")
        elements.append(raw[i + 4:i + 4 + n])
        i += 4 + n
    return np.array(elements, dtype=object)


__all__ = ["intended_offsets_ns", "request_arrays", "schedule_seconds"]
