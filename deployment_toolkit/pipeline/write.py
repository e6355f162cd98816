"""The pipeline in a Triton model repository:

    <repository>/<name>/               the network, written by repository.write_model (the Python backend runs the
                                       artifact with ONNX Runtime on CPU hosts; --runtime native for GPU hosts)
    <repository>/<name>_preprocess/    Python backend: step_model.py as model.py, step_runtime.py, the user's file as
    <repository>/<name>_postprocess/   user_step.py and the side files it names (FILES)
    <repository>/<name>_pipeline/      the ensemble: config.pbtxt with ensemble_scheduling, an empty version folder

or, with the fused layout, only `<repository>/<name>_pipeline/`: one Python-backend model running every step
(pipeline.fused).

Every config is built as a ModelConfig protobuf and the ensemble is checked against the configs of its steps
(configs.check_ensemble) before anything is written; each model's version folder and config appear together
(repository.layout.staged_version)."""
from __future__ import annotations

import dataclasses
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from ..repository.config import ConfigOptions, build_config
from ..repository.layout import staged_version, write_model
from ..spec import check_repository_path
from ..config import PipelineLayout
from .configs import StepServing, check_ensemble, ensemble_config, step_config
from .fused import fused_config, write_fused
from .plan import PipelinePlan
from .stepfile import StepFile

log = logging.getLogger(__name__)
HERE = Path(__file__).parent
STEP_FILES = {"model.py": HERE / "step_model.py", "step_runtime.py": HERE / "step_runtime.py"}
USER_FILE = "user_step.py"


@dataclass(frozen=True)
class WrittenPipeline:
    repository: Path
    configs: dict[str, mc.ModelConfig]  # every model written, by name: the steps in order, then the ensemble
    ensemble: str

    @property
    def models(self) -> list[str]:
        return list(self.configs)

    @property
    def composing(self) -> list[str]:
        return [n for n in self.configs if n != self.ensemble]


def model_options(plan: PipelinePlan, base: ConfigOptions | None) -> ConfigOptions:
    """The network's ConfigOptions: the user's (instances, threads, queue delay ...) under the pipeline's name."""
    return dataclasses.replace(base or ConfigOptions(model_name=plan.names.model), model_name=plan.names.model)


def build_configs(plan: PipelinePlan, serving: StepServing, network: ConfigOptions | None = None
                  ) -> dict[str, mc.ModelConfig]:
    """Every config of the pipeline, the ensemble checked against the others (ConfigError before any write)."""
    network = model_options(plan, network)
    if network.max_batch_size is not None and network.max_batch_size < plan.max_batch_size:
        serving = dataclasses.replace(serving, max_batch_size=network.max_batch_size)
    configs: dict[str, mc.ModelConfig] = {}
    for step in plan.wiring.steps:
        if step.model == plan.names.model:
            configs[step.model] = build_config(plan.manifest, network)
        else:
            kind = plan.pre.kind if step.model == plan.names.preprocess else plan.post.kind  # type: ignore[union-attr]
            configs[step.model] = step_config(step.model, kind, step.inputs, step.outputs, serving)
    batch = min(c.max_batch_size for c in configs.values())
    configs[plan.names.ensemble] = ensemble_config(plan.names.ensemble, plan.wiring, batch)
    check_ensemble(configs[plan.names.ensemble], configs)
    return configs


def _write_step(repository: Path, cfg: mc.ModelConfig, step: StepFile, version: int) -> None:
    with staged_version(repository / cfg.name, version, cfg) as staging:
        for name, source in STEP_FILES.items():
            shutil.copy2(source, staging / name)
        shutil.copy2(step.path, staging / USER_FILE)
        for name in step.files:
            target = staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(step.path.parent / name, target)


def write_pipeline(repository: str | Path, plan: PipelinePlan, serving: StepServing,
                   network: ConfigOptions | None = None, version: int = 1,
                   layout: PipelineLayout = PipelineLayout.ENSEMBLE) -> WrittenPipeline:
    """Write the network, the steps and the ensemble into `repository` (or, fused, the one model that runs them all);
    returns their configs."""
    repository = check_repository_path(repository)
    opts = model_options(plan, network)
    if PipelineLayout(layout) == PipelineLayout.FUSED:
        cfg = fused_config(plan, serving, opts)
        write_fused(repository, plan, cfg, version)
        log.info("wrote %s (the pipeline fused into one model) into %s", cfg.name, repository)
        return WrittenPipeline(Path(repository), {cfg.name: cfg}, cfg.name)
    configs = build_configs(plan, serving, network)
    write_model(repository, plan.artifact_dir, opts, version=version)
    for step in (plan.pre, plan.post):
        if step is not None:
            name = plan.names.preprocess if step is plan.pre else plan.names.postprocess
            _write_step(repository, configs[name], step, version)
    with staged_version(repository / plan.names.ensemble, version, configs[plan.names.ensemble]):
        pass  # an ensemble has no files, but Triton needs its version folder
    log.info("wrote %s into %s", ", ".join(configs), repository)
    return WrittenPipeline(Path(repository), configs, plan.names.ensemble)


__all__ = ["WrittenPipeline", "build_configs", "write_pipeline"]
