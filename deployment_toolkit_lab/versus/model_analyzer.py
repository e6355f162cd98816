"""Model Analyzer side by side: run its quick search on the same model, budget and server binary, read what
it measured, and say exactly why when it cannot run.

Model Analyzer (`triton-model-analyzer`, an optional extra) pins packages that clash with this toolkit
(numpy 2, protobuf 6, tritonclient 2.7x without perf_analyzer), so it lives in its own virtualenv and is
called as a subprocess. It launches the same embedded `tritonserver` (local launch mode) with an environment
that carries the server's bundled libraries and the CUDA runtime (it hands that environment to
perf_analyzer too) and this venv's bin/ first on PATH (so the Python-backend stub finds our numpy<2 and
onnxruntime). Its results are read from its checkpoint, which it saves after every measurement, so a run
stopped at the time limit still reports what it found.

Beyond one model: an ensemble (Model Analyzer searches every composing model, perf_analyzer drives the ensemble
with real input data) and several models searched concurrently, each under its own p99 constraint. Their results
are read per run config (read_run_configs), ranked as Model Analyzer ranks them (best_run_config) and applied to a
repository's configs (apply_settings), so its pick can be deployed from our own artifacts.

Over 400 lines on purpose: the config it is given, how it is run and how its checkpoint is read and ranked all
follow one tool's layout (its YAML keys, its checkpoint JSON, its comparison), kept side by side so a new Model
Analyzer release is checked against one file.
"""
from __future__ import annotations

import functools
import json
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from deployment_toolkit.repository.config import mc
    ModelConfig = mc.ModelConfig

log = logging.getLogger(__name__)
DEFAULT_VENV = Path("/tmp/ma-venv")
INSTALL_HINT = ("install it in a separate virtualenv (it pins numpy 2 and protobuf 6, which break this one): "
                "`python3 -m venv /tmp/ma-venv && /tmp/ma-venv/bin/pip install triton-model-analyzer`, "
                "then pass --model-analyzer /tmp/ma-venv/bin/model-analyzer")
_ERROR = re.compile(r"Model Analyzer encountered an error:\s*(.*)", re.S)
# the last line of a Python traceback: `package.module.SomeException: message` (the message may start on the next line)
_RAISED = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt))(?::\s?(.*))?$")
COMPOSING_INSTANCE_COUNTS = (1, 2, 3, 4, 5)  # a composing model's instance search, when its kind is pinned
_VARIANT_SUFFIX = re.compile(r"_config_(?:\d+|default)$")


@dataclass
class MAMeasurement:
    variant: str
    instances: int
    max_batch_size: int
    concurrency: int
    throughput: float
    p99_ms: float

    def label(self) -> str:
        return (f"{self.variant} ({self.instances} inst, max batch {self.max_batch_size}, "
                f"concurrency {self.concurrency})")


@dataclass
class MAResult:
    ran: bool
    wall_s: float = 0.0
    returncode: int | None = None
    timed_out: bool = False
    error: str = ""
    command: list[str] = field(default_factory=list)
    log_path: Path | None = None
    measurements: list[MAMeasurement] = field(default_factory=list)
    limit_minutes: float | None = None
    run_configs: list[MARunConfig] = field(default_factory=list)  # every model's point per measurement

    def best_within(self, budget_ms: float) -> MAMeasurement | None:
        ok = [m for m in self.measurements if m.p99_ms <= budget_ms]
        return max(ok, key=lambda m: m.throughput, default=None)

    @property
    def configs(self) -> int:
        return len({m.variant for m in self.measurements})


def find_model_analyzer(explicit: str | None = None, venv: Path = DEFAULT_VENV) -> Path | None:
    for candidate in (explicit, venv / "bin" / "model-analyzer", shutil.which("model-analyzer")):
        if candidate and Path(candidate).exists():
            return Path(candidate)
    return None


def ma_environment() -> dict[str, str]:
    """The server's environment (bundled libs, venv bin first on PATH) plus the CUDA runtime for perf_analyzer."""
    from deployment_toolkit.binaries import perf_environment
    from deployment_toolkit.server.local import find_installation, server_environment

    return perf_environment(server_environment(find_installation()))


def _check_pa_path(path: Path, what: str) -> None:
    """Model Analyzer builds perf_analyzer's command line as `to_cli_string().replace("=", " ").split()`
    (perf_analyzer/perf_analyzer.py:436): a space or '=' in a path splits it into bogus arguments."""
    text = str(path)
    if " " in text or "=" in text:
        raise ValueError(f"{what} {text!r} contains a space or '=': Model Analyzer splits perf_analyzer's command "
                         "line on both, so perf_analyzer would get a broken path; move it to a path without them")


