"""perf_analyzer ran and failed for a reason other than an unstable measurement (a missing or broken
binary is binaries.PerfAnalyzerNotFound)."""
from __future__ import annotations

from ...errors import UserError


class PerfAnalyzerError(UserError, RuntimeError):
    """perf_analyzer ran but failed for a reason other than an unstable measurement."""

    def __init__(self, message: str, *, returncode: int | None = None, output: str = "", connection: bool = False):
        super().__init__(message)
        self.returncode = returncode
        self.output = output
        self.connection = connection
