"""The contract between stages: tensor signatures and the manifest written next to every artifact.

Every later stage (config generator, client, perf runner, report) reads the manifest instead of
re-deriving the model. Shapes here are per sample: the batch axis is implicit and always dynamic
when `max_batch_size > 0` (Triton's convention); `-1` marks another dynamic axis.
"""
from __future__ import annotations

import dataclasses
import errno
import functools
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable

import numpy as np

from .errors import UserError, UserFileNotFoundError

MANIFEST_NAME = "manifest.json"

# numpy dtype name -> Triton datatype (the protocol's names, also used in config.pbtxt as TYPE_<x>)
_NP_TO_TRITON = {
    "bool": "BOOL",
    "uint8": "UINT8",
    "int8": "INT8",
    "int16": "INT16",
    "int32": "INT32",
    "int64": "INT64",
    "float16": "FP16",
    "float32": "FP32",
    "float64": "FP64",
    "object": "BYTES",
}
_TRITON_TO_NP = {v: k for k, v in _NP_TO_TRITON.items()}

FORMATS = ("ts-trace", "ts-script", "onnx", "trt")
ARTIFACT_NAMES = {"ts-trace": "model.pt", "ts-script": "model.pt", "onnx": "model.onnx", "trt": "model.plan"}


class SpecError(UserError, ValueError):
    """A signature or manifest that contradicts itself or the model."""


def check_repository_path(path: str | Path, flag: str = "--model-repository") -> Path:
    """`path` if tritonserver's Python backend can serve from it; else SpecError naming the part that it cannot
    use. The backend starts each model's stub with the path on a command line split at whitespace and encodes it
    as ASCII: a space made the model load forever ("still loading"), a non-ASCII folder a UnicodeEncodeError."""
    resolved = Path(path).absolute()
    for part in resolved.parts:
        if any(c.isspace() for c in part):
            raise SpecError(f"{flag} {str(path)!r}: the folder {part!r} has whitespace, which tritonserver's Python "
                            "backend cannot load models from (they stay 'loading' forever); use a path without spaces")
        if not part.isascii():
            raise SpecError(f"{flag} {str(path)!r}: the folder {part!r} has non-ASCII characters, which tritonserver's "
                            "Python backend cannot open; use an ASCII path")
    return Path(path)


def triton_dtype(np_dtype: str) -> str:
    try:
        return _NP_TO_TRITON[np.dtype(np_dtype).name]
    except (KeyError, TypeError) as err:
        raise SpecError(f"dtype {np_dtype!r} has no Triton equivalent; use one of {sorted(_NP_TO_TRITON)}") from err


def numpy_dtype(triton: str) -> str:
    key = triton.upper().removeprefix("TYPE_")
    try:
        return _TRITON_TO_NP[key]
    except KeyError as err:
        raise SpecError(f"Triton datatype {triton!r} is not supported; use one of {sorted(_TRITON_TO_NP)}") from err


# (atol, rtol) by precision: how far a converted, served or padded answer may be from the framework's
TOLERANCES = {"fp32": (1e-4, 1e-4), "fp16": (1e-2, 1e-2), "bf16": (5e-2, 5e-2)}


