"""A diffusion pipeline in a Triton model repository: the denoiser as its own model, plus a sampler model.

    <repository>/<name>_denoiser/   the converted one-step denoiser, written by `write_model` (Python runtime on
                                    CPU hosts, the format's native backend on GPU hosts); max_batch_size > 0
    <repository>/<name>/            the sampler (Python backend, KIND_CPU): samplers.py + sampler_model.py as
                                    model.py; calls the denoiser once per model evaluation through BLS

The denoiser stays a separate model so that Triton batches, schedules and measures each evaluation (its
statistics give the per-evaluation compute time), and the same artifact serves every sampler and step count.
Its max_batch_size must be > 0: one evaluation covers B conditionings x samples rows, split into chunks of
at most that size. `PipelineSettings` is the contract shared by the sampler's config parameters and the
in-process sampler (`deployment_toolkit.diffusion.runtime`), so both sample the same way.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from ..config import InstanceKind, check_numbers, setting
from ..spec import Manifest
from ..errors import UserFileNotFoundError
from ..repository.config import ConfigError, ConfigOptions, _dims, _version_policy, read_config
from ..repository.layout import staged_version, write_model
from ..repository.names import check_model_name

SAMPLER_MODEL_FILE = "sampler_model.py"
COND_INPUT = "encoder_hidden_states"
OUTPUT = "latents"
SCALAR_INPUTS = (("steps", "TYPE_INT32"), ("seed", "TYPE_INT64"), ("samples", "TYPE_INT32"))
# the sampler model's name unless told: deploy-diffusion writes it, diffusion-latency reads it
PIPELINE_NAME = "sd_pipeline"


def _sampler_names() -> tuple[str, ...]:
    from .samplers import SAMPLERS

    return tuple(SAMPLERS)


@dataclass
class PipelineOptions:
    """How a pipeline is written besides where: the sampler, what a request may ask for, the sampler's options and
    instances, and how the denoiser is served; each default written once (deploy-diffusion's flags are built from
    these fields)."""

    sampler: str = setting("ddim", flag="--sampler", help="ddim | edm_heun")
    max_samples: int = setting(4, flag="--max-samples", low=1, high=1 << 16,
                               help="samples per conditioning a request may ask for")
    max_conditionings: int = setting(4, flag="--max-conditionings", low=1, high=1 << 16,
                                     help="conditionings (B) per request")
    max_steps: int = setting(1000, flag="--max-steps", low=1, high=100_000, help="steps a request may ask for")
    # the sampler's own options (samplers.DDIMOptions / EDMOptions fields): --sampler-option KEY=VALUE
    sampler_options: dict[str, Any] = field(default_factory=dict)
    sampler_instances: int = setting(1, flag="--sampler-instances", low=1, high=1 << 10,
                                     help="concurrent sampling requests; >1 lets the denoiser's dynamic batcher merge "
                                          "evaluations")
    denoiser_name: str | None = setting(None, flag="--denoiser-name", help="default: <name>_denoiser")
    runtime: str = setting("python", flag="--runtime", choices=("python", "native"),
                           help="python: the Python backend runs the artifact (embedded server, any host); native: "
                                "the format's Triton backend (NGC container, GPU hosts)")
    # overrides the denoiser's ConfigOptions (its model_name and runtime are set from the fields above)
    denoiser_options: ConfigOptions | None = None
    version: int = 1

    def __post_init__(self) -> None:
        check_numbers(self)


@dataclass(frozen=True)
class DenoiserSource:
    """Which registered denoiser the diffusion commands convert, and the workspace their conversions are kept in
    (and reused from), so deploy-diffusion and diffusion-speedup name and find an artifact the same way."""

    model: str = setting("sd_unet", flag="--model", help="registered one-step denoiser")
    workspace: str = setting("workspace", flag="--workspace",
                             help="where conversions go: <workspace>/<model>_<preset>_<fmt>_<precision>")

    def artifact_dir(self, preset: str, fmt: str, precision: str) -> Path:
        """The conversion's folder in the workspace."""
        return Path(self.workspace) / f"{self.model}_{preset}_{fmt}_{precision}"


