"""The decision: which measured configs go to the final re-measurement (the best two non-dominated and the
default), which one is named once they are re-measured (the winner must beat the default beyond the noise with its
whole spread), and every config's verdict line. Reads the checkpoint through the `Judge`; measures nothing."""
from __future__ import annotations

from dataclasses import dataclass

from .judge import Judge
from .noise_rule import Outcome, name_winner
from .store import Point
from .sweep import score
from .trials import Decision, Trial


@dataclass
class Standings:
    """The configs going into the final re-measurement, and what the decision and the verdicts need of the rest."""

    trials: list[Trial]  # every config, in the order they were tried
    measured: list[Trial]
    feasible: list[Trial]  # with a level that holds the budget
    dominated: dict[str, Trial]  # candidate key -> the config that dominates it
    finalists: list[Trial]
    best_p99: Point | None  # the lowest p99 seen at any level


def standings(trials: list[Trial], default: Trial, judge: Judge) -> Standings:
    """The best two non-dominated configs within the budget, and the default when it is within it."""
    higher = judge.settings.explore == "throughput"
    measured = [t for t in trials if t.status == "measured"]
    feasible = [t for t in measured if judge.best(t) is not None]
    best_p99 = min((t.sweep.min_p99 for t in measured if t.sweep and t.sweep.min_p99),
                   key=lambda p: p.p99_ms, default=None)
    dominated = {t.candidate.key: d for t in feasible if (d := dominated_by(t, feasible, trials, judge))}
    ranked = sorted((t for t in feasible if t.candidate.key not in dominated),
                    key=lambda t: score(judge.best(t), judge.settings.explore), reverse=higher)
    finalists = ranked[:2]
    if default in feasible and default not in finalists:
        finalists.append(default)
    return Standings(trials, measured, feasible, dominated, finalists, best_p99)


def dominated_by(a: Trial, feasible: list[Trial], order: list[Trial], judge: Judge) -> Trial | None:
    """The first config with as much throughput at no more p99 for every point of `a` (ties: the earlier in
    `order`)."""
    def covers(xs: list[Point], ys: list[Point]) -> bool:
        return all(any(q.throughput >= p.throughput and q.p99_ms <= p.p99_ms for q in xs) for p in ys)

    pts_a = judge.frontier(a)
    for b in feasible:
        if b is a:
            continue
        pts_b = judge.frontier(b)
        if covers(pts_b, pts_a) and (not covers(pts_a, pts_b) or order.index(b) < order.index(a)):
            return b
    return None


def decide(st: Standings, default: Trial, judge: Judge) -> Decision:
    """Name the winner from the finalists' `confirmation`s and set every trial's verdict."""
    higher = judge.settings.explore == "throughput"
    confirmed = [t for t in st.finalists if t.confirmation and t.confirmation.holds]
    for t in st.finalists:
        if t.confirmation and t not in confirmed:
            t.detail = (f"p99 over budget when re-measured (or without room for the {judge.noise.p99 * 100:.1f}% "
                        f"p99 noise): {t.confirmation.p99.text()} ms at concurrency {t.confirmation.concurrency}")
    key = (lambda t: t.confirmation.throughput.median) if higher else (lambda t: t.confirmation.p99.median)
    confirmed.sort(key=key, reverse=higher)

    decision = Decision(winner=None, default=default, best_p99_seen=st.best_p99)
    if not confirmed:
        decision.message = _nothing_named(st, judge)
    else:
        _name_winner(decision, confirmed, default, judge)
    verdicts(decision, st, default, judge)
    return decision