@dataclass(frozen=True)
class MAModel:
    """One model in a Model Analyzer run: a plain model, or an ensemble (perf_analyzer drives the ensemble, Model
    Analyzer searches its composing models), each under its own p99 limit."""

    name: str  # as named in the repository
    budget_ms: float  # its own p99 limit: constraints.perf_latency_p99.max under its profile_models entry
    input_data: Path | None = None  # perf_analyzer --input-data (e.g. b64 bytes for an ensemble's TYPE_STRING input)
    composing: tuple[str, ...] = ()  # an ensemble's composing models (kept on CPU when the request is cpu_only)

    def __post_init__(self) -> None:
        if self.input_data is not None:
            _check_pa_path(Path(self.input_data), f"{self.name}'s input data")


@dataclass
class MARequest:
    """One Model Analyzer run: the model in its repository, the budget, the time limit and how it measures (the
    same server binary and perf_analyzer as our search). Its output repository holds a copy of the model per
    variant: keep it out of the results folder.

    With `models`, those replace model_name/budget_ms in profile_models, each with its own p99 constraint (no
    global latency_budget: Model Analyzer's would overwrite them); `concurrent` searches them at once (quick mode
    only, perf_analyzer under mpiexec)."""

    binary: Path | None  # the model-analyzer CLI (None: not installed, said in the result)
    model_name: str
    repository: Path
    work_dir: Path
    budget_ms: float
    max_minutes: float = 10.0
    cpu_only: bool = True
    search_mode: str = "quick"
    shared_memory: str = "none"
    output_shm_bytes: int | None = None
    output_repository: Path | None = None
    models: tuple[MAModel, ...] = ()
    concurrent: bool = False

    def __post_init__(self) -> None:
        if self.concurrent and self.search_mode != "quick":  # its default is brute, which refuses concurrency
            raise ValueError(f"Model Analyzer searches models concurrently in quick mode only, not {self.search_mode}")
        names = [m.name for m in self.models]
        if len(set(names)) != len(names):
            raise ValueError(f"a model is listed twice in {names}")


def _pa_flags(request: MARequest, model: MAModel | None) -> dict[str, str]:
    """A model's perf_analyzer flags, all of them: per-model flags replace the global ones
    (config_command_profile.py:1686-1690), so nothing is set globally."""
    flags: dict[str, str] = {}
    if request.shared_memory != "none":
        flags["shared-memory"] = request.shared_memory
        if request.output_shm_bytes:
            flags["output-shared-memory-size"] = str(request.output_shm_bytes)
    if model is not None and model.input_data is not None:
        path = Path(model.input_data).resolve()  # Model Analyzer runs in its work dir
        _check_pa_path(path, f"{model.name}'s input data")
        flags["input-data"] = str(path)
    return flags


def _profile_models(request: MARequest) -> dict[str, Any]:
    """profile_models: the one model with the global budget, or each of `models` with its own constraint."""
    if not request.models:
        model: dict[str, Any] = {"cpu_only": request.cpu_only}
        flags = _pa_flags(request, None)
        if flags:
            model["perf_analyzer_flags"] = flags
        return {request.model_name: model}
    out: dict[str, Any] = {}
    for m in request.models:
        entry: dict[str, Any] = {"cpu_only": request.cpu_only,
                                 "constraints": {"perf_latency_p99": {"max": _budget(m.budget_ms)}}}
        flags = _pa_flags(request, m)
        if flags:
            entry["perf_analyzer_flags"] = flags
        out[m.name] = entry
    return out


def _composing_on_cpu(request: MARequest) -> list[dict[str, Any]]:
    """Every composing model pinned to KIND_CPU when the request is cpu_only: cpu_only never reaches composing
    models (run_config_generator_factory.py:476), so every searched variant would be KIND_GPU and fail to load;
    an explicit kind wins (model_profile_spec.py:30-42), and unlike cpu_only_composing_models it does not break a
    run that also profiles a plain model (model_manager.py:221-225).

    Written as a list of one-model mappings: as one mapping it is parsed into the ConfigObject it shares with
    profile_models (config_command_profile.py:794-826), which then lists the composing models instead of the
    ensemble (seen with 1.58.0: the ensemble is never profiled). Each names its instance counts: 1 to 5,
    contiguous (LINEAR, as its own search), bounded as it bounds a profiled model's (config_defaults.py:37); a
    group without `count` is a KeyError wherever Model Analyzer reads it as search parameters
    (search_parameters.py:213)."""
    if not request.cpu_only:
        return []
    return [{c: {"model_config_parameters": {"instance_group": [{"kind": "KIND_CPU",
                                                                   "count": list(COMPOSING_INSTANCE_COUNTS)}]}}}
            for m in request.models for c in m.composing]


