"""Framework vs converted outputs on the same random batches, with per-precision tolerances.

When the signature has dynamic non-batch axes, the outputs are also compared at a second size of those axes:
an export that baked the example size into the graph (a traced reshape, a fixed TensorRT profile) passes at
the example size and fails at any other one.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Iterable

import numpy as np

from ..scores.agreement import task_agreement
from ..spec import TOLERANCES, ModelSignature, TensorSpec
from .errors import ConversionError

# pass when max_abs_err <= atol + rtol * max|reference|  (per output, over every batch tried)


@dataclass
class VerificationResult:
    passed: bool
    precision: str
    batch_sizes: list[int]
    max_abs_err: float
    max_rel_err: float
    atol: float
    rtol: float
    agreement: dict[str, float] = field(default_factory=dict)
    per_output: dict[str, dict[str, float]] = field(default_factory=dict)
    message: str = ""
    # per-sample input shapes the outputs were compared at: the example shapes, then the second size of the
    # dynamic axes (when the signature has any)
    input_shapes: list[dict[str, list[int]]] = field(default_factory=list)
    # second sizes not compared because the framework model itself fails there, with the reason
    unchecked_shapes: list[dict[str, Any]] = field(default_factory=list)
    # the user's real samples also compared (0: random inputs only)
    samples_checked: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def agreement(task: str, ref: np.ndarray, got: np.ndarray) -> dict[str, float]:
    """Task-level agreement: what a user of the model would notice, beyond raw error."""
    return task_agreement(task, ref, got)


def second_size(example: int) -> int:
    """Twice the example size: still a multiple of whatever the example size is a multiple of (a patch, a
    window, 2**depth of a U-Net), the only divisibility the signature knows."""
    return 2 * example


def alternate_shape(spec: TensorSpec) -> tuple[int, ...]:
    """`spec`'s per-sample shape with every dynamic axis at its second size."""
    return tuple(second_size(e) if d == -1 else e for d, e in zip(spec.shape, spec.concrete_shape))


def _resized(spec: TensorSpec) -> TensorSpec:
    if not spec.is_dynamic:
        return spec
    shape = alternate_shape(spec)
    value = spec.value
    if value is not None:  # e.g. per-band wavelengths: repeat them over the new band count
        value = np.resize(np.asarray(value).reshape(spec.concrete_shape), shape).ravel().tolist()
    return replace(spec, example_shape=shape, value=value)


def alternate_signature(signature: ModelSignature) -> ModelSignature | None:
    """The signature with every dynamic input axis at its second size; None when no input has one.

    All dynamic axes change together, so proportions between them hold (the band axis of an image and of its
    per-band wavelengths, H = W)."""
    if not any(t.is_dynamic for t in signature.inputs):
        return None
    return replace(signature, inputs=tuple(_resized(t) for t in signature.inputs))


def input_shapes(signature: ModelSignature) -> dict[str, list[int]]:
    return {t.name: list(t.concrete_shape) for t in signature.inputs}