def _nothing_named(st: Standings, judge: Judge) -> str:
    """Why no config is named: nothing measured, none held when re-measured, none with room for the noise, or
    none within the budget at all."""
    budget, noise, best_p99 = judge.settings.budget_ms, judge.noise, st.best_p99
    if best_p99 is None:
        return "nothing could be measured"
    if st.feasible:
        return (f"no configuration held p99 <= {budget:g} ms when re-measured, although "
                f"{len(st.feasible)} did once (best p99 seen {best_p99.p99_ms:.2f} ms): p99 varies by "
                f"{noise.p99 * 100:.0f}% between measurements on this host. Run on a quiet host or raise --p99-ms.")
    owner = next(t for t in st.measured if t.sweep and best_p99 in t.sweep.points)
    if best_p99.p99_ms <= budget:
        return (f"no configuration holds p99 <= {budget:g} ms with room for the p99 noise measured on this host "
                f"({noise.p99 * 100:.0f}%): the best p99 seen was {best_p99.p99_ms:.2f} ms "
                f"({owner.candidate.label()}, concurrency {best_p99.concurrency}), which the next measurement "
                f"may put at {best_p99.p99_ms * (1 + noise.p99):.1f} ms. Run on a quiet host (the noise "
                "comes from the load), or raise --p99-ms above that.")
    return (f"no configuration meets p99 <= {budget:g} ms: the best p99 seen was {best_p99.p99_ms:.2f} ms "
            f"({owner.candidate.label()}, concurrency {best_p99.concurrency}, "
            f"{best_p99.throughput:.1f} inf/s). Raise --p99-ms above that, or use a smaller model/preset.")


def _name_winner(decision: Decision, confirmed: list[Trial], default: Trial, judge: Judge) -> None:
    """The best confirmed config, unless the default (when it held) is as good within the noise (noise_rule)."""
    higher = judge.settings.explore == "throughput"
    spread = (lambda t: t.confirmation.throughput) if higher else (lambda t: t.confirmation.p99)
    host_noise = judge.noise_for_objective()
    named = name_winner(decision, confirmed, default, spread, lambda t: host_noise, higher)
    top, noise, gain = named.top, named.noise, named.gain
    if named.outcome is Outcome.DEFAULT_BEST:
        decision.message = "the default config is the best: no other config beat it"
    elif named.outcome is Outcome.NO_DEFAULT:
        decision.message = (f"the default config does not hold the budget "
                            f"({default.detail or 'no point within it'}); the winner does")
    elif named.outcome is Outcome.BEATS:
        decision.message = (f"{top.candidate.slug} beats the default by {gain.text()} "
                            f"({'throughput' if higher else 'p99'}; noise {noise * 100:.1f}%)")
    else:
        decision.message = (f"the default is as good: the best config ({top.candidate.slug}) gains "
                            f"{gain.text()}, within the noise ({noise * 100:.1f}%)")


def verdicts(decision: Decision, st: Standings, default: Trial, judge: Judge) -> None:
    """Every trial's best level, verdict and the detail line that says why."""
    obj = judge.settings.explore
    top = decision.winner
    for t in st.trials:
        t.best = judge.best(t)
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
        if t not in st.feasible and t.sweep.behind:
            t.verdict, t.detail = "worse", t.sweep.stop_reason
            continue
        if t not in st.feasible:
            p, budget = t.sweep.min_p99, judge.settings.budget_ms
            t.verdict = "over budget"
            t.detail = (f"p99 {p.p99_ms:.1f} ms > {budget:g} ms already at concurrency {p.concurrency}"
                        if p.p99_ms > budget else
                        f"p99 {p.p99_ms:.1f} ms at concurrency {p.concurrency} leaves no room within {budget:g} ms for "
                        f"the p99 noise measured on this host ({judge.noise.p99 * 100:.0f}%)")
            continue
        if t in st.finalists and t.detail:
            t.verdict = "over budget" if "over budget" in t.detail else "failed"
            continue
        if t is default:
            t.verdict = "default"
            t.detail = "re-measured as the yardstick; " + decision.message
            continue
        ref = top or (st.finalists[0] if st.finalists else None)
        gain = judge.gain(t, ref) if ref else None
        noise = judge.noise_for_objective()
        if ref is not None and gain is not None and abs(gain) <= noise:
            t.verdict = "within noise"
            t.detail = f"{gain * 100:+.1f}% vs {ref.candidate.slug} (noise {noise * 100:.1f}%)"
        elif t.candidate.key in st.dominated:
            d = st.dominated[t.candidate.key]
            t.verdict = "dominated"
            t.detail = f"by {d.candidate.slug}: as much throughput at no more p99 at every point"
        else:
            t.verdict = "worse"
            t.detail = (f"{gain * 100:+.1f}% {'p99' if obj == 'latency' else 'throughput'} vs "
                        f"{ref.candidate.slug}" if ref is not None and gain is not None else "")


__all__ = ["Standings", "decide", "dominated_by", "standings", "verdicts"]
