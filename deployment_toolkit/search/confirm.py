"""The final re-measurement: fresh samples of every finalist at its best level, taken in turns with all finalists
loaded, and the stepping down of a finalist whose samples do not hold the budget."""
from __future__ import annotations

from .bench import Bench
from .clock import SearchClock
from .judge import Judge
from .progress import Progress
from .stats import Spread, holds_budget, worst_p99
from .store import Point
from .sweep import budget_level
from .trials import CandidateFailed, CandidateRefused, Confirmation, Trial

FINAL_SAMPLE = 100  # sample numbers of the final re-measurement start here: never the sweep's or the noise's
OVERRUN_STEPS = 3  # step-downs past --max-minutes when otherwise no finalist would be named


def confirm(finalists: list[Trial], bench: Bench, judge: Judge, clock: SearchClock, progress: Progress) -> list[str]:
    """Set each finalist's `confirmation` (their time was reserved up front); return the notes for the outcome.

    A finalist whose samples do not hold the budget (`holds_budget`: any one over it, or the median without room
    for the p99 noise) steps down to where Little's law puts its worst p99 at the budget and is measured again
    there, in the time reserved for that; one that still does not hold, or finds no time left to step down, is
    not named - unless no finalist holds: then the best of them steps down past --max-minutes (at most
    `OVERRUN_STEPS` times, and the notes say by how long), since a search that names nothing for want of a few
    seconds has wasted the whole limit."""
    s = judge.settings
    budget, noise = s.budget_ms, judge.noise.p99
    level = {t.candidate.key: judge.best(t).concurrency for t in finalists}
    todo = list(finalists)
    overrun_steps, steps = 0, []
    bench.keep_loaded = True
    try:
        while todo:
            taken = take_in_turns(todo, level, bench, s.confirm_samples)
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
                if c > 1 and not clock.fits((len(todo) + 1) * s.confirm_samples):
                    if held or todo or overrun_steps >= OVERRUN_STEPS:
                        progress.say(f"  {t.candidate.slug}: {why} at concurrency {c}; no time left to step down: "
                                     "not named")
                        continue
                    overrun_steps += 1
                elif c <= 1:
                    progress.say(f"  {t.candidate.slug}: {why} at concurrency {c}; nothing below it: not named")
                    continue
                level[t.candidate.key] = max(1, min(c - 1, budget_level(c, worst_p99(p99s, noise), budget)))
                steps.append(f"{t.candidate.slug} {c} -> {level[t.candidate.key]}")
                progress.say(f"  {t.candidate.slug}: {why} at concurrency {c}; re-measuring at "
                             f"{level[t.candidate.key]}")
                todo.append(t)
    finally:
        bench.keep_loaded = False
        bench.release()
        progress.postfix("")
    return _overrun_notes(clock, overrun_steps, steps)


def take_in_turns(trials: list[Trial], level: dict[str, int], bench: Bench, samples: int) -> dict[str, list[Point]]:
    """`samples` fresh samples of each trial at its level, round-robin over the trials so that a change in the
    host's load hits all of them alike; a trial that fails is left out, with why in its detail."""
    taken: dict[str, list[Point]] = {t.candidate.key: [] for t in trials}
    for s in range(samples):
        for t in trials:
            key = t.candidate.key
            if key not in taken:
                continue
            try:
                taken[key].append(bench.retrying(
                    t, lambda t=t, s=s: bench.point(t, level[t.candidate.key], FINAL_SAMPLE + s)))
            except (CandidateRefused, CandidateFailed) as err:
                t.detail = f"failed when re-measured: {err}"
                t.confirmation = None
                del taken[key]
    return taken


def _overrun_notes(clock: SearchClock, overrun_steps: int, steps: list[str]) -> list[str]:
    """What the notes say when the final re-measurement ran past --max-minutes."""
    max_minutes = clock.settings.max_minutes
    over_s = clock.seconds_past_limit()
    if overrun_steps:
        return [f"no finalist held the budget when re-measured and --max-minutes {max_minutes:g} left no "
                f"time to step down: the best one stepped down {overrun_steps} time(s) past the limit "
                f"({max(0.0, -clock.time_left_s()):.0f} s over) rather than name nothing"]
    if over_s >= 1.0:
        return [f"finished {over_s:.0f} s past --max-minutes {max_minutes:g}: the final re-measurement"
                + (f" and its step-down(s) ({'; '.join(steps)})" if steps else "")
                + " took longer than the time reserved for it, which is estimated from the sweep's points"]
    return []


__all__ = ["FINAL_SAMPLE", "OVERRUN_STEPS", "confirm", "take_in_turns"]
