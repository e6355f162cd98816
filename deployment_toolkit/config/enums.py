"""The toolkit's fixed choices, one enum each (issue 37), instead of strings checked by hand in several places.

Each enum is a `str` enum: a member equals its value (`Precision.FP16 == "fp16"`), so manifests, run.json and
CSV cells keep their strings, and code that still compares with a literal keeps working while it moves over.
"""
from __future__ import annotations

import enum


class Choice(str, enum.Enum):
    """A fixed choice whose value is what files and flags spell."""

    def __str__(self) -> str:  # argparse's usage and f-strings show the value, not Choice.X
        return self.value

    @classmethod
    def values(cls) -> tuple[str, ...]:
        return tuple(m.value for m in cls)


class Format(Choice):
    TS_TRACE = "ts-trace"
    TS_SCRIPT = "ts-script"
    ONNX = "onnx"
    TRT = "trt"


class Precision(Choice):
    FP32 = "fp32"
    FP16 = "fp16"


class OnnxExporter(Choice):
    AUTO = "auto"  # the TorchScript-based exporter, then the torch.export-based one
    TORCHSCRIPT = "torchscript"
    DYNAMO = "dynamo"


class Protocol(Choice):
    GRPC = "grpc"
    HTTP = "http"


class SharedMemory(Choice):
    NONE = "none"
    SYSTEM = "system"
    CUDA = "cuda"


class Objective(Choice):
    CAPACITY = "capacity"
    CLOSED_LOOP = "closed-loop"
    LATENCY = "latency"


class Reuse(Choice):
    """What a rerun does with rows an earlier run of the same folder kept (results.ledger)."""
    AUTO = "auto"  # reuse rows measured under the same identity, set the others aside
    RESUME = "resume"  # reuse them, and refuse to go on where any row's identity differs
    FRESH = "fresh"  # set every earlier row aside


class StepStatus(Choice):
    """How a step of a composite job (steps.StepRunner) ended."""
    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"
    STOPPED = "stopped"  # Ctrl-C or SIGTERM while it ran (steps.json says so instead of "failed")


class InstanceKind(Choice):
    """Where Triton runs a model's instances (instance_group kind)."""
    CPU = "KIND_CPU"
    GPU = "KIND_GPU"
    AUTO = "KIND_AUTO"
    MODEL = "KIND_MODEL"


class LoadMode(Choice):
    """How perf_analyzer drives a server: closed loop (N requests in flight) or open loop (a rate, or a schedule
    of send times)."""
    CONCURRENCY = "concurrency"
    REQUEST_RATE = "request-rate"
    SCHEDULE = "schedule"


__all__ = ["Choice", "Format", "Precision", "OnnxExporter", "Protocol", "SharedMemory", "Objective", "Reuse",
           "StepStatus", "InstanceKind", "LoadMode"]


class PipelineLayout(Choice):
    """How a pipeline (pre/post-processing around a model) is served: an ensemble of one model per step (each step's
    share in the server's statistics; the network may be a native backend's model), or one Python-backend model
    running every step (one hop between Triton and a stub per request)."""
    ENSEMBLE = "ensemble"
    FUSED = "fused"
