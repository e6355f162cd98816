"""The toolkit from Python, for notebook users: the same functions the commands call, with typed results.

    import deployment_toolkit as dt

    manifest = dt.convert(model, "onnx", "ws/onnx", inputs={"input_ids": ids})     # a live nn.Module ...
    manifest = dt.convert("my_model/model.py", "onnx", "ws/onnx", data_dir="data") # ... or any model reference
    dt.deploy("ws/onnx", "model_repository", "my_model")
    with dt.serve("model_repository") as server, dt.connect(server.grpc_url) as client:
        outputs = client.infer("my_model", {"input_ids": ids}, ["logits"])
        sweep = dt.measure_online(server, "my_model", "ws/onnx", [1, 2, 4], "results/my_model")
    run = dt.search_config("my_model/model.py", p99_ms=50, result_dir="results/search", max_minutes=5)  # a SearchRun
    fleet = dt.plan("my_model/model.py", peak_rps=500, p99_ms=50, result_dir="results/plan", host_hour_cost=0.4)

A live nn.Module is converted and verified as it is (its inputs from `inputs`, example batches, or from the
data); it records no file to rebuild it from, so later steps that need the framework model (framework inference,
a search from the model) take a model.py or another reference instead and say so.
"""
from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from .client import OutputRequest, TritonClient
from .data.samples import DataSpec
from .errors import UserInputError
from .data.infer import inputs_from_data
from .export import ConvertOptions, convert as _convert
from .perf.analyzer import PerfOptions
from .perf.offline import run_offline
from .perf.online import run_online
from .perf.sweep import SweepOutcome
from .planner.pipeline import PlanResult
from .repository import ConfigOptions, write_model
from .server import LocalTritonServer, ServerConfig
from .sources import ModelSource, ResolvedModel, parse_reference, resolve
from .sources.base import DEFAULT_MAX_BATCH, SourceError
from .sources.common import input_specs, materialise, probe, task_and_metric
from .search.request import PLAN_MAX_MINUTES, SEARCH_MAX_MINUTES
from .search.trials import SearchRun
from .spec import Manifest, ModelSignature, TensorSpec

# the functions, then the types their arguments and results are made of; deployment_toolkit/__init__.py lists the
# same names (tests/unit/test_public_api.py) so that `import deployment_toolkit` stays cheap
__all__ = ["convert", "deploy", "serve", "connect", "measure_online", "measure_offline", "search_config", "plan",
           "DataSpec", "Manifest", "ModelSignature", "TensorSpec", "ConvertOptions", "ConfigOptions", "PerfOptions",
           "OutputRequest", "SweepOutcome", "SearchRun", "PlanResult", "LocalTritonServer", "TritonClient"]


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


def convert(model: Any, fmt: str, output_dir: str | Path, *, inputs: Mapping[str, Any] | None = None,
            data_dir: str | None = None, dataloader: str | None = None, dynamic_axes: Mapping[str, Sequence[int]] | None = None,
            outputs: Sequence[str] | None = None, max_batch_size: int | None = None, task: str | None = None,
            **options: Any) -> Manifest:
    """Convert and verify `model` (an nn.Module, or any reference the commands take: a zoo name, `timm:<arch>`, a
    model.py, `package.module:function`, an ONNX/TorchScript file) to `fmt` in `output_dir`; returns its manifest.
    Inputs come from `inputs` (example batches, batch axis first), else the data (`data_dir`, `dataloader`), else the
    model's own description; given data, the artifact is also compared on up to 8 of its samples, as the command
    does. `options` are ConvertOptions fields (onnx_exporter, precision, verify, ...)."""
    opts = ConvertOptions(**{"max_batch_size": max_batch_size, **options})
    if opts.verify_data is None and (data_dir is not None or dataloader is not None):  # as the command: also
        opts.verify_data = DataSpec(data_dir, dataloader).verification_batches(  # compared on the user's samples
            opts.precision, batch_size=min(opts.verify_batch_sizes or (1,)))
    if hasattr(model, "forward") and hasattr(model, "parameters"):
        if inputs is None and data_dir is None and dataloader is None:
            raise SourceError("a live nn.Module needs its inputs: pass inputs={name: example batch} or data_dir=")
        shapes = _from_arrays(inputs, dynamic_axes) if inputs is not None else \
            inputs_from_data(data_dir, dataloader, dynamic_axes=dynamic_axes)
        resolved: ResolvedModel | ModelSource = _live(model, shapes, outputs, max_batch_size, task)
    else:
        source = parse_reference(str(model), preset=opts.preset, outputs=list(outputs or []), task=task,
                                 max_batch_size=max_batch_size)
        if source.kind == "python" and (inputs is not None or data_dir or dataloader):
            source.data_inputs = _from_arrays(inputs, dynamic_axes) if inputs is not None else \
                inputs_from_data(data_dir, dataloader, dynamic_axes=dynamic_axes)
        resolved = resolve(source)
    return _convert(resolved, fmt, output_dir, opts)


