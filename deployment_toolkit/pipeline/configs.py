"""The configs of a pipeline, built as Triton's ModelConfig protobuf like every config the toolkit writes: each
step a Python-backend model (dynamic batching where the model batches, CPU instances), and the ensemble
(`platform: "ensemble"`, `ensemble_scheduling`) that chains them. `check_ensemble` validates the ensemble against
its composing configs before anything is written: every step's input fed once by an earlier tensor of the same type
and dims, every output named once, the ensemble's outputs produced, and its batch within each step's."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from tritonclient.grpc import model_config_pb2 as mc

from ..repository.config import ConfigError
from .ports import Port
from .stepfile import StepKind
from .wiring import Wiring


@dataclass(frozen=True)
class StepServing:
    """How a pre/post-processing model is served; its max batch is the network's (the ensemble's)."""

    max_batch_size: int
    instances: int = 1
    max_queue_delay_us: int = 0

    def __post_init__(self) -> None:
        if self.instances < 1:
            raise ConfigError(f"--step-instances must be >= 1, got {self.instances}")
        if self.max_queue_delay_us < 0:
            raise ConfigError(f"--step-queue-delay-us must be >= 0, got {self.max_queue_delay_us}")


def add_port(coll, port: Port) -> None:
    """`port` as a tensor of a config's input or output list."""
    t = coll.add()
    t.name = port.name
    t.data_type = mc.DataType.Value(port.config_type)
    t.dims.extend(port.wire_dims)


def step_config(name: str, kind: StepKind, inputs: Sequence[Port], outputs: Sequence[Port],
                serving: StepServing) -> mc.ModelConfig:
    """A Python-backend model running the user's function (step_model.py) on CPU instances."""
    cfg = mc.ModelConfig(name=name, backend="python", max_batch_size=serving.max_batch_size)
    for port in inputs:
        add_port(cfg.input, port)
    for port in outputs:
        add_port(cfg.output, port)
    if serving.max_batch_size > 0:
        cfg.dynamic_batching.max_queue_delay_microseconds = serving.max_queue_delay_us
    group = cfg.instance_group.add()
    group.count, group.kind = serving.instances, mc.ModelInstanceGroup.Kind.Value("KIND_CPU")
    params = {"function": kind.value, "scalar_inputs": ",".join(p.name for p in inputs if not p.shape),
              "scalar_outputs": ",".join(p.name for p in outputs if not p.shape)}
    for key, value in params.items():
        cfg.parameters[key].string_value = value
    return cfg


def ensemble_config(name: str, wiring: Wiring, max_batch_size: int) -> mc.ModelConfig:
    cfg = mc.ModelConfig(name=name, platform="ensemble", max_batch_size=max_batch_size)
    for port in wiring.inputs:
        add_port(cfg.input, port)
    for port in wiring.outputs:
        add_port(cfg.output, port)
    for step in wiring.steps:
        s = cfg.ensemble_scheduling.step.add()
        s.model_name, s.model_version = step.model, -1
        for key, value in step.input_map.items():
            s.input_map[key] = value
        for key, value in step.output_map.items():
            s.output_map[key] = value
    return cfg


def _dims_fit(a: Sequence[int], b: Sequence[int]) -> bool:
    return len(a) == len(b) and all(x == y or -1 in (x, y) for x, y in zip(a, b))


def _kind(t) -> tuple[str, list[int]]:
    return mc.DataType.Name(t.data_type), list(t.dims)


def check_ensemble(cfg: mc.ModelConfig, composing: Mapping[str, mc.ModelConfig]) -> None:
    """Raise ConfigError naming the first thing Triton would refuse (or serve wrongly) in the ensemble."""
    where = f"ensemble {cfg.name!r}"
    produced = {t.name: _kind(t) for t in cfg.input}
    for step in cfg.ensemble_scheduling.step:
        model = composing.get(step.model_name)
        if model is None:
            raise ConfigError(f"{where}: step {step.model_name!r} is not among the models written beside it")
        if cfg.max_batch_size > 0 and not 0 < cfg.max_batch_size <= model.max_batch_size:
            raise ConfigError(f"{where}: max_batch_size {cfg.max_batch_size} exceeds that of {step.model_name!r} "
                              f"({model.max_batch_size})")
        inputs = {t.name: t for t in model.input}
        for key, value in step.input_map.items():
            if key not in inputs:
                raise ConfigError(f"{where}: model {step.model_name!r} has no input {key!r}")
            if value not in produced:
                raise ConfigError(f"{where}: input {key!r} of {step.model_name!r} reads {value!r}, which no "
                                  "earlier step produces")
            want, got = _kind(inputs[key]), produced[value]
            if want[0] != got[0] or not _dims_fit(want[1], got[1]):
                raise ConfigError(f"{where}: {value!r} is {got[0]} {got[1]} but input {key!r} of {step.model_name!r} "
                                  f"is {want[0]} {want[1]}")
        unfed = [n for n, t in inputs.items() if n not in step.input_map and not t.optional]
        if unfed:
            raise ConfigError(f"{where}: input(s) {', '.join(unfed)} of {step.model_name!r} are not fed")
        outputs = {t.name: t for t in model.output}
        for key, value in step.output_map.items():
            if key not in outputs:
                raise ConfigError(f"{where}: model {step.model_name!r} has no output {key!r}")
            if value in produced:
                raise ConfigError(f"{where}: tensor {value!r} is produced twice")
            produced[value] = _kind(outputs[key])
    for t in cfg.output:
        if t.name not in produced:
            raise ConfigError(f"{where}: output {t.name!r} is produced by no step")
        got = produced[t.name]
        if got[0] != _kind(t)[0] or not _dims_fit(got[1], list(t.dims)):
            raise ConfigError(f"{where}: output {t.name!r} is declared {_kind(t)} but produced as {got}")


__all__ = ["StepServing", "add_port", "check_ensemble", "ensemble_config", "step_config"]
