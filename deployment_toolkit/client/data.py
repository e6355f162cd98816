"""Data sources for accuracy runs: a seeded synthetic generator, or a folder of .npy/.npz files.

Each source yields (ids, inputs, labels) batches; the same source gives the same batches to the
Triton run and the framework run, so their dumps pair up by id.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from ..spec import ModelSignature

Batch = tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]


class DataError(ValueError):
    pass


@dataclass
class SyntheticSource:
    """Random inputs from the model's signature (fixed non-data inputs keep their values); no labels."""

    signature: ModelSignature
    num_samples: int = 16
    seed: int = 0

    def batches(self, batch_size: int) -> Iterator[Batch]:
        for start in range(0, self.num_samples, batch_size):
            n = min(batch_size, self.num_samples - start)
            inputs = self.signature.examples(n, seed=self.seed + start)
            yield np.arange(start, start + n, dtype=np.int64), inputs, {}


@dataclass
class FolderSource:
    """`.npz` files holding one array per input name (batch axis first) and optional label arrays
    (`labels` or any key starting with `label`); or `.npy` files, one sample each, for one-input models."""

    folder: Path
    signature: ModelSignature

    def _files(self) -> list[Path]:
        files = sorted(p for p in Path(self.folder).iterdir() if p.suffix in (".npy", ".npz"))
        if not files:
            raise DataError(f"no .npy or .npz files in {self.folder}")
        return files

    def batches(self, batch_size: int) -> Iterator[Batch]:
        names = [t.name for t in self.signature.inputs]
        buf_ids: list[np.ndarray] = []
        buf_in: dict[str, list[np.ndarray]] = {n: [] for n in names}
        buf_lab: dict[str, list[np.ndarray]] = {}
        for path in self._files():
            ids, inputs, labels = self._read(path, names)
            buf_ids.append(ids)
            for n in names:
                buf_in[n].append(inputs[n])
            for k, v in labels.items():
                buf_lab.setdefault(k, []).append(v)
        ids = np.concatenate(buf_ids)
        if len(np.unique(ids)) != len(ids):
            raise DataError(f"sample ids in {self.folder} are not unique")
        all_in = {n: np.concatenate(v) for n, v in buf_in.items()}
        all_lab = {k: np.concatenate(v) for k, v in buf_lab.items()}
        for k, v in all_lab.items():
            if len(v) != len(ids):
                raise DataError(f"label {k!r} has {len(v)} rows for {len(ids)} samples in {self.folder}")
        for start in range(0, len(ids), batch_size):
            sl = slice(start, start + batch_size)
            yield ids[sl], {n: v[sl] for n, v in all_in.items()}, {k: v[sl] for k, v in all_lab.items()}

    def _read(self, path: Path, names: list[str]) -> Batch:
        if path.suffix == ".npy":
            if len(names) != 1:
                raise DataError(f"{path}: .npy files work for one-input models; use .npz with keys {names}")
            arr = np.load(path, allow_pickle=False)[None]
            return np.array([path.stem]), {names[0]: arr}, {}
        with np.load(path, allow_pickle=False) as npz:
            missing = [n for n in names if n not in npz.files]
            if missing:
                raise DataError(f"{path} lacks input(s) {missing}; it has {npz.files}")
            inputs = {n: npz[n] for n in names}
            count = len(inputs[names[0]])
            ids = npz["ids"] if "ids" in npz.files else np.array([f"{path.stem}:{i}" for i in range(count)])
            labels = {k: npz[k] for k in npz.files if k.startswith("label")}
        for spec in self.signature.inputs:
            got = inputs[spec.name].shape[1:]
            if len(got) != len(spec.shape) or any(s not in (-1, g) for s, g in zip(spec.shape, got)):
                raise DataError(f"{path}: input {spec.name} has per-sample shape {got}, the model expects {spec.shape}")
        return ids, inputs, labels


def make_source(data: str, signature: ModelSignature, num_samples: int, seed: int):
    """`synthetic` or a folder path."""
    if data == "synthetic":
        return SyntheticSource(signature, num_samples, seed)
    folder = Path(data)
    if not folder.is_dir():
        raise DataError(f"--data-dir {data}: not a folder (use 'synthetic' for generated data)")
    return FolderSource(folder, signature)