def deploy(artifact_dir: str | Path, repository: str | Path, name: str, **config: Any) -> Path:
    """Write the artifact into a model repository with its config.pbtxt; `config` are ConfigOptions fields
    (max_batch_size, instances, preferred_batch_sizes, max_queue_delay_us, ...). Returns the model's folder."""
    return write_model(repository, artifact_dir, ConfigOptions(model_name=name, **config))


@contextlib.contextmanager
def serve(repository: str | Path, **server: Any) -> Iterator[LocalTritonServer]:
    """The embedded tritonserver on `repository` (loopback, free ports), stopped when the block ends; `server`
    are ServerConfig fields."""
    with LocalTritonServer(ServerConfig(Path(repository), **server)) as running:
        yield running


def connect(url: str, shared_memory: str = "none") -> TritonClient:
    """The client on a server URL (`grpc://host:port`, `http://host:port`, or `host:port` for gRPC): health,
    metadata, the loaded config (typed), statistics, load/unload, inference."""
    return TritonClient(url, shared_memory=shared_memory)


def _url(server: LocalTritonServer | str) -> tuple[str, LocalTritonServer | None]:
    return (server, None) if isinstance(server, str) else (server.grpc_url, server)


def _options(window_ms: int | None, shared_memory: str) -> PerfOptions:
    return PerfOptions(shared_memory=shared_memory, **({"measurement_interval_ms": window_ms} if window_ms else {}))


def measure_online(server: LocalTritonServer | str, model_name: str, artifact_dir: str | Path,
                   concurrencies: Sequence[int] | str, result_dir: str | Path, *, window_ms: int | None = None,
                   shared_memory: str = "system", **kwargs: Any) -> SweepOutcome:
    """perf_analyzer over concurrencies at batch 1 (the online table): rows (ms, the per-stage breakdown) in
    `result_dir`/online.csv with run.json and a report; `kwargs` are perf.sweep.run_sweep's."""
    url, running = _url(server)
    return run_online(model_name, url, Manifest.load(artifact_dir), concurrencies, _options(window_ms, shared_memory),
                      result_dir, server=running, manifest_path=Path(artifact_dir) / "manifest.json", **kwargs)


def measure_offline(server: LocalTritonServer | str, model_name: str, artifact_dir: str | Path,
                    batch_sizes: Sequence[int] | str, result_dir: str | Path, *, window_ms: int | None = None,
                    shared_memory: str = "system", **kwargs: Any) -> SweepOutcome:
    """perf_analyzer over client batch sizes at concurrency 1 (the offline table), in `result_dir`/offline.csv."""
    url, running = _url(server)
    return run_offline(model_name, url, Manifest.load(artifact_dir), batch_sizes, _options(window_ms, shared_memory),
                       result_dir, server=running, manifest_path=Path(artifact_dir) / "manifest.json", **kwargs)


def _source(model: Any, preset: str, checkpoint: str | None, model_args: Mapping[str, Any] | None,
            input_type: str | None) -> ModelSource:
    if hasattr(model, "forward") and hasattr(model, "parameters"):
        raise SourceError("a search or a plan rebuilds the model in each format it converts: give a reference it can "
                          "rebuild from (a model.py with get_model, `timm:<arch>`, a zoo name, an ONNX file, or an "
                          "artifact folder that dt.convert wrote from one), not a live nn.Module")
    if isinstance(model, ModelSource):
        return model
    return parse_reference(str(model), input_type, preset=preset, checkpoint=checkpoint, kwargs=dict(model_args or {}))


def _search_request(model: Any, p99_ms: float, result_dir: str | Path | None, *, data: DataSpec | None,
                    formats: Sequence[str], preset: str, max_minutes: float | None, objective: str,
                    checkpoint: str | None, model_args: Mapping[str, Any] | None, input_type: str | None,
                    model_repository: str | Path | None, model_name: str | None, fresh: bool, progress: bool,
                    settings: Mapping[str, Any], options: PerfOptions | None = None,
                    workspace: str | Path | None = None, open_loop_window_ms: int | None = None):
    from .search.capacity import rate_point_estimate
    from .search.request import DEFAULT_PERF_OPTIONS, FINISH_RESERVE_S, SearchRequest
    from .search.trials import SearchSettings, objective_fields

    known = {f.name for f in dataclasses.fields(SearchSettings)} - {"budget_ms", "rank_by", "objective"}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise UserInputError(f"unknown search setting(s) {', '.join(unknown)}: the keywords a search takes besides its "
                             f"own are SearchSettings fields ({', '.join(sorted(known))})")
    fields = {"budget_ms": p99_ms, "max_minutes": max_minutes, **objective_fields(objective),
              "finish_reserve_s": FINISH_RESERVE_S, "rate_point_s": rate_point_estimate(open_loop_window_ms),
              "open_loop_window_ms": open_loop_window_ms, **settings}
    return SearchRequest(source=_source(model, preset, checkpoint, model_args, input_type),
                         settings=SearchSettings(**fields), options=options or DEFAULT_PERF_OPTIONS, preset=preset,
                         formats=tuple(formats), workspace=Path(workspace) if workspace else None,
                         data=data or DataSpec(), result_dir=Path(result_dir) if result_dir else None,
                         model_repository=Path(model_repository) if model_repository else None, model_name=model_name,
                         fresh=fresh, progress=progress,
                         command=f"deployment_toolkit.api.search_config({str(model)!r}, p99_ms={p99_ms:g}, ...)")


