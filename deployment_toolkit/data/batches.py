"""Data sources for accuracy runs: a seeded synthetic generator, a folder of .npy/.npz files, or the user's
dataloader.py (the last two live in deployment_toolkit.data.user).

Each source yields (ids, inputs, labels) batches; the same source gives the same batches to the
Triton run and the framework run, so their dumps pair up by id.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from .user import DataError, UserData
from ..spec import ModelSignature

Batch = tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]


@dataclass
class SyntheticSource:
    """Random inputs from the model's signature (fixed non-data inputs keep their values); no labels."""

    signature: ModelSignature
    num_samples: int = 16
    seed: int = 0
    batched: bool = True  # False: each request is the signature's whole-request example, one id

    def batches(self, batch_size: int) -> Iterator[Batch]:
        if not self.batched:
            for i in range(self.num_samples):
                yield np.array([i], dtype=np.int64), self.signature.examples(0, seed=self.seed + i), {}
            return
        for start in range(0, self.num_samples, batch_size):
            n = min(batch_size, self.num_samples - start)
            inputs = self.signature.examples(n, seed=self.seed + start)
            yield np.arange(start, start + n, dtype=np.int64), inputs, {}


class FolderSource(UserData):
    """A folder of .npy/.npz samples (layout: deployment_toolkit/data/user.py), validated against the signature."""

    def __init__(self, folder: str | Path, signature: ModelSignature, limit: int | None = None, batched: bool = True):
        super().__init__(signature, data_dir=str(folder), limit=limit, batched=batched)


def make_source(data: str, signature: ModelSignature, num_samples: int, seed: int, *,
                dataloader: str | None = None, dataloader_args: dict | None = None, precision: str = "fp32",
                limit: int | None = None, batched: bool = True):
    """`synthetic`, a folder path, or the user's dataloader.py (which gets `data` as its data_dir). Not `batched`
    (a max_batch_size 0 model): each file or loader batch is one whole request."""
    if dataloader is not None:
        return UserData(signature, data_dir=data, dataloader=dataloader, dataloader_args=dict(dataloader_args or {}),
                        precision=precision, limit=limit, batched=batched)
    if data == "synthetic":
        return SyntheticSource(signature, num_samples, seed, batched)
    folder = Path(data)
    if not folder.is_dir():
        raise DataError(f"--data-dir {data}: not a folder (use 'synthetic' for generated data)")
    return FolderSource(folder, signature, limit=limit, batched=batched)
