"""The user's metric file (`calculate_metrics.py --metrics metrics.py`), in the DLE seed's form.

The file defines either

- `class MetricsCalculator` (the seed's name; subclassing `BaseMetricsCalculator` below is optional) whose
  `calc(self, *, ids, y_pred, x, y_real) -> Dict[str, float]` gets the whole dump at once, or
- a module-level function `calc(*, ids, y_pred, x, y_real) -> Dict[str, float]`.

`ids` is the list of sample ids, `y_pred` {output name: array}, `x` {input name: array} or None (the dump
has inputs only with --dump-inputs), `y_real` {label name: array} or None (labels only with --dump-labels);
arrays have the batch axis first and rows in the same order. A `calc` may leave out parameters it does not
use. It returns {metric name: number}; the names go into the CSV beside the built-in metrics and can be
bounded with --threshold.
"""
from __future__ import annotations

import abc
import inspect
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional

import numpy as np

from ..watchdog import user_stage
from ..data.dump import Dump
from ..sources.userfile import first_line as _first_line, import_file
from ..errors import UserError

CLASS_NAME = "MetricsCalculator"
FUNCTION_NAME = "calc"
ARGUMENTS = ("ids", "y_pred", "x", "y_real")


class MetricsFileError(UserError, ValueError):
    """A metrics file that cannot be used: does not import, defines no calc, raises, or returns non-numbers."""


class BaseMetricsCalculator(abc.ABC):
    """The seed's base class, for metric files ported from DeepLearningExamples (import it from here)."""

    @abc.abstractmethod
    def calc(self, *, ids: List[Any], y_pred: Dict[str, np.ndarray], x: Optional[Dict[str, np.ndarray]],
             y_real: Optional[Dict[str, np.ndarray]]) -> Dict[str, float]:
        """Metric name -> value over every sample of the dump."""


MetricsFn = Callable[..., Mapping[str, Any]]


def load_metrics_file(path: str | Path) -> MetricsFn:
    """The file's calc, bound and ready to call with keyword arguments; MetricsFileError otherwise."""
    path = Path(path)
    try:
        module = import_file(path, "metrics file", MetricsFileError,
                             f"it must define class {CLASS_NAME} or {FUNCTION_NAME}()")
    except MetricsFileError as err:
        if "deployment_toolkit.core" not in str(err):
            raise
        raise MetricsFileError(f"{err}; import BaseMetricsCalculator from deployment_toolkit.metrics.user "
                               "instead") from err
    cls = getattr(module, CLASS_NAME, None)
    if inspect.isclass(cls):
        try:
            instance = cls()
        except Exception as err:  # noqa: BLE001 - the user's constructor may raise anything
            raise MetricsFileError(f"{path}: {CLASS_NAME}() raised {_first_line(err)}") from err
        fn = getattr(instance, FUNCTION_NAME, None)
        where = f"{CLASS_NAME}.{FUNCTION_NAME}"
    else:
        fn = getattr(module, FUNCTION_NAME, None)
        where = FUNCTION_NAME
    if not callable(fn):
        raise MetricsFileError(f"metrics file {path} defines neither class {CLASS_NAME} with a {FUNCTION_NAME}() "
                               f"method nor a function {FUNCTION_NAME}(*, ids, y_pred, x, y_real)")
    params = inspect.signature(fn).parameters
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    unknown = [n for n, p in params.items() if n not in ARGUMENTS and p.default is inspect.Parameter.empty
               and p.kind not in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)]
    if unknown:
        raise MetricsFileError(f"{path}: {where} asks for {unknown}; it is called with keywords {list(ARGUMENTS)}")
    accepted = ARGUMENTS if takes_all else tuple(n for n in ARGUMENTS if n in params)

    def call(**kwargs: Any) -> Mapping[str, Any]:
        try:
            with user_stage(f"computing {path.name}:{where}"):
                return fn(**{k: v for k, v in kwargs.items() if k in accepted})
        except Exception as err:  # noqa: BLE001
            raise MetricsFileError(f"{path}: {where} raised {_first_line(err)}") from err

    call.__name__ = f"{path.name}:{where}"
    return call


def user_metrics(fn: MetricsFn, dump: Dump, labels: Mapping[str, np.ndarray] | None = None) -> dict[str, float]:
    """Run the user's calc over the whole dump (labels from `labels` when given, e.g. a reference's); the
    values as floats. Non-numeric values and empty results are MetricsFileError."""
    y_real = dict(labels) if labels is not None else dict(dump.labels)
    result = fn(ids=dump.ids.tolist(), y_pred=dict(dump.outputs), x=dict(dump.inputs) or None,
                y_real=y_real or None)
    name = getattr(fn, "__name__", "calc")
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


__all__ = ["BaseMetricsCalculator", "MetricsFileError", "load_metrics_file", "user_metrics"]
