"""The search's console: a tqdm bar of configs (its total adjusted as dimensions end early), the time left under
--max-minutes (tqdm's ETA assumes every config runs), and its log lines."""
from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any, Callable

from .stats import Noise

log = logging.getLogger(__name__)


class Progress:
    def __init__(self, enabled: bool = True, log: Callable[[str], None] | None = None,
                 max_minutes: float | None = None):
        self.enabled = enabled
        self.log = log
        self.max_minutes = max_minutes
        self.started: float | None = None
        self._bar = None

    def open(self, total_guess: int) -> None:
        if not self.enabled:
            return
        from tqdm import tqdm

        self._bar = tqdm(total=total_guess, desc="config search", unit="config", dynamic_ncols=True, file=sys.stderr)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    def step(self) -> None:
        if self._bar is not None:
            if self._bar.n + 1 > self._bar.total:
                self._bar.total = self._bar.n + 1
            self._bar.update(1)

    def total(self, delta: int) -> None:
        if self._bar is not None:
            self._bar.total = max(self._bar.n, self._bar.total + delta)
            self._bar.refresh()

    def postfix(self, text: str) -> None:
        """What is being measured, and the time left under --max-minutes."""
        if self._bar is not None:
            if self.max_minutes is not None and self.started is not None:
                left = self.max_minutes - (time.monotonic() - self.started) / 60.0
                text = f"{text}{', ' if text else ''}{max(0.0, left):.1f} of {self.max_minutes:g} min left"
            self._bar.set_postfix_str(text, refresh=True)

    def say(self, text: str) -> None:
        if self.log is not None:
            self.log(text)
        elif self._bar is not None:
            self._bar.write(text, file=sys.stderr)
        else:
            log.info(text)


def noisy_host_warning(noise: Noise, cores: int) -> str:
    """Why a search cannot rank configs on this host right now, and what to do."""
    try:
        load = os.getloadavg()[0]
        busy = f"; 1-minute load average {load:.1f} on {cores} cores" + (" - other processes compete for the CPU"
                                                                         if load > cores else "")
    except OSError:  # pragma: no cover
        busy = ""
    return (f"the baseline's throughput varies by {noise.throughput * 100:.0f}% between repeated measurements{busy}: "
            f"only gains above that count. Run the search on a quiet host, or lengthen the windows "
            f"(--measurement-interval)")


def trial_line(t: Any, best: Any) -> str:
    """One config's line once measured (or why not): a trials.Trial and its best point within the budget."""
    head = f"[{t.stage}] {t.candidate.label()}"
    if t.status != "measured":
        return f"{head}: {t.status} - {t.reason}"
    reused = "" if t.measured_points else " (all points from the checkpoint)"
    if best is None:
        return f"{head}: no point within budget; {t.sweep.stop_reason}{reused}"
    return (f"{head}: {best.throughput:.1f} inf/s at concurrency {best.concurrency} (p99 {best.p99_ms:.1f} ms); "
            f"stopped: {t.sweep.stop_reason}{reused}")


def format_seconds(s: float) -> str:
    return f"{s / 60:.1f} min" if s >= 90 else f"{s:.0f} s"
