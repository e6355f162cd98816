"""Which tensor feeds which: the preprocess's outputs must be the model's inputs (name, dtype, shape), and the
postprocess takes the model's outputs (or, by name, a preprocess output or a raw input: e.g. the original image
size). Every mismatch is one line naming both tensors and what to change. The result is the ensemble's plan:
its inputs and outputs and each composing model's input and output maps."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Sequence

from ..errors import UserInputError
from .ports import Port, shape_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WiredStep:
    model: str  # the composing model's name
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    input_map: dict[str, str] = field(default_factory=dict)  # its input -> ensemble tensor
    output_map: dict[str, str] = field(default_factory=dict)  # its output -> ensemble tensor


@dataclass(frozen=True)
class Wiring:
    inputs: tuple[Port, ...]  # what clients send (raw)
    outputs: tuple[Port, ...]  # what they get back
    steps: tuple[WiredStep, ...]


def _fix(given: Port, wanted: Port, rename: str, cast: bool = True) -> str:
    parts = []
    if given.name != wanted.name:
        parts.append(rename.format(name=wanted.name))
    if not (given.is_string and wanted.is_string) and given.dtype != wanted.dtype:
        hint = f" (.astype(np.{wanted.dtype}))" if cast and not wanted.is_string else ""
        parts.append(f"as {wanted.dtype}{hint}")
    if len(given.shape) != len(wanted.shape) or any(w != -1 and g != w for g, w in zip(given.shape, wanted.shape)):
        parts.append(f"with per-sample shape {shape_text(wanted.shape)}")
    return ", ".join(parts)


def _listed(ports: Sequence[Port]) -> str:
    return ", ".join(p.describe() for p in ports) or "nothing"


def check_preprocess(outputs: Sequence[Port], model_inputs: Sequence[Port]) -> None:
    """Each model input is a preprocess output of its name, dtype and shape; else one line naming both."""
    given = {p.name: p for p in outputs}
    unmatched = [p for p in outputs if p.name not in {m.name for m in model_inputs}]
    for wanted in model_inputs:
        got = given.get(wanted.name) or (unmatched.pop(0) if unmatched else None)
        if got is None:
            raise UserInputError(f"the model takes {wanted.describe()}, which preprocess does not give (it gives "
                                 f"{_listed(outputs)}): return it from preprocess too")
        if got.name != wanted.name or not got.fits(wanted):
            raise UserInputError(f"preprocess gives {got.describe()}; the model takes {wanted.describe()}: return it "
                                 + _fix(got, wanted, "as {name!r}"))
    for extra in unmatched:
        log.warning("preprocess also gives %s, which the model does not take: it is dropped", extra.describe())


def check_postprocess(inputs: Sequence[Port], providers: Sequence[tuple[str, Sequence[Port]]]) -> dict[str, str]:
    """Which provider ("model", "preprocess" or "raw") feeds each postprocess input (by name, model first); a
    mismatch is one line. An input no provider names is paired with a model output the postprocess leaves."""
    found: dict[str, tuple[str, Port]] = {}
    for source, ports in reversed(providers):  # the first provider wins a name
        found.update({p.name: (source, p) for p in ports})
    model_outputs = list(dict(providers).get("model", ()))
    taken = {p.name for p in inputs}
    left = [o for o in model_outputs if o.name not in taken]
    out = {}
    for wanted in inputs:
        source, got = found.get(wanted.name, (None, None))
        if got is None:
            got = left.pop(0) if left else None
            if got is None:
                raise UserInputError(
                    f"postprocess takes {wanted.describe()}, which neither the model (it gives "
                    f"{_listed(model_outputs)}) nor preprocess or the raw inputs give: name the parameter after one "
                    "of them")
            raise UserInputError(f"postprocess takes {wanted.describe()}; the model gives {got.describe()}: take it "
                                 + _fix(wanted, got, "as {name!r} (the parameter's name)", cast=False))
        if not got.fits(wanted):
            raise UserInputError(f"postprocess takes {wanted.describe()}; the {source} gives {got.describe()}: take it "
                                 + _fix(wanted, got, "as {name!r}", cast=False))
        out[wanted.name] = source
    return out


def tensor(source: str, name: str) -> str:
    """The ensemble's name of an internal tensor (raw inputs and final outputs keep their own names)."""
    return name if source == "raw" else f"{source}__{name}"


def wire(raw: Sequence[Port], pre: WiredStep | None, model: WiredStep, post: WiredStep | None) -> Wiring:
    """The ensemble's plan; the steps' ports must have been checked (check_preprocess, check_postprocess)."""
    steps = []
    if pre is not None:
        steps.append(WiredStep(pre.model, pre.inputs, pre.outputs, {p.name: p.name for p in pre.inputs},
                               {p.name: tensor("preprocess", p.name) for p in pre.outputs}))
    source = "preprocess" if pre is not None else "raw"
    final = post is None
    steps.append(WiredStep(model.model, model.inputs, model.outputs,
                           {p.name: tensor(source, p.name) for p in model.inputs},
                           {p.name: (p.name if final else tensor("model", p.name)) for p in model.outputs}))
    outputs = model.outputs
    if post is not None:
        providers = [("model", model.outputs), ("preprocess", pre.outputs if pre else ()), ("raw", raw)]
        sources = check_postprocess(post.inputs, providers)
        steps.append(WiredStep(post.model, post.inputs, post.outputs,
                               {p.name: tensor(sources[p.name], p.name) for p in post.inputs},
                               {p.name: p.name for p in post.outputs}))
        outputs = post.outputs
    clash = sorted({p.name for p in raw} & {p.name for p in outputs})
    if clash:
        raise UserInputError(f"{', '.join(map(repr, clash))} is both a raw input and an output of the pipeline: give "
                             "the output another name")
    return Wiring(tuple(raw), tuple(outputs), tuple(steps))


__all__ = ["Wiring", "WiredStep", "check_postprocess", "check_preprocess", "tensor", "wire"]
