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
costs: {host_hour: 1.2, gpu_hour: 4.0}
limits: {max_replicas: 20, headroom: 0.2, host_memory_gb: 64, max_models: 8}
```
Relative paths are read from the file's folder. Every number is checked as the command line checks it (finite, in
range, with its unit) and every mistake is one line naming the key, on read, before anything is converted: names
by Triton's rules and against every model the plan writes, paths (a model file too) and traffic files.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..config import PipelineLayout, check_number, check_numbers, flag_of, setting
from ..config.fields import MAX_HEADROOM, MAX_HOUR_COST, MAX_LATENCY_MS, MAX_MEMORY_GB, MAX_RATE
from ..errors import UserFileNotFoundError, UserInputError
from ..repository.names import check_model_name

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
    traffic: Path | None = None  # a CSV of time,rate: its rate over time (peaks that do not coincide share)
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


_PATHS = ("data", "dataloader", "checkpoint", "preprocess", "postprocess", "raw_data", "traffic")


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


def _number(value: Any, key: str) -> Any:
    if value is None or isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return float(value)  # YAML reads `.nan`, `1e3` as numbers, but `1e3` without a dot as text
        except ValueError:
            pass
    raise UserInputError(f"{key} must be a number, got {value!r}")


def _model(raw: Any, index: int, folder: Path, where: str) -> ModelEntry:
    section = f"{where}: models[{index}]"
    raw = _mapping(raw, section)
    _keys(section, raw, ModelEntry, skip=("peak_given",))
    for key in ("name", "model", "p99_ms"):
        if raw.get(key) in (None, ""):
            raise UserInputError(f"{section}: '{key}' is missing (each model needs name, model, peak_rps or "
                                 "traffic, p99_ms)")
    if raw.get("peak_rps") in (None, "") and raw.get("traffic") in (None, ""):
        raise UserInputError(f"{section}: 'peak_rps' is missing: give its peak (inferences/s) or its traffic over "
                             "time (traffic: a CSV of time,rate)")
    values: dict[str, Any] = {"name": str(raw["name"]), "model": str(raw["model"])}
    check_model_name(values["name"], f"{where}: models[{index}].name")
    section = f"{where}: models[{index}] ({values['name']})"
    values["p99_ms"] = _number(raw["p99_ms"], f"{section}: p99_ms")
    if raw.get("peak_rps") not in (None, ""):
        values["peak_rps"] = _number(raw["peak_rps"], f"{section}: peak_rps")
    for key in _PATHS:
        if raw.get(key) is not None:
            path = Path(str(raw[key])).expanduser()
            path = path if path.is_absolute() else (folder / path).resolve()
            if not path.exists():
                raise UserFileNotFoundError(f"{section}: {key} {path} does not exist")
            values[key] = path
    if raw.get("layout") is not None:
        values["layout"] = str(raw["layout"])
    if raw.get("model_args") is not None:
        values["model_args"] = dict(_mapping(raw["model_args"], f"{section}: model_args"))
    values["model"] = _model_reference(values["model"], folder, f"{where}: models[{index}].model")
    if "peak_rps" not in values:  # the traffic's own peak, read now: its mistakes are said on read too
        from .traffic import read_csv

        values["peak_rps"], values["peak_given"] = read_csv(values["traffic"]).peak, False
        if not values["peak_rps"] > 0:
            raise UserInputError(f"{section}: traffic {values['traffic']} is 0 inferences/s throughout: give a peak")
    elif "traffic" in values:
        from .traffic import read_csv

        read_csv(values["traffic"])
    try:
        return ModelEntry(**values)
    except UserInputError as err:
        raise UserInputError(f"{section}: {err}") from None


def _model_reference(ref: str, folder: Path, key: str) -> str:
    """A reference that names a file or folder (a path, model.py, an ONNX/TorchScript/plan file) is read from the
    deployment file's folder and must exist now, before any model is converted; zoo names, timm:<arch> and
    package.module:function are kept as given."""
    from ..sources import MODEL_FILE_SUFFIXES
    from ..sources.python import is_module_ref

    if ref.startswith("timm:") or is_module_ref(ref):
        return ref
    head, sep, tail = ref.partition(".py:")  # path/model.py:factory
    file = f"{head}.py" if sep else ref
    path = Path(file).expanduser()
    if not ("/" in file or path.suffix in MODEL_FILE_SUFFIXES or (folder / path).exists()):
        return ref  # a zoo name
    path = path if path.is_absolute() else (folder / path).resolve()
    if not path.exists():
        raise UserFileNotFoundError(f"{key}: {path} does not exist (a relative path is read from the deployment "
                                    f"file's folder, {folder.resolve()})")
    return f"{path}:{tail}" if sep else str(path)


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


def parse(data: Any, source: Path | None = None) -> Deployment:
    """A deployment from the file's parsed YAML (a mapping); `source` names it in messages and anchors paths."""
    where = str(source) if source else "deployment"
    folder = source.parent if source else Path.cwd()
    top = _mapping(data, where)
    _keys(where, top, Deployment, skip=("source",))
    models = top.get("models")
    if not isinstance(models, list):
        raise UserInputError(f"{where}: 'models' must be a list of models (name, model, peak_rps, p99_ms each)")
    entries = tuple(_model(m, i, folder, where) for i, m in enumerate(models))
    _check_names(entries, where)
    costs_raw = _mapping(top.get("costs"), f"{where}: costs")
    limits_raw = _mapping(top.get("limits"), f"{where}: limits")
    _keys(f"{where}: costs", costs_raw, Costs)
    _keys(f"{where}: limits", limits_raw, Limits, skip=("given_as",))
    try:
        costs = Costs(**{k: (dict(_mapping(v, f"{where}: costs.by_device")) if k == "by_device"
                             else _number(v, f"{where}: costs.{k}")) for k, v in costs_raw.items()})
        limits = Limits(**{k: _number(v, f"{where}: limits.{k}") for k, v in limits_raw.items()})
    except UserInputError as err:
        raise UserInputError(f"{where}: {err}") from None
    if limits.max_replicas is not None and limits.max_replicas != int(limits.max_replicas):
        raise UserInputError(f"{where}: limits.max_replicas must be a whole number, got {limits.max_replicas!r}")
    name = str(top.get("name") or (source.stem if source else "deployment"))
    return Deployment(name, entries, costs, limits, source)


def load(path: str | Path) -> Deployment:
    """Read and check a deployment file; one line for any mistake."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise UserFileNotFoundError(f"deployment file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise UserInputError(f"{path} is not UTF-8 text: a deployment file is YAML") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise UserInputError(f"{path} is not valid YAML{at}: {getattr(err, 'problem', None) or err}") from None
    return parse(data, path)


__all__ = ["Costs", "Deployment", "Limits", "ModelEntry", "generated_names", "load", "parse"]
