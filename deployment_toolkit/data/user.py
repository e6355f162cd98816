"""The user's data: a seed-style `dataloader.py` or a plain folder of `.npy`/`.npz` samples, checked against
the model's signature before anything is sent, run or written.

A dataloader file defines `get_dataloader_fn(**kwargs)` returning a callable that yields
`(ids, x, y_real)` batches: `ids` one id per sample, `x` a dict {input name: array with the batch axis
first}, `y_real` a dict {label name: array} (may be empty or None). The keyword arguments it may take (it
gets the ones its signature names, or all of them with `**kwargs`): `data_dir`, `batch_size`, `precision`,
`input_names`, `input_shapes` ({name: per-sample shape}), `input_dtypes`, `output_names`, plus every
`--dataloader-arg key=value`.

A data folder (`--data-dir DIR` without `--dataloader`) holds, in file-name order, either

- `.npz` files: arrays named after the model's inputs (one sample, or a batch with the batch axis first),
  optionally `ids` (one per row of a batch) and labels: `labels`, any key starting with `label`, or a
  key named after a model output. Any other key is refused (a misspelt input name must not pass).
- `.npy` files, for one-input models: `<id>.npy` holds one sample (or a batch), or, with labels, the
  seed's nnU-Net pairs `<id>_x.npy` (the input) and `<id>_y.npy` (its label, key `labels`).

A sample is a file holding arrays of exactly the per-sample rank of the signature; one more leading axis
makes it a batch. Ids are the `ids` array, else the file stem (`<stem>:<row>` for rows of a batch). A scalar per
sample (signature shape [], a diffusion timestep) is a 0-d array in a sample's file, [N] in a batch's and in a
dataloader's batches; it reaches the model as [batch] (Triton carries it as [batch, 1]: TensorSpec.wire_shape).
A model served one whole batch per request (CLIP's coupled [B, B] logits) takes per-sample files too: they are
stacked into requests (data.whole).

Over 400 lines on purpose: both ways in (a dataloader and a folder) end in the same per-tensor checks and the
same error messages, which are read together when a user's data is refused.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import numpy as np

from ..config.keyvalue import VALUE_RULE
from ..results.identity import file_digest
from ..userfile import first_line as _first_line, import_file
from ..spec import ModelSignature, TensorSpec
from ..errors import UserError
from ..watchdog import user_stage
from .rebatch import Batch, rebatch
from .whole import DEFAULT_REQUEST_SAMPLES, holds_samples, sample_signature, stacked_requests

Arrays = dict[str, np.ndarray]
DATALOADER_FN_NAME = "get_dataloader_fn"
LABEL_PREFIX = "label"
IDS_KEY = "ids"


class DataError(UserError, ValueError):
    """Data that cannot be used with this model: one line saying what is wrong and what to do."""


# ---- validation --------------------------------------------------------------------------------

def _describe(shape: tuple[int, ...], dtype: Any) -> str:
    return f"shape {tuple(int(d) for d in shape)} {np.dtype(dtype).name}"


def check_tensor(spec: TensorSpec, value: Any, where: str, batched: bool = True) -> np.ndarray:
    """`value` as an array if it fits `spec` (batch axis first when `batched`); else DataError naming the
    tensor, the expected and the actual per-sample shape and dtype."""
    arr = np.asarray(value)
    got = arr.shape[1:] if batched else arr.shape
    expected = " x ".join("N" if d == -1 else str(d) for d in spec.shape) or "scalar"
    fits_shape = (arr.ndim == len(spec.shape) + (1 if batched else 0)
                  and all(s in (-1, g) for s, g in zip(spec.shape, got)))
    wanted = np.dtype(spec.dtype)
    fits_dtype = arr.dtype == wanted or (wanted == np.dtype(object) and arr.dtype.kind in "OSU")
    if not (fits_shape and fits_dtype):
        raise DataError(
            f"{where}: input {spec.name!r} has per-sample {_describe(got, arr.dtype)}, the model expects "
            f"shape ({expected}) {wanted.name}"
            + ("" if fits_dtype else f"; convert it with .astype(np.{wanted.name})")
            + ("" if fits_shape or not batched else " (arrays carry the batch axis first)"))
    return arr


def validate_batch(signature: ModelSignature, ids: Any, x: Any, y_real: Any, where: str,
                   batched: bool = True) -> Batch:
    """One `(ids, x, y_real)` batch checked against the signature's inputs; returns it as numpy arrays.

    Extra keys in `x` are refused (a misspelt input name would otherwise be dropped and replaced by nothing),
    ids must be one per sample, labels must share the batch axis."""
    if not isinstance(x, Mapping):
        raise DataError(f"{where}: x must be a dict {{input name: array}}, got {type(x).__name__}")
    names = [t.name for t in signature.inputs]
    missing, extra = [n for n in names if n not in x], [k for k in x if k not in names]
    if missing or extra:
        raise DataError(f"{where}: x has tensors {sorted(x)}, the model's inputs are {names}"
                        + (f" (missing {missing})" if missing else "") + (f" (unknown {extra})" if extra else ""))
    inputs = {spec.name: check_tensor(spec, x[spec.name], where, batched) for spec in signature.inputs}
    n = len(next(iter(inputs.values()))) if batched else 1
    if batched:
        sizes = {k: len(v) for k, v in inputs.items()}
        if len(set(sizes.values())) > 1:
            raise DataError(f"{where}: inputs have different batch sizes {sizes}")
    ids_arr = np.asarray(ids).reshape(-1) if ids is not None else np.arange(n)
    if ids_arr.dtype == object:
        ids_arr = np.asarray([str(i) for i in ids_arr.tolist()])
    if len(ids_arr) != n:
        raise DataError(f"{where}: {len(ids_arr)} ids for a batch of {n} samples; give one id per sample")
    labels: Arrays = {}
    if y_real is not None:
        if not isinstance(y_real, Mapping):
            raise DataError(f"{where}: y_real must be a dict {{label name: array}} or None, got {type(y_real).__name__}")
        for k, v in y_real.items():
            arr = np.asarray(v)
            if batched and (arr.ndim == 0 or len(arr) != n):
                raise DataError(f"{where}: label {k!r} has shape {arr.shape}; its first axis must be the batch ({n})")
            labels[str(k)] = arr
    return ids_arr, inputs, labels


# ---- loading a dataloader file -----------------------------------------------------------------

def import_user_file(path: str | Path, what: str, hint: str) -> Any:
    """Import a user's Python file as a module; any failure becomes one DataError line."""
    return import_file(path, what, DataError, hint)