@dataclass(frozen=True)
class TensorSpec:
    """One input or output. `shape` excludes the batch axis; -1 marks a dynamic axis whose size for
    examples and perf runs comes from `example_shape`."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    example_shape: tuple[int, ...] | None = None
    # Inputs that are not data (e.g. band wavelengths, a timestep): perf/accuracy tools fill them with
    # `value` instead of random numbers when set.
    value: list[Any] | None = None
    # Describes a whole request rather than one sample (DOFA's band wavelengths: the model reads row 0 for
    # the batch): requests that differ in it must never share a batch. A timestep is per sample, not this.
    batch_uniform: bool = False
    # [low, high) of random integer examples (token ids below the vocabulary, a 0/1 attention mask), learnt
    # from the user's data or given by get_signature; None: 0..9 for integers, as before
    value_range: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if self.value_range is not None:
            low, high = (int(v) for v in self.value_range)
            if high <= low:
                raise SpecError(f"{self.name}: value_range [{low}, {high}) is empty")
            object.__setattr__(self, "value_range", (low, high))
        if self.example_shape is not None:
            object.__setattr__(self, "example_shape", tuple(int(d) for d in self.example_shape))
            if len(self.example_shape) != len(self.shape) or any(
                s != -1 and s != e for s, e in zip(self.shape, self.example_shape)
            ):
                raise SpecError(f"{self.name}: example_shape {self.example_shape} does not fit shape {self.shape}")
        if any(d < -1 or d == 0 for d in self.shape):
            raise SpecError(f"{self.name}: dims must be positive or -1, got {self.shape}")
        if -1 in self.shape and self.example_shape is None:
            raise SpecError(f"{self.name}: dynamic dims need an example_shape for examples and perf runs")
        triton_dtype(self.dtype)

    @property
    def concrete_shape(self) -> tuple[int, ...]:
        return self.example_shape if self.example_shape is not None else self.shape

    @property
    def triton_dtype(self) -> str:
        return triton_dtype(self.dtype)

    @property
    def is_dynamic(self) -> bool:
        return -1 in self.shape

    @property
    def wire_shape(self) -> tuple[int, ...]:
        """Per-sample dims as Triton takes them (config dims, request and perf_analyzer shapes): Triton needs at
        least one, so a scalar per sample (shape [], a diffusion timestep) travels as [1] and the config's
        `reshape: { shape: [ ] }` hands the model [batch]."""
        return self.shape or (1,)

    def nbytes(self, batch: int = 1) -> int:
        return int(np.prod(self.concrete_shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize * max(batch, 1)

    def example(self, batch: int, rng: np.random.Generator | None = None, kind: str = "random") -> np.ndarray:
        """A batch for this tensor: the fixed `value` if the spec has one, else random or zero data."""
        shape = (batch, *self.concrete_shape) if batch > 0 else self.concrete_shape
        if self.value is not None:
            one = np.asarray(self.value, dtype=self.dtype).reshape(self.concrete_shape)
            return np.broadcast_to(one, shape).copy()
        if kind == "zero":
            return np.zeros(shape, dtype=self.dtype)
        rng = rng or np.random.default_rng(0)
        if np.issubdtype(np.dtype(self.dtype), np.floating):
            return rng.standard_normal(shape).astype(self.dtype)
        if np.dtype(self.dtype) == np.bool_:
            return rng.integers(0, 2, size=shape).astype(bool)
        low, high = self.value_range or (0, 10)
        return rng.integers(low, high, size=shape).astype(self.dtype)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["shape"] = list(self.shape)
        d["example_shape"] = list(self.example_shape) if self.example_shape is not None else None
        d["value_range"] = list(self.value_range) if self.value_range is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TensorSpec":
        return cls(
            name=d["name"],
            shape=tuple(d["shape"]),
            dtype=d.get("dtype", "float32"),
            example_shape=tuple(d["example_shape"]) if d.get("example_shape") is not None else None,
            value=d.get("value"),
            batch_uniform=bool(d.get("batch_uniform", False)),
            value_range=tuple(d["value_range"]) if d.get("value_range") is not None else None,
        )


@dataclass(frozen=True)
class ModelSignature:
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def __post_init__(self) -> None:
        names = [t.name for t in (*self.inputs, *self.outputs)]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise SpecError(f"tensor names must be unique across inputs and outputs, repeated: {sorted(dup)}")
        if not self.inputs or not self.outputs:
            raise SpecError("a signature needs at least one input and one output")

    def examples(self, batch: int, seed: int = 0, kind: str = "random") -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        return {t.name: t.example(batch, rng, kind) for t in self.inputs}

    def to_dict(self) -> dict[str, Any]:
        return {"inputs": [t.to_dict() for t in self.inputs], "outputs": [t.to_dict() for t in self.outputs]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ModelSignature":
        return cls(
            inputs=tuple(TensorSpec.from_dict(t) for t in d["inputs"]),
            outputs=tuple(TensorSpec.from_dict(t) for t in d["outputs"]),
        )


@dataclass
class Manifest:
    """What convert_model writes next to an artifact; the single source of truth for later stages."""

    model: str
    preset: str
    family: str
    task: str
    metric: str
    format: str
    artifact: str
    signature: ModelSignature
    max_batch_size: int
    precision: str = "fp32"
    export_options: dict[str, Any] = field(default_factory=dict)
    verification: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    # Every file of the artifact, relative to its directory: the artifact first, then side files such as the
    # external weights of a > 2 GB ONNX model. Empty in manifests written before the field: see `files`.
    artifact_files: list[str] = field(default_factory=list)
    # Provenance (deployment_toolkit.sources.ModelSource.to_dict()): source kind and reference, file and
    # checkpoint sha256, factory kwargs. Every stage rebuilds the framework model from it. Empty in manifests
    # written before the field: the zoo model `model` is assumed.
    source: dict[str, Any] = field(default_factory=dict)
    artifact_sha256: str = ""  # sha256 of the artifact file (not of side files) as written
    # How the framework model's (possibly nested) output maps to the served tensors: {output name: path of
    # keys and indices} (deployment_toolkit.sources.outputs). Empty: the outputs in order (a tensor or a tuple).
    output_paths: dict[str, list] = field(default_factory=dict)
    # Outputs whose rows depend on the other samples of a batch ({name: how}, deployment_toolkit.export.coupling;
    # CLIP's [B, B] logits_per_image): the model is served with max_batch_size 0, each request one whole batch,
    # and its shapes carry that batch as a dynamic leading axis. Empty: rows are independent (or not probed).
    batch_coupled: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise SpecError(f"unknown format {self.format!r}; choose one of {', '.join(FORMATS)}")
        if self.max_batch_size < 0:
            raise SpecError("max_batch_size must be >= 0")
        if self.batch_coupled and self.max_batch_size:
            raise SpecError(f"outputs {sorted(self.batch_coupled)} couple the batch: max_batch_size must be 0")
        self.artifact_files = [str(f) for f in self.artifact_files]
        if self.artifact_files and self.artifact_files[0] != self.artifact:
            raise SpecError(f"artifact_files must start with the artifact {self.artifact!r}, got {self.artifact_files}")
        outside = [f for f in self.artifact_files if Path(f).is_absolute() or ".." in Path(f).parts]
        if outside:
            raise SpecError(f"artifact_files must be relative to the artifact's directory, got {outside}")

    @property
    def files(self) -> list[str]:
        """The artifact's files (copied together into a model repository); just the artifact for old manifests."""
        return list(self.artifact_files) or [self.artifact]

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self.signature.inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self.signature.outputs

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["signature"] = self.signature.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Manifest":
        d = dict(d)
        d["signature"] = ModelSignature.from_dict(d["signature"])
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise SpecError(f"manifest has unknown fields {unknown}: written by a newer toolkit?")
        return cls(**d)

    def save(self, directory: str | Path) -> Path:
        path = Path(directory) / MANIFEST_NAME
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> "Manifest":
        path = Path(path)
        if path.is_dir():
            path = path / MANIFEST_NAME
        if not path.exists():
            raise UserFileNotFoundError(f"no manifest at {path}: run triton/convert_model.py first")
        hint = "rerun triton/convert_model.py to write it again"
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict):
                raise SpecError(f"holds JSON {type(data).__name__}, not a manifest object")
            return cls.from_dict(data)
        except json.JSONDecodeError as err:
            raise SpecError(f"manifest {path} is not valid JSON ({err.msg}: line {err.lineno}, column "
                            f"{err.colno}; truncated or edited?): {hint}") from None
        except UnicodeDecodeError:
            raise SpecError(f"manifest {path} is not text (binary or corrupt): {hint}") from None
        except OSError as err:
            raise SpecError(f"cannot read manifest {path}: {err.strerror or err}") from None
        except KeyError as err:
            raise SpecError(f"manifest {path} lacks the field {err}: {hint}") from None
        except (SpecError, TypeError, ValueError, AttributeError) as err:
            raise SpecError(f"manifest {path} is not usable: {err}: {hint}") from None


