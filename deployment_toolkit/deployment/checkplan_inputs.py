"""What check-plan sends each model: found on the server it checks, never in the planner's workspace.

The plan folder names its models; the server says what each takes (model metadata: input names, datatypes, shapes
with -1 for the batch axis and dynamic dims; the config: whether the first axis is the batch). A model is called as
its clients call it: a pipeline by its ensemble `<name>_pipeline` where the server has one, else by its own name.
Inputs are the user's samples (`--samples DIR`: `DIR/<model>/*.npz`, one request per file or per row of a batch, or
raw files as `deploy-pipeline` reads them: one file per sample, one folder per sample for several inputs), else
seeded random data of the right dtype with dynamic dims of 1. A model that takes strings (TYPE_STRING: a pipeline's
raw bytes or text) has no meaningful random input: without samples it is refused in one line."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ..client import TritonClient
from ..client.openloop import Requests
from ..errors import UserFileNotFoundError, UserInputError
from ..spec import numpy_dtype

PIPELINE_SUFFIX = "_pipeline"  # a pipeline's ensemble (or fused model) on the server: pipeline.plan's naming
RANDOM_REQUESTS = 4  # distinct random requests per model, cycled over its schedule
MAX_SAMPLES = 64  # distinct requests read from a model's samples


@dataclass(frozen=True)
class ServedInput:
    name: str
    datatype: str  # Triton's: FP32, INT64, BYTES, ...
    shape: tuple[int, ...]  # as the server reports it: -1 for the batch axis and dynamic dims

    @property
    def is_string(self) -> bool:
        return self.datatype == "BYTES"

    @property
    def wire(self) -> tuple[int, ...]:
        """A request of one: the batch axis and dynamic dims as 1."""
        return tuple(1 if d == -1 else d for d in self.shape)


@dataclass(frozen=True)
class ServedModel:
    name: str  # the plan's
    served: str  # the server's: `<name>_pipeline` for a pipeline, else the name
    inputs: tuple[ServedInput, ...]
    batched: bool

    @property
    def strings(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.inputs if i.is_string)


def served_name(client: TritonClient, name: str) -> str | None:
    """What clients call for the plan's model `name`: its pipeline's ensemble where the server has one ready, else
    the model itself; None where neither is ready."""
    return next((c for c in (name + PIPELINE_SUFFIX, name) if client.ready(c)), None)


def ready_models(client: TritonClient) -> list[str]:
    """The models the server says are READY (its repository index; [] where it does not say)."""
    try:
        index = client.repository_index()
    except Exception:  # noqa: BLE001 - only said beside a missing model, to help
        return []
    return sorted({m.get("name", "") for m in index if str(m.get("state", "")).upper() == "READY"} - {""})


def describe(client: TritonClient, name: str, served: str) -> ServedModel:
    """The model's inputs as the server reports them, and whether its first axis is the batch."""
    meta = client.metadata(served)
    batched = int(client.config_json(served).get("max_batch_size", 0) or 0) > 0
    inputs = tuple(ServedInput(t["name"], t["datatype"], tuple(t["shape"])) for t in meta.get("inputs", []))
    return ServedModel(name, served, inputs, batched)


def _random(inp: ServedInput, rng: np.random.Generator) -> np.ndarray:
    dtype = np.dtype(numpy_dtype(inp.datatype))
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(inp.wire).astype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, inp.wire).astype(bool)
    return rng.integers(0, 10, inp.wire).astype(dtype)  # small ids: valid for embeddings and masks alike


def _fits(a: np.ndarray, inp: ServedInput) -> bool:
    return a.ndim == len(inp.shape) and all(d in (-1, s) for d, s in zip(inp.shape, a.shape))


def _shapes(a: np.ndarray, inp: ServedInput, batched: bool) -> list[np.ndarray]:
    """The readings of `a` that the server's dims may take: as it is; one sample (a batch axis added); a batch of
    values the server holds as [batch, 1] (trailing 1s added)."""
    out = [a]
    if batched and a.ndim < len(inp.shape):
        out.append(a[None])
    for b in list(out):
        while b.ndim < len(inp.shape):
            b = b.reshape(b.shape + (1,))
        out.append(b)
    return out


def _fit(array: np.ndarray, inp: ServedInput, batched: bool, where: str) -> np.ndarray:
    """`array` as the server takes `inp` (see _shapes: a sample without its batch axis, a string per sample as
    [1, 1]); refused in one line when the dims or the dtype differ."""
    a = np.asarray(array)
    if a.dtype.kind in "SU":
        a = a.astype(object)
    fitted = next((b for b in _shapes(a, inp, batched) if _fits(b, inp)), None)
    if fitted is None:
        raise UserInputError(f"{where}: input {inp.name!r} has shape {list(a.shape)}, but the server takes "
                             f"{list(inp.shape)} (-1: any size; the first is the batch)")
    if inp.is_string:
        return np.vectorize(lambda v: v.encode() if isinstance(v, str) else v, otypes=[object])(fitted)
    dtype = np.dtype(numpy_dtype(inp.datatype))
    if fitted.dtype.kind == "O" or not np.can_cast(fitted.dtype, dtype, "same_kind"):
        raise UserInputError(f"{where}: input {inp.name!r} is {fitted.dtype.name}, but the server takes "
                             f"{inp.datatype}")
    return np.ascontiguousarray(fitted.astype(dtype, copy=False))