def _budget(budget_ms: float) -> int:
    return int(max(1, round(budget_ms)))


def ma_config(request: MARequest, ports: tuple[int, int, int], backend_dir: Path,
              perf_analyzer: Path) -> dict[str, Any]:
    """Model Analyzer's YAML config: same model, budget, server binary and perf_analyzer as our search."""
    r = request
    http, grpc, metrics = ports
    head: dict[str, Any] = {"model_repository": str(r.repository), "profile_models": _profile_models(r)}
    composing = _composing_on_cpu(r)
    if composing:
        head["ensemble_composing_models"] = composing
    head["run_config_search_mode"] = r.search_mode  # explicit: its default is brute
    if r.concurrent:
        head["run_config_profile_models_concurrently_enable"] = True
    if not r.models:
        head["latency_budget"] = _budget(r.budget_ms)
    return {
        **head,
        "client_protocol": "grpc",
        "triton_server_flags": {"backend-directory": str(backend_dir), "http-port": str(http),
                                "grpc-port": str(grpc), "metrics-port": str(metrics),
                                "http-address": "127.0.0.1", "grpc-address": "127.0.0.1",
                                "metrics-address": "127.0.0.1"},
        "triton_http_endpoint": f"127.0.0.1:{http}",
        "triton_grpc_endpoint": f"127.0.0.1:{grpc}",
        "triton_metrics_url": f"http://127.0.0.1:{metrics}/metrics",
        "perf_analyzer_path": str(perf_analyzer),
        "output_model_repository_path": str(r.output_repository or r.work_dir / "output_repository"),
        "override_output_model_repository": True,
        "export_path": str(r.work_dir / "export"),
        "checkpoint_directory": str(r.work_dir / "checkpoints"),
        "triton_output_path": str(r.work_dir / "tritonserver.log"),
    }


def ma_command(binary: Path, config_path: Path, server_binary: Path) -> list[str]:
    return [str(binary), "profile", "-f", str(config_path), "--triton-launch-mode", "local",
            "--triton-server-path", str(server_binary)]


def read_checkpoint(checkpoint_dir: Path) -> list[MAMeasurement]:
    """Every measurement in Model Analyzer's latest checkpoint (`<n>.ckpt`, JSON)."""
    files = sorted(checkpoint_dir.glob("*.ckpt"), key=lambda p: int(p.stem) if p.stem.isdigit() else -1)
    if not files:
        return []
    data = json.loads(files[-1].read_text())
    out: list[MAMeasurement] = []
    results = data.get("ResultManager.results", {}).get("_results", {})
    for variants in results.values():
        for variant, entry in variants.items():
            run_config, measurements = entry[0], entry[1]
            variant_cfg = (run_config.get("_model_run_configs") or [{}])[0].get("_model_config_variant", {})
            mc = variant_cfg.get("model_config", {})
            instances = sum(int(g.get("count", 1)) for g in mc.get("instanceGroup", [])) or 1
            max_batch = int(mc.get("maxBatchSize", 0))
            for m in measurements.values():
                for mm in m.get("_model_config_measurements", []):
                    tags = {k: v[1]["_value"] for k, v in mm.get("_non_gpu_data_from_tag", {}).items()}
                    conc = mm.get("_model_specific_pa_params", {}).get("concurrency-range")
                    if "perf_throughput" in tags and "perf_latency_p99" in tags and conc is not None:
                        out.append(MAMeasurement(variant, instances, max_batch, int(conc),
                                                 float(tags["perf_throughput"]), float(tags["perf_latency_p99"])))
    return out


@dataclass(frozen=True)
class MAPoint:
    """What perf_analyzer measured of one profiled model in one run config."""

    throughput: float  # inferences/s
    p99_ms: float
    concurrency: int  # perf_analyzer's concurrency (a recorded 0 or none: it ran at its default, 1)


