"""In-process diffusion sampling with the served pipeline's own samplers and settings.

`denoise(x, t, cond)` callables over a converted artifact (`load_runtime`, the same class the Python
backend runs) or the eager framework model (`torch_callable`, optionally AMP fp16 on CUDA), and
`sample_in_process`, which applies a pipeline's `PipelineSettings` exactly as the sampler model does:
same sampler, options, sample shape and denoiser chunking. With the same artifact and runtime settings,
(cond, steps, seed, samples) give the served pipeline's output (tests/integration/test_diffusion_serving.py).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .pipeline import PipelineOptions, PipelineSettings, read_pipeline, settings_from_manifest
from ..spec import Manifest
from .samplers import Denoiser, chunked, get_sampler, options_for
from ..errors import UserInputError

Arrays = dict[str, np.ndarray]


def runtime_denoiser(run: Callable[[Arrays], Arrays], input_names: tuple[str, str, str] | list[str],
                     output_name: str) -> Denoiser:
    """Adapt a named-arrays runtime (`{name: array} -> {name: array}`) to `denoise(x, t, cond)`."""
    x_name, t_name, c_name = input_names

    def denoise(x: np.ndarray, t: np.ndarray, cond: np.ndarray | None) -> np.ndarray:
        if cond is None:
            raise UserInputError(f"this denoiser needs its conditioning input {c_name!r}")
        return run({x_name: x, t_name: t, c_name: cond})[output_name]

    return denoise


def artifact_denoiser(artifact_dir: str | Path, device: str = "cpu", threads: int = 0,
                      accelerator: str = "none") -> tuple[Denoiser, Manifest]:
    """The converted artifact with its runtime (ONNX Runtime / TorchScript / TensorRT), as the server runs it."""
    from ..runtimes.artifact import load_runtime

    manifest = Manifest.load(artifact_dir)
    in_names = [t.name for t in manifest.inputs]
    out_names = [t.name for t in manifest.outputs]
    rt = load_runtime(str(Path(artifact_dir) / manifest.artifact), manifest.format, in_names, out_names,
                      device=device, threads=threads, precision=manifest.precision, accelerator=accelerator)
    return runtime_denoiser(rt, in_names, out_names[0]), manifest


def eager_denoiser(model_name: str, preset: str = "small", device: str = "cpu", amp: bool = False,
                   seed: int = 0) -> tuple[Denoiser, Any]:
    """The framework model (same random weights as its conversions: same seed). `amp`: autocast fp16 on CUDA,
    the seed-003 "FW FP16 (AMP)" baseline. Returns (denoise, signature)."""
    import torch

    from ..sources.outputs import torch_callable
    from ..sources import resolve

    if amp and not device.startswith("cuda"):
        raise UserInputError("AMP fp16 needs a CUDA device; on CPU the framework baseline is fp32")
    entry = resolve(model_name, preset=preset)  # a zoo name or any other model source
    signature = entry.signature
    in_names = [t.name for t in signature.inputs]
    out_names = [t.name for t in signature.outputs]
    run = torch_callable(entry.build(seed), in_names, out_names, device=device)

    def run_amp(inputs: Arrays) -> Arrays:
        ctx = torch.autocast("cuda", dtype=torch.float16) if amp else contextlib.nullcontext()
        with ctx:
            out = run(inputs)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return out

    return runtime_denoiser(run_amp, in_names, out_names[0]), signature


def check_request(settings: PipelineSettings, cond: np.ndarray, steps: int, seed: int, samples: int) -> None:
    """The sampler model's request checks, with its messages (a front end answers these as bad requests)."""
    if not 1 <= steps <= settings.max_steps:
        raise UserInputError(f"steps must be in 1..{settings.max_steps}, got {steps}")
    if not 1 <= samples <= settings.max_samples:
        raise UserInputError(f"samples must be in 1..{settings.max_samples} (max_samples of this pipeline), got {samples}")
    if seed < 0:
        raise UserInputError(f"seed must be >= 0, got {seed}")
    shape = tuple(np.shape(cond))
    if len(shape) != 1 + len(settings.cond_shape) or not 1 <= shape[0] <= settings.max_conditionings:
        raise UserInputError(f"encoder_hidden_states must be [B,{','.join(map(str, settings.cond_shape))}] with "
                         f"1 <= B <= {settings.max_conditionings}, got {list(shape)}")


def sample_in_process(denoise: Denoiser, cond: np.ndarray, steps: int, seed: int, samples: int,
                      settings: PipelineSettings) -> np.ndarray:
    """One sampling run as the sampler model does it: (B * samples, *sample_shape) float32."""
    cond = np.ascontiguousarray(cond, dtype=np.float32)
    check_request(settings, cond, steps, seed, samples)
    sampler = get_sampler(settings.sampler)
    return sampler(chunked(denoise, settings.denoiser_max_batch), cond, steps=int(steps), seed=int(seed),
                   samples=int(samples), shape=settings.sample_shape,
                   options=options_for(settings.sampler, settings.sampler_options))


@dataclass
class InProcessPipeline:
    """A denoiser plus pipeline settings: `pipeline(cond, steps, seed, samples)` -> latents."""

    denoise: Denoiser
    settings: PipelineSettings
    source: str = ""

    def __call__(self, cond: np.ndarray, steps: int, seed: int, samples: int = 1) -> np.ndarray:
        return sample_in_process(self.denoise, cond, steps, seed, samples, self.settings)

    @classmethod
    def from_repository(cls, repository: str | Path, name: str, device: str = "cpu",
                        threads: int | None = None) -> "InProcessPipeline":
        """The pipeline `name` written by write_diffusion_pipeline, run from its denoiser's artifact with the
        denoiser config's runtime threads unless `threads` is given."""
        settings, version_dir = read_pipeline(repository, name)
        if threads is None:
            from ..repository.config import read_config

            params = read_config(version_dir.parent / "config.pbtxt").parameters
            threads = int(params["intra_op_threads"].string_value) if "intra_op_threads" in params else 0
        denoise, manifest = artifact_denoiser(version_dir, device=device, threads=threads)
        return cls(denoise, settings, source=f"{manifest.format} ({version_dir})")

    @classmethod
    def from_artifact(cls, artifact_dir: str | Path, sampler: str = PipelineOptions.sampler,
                      max_samples: int = PipelineOptions.max_samples, device: str = "cpu", threads: int = 0,
                      **settings_kwargs: Any) -> "InProcessPipeline":
        denoise, manifest = artifact_denoiser(artifact_dir, device=device, threads=threads)
        settings = settings_from_manifest(manifest, "in-process", sampler, max_samples, **settings_kwargs)
        return cls(denoise, settings, source=f"{manifest.format} ({artifact_dir})")
