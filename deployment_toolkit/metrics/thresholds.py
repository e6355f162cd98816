"""Thresholds on metrics: `metric>=x` strings, YAML files and mappings read into bounds, and the metrics judged
against them (a bound on a metric that was not computed is an error: a typo must not pass silently)."""
from __future__ import annotations

import difflib
import math
import operator
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, Union

from ..errors import ToolkitError, UserError

ThresholdsLike = Union[Mapping[str, Any], Sequence[Union[str, "Threshold"]], str, Path]


class ThresholdSyntaxError(UserError, ValueError):
    """A threshold that does not read as `<metric><op><number>` with op one of >=, <=, >, <, ==."""


class UnknownMetricError(UserError, ValueError):
    """Thresholds naming metrics that were not computed: a typo must not pass silently."""


class ThresholdsFailed(ToolkitError):
    """Raised by calculate_metrics(..., thresholds=...) when a metric misses its bound."""

    def __init__(self, failures: list[str], metrics: dict[str, float]):
        super().__init__("metrics out of bounds:\n  " + "\n  ".join(failures))
        self.failures = failures
        self.metrics = metrics


_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq,
}
_BOUND_RE = re.compile(r"^\s*(>=|<=|==|>|<)\s*(\S+)\s*$")
_THRESHOLD_RE = re.compile(r"^\s*([^<>=\s]+)\s*(>=|<=|==|>|<)\s*(\S+)\s*$")


@dataclass(frozen=True)
class Threshold:
    metric: str
    op: str
    bound: float

    def passes(self, value: float) -> bool:
        """NaN never passes: a broken run must not satisfy a bound by accident."""
        return not math.isnan(value) and _OPS[self.op](value, self.bound)

    @property
    def text(self) -> str:
        return f"{self.op} {self.bound:g}"


def _bound(metric: str, op: str, number: str) -> Threshold:
    try:
        value = float(number)
    except ValueError:
        raise ThresholdSyntaxError(f"threshold for {metric!r}: {number!r} is not a number") from None
    if math.isnan(value):
        raise ThresholdSyntaxError(f"threshold for {metric!r}: the bound cannot be NaN")
    return Threshold(metric, op, value)


def parse_threshold(text: str) -> Threshold:
    """'dice_mean>=0.9' -> Threshold('dice_mean', '>=', 0.9) (the CLI's --threshold form)."""
    m = _THRESHOLD_RE.match(text)
    if not m:
        raise ThresholdSyntaxError(
            f"cannot read threshold {text!r}; write e.g. 'dice_mean>=0.9' or 'max_abs_err<=1e-4'"
        )
    return _bound(m.group(1), m.group(2), m.group(3))


def _parse_entry(metric: str, spec: Any) -> list[Threshold]:
    if isinstance(spec, str):
        m = _BOUND_RE.match(spec)
        if not m:
            raise ThresholdSyntaxError(
                f"threshold for {metric!r}: cannot read {spec!r}; write e.g. '>=0.9' or '<=1e-4'"
            )
        return [_bound(metric, m.group(1), m.group(2))]
    if isinstance(spec, Mapping):  # {min: 0.9, max: 1.0}
        unknown = set(spec) - {"min", "max"}
        if unknown or not spec:
            raise ThresholdSyntaxError(f"threshold for {metric!r}: use keys min/max, got {sorted(map(str, spec))}")
        return [_bound(metric, ">=" if k == "min" else "<=", str(v)) for k, v in spec.items()]
    if isinstance(spec, (list, tuple)):
        return [t for item in spec for t in _parse_entry(metric, item)]
    raise ThresholdSyntaxError(
        f"threshold for {metric!r}: {spec!r} is ambiguous; write a quoted bound such as \">={spec}\" or \"<={spec}\""
    )


def load_thresholds(path: str | Path) -> list[Threshold]:
    """Thresholds from YAML: `metric: ">=0.9"` (quote it: a bare >= starts a YAML block scalar),
    `metric: {min: 0.9}`, or a list of such bounds. A top-level `thresholds:` key is unwrapped."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ThresholdSyntaxError(f"thresholds file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ThresholdSyntaxError(
            f"{path} is not valid YAML ({err.__class__.__name__}); quote bounds: dice_mean: \">=0.9\""
        ) from err
    if isinstance(data, Mapping) and set(data) == {"thresholds"}:
        data = data["thresholds"]
    if not isinstance(data, Mapping):
        raise ThresholdSyntaxError(f"{path} must map metric names to bounds, e.g. max_abs_err: \"<=1e-4\"")
    return parse_thresholds(data)


def parse_thresholds(thresholds: ThresholdsLike | None) -> list[Threshold]:
    """Normalize a mapping {metric: bound}, a list of 'metric>=x' strings / Thresholds, or a YAML path."""
    if thresholds is None:
        return []
    if isinstance(thresholds, (str, Path)):
        return load_thresholds(thresholds)
    if isinstance(thresholds, Mapping):
        return [t for metric, spec in thresholds.items() for t in _parse_entry(str(metric), spec)]
    return [t if isinstance(t, Threshold) else parse_threshold(t) for t in thresholds]


def check_thresholds(metrics: Mapping[str, float], thresholds: ThresholdsLike | None) -> list[str]:
    """One message per bound a metric misses, e.g. 'dice_mean = 0.81 fails >= 0.9'. Raises
    UnknownMetricError when a threshold names a metric that was not computed."""
    parsed = parse_thresholds(thresholds)
    unknown = sorted({t.metric for t in parsed if t.metric not in metrics})
    if unknown:
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, list(metrics), n=2)
            hints.append(f"{name!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
        raise UnknownMetricError(
            f"thresholds name metrics that were not computed: {', '.join(hints)}; computed: {', '.join(metrics)}"
        )
    return [
        f"{t.metric} = {metrics[t.metric]:.6g} fails {t.text}" for t in parsed if not t.passes(float(metrics[t.metric]))
    ]


__all__ = ["Threshold", "ThresholdSyntaxError", "ThresholdsFailed", "ThresholdsLike", "UnknownMetricError",
           "check_thresholds", "load_thresholds", "parse_threshold", "parse_thresholds"]
