"""The toolkit from Python, for notebook users: the same functions the commands call, with typed results.

    import deployment_toolkit as dt

    manifest = dt.convert(model, "onnx", "ws/onnx", inputs={"input_ids": ids})             # a live nn.Module ...
    manifest = dt.convert("my_model/model.py", "onnx", "ws/onnx", inputs=dt.DataSpec("data"))  # ... or a reference
    dt.deploy("ws/onnx", "model_repository", "my_model")
    with dt.serve("model_repository") as server, dt.connect(server.grpc_url) as client:
        outputs = client.infer("my_model", {"input_ids": ids}, ["logits"])
        sweep = dt.measure_online(server, "my_model", "ws/onnx", [1, 2, 4], "results/my_model")
    run = dt.search_config("my_model/model.py", dt.SearchSettings(budget_ms=50, max_minutes=5),
                           dt.SearchJob(result_dir="results/search"))                         # a SearchRun
    fleet = dt.plan("my_model/model.py", dt.Demand(peak_rps=500, p99_ms=50, host_hour_cost=0.4),
                    job=dt.SearchJob(result_dir="results/plan"))            # a PlanResult (a DeploymentPlan of one)

The settings are the commands' own typed dataclasses (SearchSettings, SearchJob, Demand, Checks, Deploy,
ConvertOptions): each field carries its flag, unit, range and default, written once, so the command and the API
take and refuse the same values. A search or a plan that cannot be done raises a typed error (SearchError,
PlanError, a UserError for bad input); what it measured comes back as a typed result (SearchRun, PlanResult).

A live nn.Module is converted and verified as it is (its inputs from `inputs`: example batches, or the data); it
records no file to rebuild it from, so later steps that need the framework model (framework inference, a search
from the model) take a model.py or another reference instead and say so.
"""
from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from .client import OutputRequest, TritonClient
from .config import Format, Objective, PipelineLayout, Reuse, SharedMemory
from .data.samples import DataSpec
from .data.infer import inputs_from_data
from .deployment.file import Deployment, load as load_deployment
from .deployment.plan import DeploymentPlan, DeploymentPlanError, PlanError, PlanResult
from .deployment.settings import Checks, Demand, Deploy, DeploymentSettings
from .pipeline import PipelineRequest, PipelineRun, deploy_pipeline
from .export import ConvertOptions, convert as _convert
from .perf.analyzer import PerfOptions
from .perf.offline import run_offline
from .perf.online import run_online
from .perf.sweep import ServerAt, SweepOutcome
from .repository import ConfigOptions, write_model
from .server import LocalTritonServer, ServerConfig
from .sources import ModelSource, ResolvedModel, parse_reference, resolve
from .sources.base import DEFAULT_MAX_BATCH, SourceError
from .sources.common import input_specs, materialise, probe, task_and_metric
from .search.request import SearchJob, SearchServer
from .search.trials import SearchError, SearchRun, SearchSettings
from .spec import Manifest, ModelSignature, TensorSpec

# the functions, then the types their arguments and results are made of; deployment_toolkit/__init__.py lists the
# same names (tests/unit/project/test_public_api.py) so that `import deployment_toolkit` stays cheap
__all__ = ["convert", "deploy", "serve", "connect", "measure_online", "measure_offline", "search_config", "plan",
           "plan_deployment", "load_deployment", "deploy_pipeline", "model_source",
           "DataSpec", "Manifest", "ModelSignature", "TensorSpec", "ModelSource", "ConvertOptions", "ConfigOptions",
           "PerfOptions", "OutputRequest", "SweepOutcome", "SearchSettings", "SearchJob", "SearchServer", "SearchRun",
           "Demand", "Checks", "Deploy", "PlanResult", "SearchError", "PlanError", "Deployment", "DeploymentSettings",
           "DeploymentPlan", "DeploymentPlanError", "PipelineRequest", "PipelineRun", "PipelineLayout", "Format",
           "Objective", "Reuse", "LocalTritonServer", "TritonClient"]


def _from_arrays(inputs: Mapping[str, Any], dynamic_axes: Mapping[str, Sequence[int]] | None) -> dict[str, dict]:
    """Example batches (batch axis first) -> the per-sample input description data.infer gives."""
    out = {}
    for name, value in inputs.items():
        arr = np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value)
        if arr.ndim == 0:
            raise SourceError(f"input {name!r} is a scalar; give a batch with the batch axis first")
        example = list(arr.shape[1:])
        dynamic = set((dynamic_axes or {}).get(name, ()))
        out[name] = {"shape": [-1 if a in dynamic else d for a, d in enumerate(example)] or [1],
                     "dtype": arr.dtype.name, "example_shape": example if dynamic else None,
                     "value_range": [int(arr.min()), int(arr.max()) + 1] if arr.dtype.kind in "iu" and arr.size else None}
    return out


