"""From a model and the user's pre/post-processing files to a served, verified and measured Triton ensemble in one
call (`deploy_pipeline`): the network converted (or taken as given), the steps run in-process on the raw samples
with every hand-over checked, the repository written, the embedded server started on loopback with exactly these
models, the served ensemble compared with the in-process run sample by sample, perf_analyzer points on the raw
samples with each step's share, optionally the served-against-in-process speed comparison, and the run folder."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..client import TritonClient
from ..committed import refuse_committed
from ..config import Choice, Format
from ..errors import UserInputError
from ..export import ConvertOptions
from ..framework import framework_predictor
from ..perf.analyzer import PerfOptions
from ..repository.config import ConfigOptions
from ..results import RunFolder
from ..server.local import LocalTritonServer, ServerConfig
from ..sources import ModelSource
from ..sources.base import slugify
from ..spec import Manifest
from .artifact import prepare_artifact
from .configs import PipelineLayout, StepServing
from .fused import check_fused_runtime
from .measure import MeasureJob, PipelinePoint, measure_points, write_input_json
from .output import run_identity, write_report, write_rows
from .plan import PipelineNames, PipelinePlan, plan_pipeline, prepare
from .ports import Port
from .raw import DEFAULT_MAX_SAMPLES
from .speed import SpeedResult, measure_speed
from .stepfile import StepKind, load_step
from .verify import Verification, verify_served
from .write import WrittenPipeline, write_pipeline

log = logging.getLogger(__name__)


class VerifyWith(Choice):
    """What runs the model in-process for the comparison with the served ensemble."""
    FRAMEWORK = "framework"  # the framework model, rebuilt from the manifest's source
    ARTIFACT = "artifact"  # the converted artifact, with the runtime the server runs it with


def _perf_default() -> PerfOptions:
    return PerfOptions(measurement_interval_ms=2000, max_attempts=2)


@dataclass
class PipelineRequest:
    """Everything one pipeline deployment needs; the command builds it from its flags."""

    model: "str | Path | ModelSource"  # any reference the toolkit takes, or an artifact folder
    raw_data: Path  # the raw samples: one file per sample, or one folder per sample
    result_path: Path  # the run folder
    preprocess: Path | None = None
    postprocess: Path | None = None
    name: str | None = None  # the network's model name (default: from the model); steps and ensemble add suffixes
    model_repository: Path | None = None  # default: <result_path>/model_repository
    workspace: Path = Path("workspace/pipeline")  # where a reference is converted
    fmt: Format = Format.ONNX
    convert: ConvertOptions = field(default_factory=ConvertOptions)
    network: ConfigOptions | None = None  # how the network is served (instances, threads, batching)
    step_instances: int = 1
    step_queue_delay_us: int = 0
    layout: PipelineLayout = PipelineLayout.ENSEMBLE  # fused: one model runs every step (one hop, no step shares)
    reference: VerifyWith = VerifyWith.FRAMEWORK
    concurrencies: tuple[int, ...] = (1, 2)  # perf_analyzer points; () measures none
    perf: PerfOptions = field(default_factory=_perf_default)
    speed_rounds: int = 0  # > 0: the served-against-in-process comparison, this many rounds over the samples
    max_samples: int = DEFAULT_MAX_SAMPLES
    start_timeout_s: float = 300.0
    serve: bool = True  # False: check in-process and write the repository only (for a server elsewhere)

    def check(self) -> None:
        if self.preprocess is None and self.postprocess is None:
            raise UserInputError("a pipeline needs --preprocess FILE, --postprocess FILE or both")
        for name, kind, flag in (("reference", VerifyWith, "--verify-with"), ("fmt", Format, "--format"),
                                 ("layout", PipelineLayout, "--layout")):
            try:
                setattr(self, name, kind(getattr(self, name)))
            except ValueError:
                raise UserInputError(f"{flag} must be one of {', '.join(kind.values())}, got "
                                     f"{getattr(self, name)!r}") from None
        if any(c < 1 for c in self.concurrencies):
            raise UserInputError(f"--concurrency levels must be >= 1, got {list(self.concurrencies)}")
        if self.speed_rounds < 0:
            raise UserInputError(f"--speed-rounds must be >= 0, got {self.speed_rounds}")
        if self.layout == PipelineLayout.FUSED and self.network is not None:
            check_fused_runtime(self.network.runtime)
        if self.serve and self.network is not None and self.network.runtime != "python":
            raise UserInputError(f"--runtime {self.network.runtime}: the network then needs the NGC container's own "
                                 "backends, which the embedded server has not; add --write-only to write the "
                                 "repository for that server, or serve it here with --runtime python")


@dataclass
class PipelineRun:
    out_dir: Path
    plan: PipelinePlan
    written: WrittenPipeline
    verification: Verification | None = None
    points: list[PipelinePoint] = field(default_factory=list)
    speed: SpeedResult | None = None
    report: Path | None = None

    @property
    def passed(self) -> bool:
        return self.verification is not None and self.verification.passed


def plan_request(request: PipelineRequest) -> PipelinePlan:
    """The steps checked in-process on the raw samples (no server): the plan the repository is written from. The
    raw samples and the preprocess are checked before the model is converted."""
    request.check()
    pre = load_step(request.preprocess, StepKind.PREPROCESS) if request.preprocess else None
    post = load_step(request.postprocess, StepKind.POSTPROCESS) if request.postprocess else None
    prepared = prepare(request.raw_data, pre, max_samples=request.max_samples) if pre is not None else None
    artifact_dir = prepare_artifact(request.model, request.workspace, request.fmt.value, request.convert)
    manifest = Manifest.load(artifact_dir)
    if prepared is None:
        prepared = prepare(request.raw_data, None, tuple(Port.from_spec(t) for t in manifest.inputs),
                           request.max_samples)
    predict = framework_predictor(artifact_dir, request.reference.value)[0]
    names = PipelineNames(request.name or slugify(manifest.model.replace(":", "_")))
    return plan_pipeline(names, artifact_dir, prepared, post, predict)


def deploy_pipeline(request: PipelineRequest) -> PipelineRun:
    """The whole run; raises UserInputError (one line) on a mismatch or a bad sample before anything is served.
    `run.passed` says whether the served ensemble matched the in-process steps."""
    out_dir = Path(request.result_path)
    refuse_committed(out_dir, "--result-path")  # a committed example run is regenerated only on purpose
    plan = plan_request(request)
    out_dir.mkdir(parents=True, exist_ok=True)
    repository = Path(request.model_repository or out_dir / "model_repository")
    serving = StepServing(plan.max_batch_size, request.step_instances, request.step_queue_delay_us)
    written = write_pipeline(repository, plan, serving, request.network, layout=request.layout)
    run = PipelineRun(out_dir, plan, written)
    if not request.serve:
        run.report = write_report(out_dir / "report.md", plan, None, [], None, request.layout)
        RunFolder(out_dir).record(_config(request, run))
        return run
    config = ServerConfig(repository, model_control_mode="explicit", load_models=tuple(written.models),
                          log_dir=out_dir / "logs", start_timeout_s=request.start_timeout_s)
    with LocalTritonServer(config) as server, TritonClient(server.grpc_url) as client:
        server.require_models(written.models)
        _serve_checks(run, request, client, server.grpc_url)
    return run


def _serve_checks(run: PipelineRun, request: PipelineRequest, client: TritonClient, url: str) -> None:
    plan, out_dir = run.plan, run.out_dir
    run.verification = verify_served(client, plan, request.reference.value)
    (log.info if run.verification.passed else log.warning)("%s", run.verification.summary())
    input_json = write_input_json(plan, out_dir / "input_data.json")
    loaded = {m: client.config_json(m) for m in run.written.models}
    identity = run_identity(plan, loaded, client.server_version(), request.perf.measurement_fields(), input_json)
    if request.concurrencies:
        job = MeasureJob(url, tuple(request.concurrencies), request.perf, out_dir / "perf", input_json)
        run.points = measure_points(plan, client, run.written.composing, job)
    if request.speed_rounds:
        runtime: Callable[[Any], Any] = framework_predictor(plan.artifact_dir, "artifact")[0]
        run.speed = measure_speed(plan, client, runtime, run.written.composing, rounds=request.speed_rounds)
        log.info("%s", run.speed.text())
    folder = RunFolder(out_dir, identity)
    write_rows(folder, run.points, run.verification)
    run.report = write_report(out_dir / "report.md", plan, run.verification, run.points, run.speed, request.layout)
    folder.record(_config(request, run), client.server_version())


def _config(request: PipelineRequest, run: PipelineRun) -> dict[str, Any]:
    plan = run.plan
    return {"kind": "pipeline", "model": str(request.model), "artifact": str(plan.artifact_dir),
            "preprocess": str(request.preprocess or ""), "postprocess": str(request.postprocess or ""),
            "raw_data": str(request.raw_data), "samples": len(plan.runs), "repository": str(run.written.repository),
            "models": run.written.models, "ensemble": plan.names.ensemble, "layout": request.layout.value,
            "served": request.serve,
            "verify_with": request.reference.value,
            "verified": run.passed, "concurrency": list(request.concurrencies), "speed_rounds": request.speed_rounds,
            "speed": None if run.speed is None else {"served_ms": run.speed.served_ms,
                                                      "inprocess_ms": run.speed.inprocess_ms,
                                                      "round_trip_ms": run.speed.round_trip_ms,
                                                      "met": run.speed.met}}


__all__ = ["PipelineRequest", "PipelineRun", "VerifyWith", "deploy_pipeline", "plan_request"]