@dataclass(frozen=True)
class MASettings:
    """The serving settings Model Analyzer gave one model in a run config (what apply_settings writes)."""

    instances: int  # the sum of its instance groups' counts (1 when none is given)
    kind: str | None  # KIND_CPU / KIND_GPU / KIND_AUTO; None: its config names no instance group (an ensemble)
    max_batch_size: int
    dynamic_batching: bool
    max_queue_delay_us: int | None = None  # None: not in its config (the protobuf default, 0)
    preferred_batch_size: tuple[int, ...] = ()


@dataclass(frozen=True)
class MARunConfig:
    """One measurement of one run config: every profiled model's point (an ensemble: the ensemble's, end to end)
    and every configured model's settings (an ensemble's composing models included)."""

    variants: str  # Model Analyzer's comma-joined variant names, e.g. "a_config_2,b_config_0"
    points: dict[str, MAPoint]  # per profiled model, in Model Analyzer's order
    configs: dict[str, MASettings]  # per configured model (profiled and composing), by its repository name

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(self.points)

    def passes(self, budgets: dict[str, float]) -> bool:
        """Every profiled model within its budget (a model without one is not constrained)."""
        return all(p.p99_ms <= budgets.get(n, math.inf) for n, p in self.points.items())


def _repository_name(variant: dict[str, Any]) -> str:
    """The model's name in the repository: its config's name (the original one in local mode), else the variant
    name without `_config_<i|default>`."""
    name = variant.get("model_config", {}).get("name") or variant.get("variant_name", "")
    return _VARIANT_SUFFIX.sub("", name)


def _settings(model_config: dict[str, Any]) -> MASettings:
    """MASettings from a checkpointed config (protobuf MessageToDict: camelCase keys, int64 values as strings)."""
    groups = model_config.get("instanceGroup", [])
    instances = sum(max(1, int(g.get("count", 1))) for g in groups) or 1
    kind = (groups[0].get("kind", "KIND_AUTO") if groups else None)
    db = model_config.get("dynamicBatching")
    delay = db.get("maxQueueDelayMicroseconds") if db is not None else None
    return MASettings(instances=instances, kind=kind, max_batch_size=int(model_config.get("maxBatchSize", 0)),
                      dynamic_batching=db is not None, max_queue_delay_us=None if delay is None else int(delay),
                      preferred_batch_size=tuple(int(b) for b in (db or {}).get("preferredBatchSize", [])))


def _configs(run_config: dict[str, Any]) -> dict[str, MASettings]:
    out: dict[str, MASettings] = {}
    for mrc in run_config.get("_model_run_configs", []):
        for variant in [mrc.get("_model_config_variant", {}), *mrc.get("_composing_config_variants", [])]:
            out[_repository_name(variant) or mrc.get("_model_name", "")] = _settings(variant.get("model_config", {}))
    return out


def _point(mcm: dict[str, Any]) -> MAPoint | None:
    tags = {k: v[1]["_value"] for k, v in mcm.get("_non_gpu_data_from_tag", {}).items()}
    if "perf_throughput" not in tags or "perf_latency_p99" not in tags:
        return None
    concurrency = int(mcm.get("_model_specific_pa_params", {}).get("concurrency-range") or 0)
    return MAPoint(float(tags["perf_throughput"]), float(tags["perf_latency_p99"]), concurrency or 1)


def read_run_configs(checkpoint_dir: Path) -> list[MARunConfig]:
    """One MARunConfig per measurement in Model Analyzer's latest checkpoint, for any number of models and
    ensembles. The layout: `_results[models][variants] = [run_config, {key: measurement}]`; measurement i
    (`_model_config_measurements[i]`) is of `_model_run_configs[i]`; an ensemble's composing configs are in its
    `_composing_config_variants` (results.py:266-277, model_run_config.py:122-127, metrics_manager.py:284-306)."""
    files = sorted(Path(checkpoint_dir).glob("*.ckpt"), key=lambda p: int(p.stem) if p.stem.isdigit() else -1)
    if not files:
        return []
    data = json.loads(files[-1].read_text())
    out: list[MARunConfig] = []
    for variants_by_name in data.get("ResultManager.results", {}).get("_results", {}).values():
        for variants, entry in variants_by_name.items():
            run_config, measurements = entry[0], entry[1]
            mrcs = run_config.get("_model_run_configs", [])
            configs = _configs(run_config)
            for measurement in measurements.values():
                mcms = measurement.get("_model_config_measurements", [])
                points = {}
                for i, mcm in enumerate(mcms):
                    name = mrcs[i].get("_model_name") if i < len(mrcs) else mcm.get("_model_config_name")
                    point = _point(mcm)
                    if point is not None:
                        points[name or mcm.get("_model_config_name", "")] = point
                if points and len(points) == len(mcms):  # a model without its numbers: not a whole measurement
                    out.append(MARunConfig(variants, points, dict(configs)))
                else:
                    log.debug(f"Model Analyzer's measurement of {variants} lacks a model's numbers; skipped")
    return out