@dataclass(frozen=True)
class PipelineSettings:
    """Everything that decides what a sampling run computes (besides cond, steps, seed, samples)."""

    denoiser: str
    sampler: str
    sample_shape: tuple[int, ...]
    cond_shape: tuple[int, ...]
    denoiser_inputs: tuple[str, str, str]  # sample, timestep, conditioning
    denoiser_output: str
    denoiser_max_batch: int
    max_samples: int = PipelineOptions.max_samples
    max_conditionings: int = PipelineOptions.max_conditionings
    max_steps: int = PipelineOptions.max_steps
    sampler_options: dict[str, Any] = field(default_factory=dict)

    def to_parameters(self) -> dict[str, str]:
        """The sampler model's config parameters (strings, as Triton stores them)."""
        d = asdict(self)
        return {
            **{k: str(v) for k, v in d.items() if isinstance(v, (str, int))},
            "denoiser_version": "",
            "sample_shape": ",".join(map(str, self.sample_shape)),
            "cond_shape": ",".join(map(str, self.cond_shape)),
            "denoiser_inputs": ",".join(self.denoiser_inputs),
            "sampler_options": json.dumps(self.sampler_options, sort_keys=True),
        }

    @classmethod
    def from_parameters(cls, params: dict[str, str]) -> "PipelineSettings":
        ints = lambda text: tuple(int(v) for v in text.split(",") if v)  # noqa: E731
        names = tuple(n.strip() for n in params["denoiser_inputs"].split(","))
        return cls(
            denoiser=params["denoiser"], sampler=params["sampler"], sample_shape=ints(params["sample_shape"]),
            cond_shape=ints(params["cond_shape"]), denoiser_inputs=names,  # type: ignore[arg-type]
            denoiser_output=params["denoiser_output"], denoiser_max_batch=int(params["denoiser_max_batch"]),
            max_samples=int(params["max_samples"]), max_conditionings=int(params["max_conditionings"]),
            max_steps=int(params.get("max_steps") or PipelineOptions.max_steps),  # a pipeline written before it
            sampler_options=json.loads(params.get("sampler_options") or "{}"),
        )


@dataclass(frozen=True)
class PipelinePaths:
    sampler_dir: Path
    denoiser_dir: Path
    settings: PipelineSettings


def settings_from_manifest(manifest: Manifest, denoiser: str, sampler: str, max_samples: int,
                           max_conditionings: int = PipelineOptions.max_conditionings, max_batch: int | None = None,
                           max_steps: int = PipelineOptions.max_steps,
                           sampler_options: dict[str, Any] | None = None) -> PipelineSettings:
    """Derive the sampler's settings from the denoiser's manifest; raises ConfigError on a misfit."""
    if sampler not in _sampler_names():
        raise ConfigError(f"unknown sampler {sampler!r}; choose one of {', '.join(_sampler_names())}")
    if len(manifest.inputs) != 3 or len(manifest.outputs) != 1:
        raise ConfigError(f"{manifest.model} is not a one-step denoiser: it needs inputs (sample, timestep, "
                          f"conditioning) and one output, it has {len(manifest.inputs)} and {len(manifest.outputs)}")
    sample, timestep, cond = manifest.inputs
    if tuple(manifest.outputs[0].shape) != tuple(sample.shape):
        raise ConfigError(f"denoiser output shape {manifest.outputs[0].shape} differs from its sample input "
                          f"{sample.shape}")
    if -1 in sample.shape:
        raise ConfigError(f"the sample shape must be fixed to draw the initial noise, got {sample.shape}")
    batch = manifest.max_batch_size if max_batch is None else max_batch
    if batch <= 0:
        raise ConfigError("the denoiser needs max_batch_size > 0 so the sampler can send samples x conditionings "
                          "rows per evaluation: reconvert it with --max-batch-size N")
    for what, value in (("max_samples", max_samples), ("max_conditionings", max_conditionings),
                        ("max_steps", max_steps)):
        if value < 1:
            raise ConfigError(f"{what} must be >= 1, got {value}")
    from .samplers import options_for

    try:
        options_for(sampler, sampler_options)  # a misspelt option fails here, not when the model loads
    except (TypeError, ValueError) as err:
        raise ConfigError(f"--sampler-option: {err}") from err
    return PipelineSettings(
        denoiser=denoiser, sampler=sampler, sample_shape=tuple(sample.shape), cond_shape=tuple(cond.shape),
        denoiser_inputs=(sample.name, timestep.name, cond.name), denoiser_output=manifest.outputs[0].name,
        denoiser_max_batch=batch, max_samples=max_samples, max_conditionings=max_conditionings,
        max_steps=max_steps, sampler_options=dict(sampler_options or {}),
    )


