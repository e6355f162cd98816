"""The network behind a preprocess needs nothing more: its inputs are what the preprocess gives on the raw samples.

The preprocess runs in-process on the raw samples, alone and in batches as Triton hands them (plan.prepare); its
numeric outputs are the network's inputs: names, dtypes, per-sample dims, the dims that vary (-1, from the samples
and the batches: a tokenizer that pads each batch to its longest text), an example shape (the first sample's) and,
for integers, the range the values span (token ids below the vocabulary, a 0/1 mask). Each sample's outputs are
written as one .npz file (data.user's folder layout, no batch axis), so the network's conversion is verified and
its search measured on the real token lengths and image sizes, not on one fixed example shape.

    inputs = network_inputs("preprocess.py", "texts/", "workspace/net_inputs")
    source = inputs.source(parse_reference("model.py"))   # get_signature optional: checked against them if given
    data = inputs.data                                     # DataSpec over inputs.folder, for the search

A model.py's `get_signature` and a deployment entry's `data:` stay optional; given, they are checked against these
inputs (check_signature, check_data), a mismatch one line naming the tensor and both shapes and dtypes.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..data.samples import DataSpec
from ..data.user import DataError
from ..errors import UserInputError
from ..sources import ModelSource, parse_reference
from ..sources.base import DEFAULT_MAX_BATCH
from ..spec import ModelSignature, SpecError, TensorSpec
from .plan import Prepared, prepare
from .ports import Port, shape_text
from .raw import DEFAULT_MAX_SAMPLES
from .stepfile import StepFile, StepKind, load_step
from .wiring import pre_by_position

CHECKED_SAMPLES = 8  # of a deployment entry's own `data:`, checked against the preprocess's outputs


@dataclass(frozen=True)
class NetworkInputs:
    """The network's inputs as the preprocess gives them, and a folder holding them for every raw sample."""

    specs: tuple[TensorSpec, ...]
    folder: Path  # one .npz per raw sample, named after it: its network inputs without the batch axis
    samples: int
    preprocess: Path  # the step file they came from, for the error lines

    @property
    def data(self) -> DataSpec:
        """The per-sample inputs as the toolkit's data (`--data-dir`): what the search and the dumps read."""
        return DataSpec(data_dir=str(self.folder))

    def shapes(self) -> dict[str, dict[str, Any]]:
        """The form ModelSource.input_shapes / data_inputs take: {name: {shape, dtype, example_shape, value_range}}."""
        return _shapes(self.specs)

    def describe(self) -> str:
        return ", ".join(f"{t.name!r} {t.dtype} {shape_text(t.shape)}" for t in self.specs)

    def check_signature(self, signature: ModelSignature | Sequence[TensorSpec], where: str) -> None:
        """Each input the network declares (`where`: get_signature, the manifest) is a preprocess output of its dtype
        and dims (-1 on the network's side takes any size); else one line naming the tensor and both sides."""
        inputs = signature.inputs if isinstance(signature, ModelSignature) else tuple(signature)
        given = {t.name: t for t in self.specs}
        for wanted in inputs:
            got = given.get(wanted.name)
            if got is None:
                raise UserInputError(f"{where} declares input {wanted.name!r} {wanted.dtype} {shape_text(wanted.shape)}"
                                     f", which {self.preprocess.name} does not give on the raw samples (it gives "
                                     f"{self.describe()}): return it from preprocess, or fix {where}")
            if not Port(got.name, got.dtype, got.shape).fits(Port(wanted.name, wanted.dtype, wanted.shape)):
                raise UserInputError(f"{where} declares input {wanted.name!r} as {wanted.dtype} "
                                     f"{shape_text(wanted.shape)}, but {self.preprocess.name} gives {got.dtype} "
                                     f"{shape_text(got.shape)} on the raw samples (-1: the size varies): make them "
                                     "agree, or leave the inputs out of get_signature (they are read from preprocess)")

    def check_data(self, data: DataSpec, outputs: Sequence[str] = ()) -> None:
        """A deployment entry's own samples (`data:`) against these inputs: the first CHECKED_SAMPLES read and
        checked, a mismatch one line (data.user.check_tensor: the file, the tensor, both shapes and dtypes).
        `outputs`: the network's output names, which a data file may hold as labels."""
        if not data.user_data:
            return
        names = [n for n in outputs if n not in {t.name for t in self.specs}] or ["__network_output__"]
        signature = ModelSignature(self.specs, tuple(TensorSpec(n, (1,)) for n in names))
        dataset = data.dataset(signature, limit=CHECKED_SAMPLES)
        try:
            for _ in dataset.batches(1):
                pass
        except DataError as err:
            raise DataError(f"{err} (the network's inputs as {self.preprocess.name} gives them on the raw samples: "
                            f"{self.describe()})") from None

    def source(self, source: ModelSource) -> ModelSource:
        """`source` fed these inputs: a model.py without get_signature takes them as its inputs (no --input-shape or
        data needed); one with get_signature keeps its own, checked against them, its dynamic dims' example shapes
        filled from them. Other kinds describe their inputs themselves: the plan's check compares them."""
        if source.kind != "python" or source.input_shapes:
            return source
        from ..sources.python import SIGNATURE_FN, load_module

        module = load_module(source.ref)[0]
        if not callable(getattr(module, SIGNATURE_FN, None)):
            return dataclasses.replace(source, input_shapes=self.shapes())
        fed = dataclasses.replace(source, data_inputs=self.shapes())
        from ..sources import resolve

        self.check_signature(resolve(dataclasses.replace(fed)).signature, f"{Path(source.ref).name}:{SIGNATURE_FN}")
        return fed


