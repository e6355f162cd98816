"""The user's metric file (`calculate_metrics.py --metrics metrics.py`), in the DLE seed's form.

The file defines either

- `class MetricsCalculator` (the seed's name; subclassing `BaseMetricsCalculator` below is optional) whose
  `calc(self, *, ids, y_pred, x, y_real) -> Dict[str, float]` gets the whole dump at once, or
- a module-level function `calc(*, ids, y_pred, x, y_real) -> Dict[str, float]`, or
- `calc_sample(*, id, y_pred, x, y_real) -> Dict[str, float]` (a function, or a MetricsCalculator method) called
  once per sample with that sample's arrays (no batch axis); each metric is reported as its mean over samples.
  This is the form for samples of different shapes (token ids, waveforms of different lengths).

`ids` is the list of sample ids, `y_pred` {output name: array}, `x` {input name: array} or None (the dump
has inputs only with --dump-inputs), `y_real` {label name: array} or None (labels only with --dump-labels);
arrays have the batch axis first and rows in the same order. A whole-dump `calc` gets samples of one shape
stacked; when a tensor's samples differ in shape it is not called, and one line says which samples differ and
to define calc_sample. A `calc` may leave out parameters it does not use. It returns {metric name: number}; the
names go into the CSV beside the built-in metrics and can be bounded with --threshold.
"""
from __future__ import annotations

import abc
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional

import numpy as np

from ..watchdog import user_stage
from ..data.dump import Dump
from ..data.ragged import stacked
from ..userfile import first_line as _first_line, import_file
from ..errors import UserError

CLASS_NAME = "MetricsCalculator"
FUNCTION_NAME = "calc"
SAMPLE_FUNCTION_NAME = "calc_sample"
ARGUMENTS = ("ids", "y_pred", "x", "y_real")
SAMPLE_ARGUMENTS = ("id", "y_pred", "x", "y_real")


class MetricsFileError(UserError, ValueError):
    """A metrics file that cannot be used: does not import, defines no calc, raises, or returns non-numbers."""


class BaseMetricsCalculator(abc.ABC):
    """The seed's base class, for metric files ported from DeepLearningExamples (import it from here)."""

    @abc.abstractmethod
    def calc(self, *, ids: List[Any], y_pred: Dict[str, np.ndarray], x: Optional[Dict[str, np.ndarray]],
             y_real: Optional[Dict[str, np.ndarray]]) -> Dict[str, float]:
        """Metric name -> value over every sample of the dump."""


@dataclass(frozen=True)
class MetricsFn:
    """The user's calc, bound and ready to call with keyword arguments; per_sample for calc_sample."""

    name: str
    per_sample: bool
    call: Callable[..., Mapping[str, Any]]

    def __call__(self, **kwargs: Any) -> Mapping[str, Any]:
        return self.call(**kwargs)


def _find_calc(module: Any, path: Path) -> tuple[Callable[..., Any], str, bool]:
    """(calc, where, per_sample): MetricsCalculator's method or the module's function, calc before calc_sample."""
    cls = getattr(module, CLASS_NAME, None)
    owner, prefix = module, ""
    if inspect.isclass(cls):
        try:
            owner, prefix = cls(), f"{CLASS_NAME}."
        except Exception as err:  # noqa: BLE001 - the user's constructor may raise anything
            raise MetricsFileError(f"{path}: {CLASS_NAME}() raised {_first_line(err)}") from err
    for name, per_sample in ((FUNCTION_NAME, False), (SAMPLE_FUNCTION_NAME, True)):
        fn = getattr(owner, name, None)
        if callable(fn):
            return fn, prefix + name, per_sample
    raise MetricsFileError(f"metrics file {path} defines neither class {CLASS_NAME} with a {FUNCTION_NAME}() "
                           f"method nor a function {FUNCTION_NAME}(*, ids, y_pred, x, y_real) (or "
                           f"{SAMPLE_FUNCTION_NAME}(*, id, y_pred, x, y_real), called once per sample)")