def search_config(model: Any, p99_ms: float, result_dir: str | Path | None = None, *, data: DataSpec | None = None,
                  formats: Sequence[str] = ("onnx",), preset: str = "small",
                  max_minutes: float | None = SEARCH_MAX_MINUTES,
                  objective: str = "capacity", checkpoint: str | None = None,
                  model_args: Mapping[str, Any] | None = None, input_type: str | None = None,
                  model_repository: str | Path | None = None, model_name: str | None = None,
                  options: PerfOptions | None = None, workspace: str | Path | None = None,
                  open_loop_window_ms: int | None = None, fresh: bool = False, progress: bool = False,
                  **settings: Any) -> SearchRun:
    """The config search of `deployment-toolkit search` under a p99 budget: `model` is any reference the commands
    take (or a sources.ModelSource), `data` the user's samples (a DataSpec; random inputs without), `settings`
    SearchSettings fields (capacity_trials, max_configs, queue_delays_us, ...), `options` perf_analyzer's
    (PerfOptions; default: the command's), `workspace` where the artifacts go. Returns the search.trials.SearchRun:
    `.outcome.decision.winner` (with its open-loop capacity under the default objective), `.written` (the winner's
    config.pbtxt in the model repository), `.code` (0: a winner; 2: none met the budget, or the search could not start: `.error`)."""
    from .search.cli import search_step

    # not `search`: that name is the deployment_toolkit.search package once it is imported
    return search_step(_search_request(
        model, p99_ms, result_dir, data=data, formats=formats, preset=preset, max_minutes=max_minutes,
        objective=objective, checkpoint=checkpoint, model_args=model_args, input_type=input_type,
        model_repository=model_repository, model_name=model_name, fresh=fresh, progress=progress, settings=settings,
        options=options, workspace=workspace, open_loop_window_ms=open_loop_window_ms))


def plan(model: Any, peak_rps: float, p99_ms: float, result_dir: str | Path, *, data: DataSpec | None = None,
         host_hour_cost: float | None = None, gpu_hour_cost: float | None = None, max_replicas: int | None = None,
         headroom: float | None = None, formats: Sequence[str] = ("onnx",), preset: str = "small",
         max_minutes: float | None = PLAN_MAX_MINUTES, checkpoint: str | None = None, model_args: Mapping[str, Any] | None = None,
         input_type: str | None = None, confirm: bool = True, k8s: bool = True, options: PerfOptions | None = None,
         workspace: str | Path | None = None, open_loop_window_ms: int | None = None, fresh: bool = False,
         progress: bool = False, **settings: Any) -> PlanResult:
    """`deployment-toolkit plan` from Python: convert and verify, the search ranked by open-loop capacity, the
    winner's sweep, the fleet plan, its confirmation under open-loop traffic and the Kubernetes manifests, with
    plan.md/plan.html in `result_dir`. Returns the planner.PlanResult: `.plan` (replicas, devices, cost),
    `.confirmation`, `.manifests`, `.code` (0 confirmed, 1 no round of the confirmation held). A plan that cannot be
    made (no config meets the SLO, the peak needs more than `max_replicas`) raises planner.PlanError."""
    from .planner import Checks, Demand, Deploy, make_plan

    demand = Demand(peak_rps, p99_ms, headroom, max_replicas, host_hour_cost=host_hour_cost,
                    gpu_hour_cost=gpu_hour_cost)
    request = _search_request(
        model, p99_ms, None, data=data, formats=formats, preset=preset, max_minutes=max_minutes,
        objective="capacity", checkpoint=checkpoint, model_args=model_args, input_type=input_type,
        model_repository=None, model_name=None, fresh=fresh, progress=progress, settings=settings, options=options,
        workspace=workspace, open_loop_window_ms=open_loop_window_ms)
    command = f"deployment_toolkit.api.plan({str(model)!r}, peak_rps={peak_rps:g}, p99_ms={p99_ms:g}, ...)"
    return make_plan(request, demand, Checks(confirm=confirm), Deploy(k8s=k8s), Path(result_dir), command)
