"""One entry point for every format: resolve the model source, export, verify, write the manifest with its provenance."""
from __future__ import annotations

import logging
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..config import OnnxExporter, Precision, check_numbers, setting
from ..config.fields import int_list
from ..sources import ModelSource, ResolvedModel, parse_reference, resolve, sha256_file
from ..sources.outputs import left_out_line, torch_callable
from ..sources.trained import framework_model
from ..spec import ARTIFACT_NAMES, FORMATS, Manifest, ModelSignature
from .errors import ConversionError, FormatUnavailable, VerificationError
from .files import copy_artifact_files
from .attempts import LOG_NAME, Attempt, all_failed, run_attempt
from .coupling import batch_coupling
from .routes import ExportExample, export_routes
from .artifact_source import check_route, from_artifact
from .tensorrt import tensorrt_available
from .verify import VerifyPlan, verify

log = logging.getLogger(__name__)


def _timeout(seconds: float) -> float | None:
    return seconds if seconds > 0 else None


@dataclass
class ConvertOptions:
    """How to convert and verify; each field's default, flag and range written once (the convert command's flags
    are built from these fields, and the Python API's convert takes the same fields)."""

    preset: str = setting("small", flag="--preset", help="small (CI size) or full (benchmark size)")
    opset: int = setting(17, flag="--onnx-opset", help="ONNX opset", low=7, high=30)
    simplify: bool = setting(False, flag="--onnx-optimized", type=int, choices=(0, 1), to_value=bool,
                             help="1: simplify the ONNX graph (onnxslim)")
    precision: Precision = setting(Precision.FP32, flag="--precision",
                                   help="fp16 for TensorRT, TorchScript and ONNX")
    max_batch_size: int | None = setting(None, flag="--max-batch-size", help="default: the preset's", low=0,
                                         high=1 << 20)
    trt_min_batch: int = setting(1, flag="--trt-min-batch", low=1, high=1 << 20)
    trt_opt_batch: int | None = setting(None, flag="--trt-opt-batch", help="default: max batch size", low=1,
                                        high=1 << 20)
    trt_workspace_bytes: int = setting(1 << 30, flag="--max-workspace-size", help="TensorRT workspace", unit="bytes",
                                       low=1, low_open=False)
    verify: bool = setting(True, flag="--no-verify", action="store_false", help="skip the framework comparison")
    verify_batch_sizes: tuple[int, ...] = setting((1, 2), flag="--verify-batch-sizes", type=int_list, low=1,
                                                  high=1 << 16, help="batch sizes the artifact is compared at")
    # where framework and artifact run for verification (cuda:0 on GPU hosts)
    verify_device: str = setting("cpu", flag="--verify-device",
                                 help="cpu or cuda:N: where the framework and the artifact run for the comparison")
    seed: int = setting(0, flag="--seed", help="seed of the random example inputs", low=0, high=2**32 - 1)
    onnx_external_data_threshold: int | None = None  # default: onnx.EXTERNAL_DATA_THRESHOLD_BYTES (2 GB)
    onnx_exporter: OnnxExporter = setting(
        OnnxExporter.AUTO, flag="--onnx-exporter",
        help="auto: the TorchScript-based exporter, then the torch.export-based one if it fails or does not verify; "
             "each attempt is recorded in the manifest, their output in export.log")
    export_timeout_s: float | None = setting(
        900.0, flag="--export-timeout", to_value=_timeout, low=0, unit="s", metavar="SECONDS",
        help="time limit per exporter attempt; past it the command stops with exit 2 (0: none)")
    # the user's real inputs for verification: signature -> batches {input name: array}, read (and checked
    # against the signature) before anything is exported, so bad data writes nothing
    verify_data: Callable[[ModelSignature], list[dict]] | None = None
    # where the one-line notes go (outputs left out, a batch-coupled model served whole): default this module's
    # logger, as warnings
    log: Callable[[str], None] | None = None

    def __post_init__(self) -> None:
        self.precision = Precision(self.precision)
        self.onnx_exporter = OnnxExporter(self.onnx_exporter)
        self.verify_batch_sizes = tuple(self.verify_batch_sizes)
        check_numbers(self)