def _live(model, shapes: dict[str, dict], outputs: Sequence[str] | None, max_batch_size: int | None,
          task: str | None) -> ResolvedModel:
    """A ResolvedModel around a live module: the same instance every time (its weights are what it has)."""
    source = ModelSource(kind="python", ref=f"<live {type(model).__module__}.{type(model).__qualname__}>",
                         data_inputs=shapes, outputs=list(outputs or []), task=task, max_batch_size=max_batch_size)
    inputs = input_specs(source, shapes)
    model = materialise(model.eval(), list(inputs), 0)
    batch = DEFAULT_MAX_BATCH if max_batch_size is None else max_batch_size
    outs, paths = probe(model, inputs, 2 if batch else 0, list(outputs or []) or None)
    signature = ModelSignature(inputs=inputs, outputs=outs)
    task_name, metric = task_and_metric(source, outs)
    return ResolvedModel(source=source, name=type(model).__name__, family="live", task=task_name, metric=metric,
                         signature=signature, max_batch_size=batch, builder=lambda seed: model, output_paths=paths)


def _is_module(model: Any) -> bool:
    return hasattr(model, "forward") and hasattr(model, "parameters")


def _shapes(examples: Mapping[str, Any] | None, data: DataSpec | None,
            dynamic_axes: Mapping[str, Sequence[int]] | None) -> dict[str, dict]:
    """The per-sample input description, from example batches or else from the user's data."""
    if examples is not None:
        return _from_arrays(examples, dynamic_axes)
    folder = data.data_dir if data.data_dir != "synthetic" else None
    return inputs_from_data(folder, data.dataloader, dynamic_axes=dynamic_axes)


def convert(model: Any, fmt: Format | str, output_dir: str | Path, options: ConvertOptions | None = None, *,
            inputs: Mapping[str, Any] | DataSpec | None = None, dynamic_axes: Mapping[str, Sequence[int]] | None = None,
            outputs: Sequence[str] | None = None, task: str | None = None) -> Manifest:
    """Convert and verify `model` (an nn.Module, a sources.ModelSource or ResolvedModel, or any reference the
    commands take: a zoo name, `timm:<arch>`, a model.py, `package.module:function`, an ONNX/TorchScript file) to
    `fmt` in `output_dir`; returns its manifest. `options`: how (ConvertOptions, the convert command's flags; its
    max_batch_size too).
    `inputs`: example batches (batch axis first), or the user's data (a DataSpec: the inputs are read from it and the
    artifact is also compared on up to 8 of its samples, as the command does); without, the model's own description."""
    opts = dataclasses.replace(options) if options is not None else ConvertOptions()
    data = inputs if isinstance(inputs, DataSpec) else None
    examples = None if isinstance(inputs, DataSpec) else inputs
    if opts.verify_data is None and data is not None and data.user_data:  # as the command: also compared on the
        opts.verify_data = data.verification_batches(  # user's samples
            opts.precision, batch_size=min(opts.verify_batch_sizes or (1,)))
    if isinstance(model, ResolvedModel):  # the convert command resolves first, to name the model before the work
        resolved = model
    elif _is_module(model):
        if examples is None and (data is None or not data.user_data):
            raise SourceError("a live nn.Module needs its inputs: pass inputs={name: example batch} or "
                              "inputs=dt.DataSpec(data_dir)")
        resolved = _live(model, _shapes(examples, data, dynamic_axes), outputs, opts.max_batch_size, task)
    else:
        source = model if isinstance(model, ModelSource) else parse_reference(
            str(model), preset=opts.preset, outputs=list(outputs or []), task=task, max_batch_size=opts.max_batch_size)
        if source.kind == "python" and (examples is not None or (data is not None and data.user_data)):
            source.data_inputs = _shapes(examples, data, dynamic_axes)
        resolved = resolve(source)
    return _convert(resolved, str(fmt), output_dir, opts)


def deploy(artifact_dir: str | Path, repository: str | Path, model_name: str, **config: Any) -> Path:
    """Write the artifact into a model repository with its config.pbtxt; `config` are ConfigOptions fields
    (max_batch_size, instances, preferred_batch_sizes, max_queue_delay_us, ...), the config command's flags.
    Returns the model's folder."""
    return write_model(repository, artifact_dir, ConfigOptions(model_name=model_name, **config))


