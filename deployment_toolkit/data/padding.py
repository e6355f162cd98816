"""Samples of different lengths padded into one batch, where the model's own attention mask makes that safe.

Batched by shape (data/rebatch.py), token samples of many lengths go out nearly one at a time. A model that takes
an attention mask pads its own inputs that way: the padded positions are masked out, so each sample's answer at
its real positions is the one it gets alone. The plan applies when an input named `attention_mask` has a single
dynamic per-sample axis (the tokens), every other input with a dynamic axis has it first, and every output's
dynamic axes are the tokens (they come back at the padded length and are cut back to each sample's own). Inputs
are padded with zeros (mask 0) at the end, samples sorted by length within a window so a batch pads little.

It is checked, not assumed: the first batch that mixes lengths is compared, for its shortest sample, with that
sample run alone; a difference past the fp32 tolerance (or an output that does not come back at the padded
length) turns padding off for the run, which then goes by shape, and the dump's `batching` says why.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from ..errors import ToolkitError
from ..spec import TOLERANCES, ModelSignature
from .rebatch import HELD_BATCHES, MIN_HELD, Batch, rebatch

Arrays = dict[str, np.ndarray]
PredictMany = Callable[[list[Arrays]], list[Arrays]]  # request batches -> their outputs, in order
Row = tuple[np.ndarray, Any, Any, Any]  # ids, inputs, labels, outputs: arrays or lists of per-sample arrays
MASK_NAME = "attention_mask"


class PaddingUnsafe(ToolkitError):
    """The model's answer changes with padding, or an output's dynamic axes are not the tokens (caught inside
    padded_rows, which then batches by shape: never reaches the user)."""


@dataclass(frozen=True)
class PaddingPlan:
    mask: str
    padded: tuple[str, ...]  # inputs padded along their first per-sample axis (the tokens)
    trimmed: Mapping[str, tuple[int, ...]]  # output -> its per-sample axes that are the tokens


def padding_plan(signature: ModelSignature) -> PaddingPlan | None:
    """The plan for a signature whose attention mask covers its dynamic axes (module doc); None otherwise."""
    mask = next((t for t in signature.inputs if t.name.endswith(MASK_NAME) and t.shape == (-1,)), None)
    if mask is None or not all(-1 not in t.shape[1:] for t in signature.inputs):
        return None
    padded = tuple(t.name for t in signature.inputs if t.shape[:1] == (-1,))
    trimmed = {t.name: tuple(a for a, d in enumerate(t.shape) if d == -1) for t in signature.outputs}
    return PaddingPlan(mask.name, padded, trimmed)


@dataclass
class Batching:
    """How a run batched its samples, for the dump's metadata (write_dump counts the batches)."""

    mode: str = "grouped by shape"
    padded: bool = False
    batches: int = 0
    reason: str = ""  # why padding was not used, or how it was checked
    checks: list[str] = field(default_factory=list)

    def meta(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "padded": self.padded, "batches": self.batches}
        if self.reason:
            out["reason"] = self.reason
        return out


def _pad(samples: Sequence[Batch], plan: PaddingPlan) -> tuple[Arrays, list[int], int]:
    """One request of single-sample batches, padded with zeros to the longest; (inputs, lengths, padded length)."""
    lengths = [int(s[1][plan.mask].shape[1]) for s in samples]
    longest = max(lengths)
    inputs = {}
    for name in samples[0][1]:
        if name in plan.padded:
            rows = [np.pad(s[1][name], [(0, 0), (0, longest - s[1][name].shape[1])] + [(0, 0)] * (s[1][name].ndim - 2))
                    for s in samples]
        else:
            rows = [s[1][name] for s in samples]
        inputs[name] = np.concatenate(rows)
    return inputs, lengths, longest


def _trim(outputs: Arrays, lengths: list[int], longest: int, plan: PaddingPlan) -> dict[str, list[np.ndarray]]:
    """Each sample's outputs at its own length; PaddingUnsafe if a token axis did not come back padded."""
    out: dict[str, list[np.ndarray]] = {}
    for name, arr in outputs.items():
        axes = plan.trimmed.get(name, ())
        wrong = [a for a in axes if arr.shape[1 + a] != longest]
        if wrong:
            raise PaddingUnsafe(f"output {name} axis {wrong[0]} is {arr.shape[1 + wrong[0]]} long for {longest} "
                                "padded tokens, so it cannot be cut back per sample")
        out[name] = [arr[i][tuple(slice(0, n) if a in axes else slice(None) for a in range(arr.ndim - 1))]
                     for i, n in enumerate(lengths)]
    return out


