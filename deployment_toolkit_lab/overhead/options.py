"""What one serving-overhead run measures (OverheadOptions, its serving Variants): the run (overhead) and its
report (overhead_report) both take them, so they live apart from both."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from deployment_toolkit.config import Protocol, SharedMemory, setting
from deployment_toolkit.config.fields import int_list
from deployment_toolkit.errors import UserInputError
from deployment_toolkit.perf.analyzer import PerfOptions
from deployment_toolkit.perf.online import parse_range


@dataclass(frozen=True)
class Variant:
    """A serving configuration: model instances x ONNX Runtime intra-op threads per instance (0: ORT's default)."""

    instances: int
    threads: int = 0

    @classmethod
    def parse(cls, text: str) -> "Variant":
        """`1x0` (one instance, default threads) or `2x1` (two instances, one thread each)."""
        try:
            a, b = text.lower().split("x")
            variant = cls(int(a), int(b))
        except ValueError:
            raise UserInputError(f"{text!r}: expected INSTANCESxTHREADS, e.g. 1x0 or 2x1 (0 threads = default)"
                                 ) from None
        if variant.instances < 1 or variant.threads < 0:
            raise UserInputError(f"{text!r}: instances must be >= 1 and threads >= 0")
        return variant

    @property
    def label(self) -> str:
        return f"{self.instances} instance{'s' if self.instances > 1 else ''} x " + (
            f"{self.threads} intra-op thread{'s' if self.threads > 1 else ''}" if self.threads else "default threads")

    def model_name(self, model: str) -> str:
        from deployment_toolkit.sources import short_name

        return f"{short_name(model)}_i{self.instances}_t{self.threads}"

    def __str__(self) -> str:
        """The flag's form (`2x1`), so --variants shows its default as a user types it."""
        return f"{self.instances}x{self.threads}"


def _variants(value: Sequence[str | Variant]) -> tuple[Variant, ...]:
    """--variants as typed (`1x0 2x1`) or already parsed (the default) -> Variants."""
    return tuple(v if isinstance(v, Variant) else Variant.parse(v) for v in value)


def _concurrencies(value: str | Sequence[int]) -> tuple[int, ...]:
    """--concurrency as typed (`1:4:1`, `1,2,4`) or already a tuple (the default) -> levels."""
    return tuple(parse_range(value)) if isinstance(value, str) else tuple(value)


@dataclass
class OverheadOptions:
    """One overhead run; each default written once (bench-overhead's flags are built from these fields)."""

    model: str = setting("resnet50", flag="--model",
                         help="a zoo name, timm:<arch>, a model.py with get_signature, an ONNX file or an artifact "
                              "folder (the source its manifest records)")
    preset: str = setting("full", flag="--preset", help="the model's size preset")
    batch_sizes: tuple[int, ...] = setting((1, 8), flag="--batch-sizes", type=int_list, help="client batch sizes")
    # the online sweep's levels; the flag takes start:end:step (perf_analyzer's form) or a list
    concurrencies: tuple[int, ...] = setting((1, 2, 3, 4), flag="--concurrency", type=str, to_value=_concurrencies,
                                             help="online sweep levels: start:end:step or a list")
    variants: tuple[Variant, ...] = setting(
        (Variant(1, 0), Variant(2, 1)), flag="--variants", type=str, nargs="+", to_value=_variants,
        metavar="INSTANCESxTHREADS",
        help="serving variants, instances x intra-op threads (0 threads: ONNX Runtime's choice)")
    inprocess_warmup: int = setting(3, flag="--inprocess-warmup", help="untimed in-process calls")
    inprocess_seconds: float = setting(10.0, flag="--inprocess-seconds", help="timed in-process seconds, twice")
    # paired in-process / served-at-concurrency-1 rounds per batch (0: none)
    single_client_rounds: int = setting(
        3, flag="--single-client-rounds",
        help="rounds of in-process timing then served at concurrency 1, in turns on one server, per batch "
             "(the single client's ratio; 0: none)")
    max_queue_delay_us: int = setting(0, flag="--max-queue-delay-us", help="dynamic batcher delay")
    # the acceptance bar
    bar: float = setting(0.8, flag="--bar", help="acceptance bar for served / in-process")
    perf: PerfOptions = field(default_factory=lambda: PerfOptions(protocol=Protocol.GRPC,
                                                                  shared_memory=SharedMemory.SYSTEM))
    workspace: Path = Path("workspace/overhead")
    server_start_timeout_s: float = setting(300.0, flag="--server-start-timeout", aliases=("--server-timeout",),
                                            help="seconds the embedded server may take to load the models")
    seed: int = 0
