"""From a model and the user's pre/post-processing files to a served, verified and measured Triton ensemble in one
call (`deploy_pipeline`): the network converted (or taken as given), the steps run in-process on the raw samples
with every hand-over checked, the repository written, the embedded server started on loopback with exactly these
models, the served ensemble compared with the in-process run sample by sample, perf_analyzer points on the raw
samples with each step's share, optionally the served-against-in-process speed comparison, and the run folder."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from ..client import TritonClient
from ..committed import refuse_committed
from ..config import Choice, Format, PipelineLayout, check_numbers, setting
from ..config.fields import int_list
from ..errors import UserInputError
from ..export import ConvertOptions
from ..framework import framework_predictor
from ..perf.analyzer import PerfOptions
from ..repository.config import ConfigOptions
from ..results import RunFolder
from ..results.identity import key_fields
from ..server.local import LocalTritonServer, ServerConfig
from ..sources import ModelSource
from ..sources.base import DEFAULT_MAX_BATCH, slugify
from ..spec import Manifest
from .artifact import is_artifact_folder, prepare_artifact
from .configs import StepServing
from .fused import check_fused_runtime
from .measure import MeasureJob, PipelinePoint, measure_points, write_input_json
from .network_inputs import as_source, inputs_from_prepared
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


# perf_analyzer for a pipeline's points: shorter windows and fewer attempts than a model's sweep (a pipeline run is a
# check first; its points show each step's share)
PIPELINE_PERF = PerfOptions(measurement_interval_ms=2000, max_attempts=2)


@dataclass
class PipelineRequest:
    """Everything one pipeline deployment needs; the fields with a flag are deploy-pipeline's flags (config.setting),
    their defaults written here once."""

    model: "str | Path | ModelSource"  # any reference the toolkit takes, or an artifact folder
    raw_data: Path = setting(flag="--raw-data", type=Path, metavar="DIR",
                             help="raw samples: one file per sample (image.jpg, review.txt), or one folder per sample "
                                  "with one file per input name; .npy for numeric inputs")
    result_path: Path = setting()  # the run folder (--result-path, the toolkit's one output flag)
    preprocess: Path | None = setting(None, flag="--preprocess", type=Path, metavar="FILE",
                                      help="Python file defining preprocess(<raw input>...) -> {model input: array}")
    postprocess: Path | None = setting(None, flag="--postprocess", type=Path, metavar="FILE",
                                       help="Python file defining postprocess(<model output>...) -> {name: array}")
    name: str | None = setting(None, flag="--name", help="the network's model name (default: from the model); the "
                                                         "steps are <name>_preprocess/_postprocess, the ensemble "
                                                         "<name>_pipeline")
    model_repository: Path | None = setting(None, flag="--model-repository", type=Path, metavar="DIR",
                                            help="default: <result-path>/model_repository")
    workspace: Path = setting(Path("workspace/pipeline"), flag="--workspace", type=Path, metavar="DIR",
                              help="where a reference is converted")
    fmt: Format = setting(Format.ONNX, flag="--format", help="artifact a reference is converted to")
    convert: ConvertOptions = field(default_factory=ConvertOptions)
    network: ConfigOptions | None = None  # how the network is served (instances, threads, batching)
    step_instances: int = setting(1, flag="--step-instances", low=1,
                                  help="instances of each pre/post-processing model")
    step_queue_delay_us: int = setting(0, flag="--step-queue-delay-us", low=0, unit="us",
                                       help="dynamic batching delay of the pre/post-processing models")
    layout: PipelineLayout = setting(
        PipelineLayout.ENSEMBLE, flag="--layout",
        help="ensemble: one model per step, each step's share measured; fused: one Python-backend model runs every "
             "step in one process (one hop between Triton and a stub instead of one per step; needs --runtime python)")
    reference: VerifyWith = setting(VerifyWith.FRAMEWORK, flag="--verify-with",
                                    help="what runs the model in-process for the comparison: the framework model or "
                                         "the artifact")
    concurrencies: tuple[int, ...] = setting((1, 2), flag="--concurrency", type=int_list, low=1, metavar="LEVELS",
                                             show_default=False, help="perf_analyzer closed-loop levels against the "
                                                                      "pipeline, e.g. 1,2,4 (default: 1,2)")
    perf: PerfOptions = field(default_factory=lambda: PIPELINE_PERF)
    speed_rounds: int = setting(0, flag="--speed-rounds", low=0, metavar="N",
                                help="also time the served pipeline against its steps in-process, side by side, N "
                                     "rounds over the samples (the speed benchmark; 0: not run)")
    max_samples: int = setting(DEFAULT_MAX_SAMPLES, flag="--max-samples", low=1,
                               help="raw samples used (the first, by name)")
    start_timeout_s: float = setting(300.0, flag="--server-timeout", unit="s", low=0, low_open=True,
                                     metavar="SECONDS", help="server start limit")
    serve: bool = setting(True, flag="--write-only", action="store_false",
                          help="check the steps in-process and write the repository, but serve nothing (for a server "
                               "elsewhere, e.g. the NGC container with --runtime native)")

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
        check_numbers(self)  # each number finite and in its flag's range, in one line naming the flag
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
    prepared = prepare(request.raw_data, pre, max_samples=request.max_samples,
                       max_batch_size=_max_batch_size(request)) if pre is not None else None
    model, convert = request.model, request.convert
    source = as_source(model, convert.preset) if prepared is not None and not is_artifact_folder(model) else None
    if source is not None and source.kind == "python" and not source.input_shapes:
        # the network takes what the preprocess gives: no get_signature or data needed (pipeline.network_inputs)
        folder = Path(request.workspace) / "network_inputs" / slugify(request.name or source.slug)
        inputs = inputs_from_prepared(prepared, folder)  # type: ignore[arg-type]
        model = inputs.source(source)
        if convert.verify_data is None:  # the conversion is verified on the real inputs too (token lengths, sizes)
            convert = replace(convert, verify_data=inputs.data.verification_batches(convert.precision))
    artifact_dir = prepare_artifact(model, request.workspace, request.fmt.value, convert)
    manifest = Manifest.load(artifact_dir)
    if prepared is None:
        prepared = prepare(request.raw_data, None, tuple(Port.from_spec(t) for t in manifest.inputs),
                           request.max_samples)
    predict = framework_predictor(artifact_dir, request.reference.value)[0]
    names = PipelineNames(request.name or slugify(manifest.model.replace(":", "_")))
    return plan_pipeline(names, artifact_dir, prepared, post, predict)


def _max_batch_size(request: PipelineRequest) -> int:
    """The largest batch the steps will be handed (what they are checked at): the artifact's, else the asked one."""
    if is_artifact_folder(request.model):
        return Manifest.load(request.model).max_batch_size
    return request.convert.max_batch_size if request.convert.max_batch_size is not None else DEFAULT_MAX_BATCH


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
    identity = run_identity(plan, loaded, client.server_version(), key_fields(request.perf.measurement_fields()),
                            input_json)
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