@functools.lru_cache(maxsize=1)
def default_file_mode() -> int:
    """The mode `open()` gives a new file under the process's umask (0644 for the usual 022). Read once: the
    umask can only be read by setting it, which would briefly change it for every other thread."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


class NoSpaceError(UserError, OSError):
    """A write with no room (refused up front, or the disk filled while writing): one line naming the path and the
    space needed and free. Still an OSError (ENOSPC): the callers that explain a failed write go on catching it."""

    def __init__(self, path: str | Path, needed: int | None, free: int | None, written: int | None = 0):
        OSError.__init__(self, errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        need = (f"it needs {size_text(needed)}" if needed is not None
                else "the disk filled while it was written" if written is None
                else f"the disk filled after {size_text(written)} of it")
        room = f"{size_text(free)} free there" if free is not None else "the free space is unknown"
        self.message = (f"no space left to write {path}: {need}, {room}; nothing was left half-written: make room "
                        "or write to another folder, then run the same command again")

    def __str__(self) -> str:
        return self.message


def size_text(n: int) -> str:
    """Bytes for a message: 1.5 MiB, 12 KiB, 300 bytes."""
    if n >= 2**20:
        return f"{n / 2**20:.1f} MiB"
    return f"{n / 2**10:.0f} KiB" if n >= 2**10 else f"{n} bytes"


def free_bytes(folder: str | Path) -> int | None:
    """The probe: bytes an unprivileged writer may still use on `folder`'s filesystem (None: cannot be read)."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def check_free_space(path: str | Path, needed: int) -> None:
    """Refuse a write of `needed` bytes at `path` before it starts when the filesystem has less free: halfway, a
    full disk aborts some writers (torch's C++ one kills the process)."""
    free = free_bytes(Path(path).parent)
    if free is not None and free < needed:
        raise NoSpaceError(path, needed, free)


