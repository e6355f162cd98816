"""The deployment file: what a user ships, typed. Several models, each any reference the toolkit takes (with its
samples and optional pre/post-processing), its peak rate and p99 SLO; the costs and limits of the fleet.

```yaml
name: shop                         # names the fleet's manifests
models:
  - name: classifier               # the Triton model name (unique)
    model: timm:resnet18           # any model reference (zoo name, timm:<arch>, model.py, an ONNX file, ...)
    data: samples/                 # optional: the model's samples (a .npy/.npz folder; `dataloader:` a dataloader.py)
    peak_rps: 200                  # inferences/s at its peak
    p99_ms: 50                     # its SLO
  - name: tagger
    model: examples/token_classifier/model.py
    model_args: {vocab_size: 1000}
    checkpoint: tagger.safetensors
    traffic: tagger_day.csv        # optional: its rate over time (time,rate rows; HH:MM, seconds or ISO-8601)
    p99_ms: 100                    # with traffic, peak_rps is optional (the series' peak; given: scaled to it)
  - {name: fraud, model: fraud.onnx, p99_ms: 20, traffic: prometheus.json,  # or a request log: every model's traffic
     series: {model: fraud, version: "2"}}  # optional: which series are its own (default: model equal to its name)
costs: {host_hour: 1.2, gpu_hour: 4.0}
limits: {max_replicas: 20, headroom: 0.2, host_memory_gb: 64, max_models: 8}
```
Relative paths are read from the file's folder. Every number is checked as the command line checks it (finite, in
range, with its unit) and every mistake is one line naming the key, on read, before anything is converted: names
by Triton's rules and against every model the plan writes, paths (a model file too) and traffic files.
"""
from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..config import PipelineLayout, check_number, check_numbers, flag_of, setting
from ..config.fields import MAX_HEADROOM, MAX_HOUR_COST, MAX_LATENCY_MS, MAX_MEMORY_GB, MAX_RATE
from ..config.yamlfile import load_yaml
from ..errors import UserFileNotFoundError, UserInputError
from ..inputfile import MIB, NO_LIMIT, TEXT_LIMIT, Expect, Limit, check_path, read_text
from ..repository.names import check_model_name
from ..kube.manifests import dns_name
from .traffic import reading
from ..traffic.prometheus import SeriesKind
from ..traffic.read import DEFAULT_SLICE_S, ReadOptions, read_model
from ..traffic.series import DAY_S

@dataclass(frozen=True)
class ModelEntry:
    """One model of the deployment and the traffic it must hold."""

    name: str
    model: str  # the reference, as the command line takes it
    peak_rps: float = setting(unit="inferences/s", low=0, low_open=True, high=MAX_RATE,
                              help="inferences/s at its peak (with traffic: the series is scaled to it)")
    p99_ms: float = setting(unit="ms", low=0, low_open=True, high=MAX_LATENCY_MS, help="its p99 latency SLO")
    data: Path | None = None  # a folder of .npy/.npz samples (or the folder the dataloader reads)
    dataloader: Path | None = None  # the user's dataloader.py
    checkpoint: Path | None = None
    model_args: Mapping[str, Any] = field(default_factory=dict)
    preprocess: Path | None = None
    postprocess: Path | None = None
    raw_data: Path | None = None  # the raw samples (bytes, text) a pipeline's clients send
    layout: PipelineLayout = PipelineLayout.ENSEMBLE  # a pipeline as an ensemble, or fused into one model
    # its rate over time (peaks that do not coincide share): a Prometheus range-query answer, a request log (CSV or
    # JSON Lines) or a CSV of time,rate, told apart by its content
    traffic: Path | None = None
    # which of the traffic file's series (or a log's rows) are its own: labels (columns) equal to these values, every
    # match summed; a text names the `model` label; default: `model` equal to its name
    series: Mapping[str, str] = field(default_factory=dict)
    # a Prometheus series is a `counter` (turned into a rate, a drop being a reset) or a `rate`; auto: a counter when
    # its __name__ is one of Triton's counters or ends in _total
    traffic_kind: SeriesKind = SeriesKind.AUTO
    time_column: str | None = None  # a request log's time column (default: time, timestamp or ts)
    slice_s: float = setting(DEFAULT_SLICE_S, unit="s", low=0, low_open=True, high=DAY_S,
                             help="a request log's rate is its requests counted per slice of this width")
    peak_given: bool = True  # False: peak_rps is the traffic's own peak (only `traffic:` was given)

    def __post_init__(self) -> None:
        check_numbers(self)
        try:
            object.__setattr__(self, "layout", PipelineLayout(self.layout))
        except ValueError:
            raise UserInputError(f"layout must be one of {', '.join(PipelineLayout.values())}, got "
                                 f"{self.layout!r}") from None

    @property
    def has_pipeline(self) -> bool:
        return self.preprocess is not None or self.postprocess is not None


