"""perf_analyzer ran and failed for a reason other than an unstable measurement (a missing or broken
binary is binaries.PerfAnalyzerNotFound)."""
from __future__ import annotations

from ...errors import UserError


# perf_analyzer's words when no request finished within a measurement window (one request slower than the window)
EMPTY_WINDOW = "No valid requests recorded within time interval"


class PerfAnalyzerError(UserError, RuntimeError):
    """perf_analyzer ran but failed for a reason other than an unstable measurement."""

    def __init__(self, message: str, *, returncode: int | None = None, output: str = "", connection: bool = False):
        super().__init__(message)
        self.returncode = returncode
        self.output = output
        self.connection = connection


class PerfAnalyzerTimeout(PerfAnalyzerError):
    """perf_analyzer did not finish within its time limit: the server could not answer what it was sent in time
    (an overloaded rate, a hung step). In open loop that is the rate's failing verdict, not a broken measurement."""