def disk_full(err: BaseException, path: str | Path, needed: int | None, written: int = 0) -> NoSpaceError | None:
    """`err` as a NoSpaceError when it is a full disk or quota (ENOSPC, EDQUOT) met while writing `path`."""
    if isinstance(err, OSError) and not isinstance(err, NoSpaceError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        return NoSpaceError(path, needed, free_bytes(Path(path).parent), written)
    return None


def atomic_write(path: str | Path, write: Callable[[IO[Any]], Any], mode: str = "wb", size: int | None = None) -> None:
    """THE atomic writer: `write(fh)` fills a temporary file beside `path` (opened with `mode`), which is synced and
    renamed over `path`, so a crash never leaves half a file behind (nor a truncated shard that loads as valid).
    The file gets the umask's usual mode, not mkstemp's 0600: a server running as another user (a container) must
    read it. `size` (bytes, where known) is checked against the free space first; a full disk is a NoSpaceError
    and leaves no temporary file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if size is not None:
        check_free_space(path, size)
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.fchmod(fd, default_file_mode())
        with os.fdopen(fd, mode) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        written = os.stat(tmp).st_size if tmp and os.path.exists(tmp) else 0
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        full = disk_full(err, path, size, written)
        if full is not None:
            raise full from err
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write `text` through `atomic_write`: the whole file or, after a crash, the previous one."""
    atomic_write(path, lambda fh: fh.write(text), mode="w")