@contextlib.contextmanager
def serve(repository: str | Path, **server: Any) -> Iterator[LocalTritonServer]:
    """The embedded tritonserver on `repository` (loopback, free ports), stopped when the block ends; `server`
    are ServerConfig fields."""
    with LocalTritonServer(ServerConfig(Path(repository), **server)) as running:
        yield running


def connect(url: str, shared_memory: SharedMemory | str = SharedMemory.NONE) -> TritonClient:
    """The client on a server URL (`grpc://host:port`, `http://host:port`, or `host:port` for gRPC): health,
    metadata, the loaded config (typed), statistics, load/unload, inference."""
    return TritonClient(url, shared_memory=shared_memory)


def _where(server: LocalTritonServer | str) -> ServerAt:
    """A URL (gRPC unless it says http://) or the embedded server (its gRPC URL), as one value."""
    return ServerAt(url=server) if isinstance(server, str) else ServerAt(url=server.grpc_url, server=server)


def _options(window_ms: int | None, shared_memory: SharedMemory | str) -> PerfOptions:
    return PerfOptions(shared_memory=shared_memory, **({"measurement_interval_ms": window_ms} if window_ms else {}))


def measure_online(server: LocalTritonServer | str, model_name: str, artifact_dir: str | Path,
                   concurrencies: Sequence[int] | str, result_dir: str | Path, *, window_ms: int | None = None,
                   shared_memory: SharedMemory | str = SharedMemory.SYSTEM, **kwargs: Any) -> SweepOutcome:
    """perf_analyzer over concurrencies at batch 1 (the online table): rows (ms, the per-stage breakdown) in
    `result_dir`/online.csv with run.json and a report; `kwargs` are perf.sweep.SweepSettings fields (progress,
    build_report, reuse, ...) or `settings=` one SweepSettings."""
    return run_online(model_name, _where(server), Manifest.load(artifact_dir), concurrencies,
                      _options(window_ms, shared_memory), result_dir,
                      **{"manifest_path": Path(artifact_dir) / "manifest.json", **kwargs})


def measure_offline(server: LocalTritonServer | str, model_name: str, artifact_dir: str | Path,
                    batch_sizes: Sequence[int] | str, result_dir: str | Path, *, window_ms: int | None = None,
                    shared_memory: SharedMemory | str = SharedMemory.SYSTEM, **kwargs: Any) -> SweepOutcome:
    """perf_analyzer over client batch sizes at concurrency 1 (the offline table), in `result_dir`/offline.csv;
    `kwargs` as in measure_online."""
    return run_offline(model_name, _where(server), Manifest.load(artifact_dir), batch_sizes,
                       _options(window_ms, shared_memory), result_dir,
                       **{"manifest_path": Path(artifact_dir) / "manifest.json", **kwargs})


def model_source(reference: str, input_type: str | None = None, *, checkpoint: str | Path | None = None,
                 model_args: Mapping[str, Any] | None = None, outputs: Sequence[str] | None = None,
                 task: str | None = None) -> ModelSource:
    """A model reference with the options the commands take beside --model/--input-path: `input_type`
    (--input-type pyt|onnx|ts|trt), `checkpoint` (--checkpoint), `model_args` (--model-arg), `outputs` (--outputs),
    `task` (--task). dt.convert, dt.search_config and dt.plan take it where they take a reference."""
    return parse_reference(str(reference), input_type, checkpoint=str(checkpoint) if checkpoint else None,
                           kwargs=dict(model_args or {}), outputs=list(outputs or []), task=task)


def _source(model: Any, preset: str) -> ModelSource:
    """The search's model source: a reference or a ModelSource, built with the job's preset."""
    if _is_module(model):
        raise SourceError("a search or a plan rebuilds the model in each format it converts: give a reference it can "
                          "rebuild from (a model.py with get_model, `timm:<arch>`, a zoo name, an ONNX file, or an "
                          "artifact folder that dt.convert wrote from one), not a live nn.Module")
    if isinstance(model, ModelSource):
        return dataclasses.replace(model, preset=preset)
    return parse_reference(str(model), preset=preset)


def _request(model: Any, settings: SearchSettings, job: SearchJob | None, data: DataSpec | None,
             options: PerfOptions | None, call: str):
    from .search.request import DEFAULT_PERF_OPTIONS, SearchRequest

    job = job or SearchJob()
    if not job.command:
        job = dataclasses.replace(job, command=f"deployment_toolkit.api.{call}({str(model)!r}, ...)")
    return SearchRequest(source=_source(model, job.preset), settings=settings, job=job,
                         options=options or DEFAULT_PERF_OPTIONS, data=data or DataSpec())


