"""Pieces every resolver shares: checkpoint loading at build time, output probing, task defaults."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..models.registry import DEFAULT_METRIC, TASKS
from ..spec import ModelSignature, SpecError, TensorSpec
from .base import ModelSource, SourceError


def with_checkpoint(model, source: ModelSource, name: str):
    """`model` in eval mode, with the source's checkpoint (if any) loaded strictly."""
    if source.checkpoint:
        from .checkpoint import load_checkpoint

        load_checkpoint(model, source.checkpoint, name)
    return model.eval()


def task_and_metric(source: ModelSource, outputs: tuple[TensorSpec, ...], default: str | None = None) -> tuple[str, str]:
    """The task judges how converted outputs are compared: --task if given, else classification for one
    vector output (logits) and embedding (cosine agreement: generic) otherwise."""
    task = source.task or default or ("classification" if len(outputs) == 1 and len(outputs[0].shape) == 1
                                      else "embedding")
    if task not in TASKS:
        raise SourceError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    return task, DEFAULT_METRIC[task]


def input_specs(source: ModelSource) -> tuple[TensorSpec, ...]:
    """Inputs from --input-shape (float32 unless NAME=dims:dtype was given)."""
    specs = []
    for name, dims in source.input_shapes.items():
        dims, dtype = (dims, "float32") if not isinstance(dims, dict) else (dims["shape"], dims.get("dtype", "float32"))
        try:
            specs.append(TensorSpec(name, tuple(int(d) for d in dims), dtype))
        except SpecError as err:
            raise SourceError(f"--input-shape {name}: {err}") from err
    return tuple(specs)


def probe_outputs(model, inputs: tuple[TensorSpec, ...], batch: int) -> tuple[TensorSpec, ...]:
    """Run the model once on example inputs to learn its outputs (names output__<i>, per-sample shapes)."""
    import torch

    sig_in = ModelSignature(inputs=inputs, outputs=(TensorSpec("__probe__", (1,)),))
    examples = sig_in.examples(batch)
    try:
        with torch.inference_mode():
            out: Any = model(*[torch.from_numpy(examples[t.name]) for t in inputs])
    except Exception as err:
        shapes = ", ".join(f"{t.name} {[batch, *t.shape] if batch else list(t.shape)}" for t in inputs)
        raise SourceError(f"the model fails on example inputs ({shapes}): {type(err).__name__}: "
                          f"{str(err).splitlines()[0][:200] if str(err) else ''}; check --input-shape") from err
    if isinstance(out, dict):
        out = list(out.values())
    if not isinstance(out, (list, tuple)):
        out = [out]
    specs = []
    for i, o in enumerate(out):
        if not isinstance(o, torch.Tensor):
            raise SourceError(f"output {i} of the model is a {type(o).__name__}, not a tensor")
        shape = tuple(o.shape[1:]) if batch else tuple(o.shape)
        dtype = np.dtype(str(o.dtype).removeprefix("torch.")).name if o.dtype != torch.bool else "bool"
        specs.append(TensorSpec(f"output__{i}", shape or (1,), dtype))
    return tuple(specs)