def _value_range(arrays: Sequence[np.ndarray]) -> tuple[int, int] | None:
    if not arrays or arrays[0].dtype.kind not in "iu" or not any(a.size for a in arrays):
        return None
    return min(int(a.min()) for a in arrays if a.size), max(int(a.max()) for a in arrays if a.size) + 1


def input_specs(prepared: Prepared, keep: Sequence[str] | None = None) -> tuple[TensorSpec, ...]:
    """The network's inputs as a prepared preprocess run gives them (its numeric outputs, or those `keep` names),
    read from its outputs alone: nothing written."""
    pre = prepared.pre
    if pre is None:
        raise UserInputError("the network's inputs come from a preprocess: give one")
    ports = [p for p in prepared.pre_outputs if not p.is_string and (keep is None or p.name in keep)]
    if not ports:
        given = ", ".join(p.describe() for p in prepared.pre_outputs)
        raise UserInputError(f"{pre.path.name} gives no numeric tensor for the network (it gives {given}): return the "
                             "network's inputs as numeric arrays (batch axis first)")
    specs = []
    for port in ports:
        values = [r.pre[port.name] for r in prepared.runs]
        example = tuple(values[0].shape[1:]) if -1 in port.shape else None  # the first sample's
        try:
            specs.append(TensorSpec(port.name, port.shape, port.dtype, example_shape=example,
                                    value_range=_value_range(values)))
        except SpecError as err:
            raise UserInputError(f"{pre.path.name}: output {port.describe()} cannot be a network input: "
                                 f"{err}") from None
    return tuple(specs)