def build_sampler_config(name: str, settings: PipelineSettings, instances: int = 1,
                         version_policy: str = "latest") -> mc.ModelConfig:
    """The sampler's ModelConfig: no Triton batching (one request = one sampling run), CPU instances."""
    if instances < 1:
        raise ConfigError("sampler instances must be >= 1")
    cfg = mc.ModelConfig(name=name, backend="python", max_batch_size=0)
    cond = cfg.input.add()
    cond.name, cond.data_type, cond.optional = COND_INPUT, mc.DataType.Value("TYPE_FP32"), True
    cond.dims.extend([-1, *_dims(settings.cond_shape)])
    for input_name, dtype in SCALAR_INPUTS:
        tensor = cfg.input.add()
        tensor.name, tensor.data_type, tensor.optional = input_name, mc.DataType.Value(dtype), True
        tensor.dims.append(1)
    out = cfg.output.add()
    out.name, out.data_type = OUTPUT, mc.DataType.Value("TYPE_FP32")
    out.dims.extend([-1, *_dims(settings.sample_shape)])
    group = cfg.instance_group.add()
    group.count, group.kind = instances, mc.ModelInstanceGroup.Kind.Value(InstanceKind.CPU.value)  # numpy sampler
    _version_policy(cfg, version_policy)
    for key, value in settings.to_parameters().items():
        cfg.parameters[key].string_value = value
    return cfg


def write_sampler_model(repository: str | Path, name: str, settings: PipelineSettings, instances: int = 1,
                        version: int = 1) -> Path:
    """Write the sampler model; like write_model, its version folder and config become visible together."""
    from . import samplers

    check_model_name(name)
    cfg = build_sampler_config(name, settings, instances)
    model_dir = Path(repository) / name
    with staged_version(model_dir, version, cfg) as staging:
        shutil.copy2(Path(__file__).parent / SAMPLER_MODEL_FILE, staging / "model.py")
        shutil.copy2(samplers.__file__, staging / "samplers.py")
    return model_dir


def write_diffusion_pipeline(repository: str | Path, artifact_dir: str | Path, name: str,
                             options: PipelineOptions | None = None) -> PipelinePaths:
    """Write `<name>_denoiser` (or the options' `denoiser_name`) and the sampler model `<name>`.

    `runtime`: python (Python backend runs the artifact; any host) or native (the format's Triton backend,
    NGC container on GPU hosts)."""
    o = options or PipelineOptions()
    check_model_name(name)
    denoiser = check_model_name(o.denoiser_name or f"{name}_denoiser", "the denoiser's model name")
    manifest = Manifest.load(artifact_dir)
    if denoiser == name:
        raise ConfigError("the denoiser and the sampler need different model names")
    base = o.denoiser_options or ConfigOptions(model_name=denoiser)
    opts = replace(base, model_name=denoiser, runtime=o.runtime)
    batch = manifest.max_batch_size if opts.max_batch_size is None else opts.max_batch_size
    settings = settings_from_manifest(manifest, denoiser, o.sampler, o.max_samples, o.max_conditionings, batch,
                                      o.max_steps, o.sampler_options)
    denoiser_dir = write_model(repository, artifact_dir, opts, version=o.version)  # with every artifact file
    sampler_dir = write_sampler_model(repository, name, settings, o.sampler_instances, o.version)
    return PipelinePaths(sampler_dir=sampler_dir, denoiser_dir=denoiser_dir, settings=settings)


def read_pipeline(repository: str | Path, name: str) -> tuple[PipelineSettings, Path]:
    """Settings of a written pipeline and the denoiser's version directory (artifact + manifest.json)."""
    cfg = read_config(Path(repository) / check_model_name(name) / "config.pbtxt")
    params = {k: v.string_value for k, v in cfg.parameters.items()}
    if "denoiser" not in params:
        raise ConfigError(f"model {name!r} in {repository} is not a diffusion sampler (no 'denoiser' parameter)")
    settings = PipelineSettings.from_parameters(params)
    denoiser_dir = Path(repository) / settings.denoiser
    found = denoiser_dir.iterdir() if denoiser_dir.is_dir() else ()
    versions = sorted((p for p in found if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))
    if not versions:
        raise UserFileNotFoundError(f"denoiser model {settings.denoiser!r} has no version directory in {repository}")
    return settings, versions[-1]