def _versions(extra: dict[str, str] | None = None) -> dict[str, str]:
    import platform
    import sys

    import numpy
    import onnx
    import onnxruntime
    import torch

    from ..results.identity import toolkit_version

    out = {"python": platform.python_version(), "numpy": numpy.__version__, "torch": torch.__version__,
           "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__, "toolkit": toolkit_version()}
    for name in ("timm", "safetensors"):
        if name in sys.modules:
            out[name] = getattr(sys.modules[name], "__version__", "")
    return {**out, **(extra or {})}


def _as_resolved(model: "str | ModelSource | ResolvedModel", opts: ConvertOptions) -> ResolvedModel:
    if isinstance(model, ResolvedModel):
        return model
    if isinstance(model, str):
        model = parse_reference(model, preset=opts.preset)
    return resolve(model)


def convert(model: "str | ModelSource | ResolvedModel", fmt: str, output_dir: str | Path,
            options: ConvertOptions | None = None) -> Manifest:
    """Convert a model (a reference string such as a zoo name or `timm:<arch>`, a ModelSource or a resolved
    model) to `fmt` in `output_dir` (artifact + manifest.json with the source's provenance). Raises SourceError
    (bad source; nothing written), ConversionError, FormatUnavailable (host lacks the format) or
    VerificationError (outputs disagree; manifest still written)."""
    opts = options or ConvertOptions()
    resolved, samples, max_batch = _checked(model, fmt, opts)
    out = Path(output_dir)
    artifact = out / ARTIFACT_NAMES[fmt]
    model_module = resolved.build(opts.seed) if resolved.artifact_format != "trt" else None  # bad source: nothing written
    out.mkdir(parents=True, exist_ok=True)
    log = out / LOG_NAME  # kept only when an attempt failed: a clean export leaves no log behind
    log.unlink(missing_ok=True)
    job = _Job(resolved, fmt, out, artifact, log, opts, model_module, samples)
    return _first_that_verifies(job, _routes(job, max_batch))


@dataclass
class _Job:
    """One conversion's fixed parts: the model, the format, where it writes and how it verifies."""

    resolved: ResolvedModel
    fmt: str
    out: Path
    artifact: Path
    log: Path
    opts: ConvertOptions
    model_module: Any  # the framework model (None for a TensorRT engine given as the source)
    samples: Any  # the user's samples the conversion is verified on, or None


@dataclass
class _Routes:
    """The exporters to try in turn, and what the manifest records of the signature they export."""

    tries: list[tuple[str, Callable[[], dict | None]]]
    signature: ModelSignature
    max_batch: int
    paths: dict
    left: dict
    coupled: dict[str, str]


def _checked(model: "str | ModelSource | ResolvedModel", fmt: str,
             opts: ConvertOptions) -> tuple[ResolvedModel, Any, int]:
    """The resolved model, the samples it is verified on and its max batch size, refused before anything is built
    or written: an unknown format, TensorRT on a host that cannot build it, a batch size for a model without a
    batch axis, an artifact that does not convert to `fmt`."""
    if fmt not in FORMATS:
        raise ConversionError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    resolved = _as_resolved(model, opts)
    if fmt == "trt":  # before building the model and exporting ONNX for an engine this host cannot build
        ok, why = tensorrt_available()
        if not ok:
            raise FormatUnavailable(why)
    signature = resolved.signature
    samples = opts.verify_data(signature) if opts.verify_data is not None and opts.verify else None
    max_batch = opts.max_batch_size if opts.max_batch_size is not None else resolved.max_batch_size
    if resolved.max_batch_size == 0 and max_batch:
        raise ConversionError(f"{resolved.name} has no batch axis, so it is served with max_batch_size 0; "
                              f"drop --max-batch-size {max_batch}")
    if resolved.is_artifact:
        check_route(resolved, fmt)
    return resolved, samples, max_batch


def _routes(job: _Job, max_batch: int) -> _Routes:
    """A copy (or an engine build) for an artifact source; else the exporters of `fmt` on an example batch, the
    model served whole (max_batch_size 0) where its outputs couple a batch, so merged requests cannot mix."""
    resolved, opts = job.resolved, job.opts
    if resolved.is_artifact:
        tries = [("copy", lambda: from_artifact(resolved, job.fmt, job.artifact, max_batch, opts))]
        return _Routes(tries, resolved.signature, max_batch, dict(resolved.output_paths), {}, {})
    signature, coupled = resolved.signature, {}
    example = ExportExample.of(job.model_module, signature, max_batch, opts.seed, resolved.output_paths)
    coupling = batch_coupling(job.model_module, signature, example.args, example.outputs, example.paths) \
        if max_batch >= 2 else None
    if coupling is not None:  # merged requests would mix: one request, one whole batch
        if opts.max_batch_size:  # asked for batching the model cannot do
            raise ConversionError(f"{resolved.name}: {coupling.why()}, so it cannot batch requests: drop "
                                  f"--max-batch-size {opts.max_batch_size} (it is then served with max_batch_size 0,"
                                  " each request one whole batch)")
        _note(opts, f"note: {coupling.why()}: served with max_batch_size 0, each request one whole batch")
        # the user's samples stay as read: each batch of them is a valid whole request
        signature, max_batch, coupled = coupling.signature, 0, coupling.outputs
        example = ExportExample.of(job.model_module, signature, 0, opts.seed, example.paths)
    paths, left = example.paths, example.left_out
    if left:
        _note(opts, f"note: {left_out_line(left, list(paths))}")
    return _Routes(export_routes(job.fmt, example, job.artifact, opts, max_batch), signature, max_batch, paths, left,
                   coupled)


def _first_that_verifies(job: _Job, routes: _Routes) -> Manifest:
    """Each exporter in turn until one's artifact loads and verifies; one that failed verification is kept aside
    while later ones write theirs, and restored (with its manifest saying by how much) when none did better."""
    attempts: list[Attempt] = []
    unverified: tuple[Manifest, str] | None = None  # the last export that ran but did not verify, and why
    aside = job.out / ".unverified"  # its files, kept apart while later exporters write theirs
    try:
        for name, run in routes.tries:
            t0 = time.perf_counter()
            export_options, attempt = _export(job, name, run, t0)
            attempts.append(attempt)
            if export_options is None:
                continue
            manifest = _manifest(job, routes, export_options, attempts, t0)
            if not (job.opts.verify and job.model_module is not None):
                return _kept(job, manifest, attempts)
            device = "cuda:0" if job.fmt == "trt" and job.opts.verify_device == "cpu" else job.opts.verify_device
            runtime = _loaded(job, name, manifest, attempt, device)
            if runtime is None:  # written but unusable (ONNX Runtime refuses a node): the next exporter may do better
                continue
            result = verify_artifact(manifest, job.out, model=job.model_module,
                                     batch_sizes=job.opts.verify_batch_sizes, seed=job.opts.seed, samples=job.samples,
                                     device=device, runtime=runtime)
            manifest.verification = {**result.to_dict(), "device": device}
            if result.passed:
                return _kept(job, manifest, attempts)
            attempt.outcome, attempt.error = "failed verification", result.message[:300]
            unverified = (manifest, result.message)
            _move(job.out, aside, manifest.files, fresh=True)
        if unverified is not None:  # an export ran but no exporter's output verified: its manifest says by how much
            manifest, message = unverified
            _move(aside, job.out, manifest.files)
            manifest.export_options["attempts"] = [a.to_dict() for a in attempts]
            manifest.save(job.out)
            raise VerificationError(f"{job.resolved.name} as {job.fmt}: verification failed: {message}"
                                    + (f" (tried: {'; '.join(a.line() for a in attempts)})" if len(attempts) > 1 else ""))
        raise all_failed(f"{job.resolved.name} to {job.fmt}", attempts, job.log)
    finally:
        shutil.rmtree(aside, ignore_errors=True)


def _export(job: _Job, name: str, run: Callable[[], dict | None], t0: float) -> tuple[dict | None, Attempt]:
    """One exporter's run: a copy or an engine build as is (its errors are the user's to read as they are), an
    export held to its time limit with its failure logged."""
    if job.resolved.is_artifact:
        export_options, attempt = run(), Attempt(name, 0.0, "ok")
        attempt.seconds = round(time.perf_counter() - t0, 3)
        return export_options, attempt
    return run_attempt(name, f"{job.fmt} export", run, job.log, job.opts.export_timeout_s)


def _manifest(job: _Job, routes: _Routes, export_options: dict, attempts: list[Attempt], t0: float) -> Manifest:
    """The manifest of the artifact an exporter wrote: what it is, how it was made and from what source."""
    resolved, artifact, left = job.resolved, job.artifact, routes.left
    return Manifest(
        model=resolved.name, preset=resolved.source.preset, family=resolved.family, task=resolved.task,
        metric=resolved.metric, format=job.fmt, artifact=artifact.name, signature=routes.signature,
        max_batch_size=routes.max_batch, precision=job.opts.precision,
        export_options={**export_options, "export_seconds": round(time.perf_counter() - t0, 3),
                        "attempts": [a.to_dict() for a in attempts], **({"left_out": left} if left else {})},
        versions=_versions(resolved.versions),
        artifact_files=[artifact.name, *export_options.get("external_data", [])],
        source=resolved.source.to_dict(), artifact_sha256=sha256_file(artifact), output_paths=routes.paths,
        batch_coupled=routes.coupled,
    )


def _loaded(job: _Job, name: str, manifest: Manifest, attempt: Attempt, device: str) -> Any:
    """The artifact loaded in its runtime, held to the export's time limit; None (its files removed, the attempt
    marked) when it cannot be loaded."""
    runtime, loading = run_attempt(name, f"loading the {job.fmt} artifact",
                                   lambda: load_artifact(manifest, job.out, device), job.log, job.opts.export_timeout_s)
    if runtime is None:
        attempt.outcome, attempt.error = "failed to load", loading.error
        _remove(job.out, manifest.files)
    return runtime


def _kept(job: _Job, manifest: Manifest, attempts: list[Attempt]) -> Manifest:
    """The artifact that is kept: the failed attempts' log removed when clean, the manifest saved."""
    _clean(attempts, job.log)
    manifest.save(job.out)
    return manifest


def _note(opts: ConvertOptions, line: str) -> None:
    """A one-line note (outputs left out, a batch-coupled model served whole): to `opts.log` where a caller collects
    them, else logged as a warning (stderr under a command)."""
    (opts.log or log.warning)(line)


def _clean(attempts: list[Attempt], log: Path) -> None:
    """A clean export leaves no log behind."""
    if all(a.outcome == "ok" for a in attempts):
        log.unlink(missing_ok=True)


def _remove(directory: Path, names: list[str]) -> None:
    for name in names:
        (directory / name).unlink(missing_ok=True)


def _move(src: Path, dst: Path, names: list[str], fresh: bool = False) -> None:
    """Move an artifact's files from `src` to `dst` (`fresh`: emptying `dst` first): the artifact of an export
    that did not verify is set aside while the next exporter writes, and put back if none verifies."""
    if fresh:
        shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir(parents=True, exist_ok=True)
    for name in names:
        if (src / name).exists():
            os.replace(src / name, dst / name)


def load_artifact(manifest: Manifest, directory: str | Path, device: str | None = None):
    """The runtime of the artifact in `directory` (ONNX Runtime, TorchScript, TensorRT) on `device`, for the
    verification. An ONNX Runtime session made here logs only fatal errors: a node that fails on a size the export
    fixed raises, and the verification records that; ORT's own copy would be a second line on stderr."""
    import onnxruntime

    from ..runtimes.artifact import load_runtime

    device = device or ("cuda:0" if manifest.format == "trt" else "cpu")
    onnxruntime.set_default_logger_severity(4)  # a session keeps the severity it was made with
    try:
        return load_runtime(str(Path(directory) / manifest.artifact), manifest.format, [t.name for t in manifest.inputs],
                            [t.name for t in manifest.outputs], device=device, precision=manifest.precision)
    finally:
        onnxruntime.set_default_logger_severity(2)  # ORT's default: warnings


def verify_artifact(manifest: Manifest, directory: str | Path, model=None, batch_sizes=(1, 2), seed: int = 0,
                    samples=None, device: str | None = None, runtime=None):
    """Compare the artifact in `directory` (or its `runtime`, already loaded) with the framework model it came
    from, both on `device` (default: cpu, or cuda:0 for a TensorRT plan); also on `samples`, batches of the
    user's real inputs, when given."""
    model = model if model is not None else framework_model(manifest, directory, seed)
    in_names = [t.name for t in manifest.inputs]
    out_names = [t.name for t in manifest.outputs]
    device = device or ("cuda:0" if manifest.format == "trt" else "cpu")
    runtime = runtime if runtime is not None else load_artifact(manifest, directory, device)
    # no batch axis (max_batch_size 0): the signature's shapes are whole requests, compared as they are
    sizes = (0,) if manifest.max_batch_size == 0 else \
        tuple(b for b in batch_sizes if b <= manifest.max_batch_size) or (1,)
    return verify(torch_callable(model, in_names, out_names, device=device, output_paths=manifest.output_paths),
                  runtime, manifest.signature, manifest.task,
                  VerifyPlan(precision=manifest.precision, batch_sizes=sizes, seed=seed, samples=samples))


def copy_artifact(src_dir: str | Path, dst_dir: str | Path) -> Manifest:
    """Copy every file of the artifact + manifest (e.g. into a model repository version directory)."""
    manifest = Manifest.load(src_dir)
    dst = Path(dst_dir)
    dst.mkdir(parents=True, exist_ok=True)
    copy_artifact_files(manifest, src_dir, dst)
    manifest.save(dst)
    return manifest