def declared_inputs(source: ModelSource, specs: Sequence[TensorSpec]) -> tuple[Port, ...] | None:
    """The inputs a network declares itself (a timm or zoo model, an ONNX file, a model.py's get_signature), which
    the preprocess's arrays must feed; None where it takes whatever the preprocess gives (a model.py without
    get_signature) or cannot say without them (a get_signature whose dynamic dims need the preprocess's names)."""
    from ..sources import SourceError, resolve
    from ..sources.python import SIGNATURE_FN, load_module

    if source.input_shapes:
        return tuple(Port(n, (d.get("dtype") if isinstance(d, dict) else None) or "float32",
                          tuple(d["shape"] if isinstance(d, dict) else d)) for n, d in source.input_shapes.items())
    fed = dataclasses.replace(source)
    if source.kind == "python":
        if not callable(getattr(load_module(source.ref)[0], SIGNATURE_FN, None)):
            return None
        fed = dataclasses.replace(source, data_inputs=_shapes(specs))
    try:
        return tuple(Port.from_spec(t) for t in resolve(fed).signature.inputs)
    except SourceError:
        if source.kind == "python":
            return None  # said again, with its cause, where the network is resolved for its search
        raise


def by_position(source: ModelSource, specs: Sequence[TensorSpec]) -> dict[str, str]:
    """{preprocess output: network input} where the preprocess's only array feeds a network's only declared input
    of another name (wiring.pre_by_position): the network's inputs are then written under its own name."""
    declared = declared_inputs(source, specs)
    if declared is None:
        return {}
    given = [Port(t.name, t.dtype, t.shape) for t in specs]
    return {b.given: b.taken for b in pre_by_position(given, declared)}


def _shapes(specs: Sequence[TensorSpec]) -> dict[str, dict[str, Any]]:
    """Specs in the form ModelSource.input_shapes / data_inputs take: {name: {shape, dtype, example_shape, ...}}."""
    return {t.name: {"shape": list(t.shape), "dtype": t.dtype,
                     "example_shape": list(t.example_shape) if t.example_shape is not None else None,
                     "value_range": list(t.value_range) if t.value_range is not None else None}
            for t in specs}


def inputs_from_prepared(prepared: Prepared, folder: str | Path, keep: Sequence[str] | None = None,
                         model: ModelSource | None = None) -> NetworkInputs:
    """The network's inputs from a prepared preprocess run (its numeric outputs, or those `keep` names), their
    per-sample values written into `folder` (its old .npz files removed: the folder is the toolkit's). `model`: the
    network they feed; its only input takes the preprocess's only array by position (by_position), under its name."""
    specs = input_specs(prepared, keep)
    renamed = by_position(model, specs) if model is not None else {}
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.npz"):
        old.unlink()
    for sample, run in zip(prepared.raw.samples, prepared.runs):
        np.savez(folder / f"{sample.name}.npz", **{renamed.get(t.name, t.name): run.pre[t.name][0] for t in specs})
    specs = tuple(dataclasses.replace(t, name=renamed.get(t.name, t.name)) for t in specs)
    return NetworkInputs(specs, folder, len(prepared.runs), prepared.pre.path)  # type: ignore[union-attr]


def network_inputs(preprocess: str | Path | StepFile, raw_data: str | Path, folder: str | Path, *,
                   max_batch_size: int = DEFAULT_MAX_BATCH, max_samples: int = DEFAULT_MAX_SAMPLES,
                   keep: Sequence[str] | None = None, model: ModelSource | None = None) -> NetworkInputs:
    """Run the preprocess in-process on the raw samples (each alone, then batches up to `max_batch_size`, every
    failure one line) and return the network's inputs, their per-sample values written into `folder` (under the
    name of the input of `model` that takes them, where one is wired by position)."""
    step = preprocess if isinstance(preprocess, StepFile) else load_step(preprocess, StepKind.PREPROCESS)
    return inputs_from_prepared(prepare(raw_data, step, max_samples=max_samples, max_batch_size=max_batch_size),
                                folder, keep, model)


def as_source(model: "str | Path | ModelSource", preset: str) -> ModelSource:
    """A model reference as the source record the network is converted from (a copy when it is one already)."""
    if isinstance(model, ModelSource):
        return dataclasses.replace(model)
    return parse_reference(str(model), preset=preset)


__all__ = ["NetworkInputs", "as_source", "by_position", "declared_inputs", "input_specs", "inputs_from_prepared",
           "network_inputs"]