def _check(alone: Arrays, padded: Mapping[str, list[np.ndarray]], index: int, sample_id: Any) -> str:
    """The shortest sample alone vs padded: PaddingUnsafe past the fp32 tolerance, else what was compared."""
    atol, rtol = TOLERANCES["fp32"]
    worst = 0.0
    for name, ref in alone.items():
        ref = np.asarray(ref)[0]
        got = padded[name][index]
        if ref.shape != got.shape:
            raise PaddingUnsafe(f"sample {sample_id!r} output {name}: shape {got.shape} padded, {ref.shape} alone")
        if ref.dtype.kind not in "biuf":
            continue
        err = float(np.max(np.abs(ref.astype(np.float64) - got))) if ref.size else 0.0
        if err > atol + rtol * (float(np.max(np.abs(ref))) if ref.size else 0.0):
            raise PaddingUnsafe(f"sample {sample_id!r} output {name} differs by {err:.3g} padded vs alone")
        worst = max(worst, err)
    return f"sample {sample_id!r} padded vs alone: max abs err {worst:.2g}"


def _windows(samples: Iterable[Batch], size: int) -> Iterator[list[Batch]]:
    window: list[Batch] = []
    for sample in samples:
        window.append(sample)
        if len(window) >= size:
            yield window
            window = []
    if window:
        yield window


def padded_rows(samples: Iterable[Batch], batch_size: int, plan: PaddingPlan, predict_many: PredictMany,
                batching: Batching) -> Iterator[Row]:
    """(ids, inputs, labels, outputs) per request of `samples` (single-sample batches), padded per the plan while
    the check holds, by shape after it fails; `batching` is filled in as the run goes."""
    checked = False
    window_size = max(MIN_HELD, HELD_BATCHES * batch_size)
    for window in _windows(samples, window_size):
        if batching.reason and not batching.padded:  # padding was found unsafe: by shape from here on
            yield from _by_shape(window, batch_size, predict_many)
            continue
        window = sorted(window, key=lambda s: s[1][plan.mask].shape[1])
        chunks = [window[i:i + batch_size] for i in range(0, len(window), batch_size)]
        requests = [_pad(chunk, plan) for chunk in chunks]
        try:
            answers = predict_many([inputs for inputs, _, _ in requests])
            trimmed = [_trim(out, lengths, longest, plan) for out, (_, lengths, longest) in zip(answers, requests)]
            if not checked:
                mixed = next((i for i, (_, lengths, _) in enumerate(requests) if len(set(lengths)) > 1), None)
                if mixed is not None:
                    chunk, lengths = chunks[mixed], requests[mixed][1]
                    short = int(np.argmin(lengths))
                    alone = predict_many([chunk[short][1]])[0]
                    batching.checks.append(_check(alone, trimmed[mixed], short, chunk[short][0][0]))
                    checked = True
        except PaddingUnsafe as err:
            batching.mode, batching.padded, batching.reason = "grouped by shape", False, f"not padded: {err}"
            yield from _by_shape(window, batch_size, predict_many)
            continue
        if checked:
            batching.mode, batching.padded = f"padded to the batch's longest ({plan.mask})", True
            batching.reason = "; ".join(batching.checks)
        for chunk, outputs in zip(chunks, trimmed):
            yield (np.concatenate([s[0] for s in chunk]), {k: [s[1][k][0] for s in chunk] for k in chunk[0][1]},
                   {k: [s[2][k][0] for s in chunk] for k in chunk[0][2]}, outputs)


def _by_shape(window: list[Batch], batch_size: int, predict_many: PredictMany) -> Iterator[Row]:
    batches = list(rebatch(window, batch_size, None))
    for (ids, inputs, labels), outputs in zip(batches, predict_many([b[1] for b in batches])):
        yield ids, inputs, labels, outputs


__all__ = ["Batching", "PaddingPlan", "PaddingUnsafe", "padded_rows", "padding_plan"]