@dataclass
class _Tally:
    """Errors and agreement accumulated over every comparison of one verification."""

    atol: float
    rtol: float
    task: str
    worst_abs: float = 0.0
    worst_rel: float = 0.0
    per_output: dict[str, dict[str, float]] = field(default_factory=dict)
    agree: dict[str, list[float]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def compare(self, signature: ModelSignature, ref: dict, got: dict, where: str) -> None:
        for spec in signature.outputs:
            r = np.asarray(ref[spec.name], dtype=np.float64)
            g = np.asarray(got[spec.name], dtype=np.float64)
            if r.shape != g.shape:
                self.failures.append(f"{spec.name} at {where}: shape {g.shape} != framework {r.shape}")
                continue
            scale = float(np.max(np.abs(r))) if r.size else 0.0
            abs_err = float(np.max(np.abs(r - g))) if r.size else 0.0
            rel_err = abs_err / max(scale, 1e-12)
            stats = self.per_output.setdefault(spec.name, {"max_abs_err": 0.0, "max_rel_err": 0.0, "scale": 0.0})
            stats["max_abs_err"] = max(stats["max_abs_err"], abs_err)
            stats["max_rel_err"] = max(stats["max_rel_err"], rel_err)
            stats["scale"] = max(stats["scale"], scale)
            self.worst_abs, self.worst_rel = max(self.worst_abs, abs_err), max(self.worst_rel, rel_err)
            if not np.isfinite(g).all():
                self.failures.append(f"{spec.name} at {where}: converted output has NaN/inf")
            elif abs_err > self.atol + self.rtol * scale:
                self.failures.append(f"{spec.name} at {where}: max abs err {abs_err:.3g} > "
                                     f"{self.atol:g} + {self.rtol:g} x {scale:.3g}")
            if spec is signature.outputs[0]:
                for k, v in agreement(self.task, r, g).items():
                    self.agree.setdefault(k, []).append(v)

    def run_converted(self, converted: Callable[[dict], dict], inputs: dict, where: str) -> dict | None:
        """The converted outputs, or None with a failure recorded: an error here (e.g. ONNX Runtime rejecting
        a size the export baked in) is a verification failure, not a crash."""
        try:
            return converted(inputs)
        except Exception as err:  # every runtime raises its own types; the message is what matters
            self.failures.append(f"at {where}: the converted model failed: {_first_line(err)}")
            return None


def _first_line(err: Exception) -> str:
    """`Type: first line of the message` (runtime errors carry pages of context). TorchScript's interpreter
    puts the cause on the last line, after the traced code; ONNX Runtime names the C++ file and function of
    the failed check before saying what it was."""
    lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()] or [""]
    if "TorchScript interpreter" in lines[0] and len(lines) > 1:
        return lines[-1]  # `RuntimeError: The size of tensor a (8) must match ...`
    line = re.sub(r"Status Message: \S+:\d+ .*? was false\. ", "Status Message: ", lines[0])
    return f"{type(err).__name__}: {line}"


def baked_size_hint(signature: ModelSignature) -> str:
    """Why an export that matches at the example size fails at another size of the dynamic axes, and the way out."""
    dynamic = {t.name: list(t.concrete_shape) for t in signature.inputs if t.is_dynamic}
    return (f"it matches at the example shapes {dynamic} only: the export fixed those sizes in its graph, as "
            "tracing does with a Python loop over an axis (Mamba's sequential scan unrolls over the sequence) or a "
            "size read as a Python number; serve it at a fixed size (--input-shape without --dynamic-axis; pad "
            "shorter inputs) or make the loop a tensor operation")


def _check_second_size(reference: Callable[[dict], dict], converted: Callable[[dict], dict],
                       signature: ModelSignature, batch: int, seed: int, tally: _Tally) -> str | None:
    """Compare at the second size of the dynamic axes (`signature` from alternate_signature). Returns why
    nothing was compared when the framework model itself cannot run there, else None."""
    inputs = signature.examples(batch, seed=seed)
    try:
        ref = reference(inputs)
    except Exception as err:  # the signature's dynamic axes promise more than the model takes
        return f"the framework model fails there: {_first_line(err)}"
    where = f"batch {batch}, input shapes {input_shapes(signature)}"
    got = tally.run_converted(converted, inputs, where)
    if got is not None:
        tally.compare(signature, ref, got, where)
    return None


@dataclass(frozen=True)
class VerifyPlan:
    """Where a verification compares: the precision (its tolerances), the batch sizes of random example inputs
    (0: a max_batch_size 0 model's whole example request), their seed, the second size of dynamic axes, and the
    user's real samples ({input name: batch array} each, already checked against the signature)."""

    precision: str = "fp32"
    batch_sizes: tuple[int, ...] = (1, 2)
    seed: int = 0
    dynamic_sizes: bool = True
    samples: Iterable[dict] | None = None


