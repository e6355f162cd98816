"""The user's raw samples: what a pipeline's clients send (encoded images, UTF-8 text), one sample per file
(`cat.jpg`, `review.txt`) or, for several inputs, one folder per sample with one file per input name
(`0001/image.png`, `0001/caption.txt`). `.npy` files hold numeric inputs. Files are read as bytes; an input
declared "text" must decode as UTF-8, checked here with the file named."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import UserFileNotFoundError, UserInputError
from .ports import BYTES, TEXT, Port, port_of_arrays

DEFAULT_MAX_SAMPLES = 64


@dataclass(frozen=True)
class RawSample:
    name: str
    path: Path  # the sample's file, or its folder
    files: dict[str, Path]  # input name -> its file
    # a batch of one: a string as a (1,) object array, numbers as (1, *shape)
    inputs: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class RawData:
    folder: Path
    ports: tuple[Port, ...]
    samples: tuple[RawSample, ...]

    def describe(self) -> str:
        return (f"{len(self.samples)} raw sample(s) in {self.folder} ("
                + ", ".join(p.describe() for p in self.ports) + ")")


def _entries(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise UserFileNotFoundError(f"raw data folder {folder} does not exist: give a folder with one file per sample "
                                    "(image.jpg, review.txt) or one folder per sample with one file per input")
    entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    if not entries:
        raise UserInputError(f"raw data folder {folder} is empty: put one file per sample in it (image.jpg, "
                             "review.txt), or one folder per sample with one file per input name")
    if any(p.is_dir() for p in entries) and any(p.is_file() for p in entries):
        raise UserInputError(f"raw data folder {folder} mixes files and folders: use one file per sample, or one "
                             "folder per sample (one file per input name), not both")
    return entries


def _sample_files(entry: Path, names: Sequence[str]) -> dict[str, Path]:
    if entry.is_file():
        if len(names) != 1:
            raise UserInputError(f"raw sample {entry} is one file, but the pipeline takes {len(names)} inputs "
                                 f"({', '.join(names)}): put each sample in a folder with one file per input "
                                 f"({', '.join(n + '.<ext>' for n in names)})")
        return {names[0]: entry}
    by_stem = {p.stem: p for p in entry.iterdir() if p.is_file() and not p.name.startswith(".")}
    missing = [n for n in names if n not in by_stem]
    if missing:
        raise UserInputError(f"raw sample folder {entry} has no file for input(s) {', '.join(missing)} (it has "
                             f"{', '.join(sorted(by_stem)) or 'none'}): name each file after its input, e.g. "
                             f"{missing[0]}.txt")
    return {n: by_stem[n] for n in names}


def _guess_port(name: str, files: list[Path]) -> Port:
    """The port the files of one input show: .npy numbers, .txt text, anything else bytes."""
    suffixes = {f.suffix.lower() for f in files}
    if ".npy" in suffixes:
        if suffixes != {".npy"}:
            raise UserInputError(f"raw input {name!r} mixes .npy files with others ({', '.join(sorted(suffixes))}): "
                                 "give one kind of file per input")
        return port_of_arrays(name, (_load_npy(f)[None] for f in files))
    return Port(name, TEXT if suffixes == {".txt"} else BYTES)


def _load_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise UserInputError(f"raw sample {path} is not a readable .npy array: {err}") from None


def _value(port: Port, path: Path, step: str) -> np.ndarray:
    """One sample's value of `port` read from `path`, as a batch of one."""
    if not port.is_string:
        if path.suffix.lower() != ".npy":
            raise UserInputError(f"raw sample {path} feeds {port.describe()}, a numeric input: save it as .npy")
        arr = _load_npy(path)
        if arr.dtype.name != port.dtype or len(arr.shape) != len(port.shape) or any(
                d != -1 and d != s for d, s in zip(port.shape, arr.shape)):
            raise UserInputError(f"raw sample {path} holds {arr.dtype.name} {list(arr.shape)}; {step} takes "
                                 f"{port.describe()}: save it with that dtype and shape")
        return arr[None]
    if port.shape:
        raise UserInputError(f"{step} declares {port.describe()}: a raw file gives one value per sample, so declare "
                             f"it with shape [] (e.g. INPUTS = {{{port.name!r}: {port.dtype!r}}})")
    data = path.read_bytes()
    if port.dtype == TEXT:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise UserInputError(f"raw sample {path} is not valid UTF-8 ({err.reason} at byte {err.start}), but "
                                 f"{step} takes {port.name!r} as text: save it as UTF-8, or declare it "
                                 "\"bytes\"") from None
    return np.array([data], dtype=object)


def read_raw(folder: str | Path, names: Sequence[str], declared: Sequence[Port] | None = None, step: str = "the model",
             max_samples: int = DEFAULT_MAX_SAMPLES) -> RawData:
    """The raw samples for the inputs `names` (the first `max_samples`, sorted by name); `declared` ports are checked,
    the others read from the files. `step` names who takes them, for the error lines."""
    if max_samples < 1:
        raise UserInputError(f"--max-samples must be >= 1, got {max_samples}")
    folder = Path(folder)
    entries = _entries(folder)[:max_samples]
    files = [_sample_files(e, names) for e in entries]
    given = {p.name: p for p in declared or ()}
    ports = tuple(given.get(n) or _guess_port(n, [f[n] for f in files]) for n in names)
    samples = tuple(RawSample(e.name, e, f, {p.name: _value(p, f[p.name], step) for p in ports})
                    for e, f in zip(entries, files))
    return RawData(folder, ports, samples)


__all__ = ["DEFAULT_MAX_SAMPLES", "RawData", "RawSample", "read_raw"]
