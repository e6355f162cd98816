"""What the bench measures: models x precision x torch.compile x batch size x runtime, as configurations
(a group shares one prepared model)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ...errors import UserInputError


PRECISIONS = ("fp32", "fp16", "bf16", "amp")
COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune")
RUNTIMES = ("eager", "torchscript", "onnxruntime")
STATUS_OK, STATUS_SKIPPED, STATUS_FAILED = "ok", "skipped", "failed"


@dataclass(frozen=True, order=True)
class BenchConfig:
    """One measured point. `batch_size` is the requested size (halved on OOM: the row's batch_size says)."""

    model: str
    preset: str
    runtime: str
    precision: str
    compile_mode: str
    batch_size: int
    threads: int = 0  # 0: the runtime's default

    @property
    def key(self) -> tuple[str, ...]:
        return (self.model, self.preset, self.runtime, self.precision, self.compile_mode, str(self.batch_size),
                str(self.threads))

    @property
    def group(self) -> tuple[str, ...]:
        """Configurations sharing one prepared model (all batch sizes of a runtime/precision/compile)."""
        return self.key[:5] + (str(self.threads),)

    @property
    def label(self) -> str:
        comp = "" if self.compile_mode == "none" else f" compile={self.compile_mode}"
        return f"{self.model}/{self.preset} {self.runtime} {self.precision}{comp} b{self.batch_size}"


def enumerate_configs(models: Sequence[str], precisions: Sequence[str] = PRECISIONS,
                      compile_modes: Sequence[str] = ("none", "default"), batch_sizes: Sequence[int] = (1, 8),
                      runtimes: Sequence[str] = RUNTIMES, preset: str = "full", threads: int = 0) -> list[BenchConfig]:
    """Every combination, grouped so one prepared model serves all its batch sizes in a row.

    torch.compile is a transformation of the eager module, so compile modes other than `none` are paired
    with the eager runtime only (TorchScript and ONNX Runtime have their own graph compilers).
    """
    for name, values, allowed in (("precision", precisions, PRECISIONS), ("compile mode", compile_modes, COMPILE_MODES),
                                  ("runtime", runtimes, RUNTIMES)):
        bad = [v for v in values if v not in allowed]
        if bad:
            raise UserInputError(f"unknown {name} {bad}; choose from {', '.join(allowed)}")
    if any(b < 1 for b in batch_sizes):
        raise UserInputError("batch sizes must be >= 1")
    out: list[BenchConfig] = []
    for model in dict.fromkeys(models):
        for runtime in dict.fromkeys(runtimes):
            for precision in dict.fromkeys(precisions):
                for mode in dict.fromkeys(compile_modes):
                    if mode != "none" and runtime != "eager":
                        continue
                    for batch in sorted(set(batch_sizes)):
                        out.append(BenchConfig(model, preset, runtime, precision, mode, batch, threads))
    return out