@dataclass(frozen=True)
class Costs:
    """$/hour of one host (CPU replicas) or one GPU (a GPU replica per device); `by_device` wins where it names the
    device the models were measured on."""

    host_hour: float | None = setting(None, unit="$/h", low=0, high=MAX_HOUR_COST)
    gpu_hour: float | None = setting(None, unit="$/h", low=0, high=MAX_HOUR_COST)
    by_device: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_numbers(self)
        price_flag = flag_of(next(f for f in dataclasses.fields(self) if f.name == "host_hour"))
        for device, price in self.by_device.items():
            if not isinstance(price, (int, float)) or isinstance(price, bool):
                raise UserInputError(f"costs.by_device[{device!r}] must be a price in $/h, got {price!r}")
            check_number(price, price_flag, f"costs.by_device[{device!r}]")

    def price_for(self, device: str, gpu: bool) -> float | None:
        """$/h on `device`: its name in by_device, else the longest key in its name (any case), else the flat price."""
        hits = sorted((k for k in self.by_device if k.lower() in device.lower()), key=lambda k: (k != device, -len(k)))
        return float(self.by_device[hits[0]]) if hits else (self.gpu_hour if gpu else self.host_hour)


@dataclass(frozen=True)
class Limits:
    max_replicas: int | None = setting(None, low=1, high=100_000)
    headroom: float | None = setting(None, low=0, high=MAX_HEADROOM)  # default: from the capacity's spread
    host_memory_gb: float | None = setting(None, unit="GB", low=0, low_open=True, high=MAX_MEMORY_GB)
    gpu_memory_gb: float | None = setting(None, unit="GB", low=0, low_open=True, high=MAX_MEMORY_GB)
    max_models: int | None = setting(None, low=1, high=10_000)  # models one server may load
    # how a limit was given where that is not its file key (a plan of one model takes them from flags): every
    # message about a limit names it as the user gave it (`key`); not a key of the file itself
    given_as: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        check_numbers(self)

    def key(self, name: str) -> str:
        """How the user gave limit `name`: its flag (a plan of one model), else the file's `limits.<name>`."""
        return self.given_as.get(name, f"limits.{name}")


@dataclass(frozen=True)
class Deployment:
    name: str
    models: tuple[ModelEntry, ...]
    costs: Costs = field(default_factory=Costs)
    limits: Limits = field(default_factory=Limits)
    source: Path | None = None  # the file it was read from

    def __post_init__(self) -> None:
        if not self.models:
            raise UserInputError(f"{self._where()}: no models: list at least one under 'models:'")
        seen: dict[str, int] = {}
        for i, m in enumerate(self.models):
            if m.name in seen:
                raise UserInputError(f"{self._where()}: models[{i}] is named {m.name!r} like models[{seen[m.name]}]: "
                                     "each model needs its own name (it is its Triton model name)")
            seen[m.name] = i

    def _where(self) -> str:
        return str(self.source) if self.source else "deployment"

    def model(self, name: str) -> ModelEntry:
        return next(m for m in self.models if m.name == name)