def _score(a: MARunConfig, b: MARunConfig) -> float:
    """How much better `a` is than `b` (> 0: better): per model (a - b) / mean(a, b) of throughput, the default
    objective (weight 1 after normalisation), summed with equal model weights. Mirrors
    RunConfigMeasurement._compare_measurements -> _calculate_weighted_mcm_score / _calculate_weighted_rcm_score
    (result/run_config_measurement.py:511-609) over ModelConfigMeasurement._calculate_weighted_score
    (result/model_config_measurement.py:269-304), models zipped by position as there."""
    pairs = list(zip(a.points.values(), b.points.values()))
    score = 0.0
    for x, y in pairs:
        mean = (x.throughput + y.throughput) / 2
        score += ((x.throughput - y.throughput) / mean if mean else 0.0) / len(pairs)
    return score


def _order(a: MARunConfig, b: MARunConfig) -> int:
    """-1 when `a` ranks first: `a < b` in Model Analyzer's sort (RunConfigResult.__lt__ = is_better_than,
    COMPARISON_SCORE_THRESHOLD 0 in constants.py:27)."""
    score = _score(a, b)
    return -1 if score > 0 else (1 if score < 0 else 0)


def best_run_config(run_configs: Sequence[MARunConfig], budgets: dict[str, float]) -> MARunConfig | None:
    """The run config Model Analyzer ranks first among those where every profiled model keeps its budget (a model
    not in `budgets` is unconstrained), under its default objective (throughput, models weighted equally); None
    when none passes. As its SortedResults.top_n_results (result/sorted_results.py) over RunConfigResults
    (result/run_config_result.py): each variant stands for its best passing measurement (RunConfigResultComparator.
    _aggregate_run_config_measurements, max over passing_measurements, run_config_result_comparator.py:82-110),
    the variants are sorted best first with RunConfigResult.__lt__ (run_config_result.py:201-210, a stable sort in
    checkpoint order), and the first one with a passing measurement wins. All run configs must profile the same
    models (one run's checkpoint; a sequential multi-model run: call it per model)."""
    sets = {rc.models for rc in run_configs}
    if len(sets) > 1:
        raise ValueError(f"run configs of different models cannot be ranked together: {sorted(sets)}")
    key = functools.cmp_to_key(_order)
    groups: dict[str, list[MARunConfig]] = {}
    for rc in run_configs:
        groups.setdefault(rc.variants, []).append(rc)
    ranked = []
    for measured in groups.values():
        passing = [rc for rc in measured if rc.passes(budgets)]
        ranked.append((bool(passing), min(passing or measured, key=key)))  # min under `<`: the best
    ranked.sort(key=lambda item: key(item[1]))
    return next((rc for ok, rc in ranked if ok), None)


def apply_settings(config: ModelConfig, settings: MASettings) -> ModelConfig:
    """A copy of a repository model's config with Model Analyzer's instance count and kind, max_batch_size and
    dynamic batching (everything else as it is): how its pick is deployed from our own artifacts. A setting its
    config leaves out is the protobuf default it ran with (no queue delay, no preferred sizes). An ensemble takes
    only max_batch_size (it has no instances and no batcher of its own)."""
    from deployment_toolkit.repository.config import mc

    out = mc.ModelConfig()
    out.CopyFrom(config)
    out.max_batch_size = settings.max_batch_size
    if out.platform == "ensemble":
        return out
    if settings.kind is not None:
        kind = mc.ModelInstanceGroup.Kind.Value(settings.kind)
        if len(out.instance_group) != 1:
            del out.instance_group[:]
            out.instance_group.add()
        group = out.instance_group[0]  # one group, as Model Analyzer writes it; its name and the like kept
        group.count, group.kind = settings.instances, kind
        if kind != mc.ModelInstanceGroup.Kind.KIND_GPU:
            del group.gpus[:]
    if settings.dynamic_batching:
        db = out.dynamic_batching
        db.SetInParent()
        db.max_queue_delay_microseconds = settings.max_queue_delay_us or 0
        del db.preferred_batch_size[:]
        db.preferred_batch_size.extend(settings.preferred_batch_size)
    else:
        out.ClearField("dynamic_batching")
    return out