def _rows(request: Mapping[str, np.ndarray], batched: bool, where: str) -> list[dict[str, np.ndarray]]:
    """A batched request of N samples as N requests of one (the plan's rates count inferences, sent one each)."""
    sizes = {a.shape[0] for a in request.values()} if batched else {1}
    if len(sizes) != 1:
        raise UserInputError(f"{where}: its inputs hold different numbers of samples ({sorted(sizes)})")
    n = sizes.pop()
    return [dict(request)] if not batched or n == 1 else [{k: a[i:i + 1] for k, a in request.items()}
                                                          for i in range(n)]


def _npz_requests(model: ServedModel, files: Sequence[Path]) -> list[dict[str, np.ndarray]]:
    out: list[dict[str, np.ndarray]] = []
    for path in files:
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except (OSError, ValueError) as err:
            raise UserInputError(f"{path} is not a readable .npz file: {err}") from None
        missing = [i.name for i in model.inputs if i.name not in arrays]
        if missing:
            raise UserInputError(f"{path} has no array for input(s) {', '.join(missing)} of {model.served} (it has "
                                 f"{', '.join(sorted(arrays)) or 'none'}): save one array per input name")
        fitted = {i.name: _fit(arrays[i.name], i, model.batched, str(path)) for i in model.inputs}
        out += _rows(fitted, model.batched, str(path))
        if len(out) >= MAX_SAMPLES:
            break
    return out[:MAX_SAMPLES]


def _raw_requests(model: ServedModel, folder: Path) -> list[dict[str, np.ndarray]]:
    """Raw samples (image files, text files, one folder per sample): read as the pipeline tools read them."""
    from ..pipeline.raw import read_raw

    raw = read_raw(folder, [i.name for i in model.inputs], step=model.served, max_samples=MAX_SAMPLES)
    return [{i.name: _fit(s.inputs[i.name], i, model.batched, str(s.path)) for i in model.inputs}
            for s in raw.samples]


def sample_folder(samples: Path, model: ServedModel) -> Path | None:
    """`samples/<name>` (or `samples/<served name>`), None where neither exists."""
    return next((samples / n for n in (model.name, model.served) if (samples / n).is_dir()), None)


def requests_for(model: ServedModel, samples: Path | None, seed: int) -> Requests:
    """The model's distinct requests: its samples where `samples` has a folder for it, else seeded random data."""
    folder = sample_folder(samples, model) if samples is not None else None
    if folder is None:
        rng = np.random.default_rng([seed, 7])
        arrays = [{i.name: _random(i, rng) for i in model.inputs} for _ in range(RANDOM_REQUESTS)]
    else:
        npz = sorted(folder.glob("*.npz"))
        arrays = _npz_requests(model, npz) if npz else _raw_requests(model, folder)
    return Requests(model.served, tuple(arrays), {i.name: i.datatype for i in model.inputs})


def refuse_strings_without_samples(models: Sequence[ServedModel], samples: Path | None) -> None:
    """A model taking strings (a pipeline's raw input) must be fed the user's samples: one line naming each."""
    if samples is not None and not samples.is_dir():
        raise UserFileNotFoundError(f"--samples {samples}: no such folder (give a folder with one sub-folder per "
                                    "model: DIR/<model>/*.npz, or its raw files for a pipeline)")
    lacking = [m for m in models if m.strings and (samples is None or sample_folder(samples, m) is None)]
    if lacking:
        where = "give --samples DIR" if samples is None else f"add them under {samples}"
        names = ", ".join(f"{m.name} ({m.served}: {', '.join(m.strings)})" for m in lacking)
        raise UserInputError(f"model(s) {names} take TYPE_STRING inputs (a pipeline's raw bytes or text), which random "
                             f"data cannot stand for: {where} with DIR/<model>/ holding the raw samples its clients "
                             "send (one file per sample, as deploy-pipeline --raw-data reads them)")


def describe_all(client: TritonClient, served: Mapping[str, str]) -> dict[str, ServedModel]:
    """Every model's ServedModel (plan name -> server name)."""
    return {name: describe(client, name, s) for name, s in served.items()}


def data_text(model: ServedModel, samples: Path | None, requests: Requests) -> str:
    """Where a model's inputs came from, for the output."""
    folder = sample_folder(samples, model) if samples is not None else None
    if folder is None:
        return f"{len(requests.arrays)} seeded random request(s)"
    return f"{len(requests.arrays)} request(s) from {folder}"


__all__ = ["ServedInput", "ServedModel", "data_text", "describe", "describe_all", "ready_models",
           "refuse_strings_without_samples", "requests_for", "served_name"]