def search_config(model: Any, settings: SearchSettings, job: SearchJob | None = None, *,
                  data: DataSpec | None = None, options: PerfOptions | None = None) -> SearchRun:
    """The config search of `deployment-toolkit search` (the command parses its flags into these same dataclasses
    and calls this): `model` is a reference the commands take or a ModelSource (`dt.model_source`), `settings` what
    the search explores and how long (its budget, objective, time limit), `job` the formats, the workspace, where the
    winner and the results go and how earlier points are reused, `data` the user's samples (random inputs without),
    `options` perf_analyzer's (default: the command's). Returns the SearchRun: `.outcome.decision.winner` (with its
    open-loop capacity under the default objective; None when no config met the budget, `.found` False), `.written`
    (the winner's config.pbtxt in the model repository). Raises SearchError when the search cannot start."""
    from .search.orchestration import search_step

    # not `search`: that name is the deployment_toolkit.search package once it is imported
    return search_step(_request(model, settings, job, data, options, "search_config"))


def plan(model: Any, demand: Demand, settings: SearchSettings | None = None, job: SearchJob | None = None, *,
         data: DataSpec | None = None, checks: Checks | None = None, deploy: Deploy | None = None,
         options: PerfOptions | None = None) -> PlanResult:
    """`deployment-toolkit plan` from Python (the command parses its flags into these same dataclasses and calls
    this): one model is a deployment of one, planned by the one planner (`plan_deployment`): convert and verify, the
    search ranked by open-loop capacity, the capacity held k of k, the replicas for `demand` (peak, SLO, headroom,
    prices, memory, max_replicas), the confirmation under open-loop traffic with derating and the burst check
    (`checks`) and the Kubernetes manifests (`deploy`), with plan.md/plan.html in `job.result_dir`. `settings`: the
    search's (default: the plan's time limit; its budget is always the demand's p99). Returns the PlanResult (a
    DeploymentPlan): `.replicas`, `.cost_per_hour`, `.groups`, `.confirmed`, `.manifests`, `.search`. A plan that
    cannot be made (no config meets the SLO, the peak needs more than max_replicas) raises PlanError."""
    from .deployment.one import plan_model
    from .search.trials import PLAN_MAX_MINUTES

    settings = settings or SearchSettings(budget_ms=demand.p99_ms, max_minutes=PLAN_MAX_MINUTES)
    request = _request(model, settings, job, data, options, "plan")
    return plan_model(request, demand, DeploymentSettings(checks or Checks(), deploy or Deploy()))


def plan_deployment(deployment: Deployment | str | Path, settings: SearchSettings | None = None,
                    job: SearchJob | None = None, *, plan: DeploymentSettings | None = None,
                    options: PerfOptions | None = None, only: int | None = None,
                    gather: bool = False) -> DeploymentPlan:
    """`deployment-toolkit plan --deployment FILE` from Python: several models (a Deployment, or its YAML file) to
    one fleet plan confirmed under their mixed traffic. Each model is searched as `dt.plan` searches one, with
    `settings`, `job` and `options` as the template (its budget is the model's own p99 SLO, its folders the plan's);
    its capacity alone and each shared group's mix capacity are held k of k (`plan.checks.retests`) before a packing
    uses them; the solver's packing is confirmed per replica group. Writes plan.md/plan.html, run.json and the manifests
    per group in `job.result_dir` (default results/plan-<deployment name>). Returns the DeploymentPlan (`.groups`:
    which models share a replica and how many replicas; `.packing`: the solver's cost, bound and gap; `.confirmed`);
    raises DeploymentPlanError when no plan can be made. `only=i`: the i-th model's search alone (one index of a
    fan-out job); `gather=True`: plan from the searches such a job left, refusing when one is missing."""
    from .deployment.plan import plan_deployment as _plan_deployment
    from .search.request import DEFAULT_PERF_OPTIONS, SearchRequest
    from .search.trials import PLAN_MAX_MINUTES

    deployment = deployment if isinstance(deployment, Deployment) else load_deployment(deployment)
    job = job or SearchJob()
    out_dir = job.result_dir or Path("results") / f"plan-{deployment.name}"
    if not job.command:
        job = dataclasses.replace(job, command=f"deployment_toolkit.api.plan_deployment({deployment.name!r}, ...)")
    settings = settings or SearchSettings(budget_ms=1.0, max_minutes=PLAN_MAX_MINUTES)  # budget: each model's SLO
    template = SearchRequest(source=None, settings=settings, job=job, options=options or DEFAULT_PERF_OPTIONS)
    return _plan_deployment(deployment, out_dir, plan or DeploymentSettings(), template, only=only, gather=gather)