def verify(reference: Callable[[dict], dict], converted: Callable[[dict], dict], signature: ModelSignature,
           task: str, plan: VerifyPlan | None = None) -> VerificationResult:
    """Compare at every batch size (example shapes), then, with `dynamic_sizes` and dynamic non-batch axes in
    the signature, once more at the smallest batch size with those axes at their second size; then on every
    batch of `samples` (the user's real inputs): random inputs can miss what real data hits (saturating
    activations, a skewed class mix)."""
    p = plan or VerifyPlan()
    precision, batch_sizes, seed = p.precision, tuple(p.batch_sizes), p.seed
    atol, rtol = TOLERANCES.get(precision, TOLERANCES["fp32"])
    tally = _Tally(atol=atol, rtol=rtol, task=task)
    _check_examples(reference, converted, signature, batch_sizes, seed, tally)
    samples_checked = _check_samples(reference, converted, signature, p.samples, tally)
    checked, unchecked = [input_shapes(signature)], []
    second = alternate_signature(signature) if p.dynamic_sizes else None
    before = len(tally.failures)
    if second is not None:
        why = _check_second_size(reference, converted, second, min(batch_sizes, default=1),
                                 seed + len(batch_sizes), tally)
        if why is None:
            checked.append(input_shapes(second))
        else:
            unchecked.append({"input_shapes": input_shapes(second), "reason": why})
    message = "; ".join(tally.failures) if tally.failures else "outputs match the framework"
    if before == 0 and tally.failures and second is not None:
        message += f" ({baked_size_hint(signature)})"
    if unchecked and not tally.failures:
        message += f" (second size of the dynamic axes not checked: {unchecked[0]['reason']})"
    return VerificationResult(
        passed=not tally.failures,
        precision=precision,
        batch_sizes=list(batch_sizes),
        max_abs_err=tally.worst_abs,
        max_rel_err=tally.worst_rel,
        atol=atol,
        rtol=rtol,
        agreement={k: float(min(v)) for k, v in tally.agree.items()},
        per_output=tally.per_output,
        message=message,
        input_shapes=checked,
        unchecked_shapes=unchecked,
        samples_checked=samples_checked,
    )


def _check_examples(reference: Callable[[dict], dict], converted: Callable[[dict], dict], signature: ModelSignature,
                    batch_sizes: tuple[int, ...], seed: int, tally: _Tally) -> None:
    """Random example inputs at every batch size (seeded per size); a framework model that fails on them is one
    line (no exporter can fix the model itself), a converted one that fails is a verification failure."""
    for i, batch in enumerate(batch_sizes):
        inputs = signature.examples(batch, seed=seed + i)
        try:
            ref = reference(inputs)
        except Exception as err:  # no exporter can fix the model itself: one line, not a traceback
            raise ConversionError(f"the framework model itself fails on its example inputs at "
                                  f"{f'batch {batch}' if batch else 'the example shapes'}: {_first_line(err)}") from err
        got = tally.run_converted(converted, inputs, f"batch {batch}")
        if got is not None:
            tally.compare(signature, ref, got, f"batch {batch}")


def _check_samples(reference: Callable[[dict], dict], converted: Callable[[dict], dict], signature: ModelSignature,
                   samples: Iterable[dict] | None, tally: _Tally) -> int:
    """Every batch of the user's real samples; returns how many samples were compared. The user's data may reach
    what random inputs did not: the framework failing there is a verification failure, not a crash."""
    samples_checked = 0
    for k, inputs in enumerate(samples or ()):
        where = f"real-sample batch {k}"
        try:
            ref = reference(inputs)
        except Exception as err:  # the user's data reaches what random inputs did not: a failure, not a crash
            tally.failures.append(f"at {where}: the framework model itself fails: {_first_line(err)}")
            continue
        got = tally.run_converted(converted, inputs, where)
        if got is not None:
            tally.compare(signature, ref, got, where)
        samples_checked += len(next(iter(inputs.values())))
    return samples_checked