def load_metrics_file(path: str | Path) -> MetricsFn:
    """The file's calc (or calc_sample), bound and ready to call with keyword arguments; MetricsFileError otherwise."""
    path = Path(path)
    try:
        module = import_file(path, "metrics file", MetricsFileError,
                             f"it must define class {CLASS_NAME} or {FUNCTION_NAME}()")
    except MetricsFileError as err:
        if "deployment_toolkit.core" not in str(err):
            raise
        raise MetricsFileError(f"{err}; import BaseMetricsCalculator from deployment_toolkit.metrics.user "
                               "instead") from err
    fn, where, per_sample = _find_calc(module, path)
    arguments = SAMPLE_ARGUMENTS if per_sample else ARGUMENTS
    params = inspect.signature(fn).parameters
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    unknown = [n for n, p in params.items() if n not in arguments and p.default is inspect.Parameter.empty
               and p.kind not in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)]
    if unknown:
        raise MetricsFileError(f"{path}: {where} asks for {unknown}; it is called with keywords {list(arguments)}")
    accepted = arguments if takes_all else tuple(n for n in arguments if n in params)

    def call(**kwargs: Any) -> Mapping[str, Any]:
        try:
            with user_stage(f"computing {path.name}:{where}"):
                return fn(**{k: v for k, v in kwargs.items() if k in accepted})
        except Exception as err:  # noqa: BLE001
            raise MetricsFileError(f"{path}: {where} raised {_first_line(err)}") from err

    return MetricsFn(f"{path.name}:{where}", per_sample, call)


def _numbers(name: str, result: Any) -> dict[str, float]:
    """A calc's result as {metric: float}; non-numeric values and empty results are MetricsFileError."""
    if not isinstance(result, Mapping) or not result:
        raise MetricsFileError(f"{name} returned {type(result).__name__}{'' if result else ' (empty)'}; "
                               "return a dict {metric name: number}")
    out: dict[str, float] = {}
    for key, value in result.items():
        try:
            number = float(np.asarray(value).item())
        except (TypeError, ValueError):
            raise MetricsFileError(f"{name}: metric {key!r} is {type(value).__name__} {str(value)[:40]!r}, "
                                   "not a number") from None
        if not isinstance(key, str) or not key or any(c in key for c in "<>=,\n"):
            raise MetricsFileError(f"{name}: metric name {key!r} must be a non-empty string without <>=, or newlines")
        out[key] = number
    return out


def _per_sample(fn: Callable[..., Mapping[str, Any]], name: str, ids: list[Any], y_pred: Mapping[str, np.ndarray],
                x: Mapping[str, np.ndarray] | None, y_real: Mapping[str, np.ndarray] | None) -> dict[str, float]:
    """calc_sample over every sample; each metric's mean (a metric a sample leaves out is averaged over the rest)."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for i, sample_id in enumerate(ids):
        def row(tensors: Mapping[str, np.ndarray] | None) -> dict[str, np.ndarray] | None:
            return {k: v[i] for k, v in tensors.items()} if tensors else None

        for key, value in _numbers(f"{name} (sample {sample_id!r})",
                                   fn(id=sample_id, y_pred=row(y_pred), x=row(x), y_real=row(y_real))).items():
            sums[key] = sums.get(key, 0.0) + value
            counts[key] = counts.get(key, 0) + 1
    return {key: sums[key] / counts[key] for key in sums}


def user_metrics(fn: Callable[..., Mapping[str, Any]], dump: Dump,
                 labels: Mapping[str, np.ndarray] | None = None) -> dict[str, float]:
    """Run the user's calc over the whole dump (labels from `labels` when given, e.g. a reference's), or its
    calc_sample once per sample; the values as floats."""
    y_real = dict(labels) if labels is not None else dict(dump.labels)
    name = getattr(fn, "name", getattr(fn, "__name__", "calc"))
    ids = dump.ids.tolist()
    if getattr(fn, "per_sample", False):
        return _per_sample(fn, name, ids, dump.outputs, dump.inputs or None, y_real or None)
    hint = f"define {SAMPLE_FUNCTION_NAME}(*, id, y_pred, x, y_real) in the metrics file to score samples one by one"

    def whole(tensors: Mapping[str, np.ndarray], what: str) -> dict[str, np.ndarray]:
        return {k: stacked(v, f"{name}: {what} {k!r}", ids, hint) for k, v in tensors.items()}

    result = fn(ids=ids, y_pred=whole(dump.outputs, "output"), x=whole(dump.inputs, "input") or None,
                y_real=whole(y_real, "label") or None)
    return _numbers(name, result)


__all__ = ["BaseMetricsCalculator", "MetricsFileError", "MetricsFn", "load_metrics_file", "user_metrics"]
