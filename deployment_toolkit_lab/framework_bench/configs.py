"""What the bench measures: models x precision x torch.compile x batch size x runtime, as configurations
(a group shares one prepared model)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from deployment_toolkit.config import setting
from deployment_toolkit.config.fields import int_list
from deployment_toolkit.errors import UserInputError


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


@dataclass(frozen=True)
class BenchMatrix:
    """What a bench run measures: every combination of these; each default written once (the bench command's
    flags are built from these fields, and `enumerate_configs` takes the same defaults)."""

    models: tuple[str, ...] = setting(
        ("resnet50",), flag="--models", nargs="+", help="models: each a zoo name, timm:<arch>, a model.py with get_signature, an "
        "ONNX file or an artifact folder (the source its manifest records)")
    preset: str = setting("full", flag="--preset", help="model preset")
    precisions: tuple[str, ...] = setting(PRECISIONS, flag="--precisions", nargs="+", choices=PRECISIONS,
                                          help="amp: autocast (see --amp-dtype)")
    compile_modes: tuple[str, ...] = setting(("none", "default"), flag="--compile-modes", nargs="+", choices=COMPILE_MODES,
                                             help="torch.compile modes, eager runtime only")
    runtimes: tuple[str, ...] = setting(RUNTIMES, flag="--runtimes", nargs="+", choices=RUNTIMES,
                                        help="eager: torch itself")
    batch_sizes: tuple[int, ...] = setting((1, 8), flag="--batch-sizes", type=int_list,
                                           help="e.g. 1,8,32 (halved on OOM)")
    threads: int = setting(BenchConfig.threads, flag="--threads",
                           help="torch / ONNX Runtime intra-op threads (0: their default)")

    def __post_init__(self) -> None:
        for name in ("models", "precisions", "compile_modes", "runtimes", "batch_sizes"):
            object.__setattr__(self, name, tuple(getattr(self, name)))  # a flag's list, a caller's list

    def configs(self) -> list[BenchConfig]:
        """Every configuration of the matrix (`enumerate_configs`)."""
        return enumerate_configs(self.models, self.precisions, self.compile_modes, self.batch_sizes, self.runtimes,
                                 self.preset, self.threads)


def enumerate_configs(models: Sequence[str], precisions: Sequence[str] = BenchMatrix.precisions,
                      compile_modes: Sequence[str] = BenchMatrix.compile_modes,
                      batch_sizes: Sequence[int] = BenchMatrix.batch_sizes,
                      runtimes: Sequence[str] = BenchMatrix.runtimes, preset: str = BenchMatrix.preset,
                      threads: int = BenchMatrix.threads) -> list[BenchConfig]:
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
