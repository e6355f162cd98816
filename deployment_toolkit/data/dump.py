"""The dump format shared by Triton and framework inference runs, so any two runs can be compared.

Layout of a dump directory::

    dump.json                    metadata (written last, by `DumpWriter.close`)
    outputs/shard_00000.npz      one array per output tensor + `ids`
    inputs/shard_00000.npz       optional, same shard numbering
    labels/shard_00000.npz       optional, same shard numbering

Every shard holds one array per tensor (batch axis first) plus an `ids` array: one sample id per row
(int64 or str). A shard index covers the same samples in every section. A tensor whose samples differ in
shape (token logits of different lengths) is ragged: a shard holds its samples' values end to end and, as
`shapes:<name>`, each sample's own shape; samples of one shape in a shard are stored as one array as usual,
and shards may differ in the per-sample shape. dump.json marks a ragged tensor (`"ragged": true`, -1 on the
axes that vary), and `load_dump` gives it as one array per sample (data/ragged.py). `dump.json` is written only
when the run finished, so a crashed run is reported as incomplete instead of being scored on part of its
samples. Ids, not positions, pair samples across dumps: `align` reorders one dump to the other's id order and
refuses (with counts and examples) when the dumps do not hold the same samples.

Over 400 lines on purpose: the writer, the reader and the id alignment are one file format; splitting them
would put its rules (sections, shard numbering, ids, when dump.json is written) in three places.
"""
from __future__ import annotations

import json
import re
import zipfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..spec import atomic_write, atomic_write_text
from ..errors import UserError
from .ragged import differing, from_chunks, from_samples, is_ragged, sample_shapes

DUMP_META_NAME = "dump.json"
SECTIONS = ("outputs", "inputs", "labels")
IDS_KEY = "ids"
SHAPES_PREFIX = "shapes:"  # a ragged tensor's per-sample shapes in a shard, beside its values end to end
FORMAT_VERSION = 1
_SHARD_RE = re.compile(r"^shard_(\d{5,})\.npz$")
# keys DumpWriter computes itself; a caller's meta must not set them
_COMPUTED_META = ("format_version", "num_samples", "num_shards", "id_dtype", "tensors")


class DumpError(UserError, ValueError):
    """A dump that cannot be written or read as asked (empty, incomplete, inconsistent)."""


class DumpMismatchError(DumpError):
    """Two dumps that cannot be compared sample by sample: different ids, tensors or shapes."""


def shard_name(index: int) -> str:
    return f"shard_{index:05d}.npz"


@dataclass
class Dump:
    """A whole dump in memory: every section's tensors concatenated over shards, rows in file order."""

    directory: Path
    meta: dict[str, Any]
    ids: np.ndarray
    outputs: dict[str, np.ndarray]
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    labels: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def num_samples(self) -> int:
        return int(self.ids.shape[0])

    @property
    def task(self) -> str | None:
        return self.meta.get("task")

    @property
    def model(self) -> str | None:
        return self.meta.get("model")

    @property
    def source(self) -> str | None:
        return self.meta.get("source")

    def section(self, name: str) -> dict[str, np.ndarray]:
        if name not in SECTIONS:
            raise DumpError(f"unknown dump section {name!r}; sections are {', '.join(SECTIONS)}")
        return getattr(self, name)


def _normalize_ids(ids: Any) -> np.ndarray:
    arr = np.asarray(ids)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise DumpError(f"ids must be one-dimensional (one id per sample), got shape {arr.shape}")
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    if arr.dtype.kind == "U":
        return arr
    items = arr.tolist()
    if arr.dtype.kind in "SO" and all(isinstance(v, (str, bytes)) for v in items):
        return np.array([v.decode() if isinstance(v, bytes) else v for v in items], dtype=str)
    raise DumpError(f"ids must be integers or strings, got dtype {arr.dtype}")


def _storable(name: str, value: Any) -> np.ndarray:
    """npz files are read without pickle, so object arrays (Triton BYTES) become fixed-width bytes/str."""
    arr = np.asarray(value)
    if arr.dtype.kind != "O":
        return arr
    items = arr.ravel().tolist()
    if all(isinstance(v, bytes) for v in items):
        return arr.astype(np.bytes_)
    if all(isinstance(v, str) for v in items):
        return arr.astype(np.str_)
    raise DumpError(f"tensor {name!r} has dtype object with mixed values; convert it to a numeric, bytes or str array")


