"""Outputs that couple the samples of a batch, found before anything is exported.

Triton's dynamic batcher concatenates queued requests along axis 0 and splits the outputs back row by row, which
is right only when row i of the output depends on row i of the inputs alone. A CLIP-style model's
`logits_per_image` is [B, B] (every image against every text of the batch): it carries the batch axis, so the
batch-axis check passes, yet merged requests would each get a slice of someone else's similarity matrix. The
probe runs the example batch of 2, then each of its samples alone; an output whose rows differ (in shape, or in
value beyond a tolerance far above batched-vs-single rounding) couples the batch. Such a model is served with
max_batch_size 0: each request is one whole batch, its batch axis an ordinary dynamic axis of the signature.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..sources.outputs import call, pick
from ..spec import ModelSignature, TensorSpec
from ..watchdog import user_stage

# a row differs when max|batched - alone| > ATOL + RTOL * max|batched|; batched matmuls round differently from
# single ones (~1e-6 relative), a coupled output differs by the order of its values
ATOL, RTOL = 1e-4, 1e-3


@dataclass(frozen=True)
class Coupling:
    """The outputs that couple the batch ({name: how}) and the whole-request signature to serve instead."""

    outputs: dict[str, str]
    signature: ModelSignature

    def why(self) -> str:
        how = "; ".join(f"{name}: {why}" for name, why in self.outputs.items())
        return f"output(s) {', '.join(self.outputs)} depend on the other samples of the batch ({how})"


def _np(t) -> np.ndarray:
    t = t.detach().cpu()
    return (t.float() if t.is_floating_point() else t).numpy()  # bfloat16 has no numpy dtype


def _difference(a: np.ndarray, b: np.ndarray) -> str | None:
    """How two equally shaped outputs differ beyond the tolerance (exactly, for integers), or None."""
    if np.issubdtype(a.dtype, np.floating):
        a, b = a.astype(np.float64), b.astype(np.float64)
        err = float(np.max(np.abs(a - b))) if a.size else 0.0
        scale = float(np.max(np.abs(a))) if a.size else 0.0
        return f"differs by {err:.3g} (scale {scale:.3g})" if err > ATOL + RTOL * scale or not np.isfinite(err) \
            else None
    return None if np.array_equal(a, b) else "differs"


def _row_differs(batched: np.ndarray, alone: np.ndarray, row: int) -> str | None:
    """Why row `row` of the batched output is not the sample's own output, or None."""
    if batched.ndim == 0 or batched.shape[0] != 2 or batched[row:row + 1].shape != alone.shape:
        return f"{list(batched.shape)} for a batch of 2, {list(alone.shape)} for one sample"
    why = _difference(batched[row:row + 1], alone)
    return f"sample {row} {why} from its output alone" if why else None


def _outputs(model, args: tuple, names: list[str], in_names: list[str], paths: dict[str, list]) -> dict[str, Any]:
    import torch

    with torch.no_grad():
        out = call(model, args, in_names)
    return {n: _np(pick(out, tuple(paths[n]))) for n in names}


def batch_coupling(model, signature: ModelSignature, args: tuple, batched: tuple,
                   paths: dict[str, list]) -> Coupling | None:
    """Compare the outputs `batched` of the model on `args` (the example batch of 2, signature order) with each
    sample run alone; None when every output is row-wise. A model that fails on one sample is judged as
    coupled by nothing (the verification at batch 1 reports it)."""
    in_names = [t.name for t in signature.inputs]
    names = [t.name for t in signature.outputs]
    full = {n: _np(t) for n, t in zip(names, batched)}
    try:
        with user_stage("running the model on each sample alone (do the outputs couple the batch?)"):
            alone = [_outputs(model, tuple(a[i:i + 1] for a in args), names, in_names, paths) for i in range(2)]
    except Exception:  # noqa: BLE001 - the model's own error, said in one line by the verification at batch 1
        return None
    found = {n: why for n in names
             for why in [_row_differs(full[n], alone[0][n], 0) or _row_differs(full[n], alone[1][n], 1)] if why}
    if any("differs" in why for why in found.values()):  # a model that is not deterministic is not coupled
        with user_stage("running the model on the example batch again (is it deterministic?)"):
            again = _outputs(model, args, names, in_names, paths)
        found = {n: why for n, why in found.items()
                 if "differs" not in why or _difference(full[n], again[n]) is None}
    if not found:
        return None
    return Coupling(found, whole_request_signature(signature, full, alone[0]))


def _whole(spec: TensorSpec) -> TensorSpec:
    """An input with its batch axis as a dynamic axis of the request (example size 2)."""
    value = spec.value
    if value is not None:  # one sample's fixed value, repeated for the example batch
        value = np.broadcast_to(np.asarray(value).reshape(spec.concrete_shape), (2, *spec.concrete_shape)).ravel().tolist()
    return replace(spec, shape=(-1, *spec.shape), example_shape=(2, *spec.concrete_shape), value=value)


def _whole_output(spec: TensorSpec, batched: np.ndarray, alone: np.ndarray) -> TensorSpec:
    """An output as a whole request gives it: every axis whose size follows the batch (or, per sample, the
    inputs' dynamic axes) is dynamic."""
    per_sample = spec.shape if batched.ndim == len(spec.shape) + 1 else ()
    dims = tuple(-1 if j >= alone.ndim or alone.shape[j] != d or (j and per_sample and per_sample[j - 1] == -1)
                 else d for j, d in enumerate(batched.shape)) or (1,)
    return TensorSpec(spec.name, dims, spec.dtype, example_shape=tuple(batched.shape) if -1 in dims else None)


def whole_request_signature(signature: ModelSignature, batched: dict[str, np.ndarray],
                            alone: dict[str, np.ndarray]) -> ModelSignature:
    """The signature for max_batch_size 0: the shapes are whole requests, their leading axis the request's batch."""
    return ModelSignature(inputs=tuple(_whole(t) for t in signature.inputs),
                          outputs=tuple(_whole_output(t, batched[t.name], alone[t.name]) for t in signature.outputs))
