"""Which tensor feeds which: the preprocess's outputs must be the model's inputs (name, dtype, shape), and the
postprocess takes the model's outputs (or, by name, a preprocess output or a raw input: e.g. the original image
size). Every mismatch is one line naming both tensors and what to change. The result is the ensemble's plan:
its inputs and outputs and each composing model's input and output maps.

Where the wiring is unambiguous it is made by position rather than refused (ByPosition): the only array a preprocess
returns feeds a model's only input whatever their names, and a model's only output feeds the one postprocess
parameter that no tensor names (the exporter's `output__0` -> `logits`). With several candidates nothing is
guessed: a parameter that matches none of two outputs is refused, naming them and the parameter."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..errors import UserInputError
from .ports import Port, shape_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ByPosition:
    """One hand-over made by position, not by name: the giver's only tensor to the taker's only unnamed one."""

    given: str  # the tensor given (the model's output__0, the preprocess's array)
    taken: str  # the input that takes it (the postprocess's logits, the model's input__0)

    def text(self) -> str:
        return f"wired by position: {self.given} → {self.taken}"


@dataclass(frozen=True)
class WiredStep:
    model: str  # the composing model's name
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    input_map: dict[str, str] = field(default_factory=dict)  # its input -> ensemble tensor
    output_map: dict[str, str] = field(default_factory=dict)  # its output -> ensemble tensor
    by_position: tuple[ByPosition, ...] = ()  # inputs fed by a tensor of another name

    def feed(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Its inputs from the tensors given by their own names (raw, preprocess and model outputs, in-process)."""
        renamed = {b.taken: b.given for b in self.by_position}
        return {p.name: given[renamed.get(p.name, p.name)] for p in self.inputs}


@dataclass(frozen=True)
class Wiring:
    inputs: tuple[Port, ...]  # what clients send (raw)
    outputs: tuple[Port, ...]  # what they get back
    steps: tuple[WiredStep, ...]

    @property
    def by_position(self) -> tuple[ByPosition, ...]:
        return tuple(b for s in self.steps for b in s.by_position)

    def describe_positions(self) -> str:
        """'wired by position: output__0 → logits' for each such hand-over ('' where every name matched)."""
        return "; ".join(b.text() for b in self.by_position)


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


def pre_by_position(outputs: Sequence[Port], model_inputs: Sequence[Port]) -> tuple[ByPosition, ...]:
    """The preprocess's only array to the model's only input, whatever their names, where it fits (dtype and
    shape): a preprocess returning `pixels` for a timm network's `input__0`. Anything else is matched by name."""
    if len(outputs) == 1 and len(model_inputs) == 1:
        got, wanted = outputs[0], model_inputs[0]
        if got.name != wanted.name and got.fits(wanted):
            return (ByPosition(got.name, wanted.name),)
    return ()


def check_preprocess(outputs: Sequence[Port], model_inputs: Sequence[Port]) -> tuple[ByPosition, ...]:
    """Each model input is a preprocess output of its name, dtype and shape (or, the only one, by position); else
    one line naming both. Returns the hand-overs made by position."""
    positions = pre_by_position(outputs, model_inputs)
    if positions:
        return positions
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
    return ()


Providers = Sequence[tuple[str, Sequence[Port]]]  # ("model" | "preprocess" | "raw", the tensors it gives)


def post_by_position(names: Sequence[str], providers: Providers, ports: Mapping[str, Port] | None = None,
                     where: str = "") -> tuple[ByPosition, ...]:
    """The model's only output to the one postprocess parameter that no tensor names (`output__0` -> `logits`),
    where it fits the parameter's declared port (`ports`, if any). A parameter no tensor names while two or more
    outputs are left is refused in one line naming them and the parameter (`where`: the step file): nothing is
    guessed. Other cases are left to check_postprocess's lines."""
    named = {p.name for _, given in providers for p in given}
    unnamed = [n for n in names if n not in named]
    outputs = list(dict(providers).get("model", ()))
    free = [o for o in outputs if o.name not in names]
    if not unnamed:
        return ()
    if len(outputs) == 1 and len(unnamed) == 1 and free:
        wanted = (ports or {}).get(unnamed[0])
        return (ByPosition(outputs[0].name, unnamed[0]),) if wanted is None or outputs[0].fits(wanted) else ()
    if len(free) > 1:
        raise UserInputError(
            f"{where + ': ' if where else ''}postprocess takes {unnamed[0]!r}, which matches no output of the model "
            f"by name, and {len(free)} of its outputs could feed it ({_listed(free)}): too many to wire by position; "
            f"name the parameter after the one it takes (e.g. postprocess({free[0].name}, ...)), or declare INPUTS")
    return ()


def check_postprocess(inputs: Sequence[Port], providers: Providers) -> dict[str, tuple[str, str]]:
    """Which tensor feeds each postprocess input: (its provider "model", "preprocess" or "raw", its name), by name
    with the model first, or by position (post_by_position); a mismatch is one line. An input no provider names is
    paired with a model output the postprocess leaves, to say what to rename."""
    found: dict[str, tuple[str, Port]] = {}
    for source, ports in reversed(providers):  # the first provider wins a name
        found.update({p.name: (source, p) for p in ports})
    model_outputs = list(dict(providers).get("model", ()))
    positions = {b.taken: b.given for b in post_by_position([p.name for p in inputs], providers,
                                                            {p.name: p for p in inputs})}
    taken = {p.name for p in inputs}
    left = [o for o in model_outputs if o.name not in taken]
    out = {}
    for wanted in inputs:
        source, got = found.get(positions.get(wanted.name, wanted.name), (None, None))
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
        out[wanted.name] = (source, got.name)
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
    renamed = {b.taken: b.given for b in model.by_position}  # the model's input fed by the preprocess's only array
    steps.append(WiredStep(model.model, model.inputs, model.outputs,
                           {p.name: tensor(source, renamed.get(p.name, p.name)) for p in model.inputs},
                           {p.name: (p.name if final else tensor("model", p.name)) for p in model.outputs},
                           model.by_position))
    outputs = model.outputs
    if post is not None:
        providers = [("model", model.outputs), ("preprocess", pre.outputs if pre else ()), ("raw", raw)]
        sources = check_postprocess(post.inputs, providers)
        steps.append(WiredStep(post.model, post.inputs, post.outputs,
                               {name: tensor(src, given) for name, (src, given) in sources.items()},
                               {p.name: p.name for p in post.outputs},
                               tuple(ByPosition(given, name) for name, (_, given) in sources.items()
                                     if given != name)))
        outputs = post.outputs
    clash = sorted({p.name for p in raw} & {p.name for p in outputs})
    if clash:
        raise UserInputError(f"{', '.join(map(repr, clash))} is both a raw input and an output of the pipeline: give "
                             "the output another name")
    return Wiring(tuple(raw), tuple(outputs), tuple(steps))


__all__ = ["ByPosition", "Providers", "Wiring", "WiredStep", "check_postprocess", "check_preprocess",
           "post_by_position", "pre_by_position", "tensor", "wire"]
