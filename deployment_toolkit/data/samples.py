"""Where a step's samples come from, typed: the flags `--data-dir`, `--dataloader`, `--dataloader-arg`,
`--dynamic-axis`, `--num-samples` and `--seed` parsed once, so that the steps (inference dumps, the search's and the
runners' perf_analyzer input, a model.py's inputs read from the data) take this object rather than the parsed
flags, from a command and from Python alike."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..config.keyvalue import parse_pairs
from .user import DataError, UserData

VERIFY_SAMPLES = 8  # real samples a conversion is also compared on, at most


@dataclass
class DataSpec:
    """'synthetic' (random inputs), a folder of .npy/.npz, or the user's dataloader.py over `data_dir`."""

    data_dir: str | None = "synthetic"  # None: no folder (a dataloader that needs none)
    dataloader: str | None = None
    dataloader_args: dict[str, Any] = field(default_factory=dict)
    num_samples: int | None = None  # of synthetic data (default 16), or at most this many of the user's
    seed: int = 0
    dynamic_axes: dict[str, list[int]] = field(default_factory=dict)  # per-sample axes forced dynamic (NAME: axes)
    # a model served one whole batch per request (data.whole), fed per-sample files: samples stacked per request
    samples_per_request: int | None = None

    @property
    def user_data(self) -> bool:
        return self.dataloader is not None or self.data_dir not in (None, "synthetic")

    def describe(self) -> str:
        """Where the samples come from, in words ('' for random inputs)."""
        if self.dataloader:
            return f"{self.dataloader} over {self.data_dir}"
        return self.data_dir if self.user_data else ""

    def dataset(self, signature, *, precision: str = "fp32", limit: int | None = None,
                  batched: bool = True) -> UserData | None:
        """The user's data set for `signature` (validated batches), or None for random inputs."""
        if not self.user_data:
            return None
        return UserData(signature, data_dir=self.data_dir, dataloader=self.dataloader,
                        dataloader_args=self.dataloader_args, precision=precision, limit=limit, batched=batched,
                        request_samples=self.samples_per_request)

    def verification_batches(self, precision: str = "fp32", limit: int = VERIFY_SAMPLES,
                             batch_size: int = 1) -> Callable[[Any], list[dict]] | None:
        """signature -> at most `limit` of the user's samples in batches (ConvertOptions.verify_data), read and
        checked against the signature before anything is exported; None for random inputs."""
        if not self.user_data:
            return None

        def load(signature: Any) -> list[dict]:
            data = self.dataset(signature, precision=precision, limit=limit)
            return [x for _, x, _ in data.batches(batch_size)] if data is not None else []

        return load

    @classmethod
    def from_args(cls, args: Any) -> DataSpec:
        """From a command's parsed flags (those it does not have keep their defaults)."""
        return cls(getattr(args, "data_dir", None), getattr(args, "dataloader", None),
                   parse_pairs(getattr(args, "dataloader_arg", None) or [], "--dataloader-arg"), getattr(args, "num_samples", None),
                   getattr(args, "seed", 0) or 0, parse_dynamic_axes(getattr(args, "dynamic_axis", None) or []))


def parse_dynamic_axes(items: list[str]) -> dict[str, list[int]]:
    """--dynamic-axis NAME:AXIS (repeatable; AXIS counts per-sample axes, 0 = the first after the batch)."""
    out: dict[str, list[int]] = {}
    for item in items:
        name, sep, axis = item.rpartition(":")
        if not sep or not name or not axis.strip().isdigit():
            raise DataError(f"--dynamic-axis expects NAME:AXIS (e.g. input_ids:0), got {item!r}")
        out.setdefault(name, []).append(int(axis))
    return out


__all__ = ["DataSpec", "VERIFY_SAMPLES", "parse_dynamic_axes"]
