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

from .samples import DataSpec
from .user import DataError, UserData
from ..spec import ModelSignature

Batch = tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]
SYNTHETIC_SAMPLES = 16  # random samples when the data spec does not say how many


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

    def __init__(self, folder: str | Path, signature: ModelSignature, limit: int | None = None, batched: bool = True,
                 request_samples: int | None = None):
        super().__init__(signature, data_dir=str(folder), limit=limit, batched=batched,
                         request_samples=request_samples)


def make_source(data: DataSpec, signature: ModelSignature, *, precision: str = "fp32", batched: bool = True):
    """The samples `data` names: `synthetic` (its num_samples, default 16), a folder path, or the user's
    dataloader.py (which gets the folder as its data_dir); at most num_samples of the user's. Not `batched`
    (a max_batch_size 0 model): each file or loader batch is one whole request."""
    if data.dataloader is not None:
        return UserData(signature, data_dir=data.data_dir, dataloader=data.dataloader,
                        dataloader_args=dict(data.dataloader_args or {}), precision=precision, limit=data.num_samples,
                        batched=batched, request_samples=data.samples_per_request)
    if data.data_dir == "synthetic":
        return SyntheticSource(signature, data.num_samples or SYNTHETIC_SAMPLES, data.seed, batched)
    folder = Path(str(data.data_dir))
    if not folder.is_dir():
        raise DataError(f"--data-dir {data.data_dir}: not a folder (use 'synthetic' for generated data)")
    return FolderSource(folder, signature, limit=data.num_samples, batched=batched,
                        request_samples=data.samples_per_request)