def call_with_accepted(fn: Callable[..., Any], offered: Mapping[str, Any], required_extra: Mapping[str, Any],
                       what: str) -> Any:
    """Call `fn` with the offered keyword arguments it takes (all of them with **kwargs); the user's own
    `required_extra` ones must all be taken, else DataError (a typo in --dataloader-arg must not pass)."""
    params = inspect.signature(fn).parameters
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    unknown = [k for k in required_extra if not var_kw and k not in params]
    if unknown:
        raise DataError(f"{what} takes no argument(s) {unknown}; it takes {sorted(params)}")
    kwargs = {k: v for k, v in {**offered, **required_extra}.items() if var_kw or k in params}
    needed = [n for n, p in params.items() if p.default is inspect.Parameter.empty and n not in kwargs
              and p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    if needed:
        raise DataError(f"{what} needs argument(s) {needed} that nobody gives; pass them with "
                        f"--dataloader-arg NAME=VALUE or give them defaults")
    try:
        with user_stage(f"calling {what}"):
            return fn(**kwargs)
    except DataError:
        raise
    except Exception as err:  # noqa: BLE001
        raise DataError(f"{what} raised {_first_line(err)}") from err


# ---- reading a folder --------------------------------------------------------------------------

def _npy_groups(files: list[Path]) -> list[tuple[str, Path, Path | None]]:
    """(id, input file, label file or None): `<id>_x.npy` + `<id>_y.npy` pairs, else `<id>.npy` alone."""
    by_name = {p.name: p for p in files}
    pairs = [p for p in files if p.name.endswith("_x.npy")]
    if pairs:
        stray = [p.name for p in files if not p.name.endswith(("_x.npy", "_y.npy"))]
        if stray:
            raise DataError(f"{files[0].parent}: mixes <id>_x.npy/<id>_y.npy pairs with other .npy files "
                            f"({', '.join(stray[:3])}); use one layout")
        orphans = [p.name for p in files if p.name.endswith("_y.npy") and p.name[:-6] + "_x.npy" not in by_name]
        if orphans:
            raise DataError(f"{files[0].parent}: label file(s) {orphans[:3]} have no <id>_x.npy input")
        return [(p.name[:-6], p, by_name.get(p.name[:-6] + "_y.npy")) for p in pairs]
    return [(p.stem, p, None) for p in files]


def _one_sample(arrays: Mapping[str, np.ndarray], signature: ModelSignature) -> bool:
    """A file holds one sample (arrays of the per-sample rank) or a batch (one axis more): most inputs decide, so
    the one that disagrees is named by the checks (a scalar timestep saved as [1] beside one sample's latents)."""
    votes = [arrays[t.name].ndim == len(t.shape) for t in signature.inputs]
    return 2 * sum(votes) >= len(votes)


def read_folder(folder: str | Path, signature: ModelSignature, batched: bool = True) -> Iterator[tuple[Batch, str]]:
    """Each file of a data folder as a validated (ids, x, y_real) batch, with the file name for messages.
    Not `batched` (a max_batch_size 0 model): each file is one whole request, taken as it is."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"--data-dir {folder} is not a folder")
    files = sorted(p for p in folder.iterdir() if p.suffix in (".npy", ".npz") and not p.name.startswith("."))
    if not files:
        raise DataError(f"no .npy or .npz files in {folder}; see the layout in deployment_toolkit/data/user.py")
    kinds = {p.suffix for p in files}
    if len(kinds) > 1:
        raise DataError(f"{folder} mixes .npy and .npz files; use one layout")
    names = [t.name for t in signature.inputs]
    out_names = {t.name for t in signature.outputs}
    if kinds == {".npy"}:
        if len(names) != 1:
            raise DataError(f"{folder}: .npy files work for one-input models; this model has inputs {names}: "
                            "use .npz files with one array per input")
        spec = signature.inputs[0]
        for sample_id, x_path, y_path in _npy_groups(files):
            raw = np.load(x_path, allow_pickle=False)
            single = raw.ndim == len(spec.shape) and batched
            x = raw[None] if single else raw
            ids = [sample_id] if single else [f"{sample_id}:{i}" for i in range(len(x))]
            labels = None
            if y_path is not None:
                y = np.load(y_path, allow_pickle=False)
                labels = {"labels": y[None] if single else y}
            yield validate_batch(signature, ids, {spec.name: x}, labels, str(x_path), batched), x_path.name
        return
    for path in files:
        with np.load(path, allow_pickle=False) as npz:
            keys = list(npz.files)
            unknown = [k for k in keys if k not in names and k != IDS_KEY and k not in out_names
                       and not k.startswith(LABEL_PREFIX)]
            if unknown:
                raise DataError(f"{path}: arrays {unknown} are neither inputs {names}, '{IDS_KEY}', outputs "
                                f"{sorted(out_names)} nor labels ('{LABEL_PREFIX}*'); rename them")
            missing = [n for n in names if n not in keys]
            if missing:
                raise DataError(f"{path} lacks input(s) {missing}; it has {keys}")
            arrays = {n: npz[n] for n in names}
            single = batched and _one_sample(arrays, signature)
            x = {n: a[None] if single else a for n, a in arrays.items()}
            labels = {k: (npz[k][None] if single else npz[k]) for k in keys
                      if k not in names and k != IDS_KEY}
            n = next((len(a) for a in x.values() if a.ndim), 1)
            if IDS_KEY in keys:
                ids = npz[IDS_KEY].reshape(-1)
            else:
                ids = [path.stem] if single else [f"{path.stem}:{i}" for i in range(n)]
        if not batched:
            ids = [path.stem]
        yield validate_batch(signature, ids, x, labels, str(path), batched), path.name


# ---- the data set ------------------------------------------------------------------------------

def _same_labels(batches: Iterable[Batch]) -> Iterator[Batch]:
    """The batches as they are, refusing one whose label names differ from the first's."""
    names: set[str] | None = None
    for batch in batches:
        if names is not None and set(batch[2]) != names:
            raise DataError(f"labels {sorted(batch[2])} differ from earlier batches' {sorted(names)}; "
                            "every batch needs the same label tensors")
        names = set(batch[2])
        yield batch


@dataclass
class UserData:
    """The user's data set for one model: `batches()` gives validated batches of the asked size, the same
    interface as data.batches' SyntheticSource, so every tool takes either."""

    signature: ModelSignature
    data_dir: str | None = None
    dataloader: str | None = None
    dataloader_args: dict[str, Any] = field(default_factory=dict)
    precision: str = "fp32"
    limit: int | None = None  # at most this many samples (None: all)
    batched: bool = True  # False for a max_batch_size 0 model: every yielded x is one whole request
    # not batched, a folder of per-sample files (data.whole): samples stacked into one request, at most this many
    request_samples: int | None = None

    def __post_init__(self) -> None:
        if self.dataloader is None and self.data_dir is None:
            raise DataError("give --data-dir (a folder of .npy/.npz samples) or --dataloader (a dataloader.py)")
        if self.dataloader is not None and not Path(self.dataloader).is_file():
            raise DataError(f"--dataloader {self.dataloader} does not exist")
        if self.limit is not None and self.limit < 1:
            raise DataError(f"the sample limit must be >= 1, got {self.limit}")
        if self.request_samples is not None and self.request_samples < 1:
            raise DataError(f"samples per request must be >= 1, got {self.request_samples}")

    def offered_kwargs(self, batch_size: int) -> dict[str, Any]:
        """What a dataloader's get_dataloader_fn may take (see the module doc)."""
        return {
            "data_dir": self.data_dir,
            "batch_size": batch_size,
            "precision": self.precision,
            "input_names": [t.name for t in self.signature.inputs],
            "input_shapes": {t.name: list(t.concrete_shape) for t in self.signature.inputs},
            "input_dtypes": {t.name: t.dtype for t in self.signature.inputs},
            "output_names": [t.name for t in self.signature.outputs],
        }

    def _raw(self, batch_size: int) -> Iterator[Batch]:
        if self.dataloader is None:
            per_sample = sample_signature(self.signature)
            if not self.batched and per_sample is not None and holds_samples(self.data_dir, self.signature):
                samples = (batch for batch, _ in read_folder(self.data_dir, per_sample))  # type: ignore[arg-type]
                yield from stacked_requests(samples, self.request_samples or DEFAULT_REQUEST_SAMPLES, self.limit)
                return
            for batch, _ in read_folder(self.data_dir, self.signature, self.batched):  # type: ignore[arg-type]
                yield batch
            return
        module = import_user_file(self.dataloader, "dataloader", f"it must define {DATALOADER_FN_NAME}(**kwargs)")
        factory = getattr(module, DATALOADER_FN_NAME, None)
        if not callable(factory):
            raise DataError(f"dataloader {self.dataloader} defines no {DATALOADER_FN_NAME}(**kwargs) returning a "
                            "callable that yields (ids, x, y_real)")
        what = f"{Path(self.dataloader).name}:{DATALOADER_FN_NAME}"
        fn = call_with_accepted(factory, self.offered_kwargs(batch_size), self.dataloader_args, what)
        if not callable(fn):
            raise DataError(f"{what} returned {type(fn).__name__}, not a callable yielding (ids, x, y_real)")
        try:
            iterator = iter(fn())
        except Exception as err:  # noqa: BLE001
            raise DataError(f"{what}'s dataloader raised {_first_line(err)}") from err
        index = 0
        while True:
            try:
                with user_stage(f"reading batch {index} from {what}", announce=index == 0):
                    item = next(iterator)
            except StopIteration:
                return
            except Exception as err:  # noqa: BLE001
                raise DataError(f"{what}'s dataloader raised {_first_line(err)} at batch {index}") from err
            if not isinstance(item, tuple) or len(item) != 3:
                raise DataError(f"{what}: batch {index} is not an (ids, x, y_real) tuple")
            yield validate_batch(self.signature, *item, where=f"{what} batch {index}", batched=self.batched)
            index += 1

    def batches(self, batch_size: int) -> Iterator[Batch]:
        """Validated batches of exactly `batch_size` samples (the last may be smaller); ids unique."""
        if batch_size < 1:
            raise DataError(f"batch size must be >= 1, got {batch_size}")
        seen: set[Any] = set()
        count = 0
        source = self._raw(batch_size)
        stream = source if not self.batched else rebatch(_same_labels(source), batch_size, self.limit)
        for ids, x, y in stream:
            dup = [i for i in ids.tolist() if i in seen]
            if dup:
                raise DataError(f"sample ids repeat ({dup[:3]}); ids must be unique across the data set")
            seen.update(ids.tolist())
            count += len(ids)
            yield ids, x, y
            if not self.batched and self.limit is not None and count >= self.limit:
                return
        if count == 0:
            raise DataError(f"{self.dataloader or self.data_dir} yielded no samples")

    def samples(self, limit: int | None = None) -> Iterator[tuple[Any, Arrays]]:
        """(id, inputs of one sample without the batch axis), at most `limit` of them."""
        n = 0
        for ids, x, _ in self.batches(1):
            for i, sample_id in enumerate(ids.tolist()):
                if limit is not None and n >= limit:
                    return
                yield sample_id, ({k: v[i] for k, v in x.items()} if self.batched else x)
                n += 1

    def describe(self) -> dict[str, Any]:
        """Provenance of the data for manifests and run.json: what was read, and the loader file's digest."""
        out: dict[str, Any] = {"data_dir": str(self.data_dir) if self.data_dir is not None else None}
        if self.dataloader is not None:
            out.update(dataloader=str(self.dataloader), dataloader_sha256=file_digest(self.dataloader),
                       dataloader_args=dict(self.dataloader_args))
        if self.limit is not None:
            out["limit"] = self.limit
        return out


def add_data_arguments(parser, *, folder_help: str | None = None) -> None:
    """--dataloader / --dataloader-arg (the seed's form); --data-dir is the caller's (its default differs)."""
    parser.add_argument("--dataloader", default=None, metavar="FILE",
                        help="a dataloader.py defining get_dataloader_fn(**kwargs) (the DLE form); it gets "
                             "--data-dir as data_dir")
    parser.add_argument("--dataloader-arg", action="append", default=[], metavar="KEY=VALUE",
                        help=f"extra keyword argument for get_dataloader_fn (repeatable; {VALUE_RULE})")


__all__ = ["DataError", "UserData", "validate_batch", "check_tensor", "read_folder", "import_user_file",
           "call_with_accepted", "add_data_arguments",
           "DATALOADER_FN_NAME"]
