"""A load level as one tagged value (issue 37): closed loop with N requests in flight, open loop at a rate, or open
loop on a schedule file of send intervals. Code that drives perf_analyzer takes one `Load` and matches on its kind,
so "exactly one of concurrency or request rate" is a type, not a check at run time."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from ..errors import UserInputError
from .enums import LoadMode


@dataclass(frozen=True)
class Concurrency:
    """Closed loop: `clients` requests always in flight."""
    clients: int
    mode = LoadMode.CONCURRENCY

    def __post_init__(self) -> None:
        if isinstance(self.clients, bool) or not isinstance(self.clients, int) or self.clients < 1:
            raise UserInputError(f"concurrency must be a whole number >= 1 (requests in flight), got {self.clients!r}")

    @property
    def level(self) -> float:
        """The number a sweep's table shows for this level."""
        return float(self.clients)


@dataclass(frozen=True)
class RequestRate:
    """Open loop: requests sent at `per_second` on average, whatever the answers."""
    per_second: float
    mode = LoadMode.REQUEST_RATE

    def __post_init__(self) -> None:
        _check_rate(self.per_second)

    @property
    def level(self) -> float:
        return float(self.per_second)


@dataclass(frozen=True)
class Schedule:
    """Open loop driven by a schedule file of send intervals (perf_analyzer's --request-intervals); `per_second`
    is its nominal rate, the level tables and capacities are keyed by."""
    intervals: Path
    per_second: float
    mode = LoadMode.SCHEDULE

    def __post_init__(self) -> None:
        object.__setattr__(self, "intervals", Path(self.intervals))
        _check_rate(self.per_second)

    @property
    def level(self) -> float:
        return float(self.per_second)


Load = Union[Concurrency, RequestRate, Schedule]


def _check_rate(value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise UserInputError(f"a request rate must be a finite number > 0 (inferences/s), got {value!r}")


def is_open_loop(load: Load) -> bool:
    return not isinstance(load, Concurrency)


__all__ = ["Concurrency", "Load", "RequestRate", "Schedule", "is_open_loop"]
