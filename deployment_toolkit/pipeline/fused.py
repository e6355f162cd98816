"""The fused layout (`--layout fused`): the whole pipeline as one Python-backend model, `<name>_pipeline`, in place of
the ensemble of three. Clients see the same model name, inputs and outputs; inside, fused_model.py runs the same
wiring (the ensemble's steps, in order, with its tensor hand-overs) in one process, so a request crosses between
Triton and a stub once instead of once per step. It needs the network in the Python runtime (the embedded server's
only backend): with `--runtime native` the network is a native backend's model and the steps stay an ensemble.

The model's config takes the network's serving settings (instances, kind, dynamic batching, runtime threads) from
the config the network alone would get (repository.build_config), so `--instances` and friends mean the same."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from ..export.check import check_artifact
from ..export.files import copy_artifact_files
from ..repository.config import ConfigError, ConfigOptions, build_config
from ..repository.layout import staged_version
from ..repository.python_runtime import RUNTIME_FILES
from .configs import StepServing, add_port
from .plan import PipelinePlan
from .stepfile import StepFile

HERE = Path(__file__).parent
FUSED_FILES = {"model.py": HERE / "fused_model.py", "step_runtime.py": HERE / "step_runtime.py",
               "runtimes.py": RUNTIME_FILES["runtimes.py"]}


def _module(step: StepFile) -> str:
    return f"user_{step.kind.value}"


def graph(plan: PipelinePlan) -> dict:
    """The wiring as fused_model.py runs it: each step's kind, its user module and function (or the network), and
    its input and output maps over the pipeline's tensors."""
    steps = []
    for wired in plan.wiring.steps:
        step = {"inputs": dict(wired.input_map), "outputs": dict(wired.output_map)}
        if wired.model == plan.names.model:
            step["kind"] = "network"
        else:
            user = plan.pre if wired.model == plan.names.preprocess else plan.post
            step.update(kind="function", module=_module(user), function=user.kind.value)  # type: ignore[union-attr]
        steps.append(step)
    return {"steps": steps, "scalar_inputs": [p.name for p in plan.wiring.inputs if not p.shape],
            "scalar_outputs": [p.name for p in plan.wiring.outputs if not p.shape]}


def check_fused_runtime(runtime: str) -> None:
    """The fused model runs the network itself, in the Python runtime (checked before any work is done)."""
    if runtime != "python":
        raise ConfigError(f"--layout fused runs the network in the Python runtime; --runtime {runtime} serves it "
                          "with a native backend: use --layout ensemble")


def check_fusable(plan: PipelinePlan, network: ConfigOptions) -> None:
    """ConfigError (one line) where one process cannot run the pipeline as the ensemble would."""
    check_fused_runtime(network.runtime)
    uniform = [t.name for t in plan.manifest.inputs if t.batch_uniform]
    if uniform:
        raise ConfigError(f"{plan.manifest.model}'s input(s) {', '.join(uniform)} must be equal within a batch, which "
                          "only the network's own model keeps: use --layout ensemble")
    _side_files(plan)


def fused_config(plan: PipelinePlan, serving: StepServing, network: ConfigOptions) -> mc.ModelConfig:
    """The one model's config: the pipeline's raw inputs and final outputs, the network's serving settings, the
    graph; max batch the smallest of the steps'."""
    check_fusable(plan, network)
    net = build_config(plan.manifest, network)
    cfg = mc.ModelConfig(name=plan.names.ensemble, backend="python",
                         max_batch_size=min(net.max_batch_size, serving.max_batch_size))
    for port in plan.wiring.inputs:
        add_port(cfg.input, port)
    for port in plan.wiring.outputs:
        add_port(cfg.output, port)
    if net.HasField("dynamic_batching"):
        cfg.dynamic_batching.CopyFrom(net.dynamic_batching)
        sizes = [s for s in cfg.dynamic_batching.preferred_batch_size if s <= cfg.max_batch_size]
        del cfg.dynamic_batching.preferred_batch_size[:]
        cfg.dynamic_batching.preferred_batch_size.extend(sizes)
    cfg.instance_group.extend(net.instance_group)
    for key in ("intra_op_threads", "precision", "accelerator"):
        if key in net.parameters:
            cfg.parameters[key].string_value = net.parameters[key].string_value
    cfg.parameters["graph"].string_value = json.dumps(graph(plan), sort_keys=True)
    return cfg


def _side_files(plan: PipelinePlan) -> dict[str, Path]:
    """Every side file the steps name, by its name in the version folder; two different files of one name refused."""
    files: dict[str, Path] = {}
    for step in (plan.pre, plan.post):
        for name in step.files if step is not None else ():
            path = (step.path.parent / name).resolve()
            if name in files and files[name] != path:
                raise ConfigError(f"the preprocess and the postprocess each name a side file {name!r} ({files[name]} "
                                  f"and {path}); one process holds one: rename one, or use --layout ensemble")
            files[name] = path
    return files


def write_fused(repository: Path, plan: PipelinePlan, cfg: mc.ModelConfig, version: int = 1) -> None:
    """The one model's version folder: fused_model.py as model.py, the runtimes, the artifact and its manifest, the
    user's files and their side files; config and folder appear together (staged_version)."""
    check_artifact(plan.manifest, plan.artifact_dir)  # a manifest edited to lie, or another artifact copied in
    side = _side_files(plan)
    with staged_version(repository / cfg.name, version, cfg) as staging:
        copy_artifact_files(plan.manifest, plan.artifact_dir, staging)
        plan.manifest.save(staging)
        for name, source in FUSED_FILES.items():
            shutil.copy2(source, staging / name)
        for step in (plan.pre, plan.post):
            if step is not None:
                shutil.copy2(step.path, staging / f"{_module(step)}.py")
        for name, path in side.items():
            target = staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


__all__ = ["FUSED_FILES", "check_fused_runtime", "check_fusable", "fused_config", "graph", "write_fused"]
