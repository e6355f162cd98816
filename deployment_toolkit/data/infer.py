"""The model's inputs read from the user's data, for a model.py that does not describe them (no get_signature,
no --input-shape): the seed's toolkit takes its inputs from the dataloader, and so does this one.

The first batches (at most MAX_BATCHES of a dataloader, MAX_FILES files of a folder) give each input its name,
dtype and per-sample shape. An axis whose size differs between samples is dynamic (-1, with the first sample's
size as the example), and so is any axis named by --dynamic-axis. Integer inputs record the range their values
span, so random examples stay valid token ids, 0/1 masks or type ids. Batches that disagree in rank or dtype
are refused in one line.

Without a signature a folder's file cannot say whether it holds one sample or a batch: a file is one sample,
unless it holds an `ids` array, whose length is its batch size.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from .samples import DataSpec
from .user import DATALOADER_FN_NAME, IDS_KEY, LABEL_PREFIX, DataError, call_with_accepted, import_user_file

MAX_BATCHES = 8
MAX_FILES = 16
SINGLE_INPUT = "input__0"


def _folder_samples(folder: Path) -> Iterator[tuple[str, dict[str, np.ndarray], bool]]:
    """(where, arrays, batched) per file of a data folder."""
    if not folder.is_dir():
        raise DataError(f"--data-dir {folder} is not a folder")
    files = sorted(p for p in folder.iterdir() if p.suffix in (".npy", ".npz") and not p.name.startswith("."))
    if not files:
        raise DataError(f"no .npy or .npz files in {folder}; see the layout in deployment_toolkit/data/user.py")
    for path in files[:MAX_FILES]:
        if path.suffix == ".npy":
            if path.name.endswith("_y.npy"):
                continue
            yield str(path), {SINGLE_INPUT: np.load(path, allow_pickle=False)}, False
            continue
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files if k != IDS_KEY and not k.startswith(LABEL_PREFIX)}
            yield str(path), arrays, IDS_KEY in npz.files


def _loader_batches(dataloader: str, data_dir: str | None, args: Mapping[str, Any], precision: str
                    ) -> Iterator[tuple[str, dict[str, np.ndarray], bool]]:
    module = import_user_file(dataloader, "dataloader", f"it must define {DATALOADER_FN_NAME}(**kwargs)")
    factory = getattr(module, DATALOADER_FN_NAME, None)
    if not callable(factory):
        raise DataError(f"dataloader {dataloader} defines no {DATALOADER_FN_NAME}(**kwargs)")
    what = f"{Path(dataloader).name}:{DATALOADER_FN_NAME}"
    fn = call_with_accepted(factory, {"data_dir": data_dir, "batch_size": 2, "precision": precision}, args, what)
    try:
        for index, item in enumerate(fn()):
            if index >= MAX_BATCHES:
                return
            if not isinstance(item, tuple) or len(item) != 3 or not isinstance(item[1], Mapping):
                raise DataError(f"{what}: batch {index} is not an (ids, x, y_real) tuple with x a dict "
                                "{input name: array}")
            yield f"{what} batch {index}", {str(k): np.asarray(v) for k, v in item[1].items()}, True
    except DataError:
        raise
    except Exception as err:  # noqa: BLE001 - the user's loader may raise anything
        from ..userfile import first_line

        raise DataError(f"{what}'s dataloader raised {first_line(err)} while the inputs were read from it") from err


def inputs_from_data(data_dir: str | None = None, dataloader: str | None = None,
                     dataloader_args: Mapping[str, Any] | None = None, dynamic_axes: Mapping[str, list[int]] | None = None,
                     precision: str = "fp32") -> dict[str, dict[str, Any]]:
    """{input name: {shape (per sample, -1 dynamic), dtype, example_shape, value_range}} from the first batches
    (the form ModelSource.data_inputs takes)."""
    stream = _loader_batches(dataloader, data_dir, dataloader_args or {}, precision) if dataloader else \
        _folder_samples(Path(data_dir or "."))
    seen: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for where, arrays, batched in stream:
        if not arrays:
            raise DataError(f"{where} holds no input arrays")
        if order and set(arrays) != set(order):
            raise DataError(f"{where}: inputs {sorted(arrays)} differ from the first batch's {sorted(order)}")
        for name, arr in arrays.items():
            if batched and arr.ndim == 0:
                raise DataError(f"{where}: input {name!r} is a scalar; batches carry the batch axis first")
            shape = tuple(arr.shape[1:] if batched else arr.shape)
            info = seen.get(name)
            if info is None:
                order.append(name)
                info = seen[name] = {"dtype": arr.dtype, "example": shape, "sizes": [set() for _ in shape],
                                     "low": None, "high": None}
            if arr.dtype != info["dtype"]:
                raise DataError(f"{where}: input {name!r} is {arr.dtype.name}, the first batch's was "
                                f"{info['dtype'].name}; every batch must have one dtype per input")
            if len(shape) != len(info["example"]):
                raise DataError(f"{where}: input {name!r} has per-sample rank {len(shape)} {list(shape)}, the first "
                                f"batch's had {len(info['example'])} {list(info['example'])}")
            for axis, size in enumerate(shape):
                info["sizes"][axis].add(size)
            if arr.dtype.kind in "iu" and arr.size:
                low, high = int(arr.min()), int(arr.max()) + 1
                info["low"] = low if info["low"] is None else min(info["low"], low)
                info["high"] = high if info["high"] is None else max(info["high"], high)
    if not order:
        raise DataError(f"{dataloader or data_dir} yielded no samples to read the inputs from")
    forced = dict(dynamic_axes or {})
    unknown = sorted(set(forced) - set(order))
    if unknown:
        raise DataError(f"--dynamic-axis names {', '.join(unknown)}, which the data does not have; its inputs are "
                        f"{', '.join(order)}")
    out: dict[str, dict[str, Any]] = {}
    for name in order:
        info = seen[name]
        example = list(info["example"])
        for axis in forced.get(name, []):
            if not 0 <= axis < len(example):
                raise DataError(f"--dynamic-axis {name}:{axis}: {name} has {len(example)} per-sample axes "
                                f"(0..{len(example) - 1}, the batch axis not counted)")
        dynamic = {a for a, sizes in enumerate(info["sizes"]) if len(sizes) > 1} | set(forced.get(name, []))
        out[name] = {"shape": [-1 if a in dynamic else d for a, d in enumerate(example)],  # [] a scalar per sample
                     "dtype": info["dtype"].name, "example_shape": example if dynamic else None,
                     "value_range": [info["low"], info["high"]] if info["low"] is not None else None}
    return out


def with_data_inputs(source, data, precision: str = "fp32"):
    """`source` (a sources.ModelSource) with its inputs read from the user's samples (`data`: a samples.DataSpec,
    or a command's parsed flags: --dataloader, --data-dir, --dynamic-axis), for a model.py or module:function given
    no --input-shape; used only when the model has no get_signature. Other sources, or no data: `source` as it is."""
    spec = data if isinstance(data, DataSpec) else DataSpec.from_args(data)
    if source.kind != "python" or source.input_shapes or not spec.user_data:
        return source
    source.data_inputs = inputs_from_data(spec.data_dir, spec.dataloader, spec.dataloader_args, spec.dynamic_axes,
                                          precision)
    return source
