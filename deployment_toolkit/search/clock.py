"""The clock of one search: --max-minutes, the measured time of a point, and the time kept back for what must still
fit in the limit (the baseline's noise samples, the final re-measurement and a finalist's step down).

Every time-dependent decision of the search reads one of three answers: the time elapsed, the time a point takes
and the time an open-loop rate takes. The clock keeps each answer it gives, in order (`answers`), and the
checkpoint stores them with the settings (store.SearchStore.clock_log). A rerun of the same search (same identity,
same settings) is given the same answers (`replay`): it takes the same decisions, asks for exactly the points and
rates the first run measured, and so measures nothing. Answering it live instead made it explore further than the
first run (a replayed point takes ~0 s, so --max-minutes looked untouched) and re-measure for as long again. Where
the replay runs out (the first run was interrupted) or the search asks something else (a failure from the
environment is measured again), the clock answers live from then on, its elapsed time continuing from the last
replayed one: an interrupted search resumes with the time it had left."""
from __future__ import annotations

import json
import logging
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

from .trials import SearchSettings

ELAPSED, POINT, RATE = "elapsed", "point", "rate"  # the kinds of answer a clock gives
ASKED = {ELAPSED: "the time elapsed", POINT: "the time a point takes", RATE: "the time a rate takes"}
log = logging.getLogger(__name__)


def settings_key(settings: SearchSettings) -> str:
    """The settings a clock log was recorded under, as canonical JSON: a log is replayed only under the same ones
    (another --max-minutes or --max-configs asks other questions)."""
    return json.dumps(asdict(settings), sort_keys=True, default=str, separators=(",", ":"))


