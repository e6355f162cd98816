"""The named tensors a pipeline step takes and gives (`Port`), and how a user's file declares them.

A step file declares its tensors as module-level dicts (per sample: no batch axis; -1 marks a size that varies):

    INPUTS = {"image": "bytes"}                         # one encoded image per sample (TYPE_STRING on the wire)
    OUTPUTS = {"input__0": ("float32", [3, 64, 64])}    # dtype and per-sample shape

A dtype is a numpy name (float32, int64, ...), "bytes" (raw bytes: an encoded image) or "text" (UTF-8 text: raw
samples are checked to decode). Both arrive in the function as numpy object arrays of `bytes`, as Triton's Python
backend hands TYPE_STRING over. A bare dtype means one value per sample (shape []). Where a file declares nothing,
the tensors are read from the user's raw samples by running the function once per sample (pipeline.stepfile).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..errors import UserInputError
from ..spec import SpecError, TensorSpec, triton_dtype

BYTES = "bytes"
TEXT = "text"
STRING_DTYPES = (BYTES, TEXT)


@dataclass(frozen=True)
class Port:
    """One named tensor of a step, per sample. `dtype`: a numpy dtype name, or bytes/text (TYPE_STRING)."""

    name: str
    dtype: str
    shape: tuple[int, ...] = ()

    @property
    def is_string(self) -> bool:
        return self.dtype in STRING_DTYPES

    @property
    def numpy_dtype(self) -> str:
        return "object" if self.is_string else self.dtype

    @property
    def config_type(self) -> str:
        """The config.pbtxt data type: TYPE_STRING for bytes and text (the protocol's BYTES)."""
        return "TYPE_STRING" if self.is_string else f"TYPE_{triton_dtype(self.dtype)}"

    @property
    def wire_dims(self) -> tuple[int, ...]:
        """Config dims and request shape per sample: one value per sample travels as [1] (Triton needs a dim)."""
        return self.shape or (1,)

    def describe(self) -> str:
        return f"{self.name!r} {self.dtype} [{','.join(map(str, self.shape))}]"

    def fits(self, consumer: "Port") -> bool:
        """Whether what this port gives is what `consumer` takes: the same dtype (bytes and text both strings) and
        rank, each size equal or varying (-1) on the consumer's side."""
        same_type = (self.is_string and consumer.is_string) or self.dtype == consumer.dtype
        return same_type and len(self.shape) == len(consumer.shape) and all(
            c == -1 or p == c for p, c in zip(self.shape, consumer.shape))

    def to_spec(self, example_shape: Sequence[int] | None = None) -> TensorSpec:
        """The TensorSpec perf_analyzer's target and the client take (a varying size needs its example size)."""
        example = tuple(example_shape) if example_shape is not None and -1 in self.shape else None
        if -1 in self.shape and example is None:
            example = tuple(1 if d == -1 else d for d in self.shape)
        return TensorSpec(self.name, self.shape, self.numpy_dtype, example_shape=example)

    @classmethod
    def from_spec(cls, spec: TensorSpec) -> "Port":
        return cls(spec.name, BYTES if spec.dtype == "object" else spec.dtype, tuple(spec.shape))


def port_of_arrays(name: str, batches: Iterable[np.ndarray]) -> Port:
    """The port that a value's batches (batch axis first) show: its dtype, and -1 where a size differs."""
    shapes, dtype = [], None
    for arr in batches:
        shapes.append(tuple(arr.shape[1:]))
        dtype = BYTES if arr.dtype == object else arr.dtype.name
    if not shapes or dtype is None:
        raise UserInputError(f"no value of {name!r} to read its dtype and shape from")
    ranks = {len(s) for s in shapes}
    if len(ranks) > 1:
        raise UserInputError(f"{name!r} has a different number of dims from sample to sample "
                             f"({sorted(set(shapes))[:3]}): declare it with -1 for the sizes that vary")
    shape = tuple(sizes[0] if len(set(sizes)) == 1 else -1 for sizes in zip(*shapes))
    return Port(name, dtype, shape)


def _parse_one(where: str, name: Any, value: Any) -> Port:
    if not isinstance(name, str) or not name:
        raise UserInputError(f"{where}: the keys are tensor names (strings), got {name!r}")
    if isinstance(value, str):
        dtype, shape = value, ()
    elif isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[0], str):
        dtype, shape = value[0], value[1]
    else:
        raise UserInputError(f"{where}[{name!r}] is {value!r}: give a dtype (\"bytes\", \"text\", \"float32\", ...) or "
                             "(dtype, [per-sample dims]), e.g. (\"float32\", [3, 224, 224])")
    if not isinstance(shape, (tuple, list)) or not all(isinstance(d, int) and (d > 0 or d == -1) for d in shape):
        raise UserInputError(f"{where}[{name!r}]: the shape {shape!r} must list per-sample dims (positive ints, -1 "
                             "for a size that varies; [] for one value per sample)")
    if dtype not in STRING_DTYPES:
        try:
            dtype = np.dtype(dtype).name
            triton_dtype(dtype)
            if dtype == "object":
                raise SpecError("object")
        except (TypeError, SpecError):
            raise UserInputError(f"{where}[{name!r}]: dtype {dtype!r} is not one Triton takes; use bytes, text or a "
                                 "numpy name such as float32, int64, uint8") from None
    return Port(name, dtype, tuple(int(d) for d in shape))


def parse_ports(where: str, value: Any) -> tuple[Port, ...] | None:
    """A declaration dict as ports (None when the file declares nothing); a malformed one is one line."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value:
        raise UserInputError(f"{where} must be a non-empty dict {{name: dtype or (dtype, [dims])}}, got "
                             f"{type(value).__name__}")
    return tuple(_parse_one(where, name, v) for name, v in value.items())


def shape_text(shape: Sequence[int]) -> str:
    return f"[{','.join(map(str, shape))}]"


__all__ = ["BYTES", "STRING_DTYPES", "TEXT", "Port", "parse_ports", "port_of_arrays", "shape_text"]
