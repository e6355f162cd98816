"""Pieces every resolver shares: checkpoint loading at build time, output probing, task defaults."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..compat import missing_op_hint
from ..watchdog import user_stage
from ..models.registry import DEFAULT_METRIC, TASKS
from ..spec import ModelSignature, SpecError, TensorSpec
from .base import ModelSource, SourceError
from .outputs import call, leaves, select


def with_checkpoint(model, source: ModelSource, name: str):
    """`model` in eval mode, with the source's checkpoint (if any) loaded strictly."""
    if source.checkpoint:
        from .checkpoint import load_checkpoint

        load_checkpoint(model, source.checkpoint, name)
    return model.eval()


def materialise(model, inputs: list[TensorSpec], seed: int):
    """Give lazy modules (nn.LazyLinear and kin) their weights with one forward pass on example inputs, under
    `seed`: an exporter and the reference must see the same, initialised model (a fresh lazy module exports
    uninitialised parameters, and each first call would draw other weights)."""
    import torch
    from torch.nn.parameter import is_lazy

    if not inputs or not any(is_lazy(p) for p in model.parameters()):
        return model
    examples = ModelSignature(inputs=tuple(inputs), outputs=(TensorSpec("__probe__", (1,)),)).examples(1, seed=seed)
    torch.manual_seed(seed)
    try:
        with torch.no_grad():
            call(model, [torch.from_numpy(examples[t.name]) for t in inputs], [t.name for t in inputs])
    except Exception as err:
        raise SourceError(f"the model's lazy modules could not be initialised by a dry run on example inputs: "
                          f"{type(err).__name__}: {(str(err).splitlines() or [''])[0][:200]}") from err
    return model


def task_and_metric(source: ModelSource, outputs: tuple[TensorSpec, ...], default: str | None = None) -> tuple[str, str]:
    """The task judges how converted outputs are compared: --task if given, else classification for one
    vector output (logits) and embedding (cosine agreement: generic) otherwise."""
    task = source.task or default or ("classification" if len(outputs) == 1 and len(outputs[0].shape) == 1
                                      else "embedding")
    if task not in TASKS:
        raise SourceError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    return task, DEFAULT_METRIC[task]


def input_specs(source: ModelSource, shapes: dict[str, Any] | None = None) -> tuple[TensorSpec, ...]:
    """Inputs from --input-shape (float32 unless NAME=dims:dtype was given), or from `shapes` in the same form:
    a list of dims, or {shape, dtype, example_shape, value_range} (what the user's data told; -1 in shape is a
    dynamic axis whose example size is example_shape's)."""
    specs = []
    for name, dims in (source.input_shapes if shapes is None else shapes).items():
        d = dims if isinstance(dims, dict) else {"shape": dims}
        try:
            specs.append(TensorSpec(name, tuple(int(x) for x in d["shape"]), d.get("dtype") or "float32",
                                    example_shape=d.get("example_shape"), value_range=d.get("value_range")))
        except SpecError as err:
            raise SourceError(f"--input-shape {name}: {err}") from err
    return tuple(specs)


def _np_dtype(tensor) -> str:
    import torch

    return "bool" if tensor.dtype == torch.bool else np.dtype(str(tensor.dtype).removeprefix("torch.")).name


def probe(model, inputs: tuple[TensorSpec, ...], batch: int, keep: list[str] | None = None
          ) -> tuple[tuple[TensorSpec, ...], dict[str, list]]:
    """Run the model once on example inputs to learn its outputs: (per-sample specs named from the output's
    structure, {name: path into it}). With a batch axis the probe runs at batch 2 and every output must carry
    it: a per-image list (a detector's boxes) or a fixed-size output cannot be split back into requests."""
    chosen = select(leaves(_run(model, inputs, batch), avoid=[t.name for t in inputs]), keep)
    varying = _varying_dims(model, inputs, batch, chosen)
    specs = []
    for leaf in chosen:
        o = leaf.value
        if batch and (o.dim() == 0 or o.shape[0] != batch):
            raise SourceError(
                f"output {leaf.name} has shape {list(o.shape)} for a batch of {batch}: it does not carry the batch "
                "axis, so batched requests cannot be split back; serve the model with --max-batch-size 0 (one "
                "sample per request)" + (", or keep the batched outputs with --outputs" if len(chosen) > 1 else ""))
        shape = tuple(o.shape[1:]) if batch else tuple(o.shape)
        dynamic = varying.get(leaf.name, set())
        specs.append(TensorSpec(leaf.name, tuple(-1 if i in dynamic else d for i, d in enumerate(shape)) or (1,),
                                _np_dtype(o), example_shape=shape if dynamic else None))
    return tuple(specs), {leaf.name: list(leaf.path) for leaf in chosen}


def _run(model, inputs: tuple[TensorSpec, ...], batch: int, what: str = "example inputs"):
    import torch

    examples = ModelSignature(inputs=inputs, outputs=(TensorSpec("__probe__", (1,)),)).examples(batch)
    try:
        with torch.inference_mode(), user_stage(f"running the model on {what}"):
            return call(model, [torch.from_numpy(examples[t.name]) for t in inputs], [t.name for t in inputs])
    except SourceError:
        raise
    except Exception as err:
        shapes = ", ".join(f"{t.name} {[batch, *t.concrete_shape] if batch else list(t.concrete_shape)}"
                           for t in inputs)
        hint = missing_op_hint(err) or "check --input-shape"
        raise SourceError(f"the model fails on {what} ({shapes}): {type(err).__name__}: "
                          f"{str(err).splitlines()[0][:200] if str(err) else ''}; {hint}") from err


def _varying_dims(model, inputs: tuple[TensorSpec, ...], batch: int, chosen) -> dict[str, set[int]]:
    """Per-sample output axes that follow the inputs' dynamic axes: the outputs at twice the example size,
    compared. A model that cannot run there keeps its outputs fixed, as before."""
    if not any(t.is_dynamic for t in inputs):
        return {}
    resized = tuple(replace(t, example_shape=tuple(2 * e if d == -1 else e for d, e in zip(t.shape, t.concrete_shape)))
                    if t.is_dynamic else t for t in inputs)
    try:
        again = {leaf.name: leaf.value for leaf in leaves(_run(model, resized, batch), avoid=[t.name for t in inputs])}
    except SourceError:
        return {}
    out: dict[str, set[int]] = {}
    skip = 1 if batch else 0
    for leaf in chosen:
        other = again.get(leaf.name)
        if other is None or other.dim() != leaf.value.dim():
            continue
        out[leaf.name] = {i - skip for i in range(skip, leaf.value.dim()) if other.shape[i] != leaf.value.shape[i]}
    return out


def probe_outputs(model, inputs: tuple[TensorSpec, ...], batch: int) -> tuple[TensorSpec, ...]:
    """The output specs alone (artifact sources, whose outputs are flat and named already)."""
    return probe(model, inputs, 2 if batch else 0)[0]
