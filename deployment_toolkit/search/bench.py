"""Measuring points for the search: each point from the checkpoint when it is there, else measured through the
`Measurer` (its config loaded first: one at a time, or the finalists together while `keep_loaded`),
and one retry of a piece of work after a failure."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, TypeVar

from .clock import SearchClock
from .progress import Progress
from .space import Candidate
from .store import Point, SearchStore
from .trials import CandidateFailed, Measurer, Trial

T = TypeVar("T")
if TYPE_CHECKING:
    from ..perf.openloop.ratepoint import RatePoint


class Bench:
    """The measurer, the checkpoint and the configs loaded now; counts the points measured in this run."""

    def __init__(self, measurer: Measurer, store: SearchStore, clock: SearchClock, progress: Progress):
        self.measurer = measurer
        self.store = store
        self.clock = clock
        self.progress = progress
        self.loaded: list[Candidate] = []  # one while exploring; the finalists together while re-measuring
        self.keep_loaded = False
        self.measured_points = 0  # measured in this run, not read from the checkpoint
        self.measured_rates = 0  # open-loop rates measured in this run
        self.reused_rates = 0  # ... and read back from the result folder

    def point(self, trial: Trial, concurrency: int, sample: int) -> Point:
        """A measured point: from the checkpoint when there (its measured time still tells the clock what a point
        takes), else measured now (loading the config first)."""
        stored = self.store.get(trial.key, concurrency, sample)
        if stored is not None:
            if stored.seconds > 0:
                self.clock.record(stored.seconds)
            return stored
        self._ensure_loaded(trial)
        self.progress.postfix(f"{trial.candidate.slug} c={concurrency}" + (f" #{sample + 1}" if sample else ""))
        t0 = time.monotonic()
        point = self.measurer.measure(trial.candidate, concurrency, sample, trial.key)
        point.seconds = point.seconds or (time.monotonic() - t0)
        self.clock.record(point.seconds)
        self.measured_points += 1
        self.store.put(point)
        return point

    def _ensure_loaded(self, trial: Trial) -> None:
        if trial.candidate not in self.loaded:
            if not self.keep_loaded:
                self.release()
            self.progress.postfix(f"loading {trial.candidate.slug}")
            self.measurer.load(trial.candidate)
            self.loaded.append(trial.candidate)

    def rate_point(self, trial: Trial, rate: float, n: int) -> "RatePoint":
        """One open-loop rate of search `n`: the stored one when the measurer has it (read without loading the
        config), else measured now, the config loaded first (the measurer stores it)."""
        stored_rate = getattr(self.measurer, "stored_rate", None)
        stored = stored_rate(trial.candidate, rate, n, trial.key) if stored_rate is not None else None
        if stored is not None:
            self.reused_rates += 1
            return stored
        self._ensure_loaded(trial)
        self.progress.postfix(f"{trial.candidate.slug} {rate:g}/s #{n}")
        t0 = time.monotonic()
        point = self.measurer.rate_point(trial.candidate, rate, n, trial.key)
        self.clock.record_rate(time.monotonic() - t0)
        self.measured_rates += 1
        self.store.save_clock()  # what the clock answered up to this rate, kept with it
        return point

    def samples(self, trial: Trial, concurrency: int, n: int) -> list[Point]:
        return [self.point(trial, concurrency, s) for s in range(n)]

    def release(self) -> None:
        while self.loaded:
            self.measurer.release(self.loaded.pop())

    def retrying(self, trial: Trial, work: Callable[[], T]) -> T:
        """Run `work` again once after a failure (a server killed from outside, a perf_analyzer hiccup): the
        points measured before the failure are in the checkpoint and are not measured again."""
        try:
            return work()
        except CandidateFailed as err:
            self.release()
            self.progress.say(f"  {trial.candidate.slug}: {err}; trying once more")
            return work()


__all__ = ["Bench"]
