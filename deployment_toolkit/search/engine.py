"""The search: coordinate descent over serving dimensions, measured on the real server, judged against noise.

Order (cheapest and most decisive first): the default config (the baseline, measured repeatedly to estimate
the noise) -> other formats -> instances x runtime threads (never more threads than cores unless allowed) ->
max batch size -> preferred batch sizes -> max queue delay. A candidate replaces the incumbent only when
its score beats it by more than the noise; along an ordered dimension the first step that does not ends
that dimension. A level counts as within the budget only with room for the p99 noise measured on the
baseline (`stats.holds_budget`). At the end the best two non-dominated configs and the default are measured
again with fresh samples, in turns; the time for that (and for one step down, while a finalist may need one)
is reserved up front from the measured time of a point, so --max-minutes never squeezes it out. A finalist
whose fresh samples do not hold the budget steps down before it can be named. The winner must beat the
default by more than the noise with its whole spread, or the default is declared as good. Measurement goes
through a `Measurer` (the real server in `triton.py`, a fake in the unit tests).

Over 400 lines on purpose: one class whose steps (exploration, noise, knee, final re-measurement, decision, time
reserves) read and write the state of one search (trials, incumbent, noise, checkpoint, clock); its contracts,
console and per-candidate sweep live in trials.py, progress.py and sweep.py.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import replace
from typing import Callable, TypeVar

from .progress import Progress, noisy_host_warning
from .space import (
    Candidate,
    default_candidate,
    instance_thread_pairs,
    max_batch_ladder,
    preferred_options,
    queue_delay_ladder,
)
from .stats import Gain, Noise, Spread, holds_budget, relative_gain, worst_p99
from .store import Point, SearchStore
from .sweep import (
    SweepPolicy,
    SweepResult,
    best_point,
    budget_level,
    narrow_knee,
    score,
    sweep_concurrency,
    sweep_near,
)
from .trials import (
    CandidateFailed,
    CandidateRefused,
    Confirmation,
    Decision,
    FormatInfo,
    Measurer,
    SearchError,
    SearchOutcome,
    SearchSettings,
    Trial,
    config_problem,
)


T = TypeVar("T")
NOISY = 0.20  # above this relative noise the search warns that the host is too busy to rank configs
OVERRUN_STEPS = 3  # step-downs past --max-minutes when otherwise no finalist would be named
FINAL_SAMPLE = 100  # sample numbers of the final re-measurement start here: never the sweep's or the noise's


class Search:
    def __init__(self, formats: list[FormatInfo], measurer: Measurer, store: SearchStore, settings: SearchSettings,
                 *, progress: bool = True, log: Callable[[str], None] | None = None, started: float | None = None):
        """`started`: the time.monotonic() the time limit counts from (default: when `run` begins), so that a
        command can count its own start-up (the server, the artifacts) against --max-minutes."""
        self.formats = {f.format: f for f in formats}
        self.order = [f.format for f in formats]
        self.measurer = measurer
        self.store = store
        self.s = settings
        self.trials: dict[str, Trial] = {}
        self.notes: list[str] = []
        self.noise = Noise(settings.min_noise, settings.min_noise, 0)
        self._noise_known = False
        self.incumbent: Trial | None = None
        self.default: Trial | None = None
        self.loaded: list[Candidate] = []  # one while exploring; the finalists together while re-measuring
        self._keep_loaded = False
        self.measured_points = 0
        self.point_seconds: list[float] = []
        self.stopped = ""
        self.started = started
        self.progress = Progress(progress, log, settings.max_minutes)

    # ---- public -----------------------------------------------------------------------------
    def run(self) -> SearchOutcome:
        self.started = time.monotonic() if self.started is None else self.started
        self.progress.started = self.started
        self._open_bar()
        try:
            self._explore()
            decision = self._decide()
        finally:
            self._release()
            self.progress.close()
        return SearchOutcome(self.s, list(self.trials.values()), decision, self.noise, self.notes,
                             self.measured_points, self.store.reused_points, time.monotonic() - self.started,
                             self.stopped)

    # ---- exploration ------------------------------------------------------------------------
    def _explore(self) -> None:
        usable = [f for f in self.order if not self.formats[f].error]
        for f in self.order:
            if self.formats[f].error:
                t = self._trial(default_candidate(f, 0), "format")
                t.status, t.reason = "unavailable", self.formats[f].error
        if not usable:
            raise SearchError("no format is available to search: " +
                              "; ".join(f"{f}: {self.formats[f].error}" for f in self.order))
        first = usable[0]
        base = self._evaluate(default_candidate(first, self._max_batch(first)), "baseline")
        if base.status != "measured":
            raise SearchError(f"the default config ({base.candidate.label()}) could not be measured: {base.reason}")
        self.default = self.incumbent = base
        self._estimate_noise(base)

        for f in usable[1:]:
            self._challenge(self._evaluate(default_candidate(f, self._max_batch(f)), "format"))

        start = self.incumbent.candidate
        for inst, threads in instance_thread_pairs(self.s.cores, self.s.allow_oversubscribe):
            cand = start.with_(instances=inst, threads=threads)
            if cand != start:
                self._challenge(self._evaluate(cand, "instances x threads"))

        skip = self._batching_skip_reason()
        if skip:
            self.notes.append(f"batching dimensions not explored: {skip}")
            self.progress.total(-self._ladder_sizes())
            return
        inc = self.incumbent.candidate
        self._ladder("max batch size", [
            inc.with_(max_batch_size=b, preferred_batch_sizes=tuple(p for p in inc.preferred_batch_sizes if p <= b))
            for b in max_batch_ladder(self._max_batch(inc.format))])
        inc = self.incumbent.candidate
        self._ladder("preferred batch sizes", [inc.with_(preferred_batch_sizes=p)
                                               for p in preferred_options(inc.max_batch_size)])
        inc = self.incumbent.candidate
        self._ladder("max queue delay", [inc.with_(max_queue_delay_us=q)
                                         for q in queue_delay_ladder(self.s.budget_ms, self.s.queue_delays_us)])

    def _batching_skip_reason(self) -> str:
        if self.s.objective == "latency":
            return "the latency objective measures one request in flight, which the batcher never groups"
        if self.incumbent.candidate.max_batch_size < 2:
            return "the model does not batch (max batch size < 2)"
        if not any(self._best(t) for t in self.trials.values()):
            return "no configuration met the budget even at concurrency 1, and batching cannot lower that latency"
        return ""

    def _ladder(self, name: str, candidates: list[Candidate]) -> None:
        """Ordered values: stop at the first measured step that does not beat the incumbent beyond noise."""
        for i, cand in enumerate(candidates):
            trial = self._evaluate(cand, name)
            if trial.status != "measured":
                continue
            if self._challenge(trial):
                continue
            rest = candidates[i + 1:]
            if rest:
                gain = self._gain_text(trial, self.incumbent)
                self.notes.append(f"{name}: stopped after {cand.label()} ({gain}, noise "
                                  f"{self._noise_for_objective() * 100:.1f}%); not tried: {len(rest)} more value(s)")
                self.progress.total(-len(rest))
            return

    def _challenge(self, trial: Trial) -> bool:
        if trial.status == "measured" and self._better(trial, self.incumbent):
            self.progress.say(f"  -> new incumbent: {trial.candidate.label()} "
                              f"({self._gain_text(trial, self.incumbent)})")
            self.incumbent = trial
            return True
        return False

    # ---- one candidate ----------------------------------------------------------------------
    def _trial(self, cand: Candidate, stage: str) -> Trial:
        key = self._store_key(cand)
        if cand.key not in self.trials:
            self.trials[cand.key] = Trial(cand, stage, key)
        return self.trials[cand.key]

    def _evaluate(self, cand: Candidate, stage: str) -> Trial:
        known = cand.key in self.trials
        trial = self._trial(cand, stage)
        if known:
            return trial
        why = self._why_not(trial)
        if why:
            trial.status, trial.reason = why
            self.progress.say(f"[{stage}] {cand.label()}: {trial.status} - {trial.reason}")
            self.progress.step()
            return trial
        t0 = time.monotonic()
        before = self.measured_points
        policy = self._policy()
        inc = self.incumbent
        # the incumbent at each level, at its median where that level was measured repeatedly
        reference = ({p.concurrency: self._median_point(inc, p) for p in inc.sweep.points} if inc and inc.sweep
                     else None)
        start = self._best(inc) if inc else None
        reserve = self._baseline_reserve_s if self.default is None else self._confirmation_reserve_s
        stop = lambda: self._out_of_time(reserve())  # noqa: E731

        def sweep() -> SweepResult:
            measure = lambda c: self._point(trial, c, 0)  # noqa: E731
            if start is None:
                return sweep_concurrency(measure, policy, reference, stop)
            return sweep_near(measure, policy, start.concurrency, reference, stop)
        try:
            trial.sweep = self._retrying(trial, sweep)
            trial.status = "measured"
        except CandidateRefused as err:
            trial.status, trial.reason = "refused", f"the server refused it: {err}"
            self.store.put_failure(trial.key, "refused", trial.reason)
        except CandidateFailed as err:
            trial.status, trial.reason = "failed", f"failed twice: {err}"
            self.store.put_failure(trial.key, "failed", trial.reason)
        finally:
            self._release()
        trial.measured_points = self.measured_points - before
        trial.seconds = time.monotonic() - t0
        self.progress.say(self._trial_line(trial))
        self.progress.step()
        return trial

    def _retrying(self, trial: Trial, work: Callable[[], T]) -> T:
        """Run `work` again once after a failure (a server killed from outside, a perf_analyzer hiccup): the
        points measured before the failure are in the checkpoint and are not measured again."""
        try:
            return work()
        except CandidateFailed as err:
            self._release()
            self.progress.say(f"  {trial.candidate.slug}: {err}; trying once more")
            return work()

    def _why_not(self, trial: Trial) -> tuple[str, str] | None:
        cand = trial.candidate
        over = cand.oversubscription(self.s.cores)
        if over and not self.s.allow_oversubscribe:
            return "oversubscribed", over + " (pass --allow-oversubscribe to measure it anyway)"
        info = self.formats[cand.format]
        if info.error:
            return "unavailable", info.error
        problem = config_problem(info.manifest, cand)
        if problem:
            return "invalid", f"build_config refused it: {problem}"
        stored = self.store.failure(trial.key)
        if stored:
            return stored["kind"], stored["reason"] + " (from the checkpoint)"
        if self.stopped:
            return "skipped", self.stopped
        counted = sum(1 for t in self.trials.values() if t.status == "measured")
        if self.s.max_configs is not None and counted >= self.s.max_configs:
            self.stopped = f"--max-configs {self.s.max_configs} reached"
            return "skipped", self.stopped
        if self.s.max_minutes is not None and self.default is not None:
            left = self._time_left_s()
            needed = self._estimate_candidate_s(trial) + self._confirmation_reserve_s()
            if needed > left:
                self.stopped = (f"--max-minutes {self.s.max_minutes:g}: {left / 60:.1f} min left, a config takes about "
                                f"{self._estimate_candidate_s(trial) / 60:.1f} min plus the final re-measurement")
                return "skipped", self.stopped
        return None

    def _point(self, trial: Trial, concurrency: int, sample: int) -> Point:
        """A measured point: from the checkpoint when there, else measured now (loading the config first)."""
        stored = self.store.get(trial.key, concurrency, sample)
        if stored is not None:
            return stored
        if trial.candidate not in self.loaded:
            if not self._keep_loaded:
                self._release()
            self.progress.postfix(f"loading {trial.candidate.slug}")
            self.measurer.load(trial.candidate)
            self.loaded.append(trial.candidate)
        self.progress.postfix(f"{trial.candidate.slug} c={concurrency}" + (f" #{sample + 1}" if sample else ""))
        t0 = time.monotonic()
        point = self.measurer.measure(trial.candidate, concurrency, sample, trial.key)
        point.seconds = point.seconds or (time.monotonic() - t0)
        self.point_seconds.append(point.seconds)
        self.measured_points += 1
        self.store.put(point)
        return point

    def _release(self) -> None:
        while self.loaded:
            self.measurer.release(self.loaded.pop())

    # ---- noise and comparisons --------------------------------------------------------------
    def _estimate_noise(self, base: Trial) -> None:
        anchor = self._best(base) or base.sweep.points[0]
        samples = self._samples(base, anchor.concurrency, 1 + self.s.noise_repeats)
        self.noise = Noise.from_samples([p.throughput for p in samples], [p.p99_ms for p in samples],
                                        self.s.min_noise)
        self._noise_known = True
        self.progress.say(f"noise (baseline at concurrency {anchor.concurrency}, {len(samples)} samples): "
                          f"{self.noise.text()}")
        if self.noise.throughput > NOISY:
            warning = noisy_host_warning(self.noise, self.s.cores)
            self.notes.append(warning)
            self.progress.say(f"WARNING: {warning}")
        self._refine_knee(base)
        self._release()

    def _refine_knee(self, trial: Trial) -> None:
        """With the p99 noise now known, the baseline's best level may no longer hold the budget with room for
        it: narrow the knee again between the best level that does and the first one above it that does not."""
        best = self._best(trial)
        if self.s.objective != "throughput" or best is None:
            return
        above = [p for p in trial.sweep.points if p.concurrency > best.concurrency
                 and not self._holds(trial, p.concurrency)]
        if not above:
            self._resume_climb(trial, best)
            return
        bad = self._median_point(trial, min(above, key=lambda p: p.concurrency))
        if bad.concurrency - best.concurrency <= 1:
            return
        before = self.measured_points
        try:
            narrow_knee(self._extending(trial), self._policy(), best, bad, trial.sweep, self._stop_keeping_final)
        except (CandidateRefused, CandidateFailed) as err:
            self.progress.say(f"  {trial.candidate.slug}: {err} while narrowing the knee; kept what was measured")
        trial.measured_points += self.measured_points - before
        new = self._best(trial)
        self.progress.say(f"  knee with room for the p99 noise ({self.noise.p99 * 100:.1f}%): best level "
                          f"{new.concurrency if new else '-'} (was {best.concurrency})")

    def _resume_climb(self, trial: Trial, best: Point) -> None:
        """A baseline whose sweep the time limit stopped before any level broke the budget climbs on from its
        best level, now that the noise is known and the reserve may be smaller (`_step_down_possible`): the
        baseline is often the recommendation on a short limit, and its knee is worth more than a challenger."""
        if not trial.sweep.stop_reason.startswith("--max-minutes") or self.s.objective != "throughput":
            return
        before = self.measured_points
        try:
            climb = sweep_near(self._extending(trial), self._policy(), best.concurrency, None,
                               self._stop_keeping_final)
        except (CandidateRefused, CandidateFailed) as err:
            self.progress.say(f"  {trial.candidate.slug}: {err} while climbing on; kept what was measured")
            climb = None
        trial.measured_points += self.measured_points - before
        if climb is not None and self.measured_points > before:
            trial.sweep.stop_reason += f"; climbed on after the noise estimate: {climb.stop_reason}"
            new = self._best(trial)
            self.progress.say(f"  climbed on from concurrency {best.concurrency}: best level "
                              f"{new.concurrency if new else '-'} ({climb.stop_reason})")

    def _extending(self, trial: Trial) -> Callable[[int], Point]:
        """Sample 0 of `trial` at a concurrency (from the checkpoint when stored), added to its sweep when new
        there: how the knee narrowing and the climb after the noise estimate extend the baseline's sweep."""
        def take(c: int) -> Point:
            p = self._point(trial, c, 0)
            if c not in trial.sweep.by_concurrency():
                trial.sweep.points.append(p)
            return p
        return take

    def _stop_keeping_final(self) -> str:
        """The stop check of the steps after the noise estimate: keep the final re-measurement's time."""
        return self._out_of_time(self._final_points(1) * self._point_s())

    def _samples(self, trial: Trial, concurrency: int, n: int) -> list[Point]:
        return [self._point(trial, concurrency, s) for s in range(n)]

    def _policy(self) -> SweepPolicy:
        return SweepPolicy(self.s.budget_ms, self.s.objective, self.s.max_concurrency, self.s.refine_steps,
                           noise=self.noise.throughput, p99_noise=self.noise.p99)

    def _noise_for_objective(self) -> float:
        return self.noise.p99 if self.s.objective == "latency" else self.noise.throughput

    def _best(self, trial: Trial) -> Point | None:
        """The best level that holds the budget (`_holds`), at the medians of its samples."""
        if trial.status != "measured" or trial.sweep is None:
            return None
        return best_point([self._median_point(trial, p) for p in trial.sweep.points
                           if self._holds(trial, p.concurrency)], self.s.budget_ms, self.s.objective)

    def _holds(self, trial: Trial, concurrency: int) -> bool:
        """Every sample of a level within the budget, and their median with room for the p99 noise."""
        return holds_budget([p.p99_ms for p in self.store.samples(trial.key, concurrency)], self.s.budget_ms,
                            self.noise.p99)

    def _median_point(self, trial: Trial, point: Point) -> Point:
        samples = self.store.samples(trial.key, point.concurrency)
        if len(samples) < 2:
            return point
        return replace(point, sample=-1, throughput=statistics.median(p.throughput for p in samples),
                       p99_ms=statistics.median(p.p99_ms for p in samples),
                       note=f"median of {len(samples)} samples")

    def _gain(self, a: Trial, b: Trial) -> float | None:
        sa, sb = score(self._best(a), self.s.objective), score(self._best(b), self.s.objective)
        if sa is None or sb is None:
            return None
        return relative_gain(sa, sb, higher_is_better=self.s.objective == "throughput")

    def _better(self, a: Trial, b: Trial) -> bool:
        """a beats b beyond noise; with neither within budget, by the lower p99 (it may lead somewhere)."""
        pa, pb = self._best(a), self._best(b)
        if pa is None and pb is None:
            ma, mb = a.sweep.min_p99 if a.sweep else None, b.sweep.min_p99 if b.sweep else None
            return ma is not None and mb is not None and ma.p99_ms < mb.p99_ms * (1 - self.noise.p99)
        if pa is None:
            return False
        if pb is None:
            return True
        return self._gain(a, b) > self._noise_for_objective()

    def _gain_text(self, a: Trial, b: Trial) -> str:
        g = self._gain(a, b)
        what = "p99" if self.s.objective == "latency" else "throughput"
        if g is not None:
            return f"{what} {g * 100:+.1f}% vs {b.candidate.slug}"
        if self._best(a) is not None:
            return f"within budget, unlike {b.candidate.slug}"
        low_a, low_b = a.sweep.min_p99, b.sweep.min_p99
        return f"neither within budget; lowest p99 {low_a.p99_ms:.1f} ms vs {low_b.p99_ms:.1f} ms"

    # ---- final decision ---------------------------------------------------------------------
    def _confirm(self, finalists: list[Trial]) -> None:
        """Fresh samples of every finalist at its best level, taken in turns with all finalists loaded (their
        time was reserved up front). A finalist whose samples do not hold the budget (`holds_budget`: any one
        over it, or the median without room for the p99 noise) steps down to where Little's law puts its worst
        p99 at the budget and is measured again there, in the time reserved for that; one that still does not
        hold, or finds no time left to step down, is not named - unless no finalist holds: then the best of
        them steps down past --max-minutes (at most `OVERRUN_STEPS` times, and the notes say by how long), since
        a search that names nothing for want of a few seconds has wasted the whole limit."""
        budget, noise = self.s.budget_ms, self.noise.p99
        level = {t.candidate.key: self._best(t).concurrency for t in finalists}
        todo = list(finalists)
        overrun_steps, steps = 0, []
        self._keep_loaded = True
        try:
            while todo:
                taken = self._take_in_turns(todo, level)
                broke = []
                for t in todo:
                    key = t.candidate.key
                    if key not in taken:
                        continue
                    pts = taken[key]
                    p99s = [p.p99_ms for p in pts]
                    t.confirmation = Confirmation(level[key], Spread.of([p.throughput for p in pts]),
                                                  Spread.of(p99s), holds_budget(p99s, budget, noise))
                    if not t.confirmation.holds:
                        broke.append((t, p99s))
                todo = []
                held = any(t.confirmation is not None and t.confirmation.holds for t in finalists)
                broke.sort(key=lambda tp: tp[0].confirmation.throughput.median, reverse=True)
                for t, p99s in broke:
                    c, over = level[t.candidate.key], sum(p > budget for p in p99s)
                    why = (f"p99 over the budget in {over} of {len(p99s)} re-measurements" if over else
                           f"median p99 {t.confirmation.p99.median:.1f} ms without room for the p99 noise "
                           f"({noise * 100:.1f}%)")
                    if c > 1 and not self._fits((len(todo) + 1) * self.s.confirm_samples):
                        if held or todo or overrun_steps >= OVERRUN_STEPS:
                            self.progress.say(f"  {t.candidate.slug}: {why} at concurrency {c}; no time left to "
                                              "step down: not named")
                            continue
                        overrun_steps += 1
                    elif c <= 1:
                        self.progress.say(f"  {t.candidate.slug}: {why} at concurrency {c}; nothing below it: "
                                          "not named")
                        continue
                    level[t.candidate.key] = max(1, min(c - 1, budget_level(c, worst_p99(p99s, noise), budget)))
                    steps.append(f"{t.candidate.slug} {c} -> {level[t.candidate.key]}")
                    self.progress.say(f"  {t.candidate.slug}: {why} at concurrency {c}; re-measuring at "
                                      f"{level[t.candidate.key]}")
                    todo.append(t)
        finally:
            self._keep_loaded = False
            self._release()
            self.progress.postfix("")
        over_s = self._seconds_past_limit()
        if overrun_steps:
            self.notes.append(
                f"no finalist held the budget when re-measured and --max-minutes {self.s.max_minutes:g} left no "
                f"time to step down: the best one stepped down {overrun_steps} time(s) past the limit "
                f"({max(0.0, -self._time_left_s()):.0f} s over) rather than name nothing")
        elif over_s >= 1.0:
            self.notes.append(
                f"finished {over_s:.0f} s past --max-minutes {self.s.max_minutes:g}: the final re-measurement"
                + (f" and its step-down(s) ({'; '.join(steps)})" if steps else "")
                + " took longer than the time reserved for it, which is estimated from the sweep's points")

    def _take_in_turns(self, trials: list[Trial], level: dict[str, int]) -> dict[str, list[Point]]:
        """Round-robin over the trials so that a change in the host's load hits all of them alike."""
        taken: dict[str, list[Point]] = {t.candidate.key: [] for t in trials}
        for s in range(self.s.confirm_samples):
            for t in trials:
                key = t.candidate.key
                if key not in taken:
                    continue
                try:
                    taken[key].append(self._retrying(
                        t, lambda t=t, s=s: self._point(t, level[t.candidate.key], FINAL_SAMPLE + s)))
                except (CandidateRefused, CandidateFailed) as err:
                    t.detail = f"failed when re-measured: {err}"
                    t.confirmation = None
                    del taken[key]
        return taken

    def _frontier(self, trial: Trial) -> list[Point]:
        """The trial's points within budget, each level at the median of its samples."""
        return [self._median_point(trial, p) for p in trial.sweep.points if self._holds(trial, p.concurrency)]

    def _dominated_by(self, a: Trial, feasible: list[Trial]) -> Trial | None:
        """The first config with as much throughput at no more p99 for every point of `a` (ties: the earlier)."""
        def covers(xs: list[Point], ys: list[Point]) -> bool:
            return all(any(q.throughput >= p.throughput and q.p99_ms <= p.p99_ms for q in xs) for p in ys)

        order = list(self.trials.values())
        pts_a = self._frontier(a)
        for b in feasible:
            if b is a:
                continue
            pts_b = self._frontier(b)
            if covers(pts_b, pts_a) and (not covers(pts_a, pts_b) or order.index(b) < order.index(a)):
                return b
        return None

    def _decide(self) -> Decision:
        obj, budget = self.s.objective, self.s.budget_ms
        higher = obj == "throughput"
        measured = [t for t in self.trials.values() if t.status == "measured"]
        feasible = [t for t in measured if self._best(t) is not None]
        best_p99 = min((t.sweep.min_p99 for t in measured if t.sweep and t.sweep.min_p99),
                       key=lambda p: p.p99_ms, default=None)
        dominated = {t.candidate.key: d for t in feasible if (d := self._dominated_by(t, feasible))}
        ranked = sorted((t for t in feasible if t.candidate.key not in dominated),
                        key=lambda t: score(self._best(t), obj), reverse=higher)
        finalists = ranked[:2]
        if self.default in feasible and self.default not in finalists:
            finalists.append(self.default)

        self.progress.say(f"final re-measurement of {len(finalists)} config(s), {self.s.confirm_samples} samples "
                          "each, taken in turns so that a change in the host's load hits all of them alike ...")
        self._confirm(finalists)
        confirmed = [t for t in finalists if t.confirmation and t.confirmation.holds]
        self.progress.step()
        for t in finalists:
            if t.confirmation and t not in confirmed:
                t.detail = (f"p99 over budget when re-measured (or without room for the {self.noise.p99 * 100:.1f}% "
                            f"p99 noise): {t.confirmation.p99.text()} ms at concurrency "
                            f"{t.confirmation.concurrency}")
        key = (lambda t: t.confirmation.throughput.median) if higher else (lambda t: t.confirmation.p99.median)
        confirmed.sort(key=key, reverse=higher)

        decision = Decision(winner=None, default=self.default, best_p99_seen=best_p99)
        noise = self._noise_for_objective()
        if not confirmed:
            if best_p99 is None:
                decision.message = "nothing could be measured"
            elif feasible:
                decision.message = (
                    f"no configuration held p99 <= {budget:g} ms when re-measured, although "
                    f"{len(feasible)} did once (best p99 seen {best_p99.p99_ms:.2f} ms): p99 varies by "
                    f"{self.noise.p99 * 100:.0f}% between measurements on this host. Run on a quiet host or raise "
                    "--p99-ms.")
            elif best_p99.p99_ms <= budget:
                owner = next(t for t in measured if t.sweep and best_p99 in t.sweep.points)
                decision.message = (
                    f"no configuration holds p99 <= {budget:g} ms with room for the p99 noise measured on this host "
                    f"({self.noise.p99 * 100:.0f}%): the best p99 seen was {best_p99.p99_ms:.2f} ms "
                    f"({owner.candidate.label()}, concurrency {best_p99.concurrency}), which the next measurement "
                    f"may put at {best_p99.p99_ms * (1 + self.noise.p99):.1f} ms. Run on a quiet host (the noise "
                    "comes from the load), or raise --p99-ms above that.")
            else:
                owner = next(t for t in measured if t.sweep and best_p99 in t.sweep.points)
                decision.message = (
                    f"no configuration meets p99 <= {budget:g} ms: the best p99 seen was {best_p99.p99_ms:.2f} ms "
                    f"({owner.candidate.label()}, concurrency {best_p99.concurrency}, "
                    f"{best_p99.throughput:.1f} inf/s). Raise --p99-ms above that, or use a smaller model/preset.")
        else:
            top = confirmed[0]
            decision.runner_up = next((t for t in confirmed[1:] if t is not self.default), None)
            d = self.default if self.default in confirmed else None
            if top is d:
                decision.winner = d
                decision.message = "the default config is the best: no other config beat it"
            elif d is None:
                decision.winner = top
                decision.message = (f"the default config does not hold the budget "
                                    f"({self.default.detail or 'no point within it'}); the winner does")
            else:
                spread = (lambda t: t.confirmation.throughput) if higher else (lambda t: t.confirmation.p99)
                gain = Gain.between(spread(top), spread(d), higher)
                decision.gain = gain
                if gain.real(noise):
                    decision.winner = top
                    decision.message = (f"{top.candidate.slug} beats the default by {gain.text()} "
                                        f"({'throughput' if higher else 'p99'}; noise {noise * 100:.1f}%)")
                else:
                    decision.winner = d
                    decision.default_as_good = True
                    decision.runner_up = top
                    decision.message = (f"the default is as good: the best config ({top.candidate.slug}) gains "
                                        f"{gain.text()}, within the noise ({noise * 100:.1f}%)")
        self._verdicts(decision, dominated, feasible, finalists)
        return decision

    def _verdicts(self, decision: Decision, dominated: dict[str, Trial], feasible: list[Trial],
                  finalists: list[Trial]) -> None:
        obj = self.s.objective
        top = decision.winner
        for t in self.trials.values():
            t.best = self._best(t)
            if t.status != "measured":
                t.verdict = t.status
                t.detail = t.detail or t.reason
                continue
            if t is decision.winner:
                t.verdict = "winner"
                t.detail = decision.message
                continue
            if t is decision.runner_up:
                t.verdict = "runner-up"
                t.detail = t.detail or ("re-measured; " + decision.message if decision.default_as_good
                                        else "re-measured; lost to the winner")
                continue
            if t not in feasible and t.sweep.behind:
                t.verdict, t.detail = "worse", t.sweep.stop_reason
                continue
            if t not in feasible:
                p = t.sweep.min_p99
                t.verdict = "over budget"
                t.detail = f"p99 {p.p99_ms:.1f} ms > {self.s.budget_ms:g} ms already at concurrency {p.concurrency}"
                continue
            if t in finalists and t.detail:
                t.verdict = "over budget" if "over budget" in t.detail else "failed"
                continue
            if t is self.default:
                t.verdict = "default"
                t.detail = "re-measured as the yardstick; " + decision.message
                continue
            ref = top or (finalists[0] if finalists else None)
            gain = self._gain(t, ref) if ref else None
            noise = self._noise_for_objective()
            if ref is not None and gain is not None and abs(gain) <= noise:
                t.verdict = "within noise"
                t.detail = f"{gain * 100:+.1f}% vs {ref.candidate.slug} (noise {noise * 100:.1f}%)"
            elif t.candidate.key in dominated:
                d = dominated[t.candidate.key]
                t.verdict = "dominated"
                t.detail = f"by {d.candidate.slug}: as much throughput at no more p99 at every point"
            else:
                t.verdict = "worse"
                t.detail = (f"{gain * 100:+.1f}% {'p99' if obj == 'latency' else 'throughput'} vs "
                            f"{ref.candidate.slug}" if ref is not None and gain is not None else "")

    # ---- time and progress ------------------------------------------------------------------
    def _estimate_candidate_s(self, trial: Trial) -> float:
        """Points a challenger takes (as many as the challengers so far, else the fewest a sweep near the
        incumbent's best can take) times the time a point takes; 0 when the checkpoint has its first point."""
        start = self._best(self.incumbent) if self.incumbent else None
        if self.store.get(trial.key, start.concurrency if start else 1, 0) is not None:
            return 0.0
        counts = [t.measured_points for t in self.trials.values() if t is not self.default and t.measured_points]
        points = sum(counts) / len(counts) if counts else 2.0
        return points * self._point_s()

    def _point_s(self) -> float:
        """The time a point takes: the median of the last ten, so that one slow point (an unstable window
        measured again) does not make every later reserve look twice as large and stop the sweeps early."""
        recent = self.point_seconds[-10:]
        return statistics.median(recent) if recent else 0.0

    def _seconds_past_limit(self) -> float:
        if self.s.max_minutes is None:
            return 0.0
        return time.monotonic() - self.started - self.s.max_minutes * 60.0

    def _time_left_s(self) -> float:
        if self.s.max_minutes is None:
            return float("inf")
        return self.s.max_minutes * 60.0 - self.s.finish_reserve_s - (time.monotonic() - self.started)

    def _out_of_time(self, reserve_s: float) -> str:
        """Why a sweep must stop before its next point ("" if it need not): that point and the `reserve_s`
        kept for later steps no longer fit in --max-minutes."""
        left = self._time_left_s()
        if left >= reserve_s + self._point_s():
            return ""
        return (f"--max-minutes {self.s.max_minutes:g}: stopped with {max(left, 0.0) / 60:.1f} min left, kept for "
                "the steps after it")

    def _fits(self, points: int) -> bool:
        """`points` more points fit in --max-minutes (at the measured time of a point)."""
        return self._time_left_s() >= points * self._point_s()

    def _final_points(self, finalists: int) -> int:
        """Points of the final re-measurement: fresh samples of every finalist, and one step down of one where a
        finalist may need it (`_step_down_possible`)."""
        return (finalists + (1 if self._step_down_possible() else 0)) * self.s.confirm_samples

    def _step_down_possible(self) -> bool:
        """Whether a finalist may break the budget when re-measured and have to step down. Not while every
        measured level that could be named is so far under the budget that even the next level a sweep may try
        (at most twice the clients, so at most twice the p99 by Little's law) keeps room for twice the p99 noise;
        until the noise is measured, it is taken as `NOISY`. Holding the step-down time back from the start cost
        the baseline its climb on fast models (resnet18 small stopped at concurrency 1 of a knee near 10)."""
        noise = self.noise.p99 if self._noise_known else max(self.noise.p99, NOISY)
        highest = 0.0
        for t in self.trials.values():
            if t.status != "measured" or t.sweep is None:
                continue
            for p in t.sweep.points:  # the levels that hold (`_holds`), each read from the store once
                p99s = [q.p99_ms for q in self.store.samples(t.key, p.concurrency)]
                if holds_budget(p99s, self.s.budget_ms, self.noise.p99):
                    highest = max(highest, worst_p99(p99s, noise))
        if highest == 0.0:
            return True  # nothing within the budget yet: no grounds to drop it
        return 2.0 * highest * (1.0 + 2.0 * noise) > self.s.budget_ms

    def _baseline_reserve_s(self) -> float:
        """The baseline keeps time for its noise samples and for its own final re-measurement."""
        return (self.s.noise_repeats + self._final_points(1)) * self._point_s()

    def _confirmation_reserve_s(self) -> float:
        """Time to keep for the final re-measurement if one more config is measured: at most two challengers
        and the default, each with fresh samples."""
        challengers = sum(1 for t in self.trials.values() if t.status == "measured" and t is not self.default
                          and self._best(t) is not None)
        default = 1 if self.default is not None and self._best(self.default) is not None else 0
        return self._final_points(min(2, challengers + 1) + default) * self._point_s()

    def _ladder_sizes(self) -> int:
        if self.s.objective == "latency":
            return 0
        mb = max((self._max_batch(f) for f in self.order), default=0)
        return (len(max_batch_ladder(mb)) + len(preferred_options(mb))
                + len(queue_delay_ladder(self.s.budget_ms, self.s.queue_delays_us)))

    def _max_batch(self, fmt: str) -> int:
        m = self.formats[fmt].manifest
        return m.max_batch_size if m else 0

    def _store_key(self, cand: Candidate) -> str:
        digest = self.formats[cand.format].digest if cand.format in self.formats else ""
        return f"{digest[:12]}:{cand.key}" if digest else cand.key

    def _trial_line(self, t: Trial) -> str:
        head = f"[{t.stage}] {t.candidate.label()}"
        if t.status != "measured":
            return f"{head}: {t.status} - {t.reason}"
        best = self._best(t)
        reused = "" if t.measured_points else " (all points from the checkpoint)"
        if best is None:
            return f"{head}: no point within budget; {t.sweep.stop_reason}{reused}"
        return (f"{head}: {best.throughput:.1f} inf/s at concurrency {best.concurrency} (p99 {best.p99_ms:.1f} ms); "
                f"stopped: {t.sweep.stop_reason}{reused}")

    def _open_bar(self) -> None:
        pairs = len(instance_thread_pairs(self.s.cores, self.s.allow_oversubscribe)) - 1
        self.progress.open(len(self.order) + pairs + self._ladder_sizes() + 1)  # + the final re-measurement


__all__ = ["Search", "FINAL_SAMPLE", "NOISY"]