@dataclass
class SearchClock:
    """`started`: the time.monotonic() the limit counts from (set by `start` when not given); `point_seconds`:
    how long each point measured in this run took; `replay`: the answers of an earlier run of the same search, given
    again in order; `answers`: every answer given in this run (replayed or live), what the checkpoint keeps."""

    settings: SearchSettings
    started: float | None = None
    point_seconds: list[float] = field(default_factory=list)
    rate_seconds: list[float] = field(default_factory=list)
    expected_rate_s: float = 0.0  # a rate's time by its window, once the rates are known (capacity.expect_rates)
    replay: Sequence[Sequence] | None = None
    answers: list[list] = field(default_factory=list)
    replayed: int = 0  # answers taken from `replay`
    diverged: str = ""  # where the replay ended before its last answer, and why (said once, in the log)
    _offset: float = 0.0  # added to the live elapsed time once a replay has run out

    @classmethod
    def kept_in(cls, store: Any, settings: SearchSettings, started: float | None = None) -> "SearchClock":
        """A clock whose answers the checkpoint (store.SearchStore) keeps, replaying those it holds for these
        settings."""
        key = settings_key(settings)
        clock = cls(settings, started, replay=store.clock_replay(key))
        store.attach_clock(clock, key)
        return clock

    def start(self) -> float:
        self.started = time.monotonic() if self.started is None else self.started
        return self.started

    def wall_s(self) -> float:
        """The real time since the start (what this run took, replayed or not)."""
        return time.monotonic() - self.started

    def elapsed_s(self) -> float:
        """The time the limit counts: replayed, else live."""
        return self._answer(ELAPSED, lambda: self.wall_s() + self._offset)

    @property
    def replaying(self) -> bool:
        return self.replay is not None

    def _answer(self, kind: str, live: Callable[[], float]) -> float:
        """The next replayed answer when it is of this kind, else (and from then on) the live one."""
        if self.replay is not None:
            i = len(self.answers)
            if i < len(self.replay) and self.replay[i][0] == kind:
                value = float(self.replay[i][1])
                self.answers.append([kind, value])
                self.replayed += 1
                return value
            if i < len(self.replay):
                self.diverged = (f"answer {i + 1} of {len(self.replay)}: this run asked for {ASKED[kind]} where the "
                                 f"first run had asked for {ASKED.get(self.replay[i][0], self.replay[i][0])}")
                log.info(f"checkpoint: the replay of the first run's decisions ended at {self.diverged}; the search "
                         "decides live from here, and may measure what the first run did not")
            self._go_live()
        value = float(live())
        self.answers.append([kind, value])
        return value

    def _go_live(self) -> None:
        """The replay ends: the elapsed time goes on from the last replayed one (never back in time)."""
        last = next((v for k, v in reversed(self.answers) if k == ELAPSED), 0.0)
        self.replay = None
        self._offset = max(0.0, last - self.wall_s())

    def record(self, seconds: float) -> None:
        self.point_seconds.append(seconds)

    def record_rate(self, seconds: float) -> None:
        """An open-loop rate's time (measured or read back: read back ones take ~0 s and are not counted)."""
        if seconds > 0.5:
            self.rate_seconds.append(seconds)

    def rate_point_s(self) -> float:
        """The time an open-loop rate takes: the median of those measured, else the longest of the settings'
        estimate, the expected one (its window once the rate is known) and the closed-loop points' measured time
        (all perf_analyzer runs of a few windows; on a slow model the windows stretch, and the settings' estimate
        alone put a search 0.9 min past its limit)."""
        return self._answer(RATE, self._rate_point_s_live)

    def _rate_point_s_live(self) -> float:
        recent = self.rate_seconds[-10:]
        return statistics.median(recent) if recent else max(self.settings.rate_point_s, self.expected_rate_s,
                                                              self._point_s_live())

    def point_s(self) -> float:
        """The time a point takes: the median of the last ten, so that one slow point (an unstable window
        measured again) does not make every later reserve look twice as large and stop the sweeps early."""
        return self._answer(POINT, self._point_s_live)

    def _point_s_live(self) -> float:
        recent = self.point_seconds[-10:]
        return statistics.median(recent) if recent else 0.0

    # ---- the limit --------------------------------------------------------------------------
    def seconds_past_limit(self) -> float:
        if self.settings.max_minutes is None:
            return 0.0
        return self.elapsed_s() - self.settings.max_minutes * 60.0

    def time_left_s(self) -> float:
        s = self.settings
        if s.max_minutes is None:
            return float("inf")
        return s.max_minutes * 60.0 - s.finish_reserve_s - self.elapsed_s()

    def out_of_time(self, reserve_s: float) -> str:
        """Why a sweep must stop before its next point ("" if it need not): that point and the `reserve_s`
        kept for later steps no longer fit in --max-minutes."""
        left = self.time_left_s()
        if left >= reserve_s + self.point_s():
            return ""
        return (f"--max-minutes {self.settings.max_minutes:g}: stopped with {max(left, 0.0) / 60:.1f} min left, "
                "kept for the steps after it")

    def fits(self, points: int) -> bool:
        """`points` more points fit in --max-minutes (at the measured time of a point)."""
        return self.time_left_s() >= points * self.point_s()

    # ---- reserves ---------------------------------------------------------------------------
    def final_points(self, finalists: int, step_down: bool) -> int:
        """Points of the final re-measurement: fresh samples of every finalist, and one step down of one where a
        finalist may need it (`Judge.step_down_possible`)."""
        return (finalists + (1 if step_down else 0)) * self.settings.confirm_samples

    def final_reserve_s(self, finalists: int, step_down: bool) -> float:
        """The time of the final re-measurement of `finalists` configs."""
        return self.final_points(finalists, step_down) * self.point_s()

    def baseline_reserve_s(self, step_down: bool) -> float:
        """The baseline keeps time for its noise samples and for its own final re-measurement."""
        return (self.settings.noise_repeats + self.final_points(1, step_down)) * self.point_s()

    def confirmation_reserve_s(self, challengers: int, default: bool, step_down: bool) -> float:
        """Time to keep for the final re-measurement if one more config is measured: at most two challengers
        (`challengers` within the budget so far, and the next one) and the default (when it is within it),
        each with fresh samples."""
        return self.final_reserve_s(min(2, challengers + 1) + (1 if default else 0), step_down)

    def candidate_s(self, points_per_challenger: list[int]) -> float:
        """Points a challenger takes (as many as the challengers so far took on average, else the fewest a sweep
        near the incumbent's best can take) times the time a point takes."""
        points = sum(points_per_challenger) / len(points_per_challenger) if points_per_challenger else 2.0
        return points * self.point_s()


__all__ = ["ELAPSED", "POINT", "RATE", "SearchClock", "settings_key"]
