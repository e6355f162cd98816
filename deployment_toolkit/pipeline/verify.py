"""The served ensemble against the same steps run in-process, sample by sample: numbers within the precision's
tolerance, strings (labels) equal. The result is typed (`Verification`); its rows go to verification.csv."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..client import TritonClient
from ..client.errors import InferenceError
from ..errors import UserError
from ..spec import TOLERANCES
from .ports import Port
from .plan import PipelinePlan


class ServedPipelineError(UserError, RuntimeError):
    """The served ensemble refused a raw sample (its step's error, as the server said it)."""


@dataclass(frozen=True)
class OutputCheck:
    sample: str
    output: str
    kind: str  # numbers | strings
    passed: bool
    max_abs_err: float | None = None  # numbers only
    detail: str = ""

    def row(self) -> dict[str, Any]:
        return {"sample": self.sample, "output": self.output, "kind": self.kind, "passed": self.passed,
                "max_abs_err": self.max_abs_err, "detail": self.detail}


@dataclass(frozen=True)
class Verification:
    checks: tuple[OutputCheck, ...]
    atol: float
    rtol: float
    reference: str  # what ran in-process: "framework" or the artifact's runtime

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def failures(self) -> list[OutputCheck]:
        return [c for c in self.checks if not c.passed]

    def summary(self) -> str:
        samples = len({c.sample for c in self.checks})
        errs = [c.max_abs_err for c in self.checks if c.max_abs_err is not None]
        worst = f"; max abs err {max(errs):.3g} (atol {self.atol:g}, rtol {self.rtol:g})" if errs else ""
        if self.passed:
            return f"served pipeline matches the in-process steps ({self.reference}) on {samples} sample(s){worst}"
        first = self.failures[0]
        failed = len({c.sample for c in self.failures})
        return (f"served pipeline differs from the in-process steps ({self.reference}) on {failed} of {samples} "
                f"sample(s){worst}; first: sample {first.sample}, {first.output}: {first.detail}")


def wire_inputs(ports: Sequence[Port], inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A batch of one as the ensemble's config declares it (one value per sample: [batch, 1])."""
    out = {}
    for port in ports:
        arr = np.asarray(inputs[port.name])
        out[port.name] = arr.reshape(len(arr), 1) if not port.shape else arr
    return out


def compare(sample: str, port: Port, expected: np.ndarray, served: np.ndarray, tolerance: tuple[float, float]
            ) -> OutputCheck:
    expected = np.asarray(expected)
    served = np.asarray(served)
    if served.size == expected.size:
        served = served.reshape(expected.shape)
    elif port.is_string or served.shape != expected.shape:
        return OutputCheck(sample, port.name, "strings" if port.is_string else "numbers", False, None,
                           f"served shape {list(served.shape)}, in-process {list(expected.shape)}")
    if port.is_string:
        same = expected.shape == served.shape and all(bytes(a) == bytes(b) for a, b in zip(expected.ravel(),
                                                                                          served.ravel()))
        detail = "" if same else f"served {_short(served)}, in-process {_short(expected)}"
        return OutputCheck(sample, port.name, "strings", same, None, detail)
    atol, rtol = tolerance
    a, b = expected.astype(np.float64), served.astype(np.float64)
    err = float(np.max(np.abs(a - b))) if a.size else 0.0
    ok = bool(np.allclose(b, a, atol=atol, rtol=rtol, equal_nan=True))
    return OutputCheck(sample, port.name, "numbers", ok, err, "" if ok else f"max abs err {err:.3g}")


def _short(arr: np.ndarray) -> str:
    items = [bytes(x).decode("utf-8", "replace") for x in arr.ravel()[:5]]
    return "[" + ", ".join(items) + (", ..." if arr.size > 5 else "") + "]"


def served_outputs(client: TritonClient, plan: PipelinePlan, inputs: dict[str, np.ndarray], sample: str
                   ) -> dict[str, np.ndarray]:
    try:
        return client.infer(plan.names.ensemble, wire_inputs(plan.wiring.inputs, inputs),
                            [p.name for p in plan.wiring.outputs])
    except InferenceError as err:
        raise ServedPipelineError(f"the served pipeline failed on raw sample {sample}: {err}") from err


def verify_served(client: TritonClient, plan: PipelinePlan, reference: str = "framework") -> Verification:
    """Send every raw sample to the ensemble and compare its outputs with the in-process run's."""
    tolerance = TOLERANCES.get(plan.manifest.precision, TOLERANCES["fp32"])
    checks = []
    for run, raw in zip(plan.runs, plan.raw.samples):
        served = served_outputs(client, plan, run.raw, str(raw.path))
        for port in plan.wiring.outputs:
            checks.append(compare(run.name, port, run.final[port.name], served[port.name], tolerance))
    return Verification(tuple(checks), tolerance[0], tolerance[1], reference)


__all__ = ["OutputCheck", "ServedPipelineError", "Verification", "compare", "served_outputs", "verify_served",
           "wire_inputs"]