def _raised(lines: list[str]) -> str | None:
    """The exception a Python traceback ends with, as one line: Model Analyzer's own refusals (an uncaught
    TritonModelAnalyzerException, e.g. 'Profiling of multiple models is not supported for ensemble models') by
    their message alone, anything else as `Type: message`."""
    start = max((i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")),
                default=None)
    if start is None:
        return None
    found = None
    for i in range(start + 1, len(lines)):
        m = _RAISED.match(lines[i])
        if m:
            found = (i, m)
    if found is None:
        return None
    i, m = found
    rest = [line.strip() for line in lines[i + 1:] if line.strip() and not line.startswith(("[Model Analyzer]", " "))]
    message = " ".join([(m.group(2) or "").strip(), *rest]).strip()
    kind = m.group(1).rsplit(".", 1)[-1]
    if kind == "TritonModelAnalyzerException" and message:
        return message[:800]
    return f"{kind}: {message}"[:800] if message else kind


def explain_failure(output: str, returncode: int | None) -> str:
    """The line of Model Analyzer's output that says why it stopped: its error message, the exception a traceback
    ends with, else the last lines."""
    m = _ERROR.search(output)
    if m:
        return " ".join(m.group(1).split())[:800]
    lines = output.strip().splitlines()
    raised = _raised(lines)
    if raised:
        return raised
    tail = [line for line in lines if line.strip()][-8:]
    return f"exit code {returncode}: " + " | ".join(tail)[-800:]


def run_model_analyzer(request: MARequest) -> MAResult:
    """Run Model Analyzer's profile with a time limit; never raises for its failures, reports them."""
    import yaml

    from deployment_toolkit.binaries import find_perf_analyzer
    from deployment_toolkit.server.local import backend_directory, find_installation, free_ports

    if request.binary is None:
        return MAResult(ran=False, error=f"Model Analyzer is not installed: {INSTALL_HINT}")
    work_dir = request.work_dir.resolve()  # it runs in work_dir: no relative paths
    request = replace(request, work_dir=work_dir, repository=request.repository.resolve(),
                      output_repository=(request.output_repository or work_dir / "output_repository").resolve())
    binary, max_minutes = request.binary, request.max_minutes
    work_dir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(request.output_repository, ignore_errors=True)
    for stale in ("checkpoints", "export"):
        shutil.rmtree(work_dir / stale, ignore_errors=True)
    (work_dir / "export").mkdir()
    inst = find_installation()
    ports = free_ports(3)
    cfg = ma_config(request, ports, backend_directory(inst), find_perf_analyzer())
    config_path = work_dir / "model_analyzer.yaml"
    config_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    cmd = ma_command(binary, config_path, inst.binary)
    log_path = work_dir / "model_analyzer.log"
    result = MAResult(ran=True, command=cmd, log_path=log_path)
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=ma_environment(), cwd=work_dir,
                                start_new_session=True)  # its own group: the server it launches goes down with it
        try:
            result.returncode = proc.wait(timeout=max_minutes * 60.0)
        except subprocess.TimeoutExpired:
            result.timed_out = True
            _stop_group(proc)
        except KeyboardInterrupt:
            _stop_group(proc)
            raise
    result.wall_s = time.monotonic() - t0
    output = log_path.read_text(errors="replace")
    result.measurements = read_checkpoint(work_dir / "checkpoints")
    result.run_configs = read_run_configs(work_dir / "checkpoints")
    if result.timed_out:
        result.error = (f"stopped at the {max_minutes:g} min limit before its search finished "
                        f"({len(result.run_configs)} measurements in its checkpoint)")
    elif result.returncode != 0:
        result.error = explain_failure(output, result.returncode)
    return result


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGINT to Model Analyzer alone (it finishes the current measurement and saves its checkpoint; a SIGINT
    to its perf_analyzer would cut that measurement short and record a bogus point), then the whole group."""
    try:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=180)
    except subprocess.TimeoutExpired:
        pass
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)  # the tritonserver it launched, if still there
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue


__all__ = ["MAModel", "MAPoint", "MARequest", "MAResult", "MARunConfig", "MASettings", "MAMeasurement",
           "apply_settings", "best_run_config", "find_model_analyzer", "ma_config", "ma_command", "ma_environment",
           "read_checkpoint", "read_run_configs", "explain_failure", "run_model_analyzer", "INSTALL_HINT"]
