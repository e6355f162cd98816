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
default by more than the noise with its whole spread, or the default is declared as good. Under --objective
capacity the finalists are ranked by open-loop capacity instead (capacity.py; its rates' windows follow the
default's throughput). Measurement goes through a `Measurer` (the real server in `triton.py`, a fake in tests).

Here: the exploration, the noise, the knee; judge.py reads levels, bench.py measures, clock.py keeps the time
limit, confirm.py (or capacity.py) re-measures the finals, decide.py decides."""
from __future__ import annotations

import time
from typing import Callable

from . import capacity
from .bench import Bench
from .clock import SearchClock
from .confirm import FINAL_SAMPLE, confirm
from .decide import decide, standings
from .judge import NOISY, Judge
from .progress import Progress, noisy_host_warning, trial_line
from .space import (
    Candidate,
    default_candidate,
    instance_thread_pairs,
    max_batch_ladder,
    preferred_options,
    queue_delay_ladder,
)
from .stats import Noise
from .store import Point, SearchStore
from .sweep import SweepPolicy, SweepResult, narrow_knee, sweep_concurrency, sweep_near
from .trials import (
    CandidateFailed,
    CandidateRefused,
    Decision,
    FormatInfo,
    Measurer,
    SearchError,
    SearchOutcome,
    SearchSettings,
    Trial,
    config_problem,
)


class Search:
    def __init__(self, formats: list[FormatInfo], measurer: Measurer, store: SearchStore, settings: SearchSettings,
                 *, progress: bool = True, log: Callable[[str], None] | None = None, started: float | None = None):
        """`started`: the time.monotonic() the time limit counts from (default: when `run` begins), so that a
        command can count its own start-up (the server, the artifacts) against --max-minutes."""
        self.formats = {f.format: f for f in formats}
        self.order = [f.format for f in formats]
        self.store = store
        self.s = settings
        self.trials: dict[str, Trial] = {}
        self.notes: list[str] = []
        self.incumbent: Trial | None = None
        self.default: Trial | None = None
        self.stopped = ""
        self.progress = Progress(progress, log, settings.max_minutes)
        self.judge = Judge(store, settings, Noise(settings.min_noise, settings.min_noise, 0))
        self.clock = SearchClock.kept_in(store, settings, started)  # an earlier run's answers again (clock.py)
        self.bench = Bench(measurer, store, self.clock, self.progress)

    # ---- public -----------------------------------------------------------------------------
    def run(self) -> SearchOutcome:
        if self.s.rank_by == "capacity" and not hasattr(self.bench.measurer, "rate_point"):
            raise SearchError("--objective capacity needs a measurer that measures open-loop rates")
        self.progress.started = self.clock.start()
        if self.clock.replaying:
            self.progress.say("checkpoint: the same search ran before; its decisions are replayed (clock.py)")
        self._open_bar()
        finished = False
        try:
            self._explore()
            decision = self._decide()
            finished = True
        finally:
            self.bench.release()
            self.progress.close()
            self.store.save_clock(complete=finished)
        return SearchOutcome(self.s, list(self.trials.values()), decision, self.judge.noise, self.notes,
                             self.bench.measured_points, self.store.reused_points, self.clock.wall_s(),
                             self.stopped, measured_rates=self.bench.measured_rates,
                             reused_rates=self.bench.reused_rates, replayed_answers=self.clock.replayed)

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
        capacity.expect_rates(self.clock, self.judge.best(base))

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
        if self.s.explore == "latency":
            return "the latency objective measures one request in flight, which the batcher never groups"
        if self.incumbent.candidate.max_batch_size < 2:
            return "the model does not batch (max batch size < 2)"
        if not any(self.judge.best(t) for t in self.trials.values()):
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
                gain = self.judge.gain_text(trial, self.incumbent)
                noise = self.judge.noise_for_objective()
                self.notes.append(f"{name}: stopped after {cand.label()} ({gain}, noise {noise * 100:.1f}%); "
                                  f"not tried: {len(rest)} more value(s)")
                self.progress.total(-len(rest))
            return

    def _challenge(self, trial: Trial) -> bool:
        if trial.status == "measured" and self.judge.better(trial, self.incumbent):
            self.progress.say(f"  -> new incumbent: {trial.candidate.label()} "
                              f"({self.judge.gain_text(trial, self.incumbent)})")
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
        before = self.bench.measured_points
        policy = self._policy()
        inc = self.incumbent
        # the incumbent at each level, at its median where that level was measured repeatedly
        reference = ({p.concurrency: self.judge.median_point(inc, p) for p in inc.sweep.points} if inc and inc.sweep
                     else None)
        start = self.judge.best(inc) if inc else None
        reserve = self._baseline_reserve_s if self.default is None else self._confirmation_reserve_s
        stop = lambda: self.clock.out_of_time(reserve())  # noqa: E731

        def sweep() -> SweepResult:
            measure = lambda c: self.bench.point(trial, c, 0)  # noqa: E731
            if start is None:
                return sweep_concurrency(measure, policy, reference, stop)
            return sweep_near(measure, policy, start.concurrency, reference, stop)
        try:
            trial.sweep = self.bench.retrying(trial, sweep)
            trial.status = "measured"
        except CandidateRefused as err:
            trial.status, trial.reason = "refused", f"the server refused it: {err}"
            self.store.put_failure(trial.key, "refused", trial.reason)
        except CandidateFailed as err:
            trial.status, trial.reason = "failed", f"failed twice: {err}"
            self.store.put_failure(trial.key, "failed", trial.reason)
        finally:
            self.bench.release()
        trial.measured_points = self.bench.measured_points - before
        trial.seconds = time.monotonic() - t0
        self.progress.say(trial_line(trial, self.judge.best(trial) if trial.status == "measured" else None))
        self.progress.step()
        return trial

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
        if self.stopped:
            return "skipped", self.stopped
        counted = sum(1 for t in self.trials.values() if t.status == "measured")
        if self.s.max_configs is not None and counted >= self.s.max_configs:
            self.stopped = f"--max-configs {self.s.max_configs} reached"
            return "skipped", self.stopped
        if self.s.max_minutes is not None and self.default is not None:
            left = self.clock.time_left_s()
            estimate = self._estimate_candidate_s(trial)
            if estimate + self._confirmation_reserve_s() > left:
                self.stopped = (f"--max-minutes {self.s.max_minutes:g}: {left / 60:.1f} min left, a config takes about "
                                f"{estimate / 60:.1f} min plus the final re-measurement")
                return "skipped", self.stopped
        # after the time check, as in the run that measured it and failed: a rerun asks the clock what that run asked
        stored = self.store.failure(trial.key, lambda why: self.progress.say(f"[{trial.stage}] {cand.label()}: {why}"))
        if stored:
            return stored["kind"], stored["reason"] + " (from the checkpoint)"
        return None

    # ---- noise and the baseline's knee -------------------------------------------------------
    def _estimate_noise(self, base: Trial) -> None:
        anchor = self.judge.best(base) or base.sweep.points[0]
        samples = self.bench.samples(base, anchor.concurrency, 1 + self.s.noise_repeats)
        self.judge.noise = Noise.from_samples([p.throughput for p in samples], [p.p99_ms for p in samples],
                                              self.s.min_noise)
        self.judge.noise_known = True
        self.progress.say(f"noise (baseline at concurrency {anchor.concurrency}, {len(samples)} samples): "
                          f"{self.judge.noise.text()}")
        if self.judge.noise.throughput > NOISY:
            warning = noisy_host_warning(self.judge.noise, self.s.cores)
            self.notes.append(warning)
            self.progress.say(f"WARNING: {warning}")
        self._refine_knee(base)
        self.bench.release()

    def _refine_knee(self, trial: Trial) -> None:
        """With the p99 noise now known, the baseline's best level may no longer hold the budget with room for
        it: narrow the knee again between the best level that does and the first one above it that does not."""
        best = self.judge.best(trial)
        if self.s.explore != "throughput" or best is None:
            return
        above = [p for p in trial.sweep.points if p.concurrency > best.concurrency
                 and not self.judge.holds(trial, p.concurrency)]
        if not above:
            self._resume_climb(trial, best)
            return
        bad = self.judge.median_point(trial, min(above, key=lambda p: p.concurrency))
        if bad.concurrency - best.concurrency <= 1:
            return
        before = self.bench.measured_points
        try:
            narrow_knee(self._extending(trial), self._policy(), best, bad, trial.sweep, self._stop_keeping_final)
        except (CandidateRefused, CandidateFailed) as err:
            self.progress.say(f"  {trial.candidate.slug}: {err} while narrowing the knee; kept what was measured")
        trial.measured_points += self.bench.measured_points - before
        new = self.judge.best(trial)
        self.progress.say(f"  knee with room for the p99 noise ({self.judge.noise.p99 * 100:.1f}%): best level "
                          f"{new.concurrency if new else '-'} (was {best.concurrency})")

    def _resume_climb(self, trial: Trial, best: Point) -> None:
        """A baseline whose sweep the time limit stopped before any level broke the budget climbs on from its
        best level, now that the noise is known and the reserve may be smaller (`Judge.step_down_possible`): the
        baseline is often the recommendation on a short limit, and its knee is worth more than a challenger."""
        if not trial.sweep.stop_reason.startswith("--max-minutes") or self.s.explore != "throughput":
            return
        before = self.bench.measured_points
        try:
            climb = sweep_near(self._extending(trial), self._policy(), best.concurrency, None,
                               self._stop_keeping_final)
        except (CandidateRefused, CandidateFailed) as err:
            self.progress.say(f"  {trial.candidate.slug}: {err} while climbing on; kept what was measured")
            climb = None
        trial.measured_points += self.bench.measured_points - before
        if climb is not None and self.bench.measured_points > before:
            trial.sweep.stop_reason += f"; climbed on after the noise estimate: {climb.stop_reason}"
            new = self.judge.best(trial)
            self.progress.say(f"  climbed on from concurrency {best.concurrency}: best level "
                              f"{new.concurrency if new else '-'} ({climb.stop_reason})")

    def _extending(self, trial: Trial) -> Callable[[int], Point]:
        """Sample 0 of `trial` at a concurrency (from the checkpoint when stored), added to its sweep when new
        there: how the knee narrowing and the climb after the noise estimate extend the baseline's sweep."""
        def take(c: int) -> Point:
            p = self.bench.point(trial, c, 0)
            if c not in trial.sweep.by_concurrency():
                trial.sweep.points.append(p)
            return p
        return take

    def _stop_keeping_final(self) -> str:
        """The stop check of the steps after the noise estimate: keep the final re-measurement's time."""
        return self.clock.out_of_time(self.clock.final_reserve_s(1, self._step_down_possible()))

    def _policy(self) -> SweepPolicy:
        return SweepPolicy(self.s.budget_ms, self.s.explore, self.s.max_concurrency, self.s.refine_steps,
                           noise=self.judge.noise.throughput, p99_noise=self.judge.noise.p99)

    # ---- time reserves (the clock's arithmetic on the counts of this search) -------------------
    def _step_down_possible(self) -> bool:
        return self.judge.step_down_possible(self.trials.values())

    def _baseline_reserve_s(self) -> float:
        if self.s.rank_by == "capacity":  # its noise samples, and the capacity stage for the default alone
            return self.s.noise_repeats * self.clock.point_s() + capacity.reserve_s(self.clock, 1)
        return self.clock.baseline_reserve_s(self._step_down_possible())

    def _confirmation_reserve_s(self) -> float:
        """Time to keep for the final re-measurement if one more config is measured (`confirmation_reserve_s`)."""
        challengers = sum(1 for t in self.trials.values() if t.status == "measured" and t is not self.default
                          and self.judge.best(t) is not None)
        default = self.default is not None and self.judge.best(self.default) is not None
        if self.s.rank_by == "capacity":  # the capacity stage for the finalists if one more config is measured
            return capacity.reserve_s(self.clock, min(capacity.planned_finalists(self.clock), challengers + 1)
                                      + int(default))
        return self.clock.confirmation_reserve_s(challengers, default, self._step_down_possible())

    def _estimate_candidate_s(self, trial: Trial) -> float:
        """The time a challenger takes (`candidate_s`); 0 when the checkpoint has its first point. The clock is asked
        either way: a rerun must ask what the first run asked, in order, or its replay goes astray (a rerun that
        skipped this question for a stored challenger took the next answer for another question, went live at the
        capacity stage and measured again what the first run had: the three-replica comparison's plan)."""
        estimate = self.clock.candidate_s([t.measured_points for t in self.trials.values()
                                           if t is not self.default and t.measured_points])
        start = self.judge.best(self.incumbent) if self.incumbent else None
        return 0.0 if self.store.get(trial.key, start.concurrency if start else 1, 0) is not None else estimate

    # ---- final decision ---------------------------------------------------------------------
    def _decide(self) -> Decision:
        """The finalists re-measured in turns (confirm.py; their open-loop capacity under --objective capacity:
        capacity.py), then the winner and every verdict."""
        standing = standings(list(self.trials.values()), self.default, self.judge)
        if self.s.rank_by == "capacity":
            configs = capacity.finalists(standing, self.default, self.judge, capacity.planned_finalists(self.clock))
            self.notes += capacity.measure(configs, self.bench, self.judge, self.clock, self.progress)
            self.progress.step()
            return capacity.decide(standing, configs, self.default, self.judge)
        self.progress.say(f"final re-measurement of {len(standing.finalists)} config(s), {self.s.confirm_samples} "
                          "samples each, taken in turns so that a change in the host's load hits all of them alike ...")
        self.notes += confirm(standing.finalists, self.bench, self.judge, self.clock, self.progress)
        self.progress.step()
        return decide(standing, self.default, self.judge)

    # ---- progress ---------------------------------------------------------------------------
    def _ladder_sizes(self) -> int:
        if self.s.explore == "latency":
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

    def _open_bar(self) -> None:
        pairs = len(instance_thread_pairs(self.s.cores, self.s.allow_oversubscribe)) - 1
        self.progress.open(len(self.order) + pairs + self._ladder_sizes() + 1)  # + the final re-measurement


__all__ = ["Search", "FINAL_SAMPLE", "NOISY", "CandidateRefused", "FormatInfo"]