def _dtype_name(arr: np.ndarray) -> str:
    return {"U": "str", "S": "bytes"}.get(arr.dtype.kind, arr.dtype.name)


def _atomic_savez(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Through spec.atomic_write: a killed run never leaves a truncated shard that later loads as valid."""
    atomic_write(path, lambda fh: np.savez(fh, **arrays))


def _per_sample(name: str, rows: list) -> np.ndarray:
    """A list of per-sample arrays: stacked when they share a shape, else ragged (one array per sample)."""
    arrays = [_storable(name, r) for r in rows]
    if len({a.shape for a in arrays}) <= 1:
        return np.stack(arrays) if arrays else np.empty(0)
    return from_samples(arrays)


def _layout(where: str, arr: np.ndarray) -> dict[str, Any]:
    """dump.json's entry for one shard's tensor: per-sample shape (-1 where its samples differ), dtype, ragged."""
    if not is_ragged(arr):
        return {"shape": list(arr.shape[1:]), "dtype": _dtype_name(arr)}
    if len({a.ndim for a in arr}) > 1 or len({_dtype_name(a) for a in arr}) > 1:
        raise DumpError(f"{where}: samples of one tensor differ in rank or dtype ({differing(arr)}); "
                        "one tensor keeps its dtype and rank")
    shapes = sample_shapes(arr)
    return {"shape": [sizes[0] if len(set(sizes)) == 1 else -1 for sizes in zip(*shapes)],
            "dtype": _dtype_name(arr[0]), "ragged": True}


def _stored(name: str, arr: np.ndarray) -> dict[str, np.ndarray]:
    """The shard's arrays for one tensor: itself, or for ragged samples their values end to end and each
    sample's shape (SHAPES_PREFIX + name), so a shard records every sample's own shape."""
    if not is_ragged(arr):
        return {name: arr}
    return {name: np.concatenate([a.ravel() for a in arr]),
            SHAPES_PREFIX + name: np.array(sample_shapes(arr), dtype=np.int64)}


def _unstored(npz: Any, name: str) -> np.ndarray:
    """One tensor of a shard as written by `_stored`."""
    values = npz[name]
    if SHAPES_PREFIX + name not in npz.files:
        return values
    shapes = npz[SHAPES_PREFIX + name]
    ends = np.cumsum([int(np.prod(shape)) for shape in shapes])
    return from_samples(chunk.reshape(shape) for chunk, shape in zip(np.split(values, ends[:-1]), shapes))


class DumpWriter:
    """Appends batches as shards; `close()` writes dump.json. As a context manager it closes only when
    the block succeeds, so a failed run leaves no dump.json and reads as incomplete.

    `meta` is free-form; these keys are understood by readers: `model`, `task`, `source` ("triton",
    "onnxruntime", "torch", ...), `extra` (dict). The writer adds num_samples, num_shards, id_dtype and
    `tensors` ({section: {name: {shape (per sample), dtype}}}, names in first-write order).
    """

    def __init__(self, directory: str | Path, meta: Mapping[str, Any] | None = None, *, overwrite: bool = False):
        self.directory = Path(directory)
        self.meta = dict(meta or {})
        clash = [k for k in _COMPUTED_META if k in self.meta]
        if clash:
            raise DumpError(f"meta keys {clash} are computed by DumpWriter; do not pass them")
        self._prepare_directory(overwrite)
        self._num_shards = 0
        self._num_samples = 0
        self._id_kind: str | None = None
        self._seen_ids: set[Any] = set()
        self._tensors: dict[str, dict[str, dict[str, Any]]] | None = None  # fixed by the first shard
        self._closed = False

    def _prepare_directory(self, overwrite: bool) -> None:
        existing = [self.directory / DUMP_META_NAME] + [p for s in SECTIONS for p in _shard_files(self.directory / s)]
        existing = [p for p in existing if p.exists()]
        if existing and not overwrite:
            raise DumpError(
                f"{self.directory} already holds a dump ({len(existing)} files); "
                "choose an empty directory or pass overwrite=True to replace it"
            )
        for p in existing:  # only our own files: never rmtree a user-given path
            p.unlink()
        self.directory.mkdir(parents=True, exist_ok=True)

    @property
    def num_samples(self) -> int:
        return self._num_samples

    def write(
        self,
        ids: Any,
        outputs: Mapping[str, Any],
        inputs: Mapping[str, Any] | None = None,
        labels: Mapping[str, Any] | None = None,
    ) -> None:
        """Append one shard. A tensor is an array with the batch axis first, or a list of per-sample arrays (a
        padded request cut back to each sample's length). Every shard carries the same tensors with the same dtypes
        and ranks; samples whose shapes differ, in a shard or between shards, make the tensor ragged."""
        if self._closed:
            raise DumpError(f"dump {self.directory} is closed; open a new DumpWriter to write more")
        ids_arr = _normalize_ids(ids)
        n = ids_arr.shape[0]
        if n == 0:
            raise DumpError("write() got no samples (empty ids)")
        if not outputs:
            raise DumpError("write() needs at least one output tensor")
        arrays: dict[str, dict[str, np.ndarray]] = {}
        for section, tensors in (("outputs", outputs), ("inputs", inputs), ("labels", labels)):
            if tensors is None:
                continue
            arrays[section] = {}
            for name, value in tensors.items():
                if not name or name == IDS_KEY or name.startswith(SHAPES_PREFIX):
                    raise DumpError(f"{section}: tensor name {name!r} is reserved or empty")
                arr = _per_sample(name, value) if isinstance(value, list) else _storable(name, value)
                if arr.ndim == 0 or arr.shape[0] != n:
                    raise DumpError(f"{section}/{name}: first axis must be the batch ({n} ids), got shape {arr.shape}")
                arrays[section][name] = arr
        self._check_ids(ids_arr)
        self._check_layout(arrays)
        for section, tensors in arrays.items():
            stored = {k: v for name, arr in tensors.items() for k, v in _stored(name, arr).items()}
            _atomic_savez(self.directory / section / shard_name(self._num_shards), {IDS_KEY: ids_arr, **stored})
        self._seen_ids.update(ids_arr.tolist())
        self._num_shards += 1
        self._num_samples += n

    def _check_ids(self, ids: np.ndarray) -> None:
        kind = "int" if ids.dtype.kind == "i" else "str"
        if self._id_kind is not None and kind != self._id_kind:
            raise DumpError(f"ids switched from {self._id_kind} to {kind} between shards; use one id type")
        self._id_kind = kind
        values = ids.tolist()
        dup = {v for v in values if v in self._seen_ids}
        if len(set(values)) != len(values):
            dup |= {v for v, count in Counter(values).items() if count > 1}
        if dup:
            raise DumpError(f"duplicate sample ids {sorted(dup)[:5]} ({len(dup)} in all); ids must be unique")

    def _check_layout(self, arrays: dict[str, dict[str, np.ndarray]]) -> None:
        layout = {s: {n: _layout(f"{s}/{n}", a) for n, a in t.items()} for s, t in arrays.items()}
        if self._tensors is None:
            self._tensors = layout
            return
        if set(layout) != set(self._tensors):
            raise DumpError(
                f"shard {self._num_shards} has sections {sorted(layout)}, earlier shards {sorted(self._tensors)}"
            )
        for section, tensors in layout.items():
            before = self._tensors[section]
            if set(tensors) != set(before):
                raise DumpError(
                    f"shard {self._num_shards} {section} tensors {sorted(tensors)} differ from "
                    f"earlier shards' {sorted(before)}"
                )
            for name, info in tensors.items():
                known = before[name]
                if len(info["shape"]) != len(known["shape"]) or info["dtype"] != known["dtype"]:
                    raise DumpError(
                        f"{section}/{name}: shard {self._num_shards} holds {info['dtype']} samples of shape "
                        f"{tuple(info['shape'])}, earlier shards {known['dtype']} of rank {len(known['shape'])} "
                        f"{tuple(known['shape'])}; one tensor keeps its dtype and rank"
                    )
                if info["shape"] != known["shape"] or info.get("ragged"):  # ragged: the axes that vary are -1
                    known["shape"] = [a if a == b else -1 for a, b in zip(known["shape"], info["shape"])]
                    known["ragged"] = True

    def close(self) -> Path:
        """Write dump.json; only now does the dump count as complete."""
        path = self.directory / DUMP_META_NAME
        if self._closed:
            return path
        if self._num_shards == 0:
            raise DumpError(f"no samples were written to {self.directory}; nothing to close")
        meta = {
            **self.meta,
            "format_version": FORMAT_VERSION,
            "num_samples": self._num_samples,
            "num_shards": self._num_shards,
            "id_dtype": self._id_kind,
            "tensors": self._tensors,
        }
        atomic_write_text(path, json.dumps(meta, indent=2, default=str) + "\n")
        self._closed = True
        return path

    def __enter__(self) -> "DumpWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()


def _shard_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    found = [(m, p) for p in directory.iterdir() if (m := _SHARD_RE.match(p.name))]
    return [p for m, p in sorted(found, key=lambda mp: int(mp[0].group(1)))]


# What numpy and zipfile raise for a truncated or bit-flipped .npz (checked: truncation gives BadZipFile or
# EOFError, a flipped byte a CRC BadZipFile, a broken array header ValueError, a broken deflate stream zlib.error)
_CORRUPT = (zipfile.BadZipFile, EOFError, OSError, ValueError, zlib.error, KeyError, UnicodeDecodeError)


def _read_shard(path: Path, parts: dict[str, list[np.ndarray]], ids: list[np.ndarray]) -> None:
    """Append a shard's ids and tensors; a shard numpy cannot read is a DumpError naming it (exit 2)."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in (IDS_KEY, *parts) if k not in npz.files]
            if missing:
                raise DumpError(f"{path} lacks arrays {missing}; the dump is corrupt, rerun the inference")
            arrays = {IDS_KEY: npz[IDS_KEY], **{name: _unstored(npz, name) for name in parts}}
    except DumpError:
        raise
    except _CORRUPT as err:
        why = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DumpError(f"{path} is truncated or corrupt ({type(err).__name__}: {why}); rerun the inference "
                        "to write the dump again") from None
    ids.append(arrays.pop(IDS_KEY))
    for name, value in arrays.items():
        parts[name].append(value)


def load_dump(directory: str | Path) -> Dump:
    """Read a complete dump. Raises DumpError for a missing, empty, incomplete or corrupt directory."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DumpError(f"dump directory {directory} does not exist; run the inference script with --output-dir first")
    meta_path = directory / DUMP_META_NAME
    if not meta_path.exists():
        shards = [p for s in SECTIONS for p in _shard_files(directory / s)]
        if shards:
            raise DumpError(
                f"dump {directory} is incomplete: {len(shards)} shard files but no {DUMP_META_NAME} "
                "(the inference run did not finish); rerun it"
            )
        raise DumpError(f"dump directory {directory} is empty (no {DUMP_META_NAME}, no shards)")
    try:
        meta = json.loads(meta_path.read_text())
    except json.JSONDecodeError as err:
        raise DumpError(f"{meta_path} is not valid JSON ({err}); the dump is corrupt, rerun the inference") from None
    except (OSError, UnicodeDecodeError) as err:
        raise DumpError(f"cannot read {meta_path} ({err}); the dump is corrupt, rerun the inference") from None
    tensors = meta.get("tensors") if isinstance(meta, dict) else None
    if not isinstance(tensors, dict) or not tensors.get("outputs"):
        raise DumpError(f"{meta_path} lists no output tensors; was it written by DumpWriter?")
    try:
        num_shards = int(meta.get("num_shards", -1))
    except (TypeError, ValueError):
        raise DumpError(f"{meta_path}: num_shards is {meta.get('num_shards')!r}, not a number; the dump is corrupt") from None
    ids: np.ndarray | None = None
    sections: dict[str, dict[str, np.ndarray]] = {}
    for section in SECTIONS:
        if section not in tensors:
            continue
        files = _shard_files(directory / section)
        if len(files) != num_shards:
            raise DumpError(f"{directory / section}: {len(files)} shards on disk, {DUMP_META_NAME} says {num_shards}")
        parts: dict[str, list[np.ndarray]] = {name: [] for name in tensors[section]}
        section_ids: list[np.ndarray] = []
        for path in files:
            _read_shard(path, parts, section_ids)
        sec_ids = np.concatenate(section_ids)
        if ids is None:
            ids = sec_ids
        elif not np.array_equal(ids, sec_ids):
            raise DumpError(f"{directory}: ids in {section}/ differ from outputs/; the dump is corrupt")
        sections[section] = {name: from_chunks(chunks) for name, chunks in parts.items()}
    assert ids is not None
    if "num_samples" in meta and int(meta["num_samples"]) != ids.shape[0]:
        raise DumpError(f"{directory}: {ids.shape[0]} samples on disk, {DUMP_META_NAME} says {meta['num_samples']}")
    return Dump(
        directory=directory,
        meta=meta,
        ids=ids,
        outputs=sections["outputs"],
        inputs=sections.get("inputs", {}),
        labels=sections.get("labels", {}),
    )


@dataclass
class Aligned:
    """One section of two dumps, rows paired by sample id, in the first dump's id order."""

    ids: np.ndarray
    a: dict[str, np.ndarray]
    b: dict[str, np.ndarray]
    b_index: np.ndarray  # rows of dump b in dump a's order: b.<section>[name][b_index] == aligned.b[name]


def _examples(values: np.ndarray, limit: int = 5) -> str:
    shown = ", ".join(repr(v) for v in values[:limit].tolist())
    return shown + (", ..." if values.shape[0] > limit else "")


def match_ids(ids_a: np.ndarray, ids_b: np.ndarray, names: tuple[str, str] = ("a", "b")) -> np.ndarray:
    """Index into ids_b that puts it in ids_a's order; DumpMismatchError unless both hold the same ids."""
    if (ids_a.dtype.kind in "iu") != (ids_b.dtype.kind in "iu"):
        raise DumpMismatchError(f"sample ids have different types: {names[0]} {ids_a.dtype}, {names[1]} {ids_b.dtype}")
    missing = np.setdiff1d(ids_a, ids_b)
    extra = np.setdiff1d(ids_b, ids_a)
    if missing.size or extra.size:
        lines = [f"dumps hold different samples ({ids_a.shape[0]} in {names[0]}, {ids_b.shape[0]} in {names[1]}):"]
        if missing.size:
            lines.append(f"  {missing.size} ids of {names[0]} are missing from {names[1]}, e.g. {_examples(missing)}")
        if extra.size:
            lines.append(f"  {extra.size} ids of {names[1]} are not in {names[0]}, e.g. {_examples(extra)}")
        lines.append("  rerun both inference runs on the same dataset and sample limit")
        raise DumpMismatchError("\n".join(lines))
    order = np.argsort(ids_b, kind="stable")
    return order[np.searchsorted(ids_b, ids_a, sorter=order)]


def align(dump_a: Dump, dump_b: Dump, section: str = "outputs") -> Aligned:
    """Pair two dumps' tensors by sample id. Refuses different id sets, tensor names or per-sample
    shapes: scoring only the samples both happen to hold would be a silent partial score."""
    names = (str(dump_a.directory), str(dump_b.directory))
    index = match_ids(dump_a.ids, dump_b.ids, names)
    ta, tb = dump_a.section(section), dump_b.section(section)
    if set(ta) != set(tb):
        only_a, only_b = sorted(set(ta) - set(tb)), sorted(set(tb) - set(ta))
        raise DumpMismatchError(
            f"{section} tensor names differ: only in {names[0]}: {only_a}, only in {names[1]}: {only_b}; "
            "both runs must use the manifest's tensor names"
        )
    b = {n: tb[n][index] for n in ta}
    for name in ta:
        shapes_a, shapes_b = sample_shapes(ta[name]), sample_shapes(b[name])
        bad = next((i for i, (x, y) in enumerate(zip(shapes_a, shapes_b)) if x != y), None)
        if bad is not None:
            raise DumpMismatchError(
                f"{section}/{name}: sample {dump_a.ids[bad]!r} has shape {shapes_a[bad]} in {names[0]} "
                f"vs {shapes_b[bad]} in {names[1]}"
            )
    return Aligned(ids=dump_a.ids, a=dict(ta), b=b, b_index=index)
