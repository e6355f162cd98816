"""Framework vs converted outputs on the same random batches, with per-precision tolerances."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

from ..spec import ModelSignature

# pass when max_abs_err <= atol + rtol * max|reference|  (per output, over every batch tried)
TOLERANCES = {"fp32": (1e-4, 1e-4), "fp16": (1e-2, 1e-2), "bf16": (5e-2, 5e-2)}


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

    def to_dict(self) -> dict:
        return asdict(self)


def torch_callable(model, input_names: list[str], output_names: list[str], device: str = "cpu") -> Callable[[dict], dict]:
    """Wrap an nn.Module as numpy-in / numpy-out, like the converted runtimes."""
    import torch

    model = model.to(device)

    def run(inputs: dict) -> dict:
        with torch.inference_mode():
            out = model(*[torch.from_numpy(np.ascontiguousarray(inputs[n])).to(device) for n in input_names])
        if not isinstance(out, (list, tuple)):
            out = [out]
        return {n: o.detach().float().cpu().numpy() for n, o in zip(output_names, out)}

    return run


def agreement(task: str, ref: np.ndarray, got: np.ndarray) -> dict[str, float]:
    """Task-level agreement: what a user of the model would notice, beyond raw error."""
    from ..metrics.compare import task_agreement

    return task_agreement(task, ref, got)


def verify(reference: Callable[[dict], dict], converted: Callable[[dict], dict], signature: ModelSignature,
           task: str, precision: str = "fp32", batch_sizes: tuple[int, ...] = (1, 2), seed: int = 0) -> VerificationResult:
    atol, rtol = TOLERANCES.get(precision, TOLERANCES["fp32"])
    worst_abs, worst_rel = 0.0, 0.0
    per_output: dict[str, dict[str, float]] = {}
    agree: dict[str, list[float]] = {}
    failures = []
    for i, batch in enumerate(batch_sizes):
        inputs = signature.examples(batch, seed=seed + i)
        ref, got = reference(inputs), converted(inputs)
        for spec in signature.outputs:
            r = np.asarray(ref[spec.name], dtype=np.float64)
            g = np.asarray(got[spec.name], dtype=np.float64)
            if r.shape != g.shape:
                failures.append(f"{spec.name} at batch {batch}: shape {g.shape} != framework {r.shape}")
                continue
            scale = float(np.max(np.abs(r))) if r.size else 0.0
            abs_err = float(np.max(np.abs(r - g))) if r.size else 0.0
            rel_err = abs_err / max(scale, 1e-12)
            stats = per_output.setdefault(spec.name, {"max_abs_err": 0.0, "max_rel_err": 0.0, "scale": 0.0})
            stats["max_abs_err"] = max(stats["max_abs_err"], abs_err)
            stats["max_rel_err"] = max(stats["max_rel_err"], rel_err)
            stats["scale"] = max(stats["scale"], scale)
            worst_abs, worst_rel = max(worst_abs, abs_err), max(worst_rel, rel_err)
            if not np.isfinite(g).all():
                failures.append(f"{spec.name} at batch {batch}: converted output has NaN/inf")
            elif abs_err > atol + rtol * scale:
                failures.append(f"{spec.name} at batch {batch}: max abs err {abs_err:.3g} > {atol:g} + {rtol:g} x {scale:.3g}")
            if spec is signature.outputs[0]:
                for k, v in agreement(task, r, g).items():
                    agree.setdefault(k, []).append(v)
    return VerificationResult(
        passed=not failures,
        precision=precision,
        batch_sizes=list(batch_sizes),
        max_abs_err=worst_abs,
        max_rel_err=worst_rel,
        atol=atol,
        rtol=rtol,
        agreement={k: float(min(v)) for k, v in agree.items()},
        per_output=per_output,
        message="; ".join(failures) if failures else "outputs match the framework",
    )