# each path key: what it names and the largest file it takes (inputfile: only regular files and folders are read)
_PATHS: dict[str, tuple[Expect, Limit]] = {
    "data": (Expect.EITHER, NO_LIMIT), "dataloader": (Expect.FILE, TEXT_LIMIT),
    "checkpoint": (Expect.EITHER, NO_LIMIT), "preprocess": (Expect.FILE, TEXT_LIMIT),
    "postprocess": (Expect.FILE, TEXT_LIMIT), "raw_data": (Expect.FOLDER, NO_LIMIT), "traffic": (Expect.FILE, TEXT_LIMIT)}
FILE_LIMIT = Limit(MIB)  # the deployment file itself: a thousand models take about 100 KiB


def _keys(section: str, given: Mapping[str, Any], cls: type, skip: tuple[str, ...] = ()) -> None:
    allowed = [f.name for f in dataclasses.fields(cls) if f.name not in skip]
    unknown = [k for k in given if k not in allowed]
    if unknown:
        raise UserInputError(f"{section}: unknown key {unknown[0]!r}; the keys are {', '.join(allowed)}")


def _mapping(value: Any, section: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UserInputError(f"{section} must be a mapping of keys to values, got {type(value).__name__}")
    return value


def _number(value: Any, key: str, whole: bool = False) -> Any:
    """A number as the key's field takes it; `whole`: a count (2.0 is 2, 2.5 is refused)."""
    if isinstance(value, str):
        try:
            value = float(value)  # YAML reads `.nan`, `1e3` as numbers, but `1e3` without a dot as text
        except ValueError:
            pass
    if value is None:
        return value
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise UserInputError(f"{key} must be a number, got {value!r}")
    if whole and math.isfinite(value):
        if value != int(value):
            raise UserInputError(f"{key} must be a whole number, got {value!r}")
        return int(value)
    return value


def _whole(cls: type) -> set[str]:
    """The fields of `cls` that are counts (annotated int)."""
    return {f.name for f in dataclasses.fields(cls) if str(f.type).split(" ")[0] == "int"}


def _required(raw: Mapping[str, Any], section: str) -> None:
    for key in ("name", "model", "p99_ms"):
        if raw.get(key) in (None, ""):
            raise UserInputError(f"{section}: '{key}' is missing (each model needs name, model, peak_rps or "
                                 "traffic, p99_ms)")
    if raw.get("peak_rps") in (None, "") and raw.get("traffic") in (None, ""):
        raise UserInputError(f"{section}: 'peak_rps' is missing: give its peak (inferences/s) or its traffic over "
                             "time (traffic: a CSV of time,rate)")


def _paths(raw: Mapping[str, Any], folder: Path, section: str) -> dict[str, Path]:
    """Each path key read from the file's folder, checked to be what it names (a regular file under its limit, or
    a folder) before anything reads it."""
    paths = {}
    for key, (expect, limit) in _PATHS.items():
        if raw.get(key) is not None:
            path = Path(str(raw[key])).expanduser()
            path = path if path.is_absolute() else Path(os.path.abspath(folder / path))
            paths[key] = check_path(path, f"{section}: {key}", expect, limit)
    return paths


def _peak(values: dict[str, Any], options: ReadOptions | None, section: str) -> None:
    """The peak from `peak_rps`, from the traffic file, or both by one stated rule: the file gives the shape over
    time and `peak_rps` its peak (the series is scaled to it), which a file of zeros cannot be."""
    if options is None:
        return
    try:
        series = read_model(values["traffic"], values["name"], values.get("series"), options).series
    except UserInputError as err:
        raise UserInputError(f"{section}: traffic: {err}") from None
    if "peak_rps" not in values:
        values["peak_rps"], values["peak_given"] = series.peak, False
        if not series.peak > 0:
            raise UserInputError(f"{section}: traffic {values['traffic']} is 0 inferences/s throughout: give a peak")
    elif not series.peak > 0:
        raise UserInputError(f"{section}: peak_rps {values['peak_rps']:g} scales traffic {values['traffic']}, "
                             "which is 0 inferences/s throughout, so it cannot be scaled: fix the file or drop "
                             "'traffic:' to plan for peak_rps alone")


def _model(raw: Any, index: int, folder: Path, where: str) -> ModelEntry:
    section = f"{where}: models[{index}]"
    raw = _mapping(raw, section)
    _keys(section, raw, ModelEntry, skip=("peak_given",))
    _required(raw, section)
    if not isinstance(raw["name"], str):
        raise UserInputError(f"{section}.name must be text, got {raw['name']!r}: quote it")
    values: dict[str, Any] = {"name": raw["name"], "model": str(raw["model"])}
    check_model_name(values["name"], f"{where}: models[{index}].name")
    section = f"{where}: models[{index}] ({values['name']})"
    values["p99_ms"] = _number(raw["p99_ms"], f"{section}: p99_ms")
    if raw.get("peak_rps") not in (None, ""):
        values["peak_rps"] = _number(raw["peak_rps"], f"{section}: peak_rps")
    values.update(_paths(raw, folder, section))
    options = reading(raw, values, section)
    if raw.get("layout") is not None:
        values["layout"] = str(raw["layout"])
    if raw.get("model_args") is not None:
        values["model_args"] = dict(_mapping(raw["model_args"], f"{section}: model_args"))
    values["model"] = _model_reference(values["model"], folder, f"{where}: models[{index}].model",
                                       values.get("model_args", {}))
    _peak(values, options, section)
    try:
        return ModelEntry(**values)
    except UserInputError as err:
        raise UserInputError(f"{section}: {err}") from None


def _model_reference(ref: str, folder: Path, key: str, model_args: Mapping[str, Any]) -> str:
    """A reference that names a file or folder (a path, model.py, an ONNX/TorchScript/plan file) is read from the
    deployment file's folder and must exist now, before any model is converted; a zoo name or timm:<arch> must be
    one the toolkit knows (a typo is said on read, not when its search starts); package.module:function is kept."""
    from ..sources import MODEL_FILE_SUFFIXES, SourceError, check_reference
    from ..sources.python import is_module_ref

    if is_module_ref(ref) and not ref.startswith("timm:"):
        return ref
    if not ref.startswith("timm:"):
        head, sep, tail = ref.partition(".py:")  # path/model.py:factory
        file = f"{head}.py" if sep else ref
        path = Path(file).expanduser()
        if "/" in file or path.suffix in MODEL_FILE_SUFFIXES or (folder / path).exists():
            path = path if path.is_absolute() else Path(os.path.abspath(folder / path))
            expect = Expect.FILE if path.suffix == ".py" else Expect.EITHER
            check_path(path, key, expect, TEXT_LIMIT if expect is Expect.FILE else NO_LIMIT,
                       f" (a relative path is read from the deployment file's folder, {folder.resolve()})")
            return f"{path}:{tail}" if sep else str(path)
    try:
        check_reference(ref, dict(model_args))
    except SourceError as err:
        raise UserInputError(f"{key}: {err}") from None
    return ref


def generated_names(entry: ModelEntry) -> dict[str, str]:
    """The models the plan writes for an entry besides the network itself (which keeps the entry's name), each with
    what it is: the pipeline's ensemble (or its fused model) and its steps."""
    if not entry.has_pipeline:
        return {}
    names = {f"{entry.name}_pipeline": "its pipeline's ensemble" if entry.layout is PipelineLayout.ENSEMBLE
             else "its fused pipeline model"}
    if entry.layout is PipelineLayout.ENSEMBLE:
        if entry.preprocess is not None:
            names[f"{entry.name}_preprocess"] = "its preprocess step"
        if entry.postprocess is not None:
            names[f"{entry.name}_postprocess"] = "its postprocess step"
    return names


def _check_names(entries: tuple[ModelEntry, ...], where: str) -> None:
    """Every model the plan will write has a name of its own in the one shared repository: an entry named like
    another's generated model (`x_pipeline` beside `x` with a preprocess) would silently replace it."""
    owner: dict[str, tuple[int, str]] = {e.name: (i, "") for i, e in enumerate(entries)}
    for i, entry in enumerate(entries):
        for name, what in generated_names(entry).items():
            check_model_name(name, f"{where}: models[{i}].name ({what}, {name!r})")
            if name in owner:
                j, other = owner[name]
                taken = f"models[{j}].name" if not other else f"models[{j}] ({entries[j].name}) for {other}"
                raise UserInputError(f"{where}: models[{i}] ({entry.name}) writes {what} as {name!r}, the name "
                                     f"{taken} already has in the model repository: rename one of them")
            owner[name] = (i, what)
    _check_kube_names(entries, where)


def _check_kube_names(entries: tuple[ModelEntry, ...], where: str) -> None:
    """Names that differ only in case, '_', '-' or '.' (`Scorer`/`scorer`, `fraud_eu`/`fraud-eu`) become the same
    Kubernetes object name (kube.manifests.dns_name): one replica group's manifests would replace the other's."""
    seen: dict[str, tuple[int, str]] = {}
    for i, entry in enumerate(entries):
        for name in (entry.name, *generated_names(entry)):
            kube = dns_name(name)
            j, other = seen.setdefault(kube, (i, name))
            if other != name:
                raise UserInputError(f"{where}: models[{i}] writes {name!r} and models[{j}] writes {other!r}, which "
                                     f"become the same Kubernetes name {kube!r} (names are lower-cased and '_', '.' "
                                     "become '-'): rename one of them")


def _name(top: Mapping[str, Any], source: Path | None, where: str) -> str:
    """The deployment's name: a folder (results/plan-<name>) and Kubernetes object names, so a model name's rule."""
    given = top.get("name")
    if given is None:
        name = source.stem if source else "deployment"
        return check_model_name(name, f"{where}: the file's name (no 'name:' given)")
    if not isinstance(given, str):
        raise UserInputError(f"{where}: name must be text, got {given!r}: quote it")
    return check_model_name(given, f"{where}: name")


def _section(cls: type, raw: Mapping[str, Any], where: str, key: str, skip: tuple[str, ...] = ()) -> Any:
    """`costs:` or `limits:` as its dataclass, each number checked under its own key (`limits.max_models`)."""
    _keys(f"{where}: {key}", raw, cls, skip=skip)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    whole, values = _whole(cls), {}
    for k, v in raw.items():
        if k == "by_device":
            values[k] = dict(_mapping(v, f"{where}: {key}.by_device"))
            continue
        values[k] = _number(v, f"{where}: {key}.{k}", k in whole)
        flag = flag_of(fields[k])
        if flag is not None:
            check_number(values[k], dataclasses.replace(flag, name=None), f"{where}: {key}.{k}")
    try:
        return cls(**values)
    except UserInputError as err:
        raise UserInputError(f"{where}: {key}: {err}") from None


def parse(data: Any, source: Path | None = None) -> Deployment:
    """A deployment from the file's parsed YAML (a mapping); `source` names it in messages and anchors paths."""
    where = str(source) if source else "deployment"
    folder = source.parent if source else Path.cwd()
    top = _mapping(data, where)
    _keys(where, top, Deployment, skip=("source",))
    name = _name(top, source, where)
    models = top.get("models")
    if not isinstance(models, list):
        raise UserInputError(f"{where}: 'models' must be a list of models (name, model, peak_rps, p99_ms each)")
    entries = tuple(_model(m, i, folder, where) for i, m in enumerate(models))
    _check_names(entries, where)
    costs = _section(Costs, _mapping(top.get("costs"), f"{where}: costs"), where, "costs")
    limits = _section(Limits, _mapping(top.get("limits"), f"{where}: limits"), where, "limits", skip=("given_as",))
    return Deployment(name, entries, costs, limits, source)


def load(path: str | Path) -> Deployment:
    """Read and check a deployment file; one line for any mistake (inputfile: a regular file under FILE_LIMIT;
    config.yamlfile: no key twice, aliases within a budget)."""
    path = Path(path)
    text = read_text(path, "--deployment", FILE_LIMIT, "a deployment file (YAML)")
    return parse(load_yaml(text, str(path)), path)


__all__ = ["Costs", "Deployment", "Limits", "ModelEntry", "generated_names", "load", "parse"]
