"""The one rule that names a search's winner against the default (issue 56): the best config wins only when it beats
the default by more than the noise with its whole spread (`stats.Gain.real`), else the default is as good.

Both objectives apply it: the closed-loop decision (`decide`, the host's measured noise) and the open-loop capacity
ranking (`capacity`, each config's own spread and the search's resolution); they differ only in what they compare,
how much noise each config carries and how they word the outcome. An optional tie-break lets a challenger within
the noise still win on something else the caller measured (steady tails, in `capacity`)."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable, Generic, Sequence, TypeVar

from .stats import Gain, Spread
from .trials import Decision

T = TypeVar("T")


class Outcome(enum.Enum):
    """How the winner was named, for the caller's wording."""

    DEFAULT_BEST = "the default ranks first"
    NO_DEFAULT = "the default is not among the ranked configs"
    BEATS = "the best config beats the default beyond the noise"
    TIE_BREAK = "within the noise, but the tie-break favours the best config"
    AS_GOOD = "within the noise: the default is as good"


@dataclass(frozen=True)
class Named(Generic[T]):
    """What `name_winner` decided: the outcome, the best config, the default where it was ranked, and the gain and
    the noise it was judged against (None and 0 where no comparison was made)."""

    outcome: Outcome
    top: T
    default: T | None
    gain: Gain | None = None
    noise: float = 0.0


def name_winner(decision: Decision, ranked: Sequence[T], default: T, spread: Callable[[T], Spread],
                noise: Callable[[T], float], higher: bool = True,
                tie_break: Callable[[T, T], bool] | None = None) -> Named[T]:
    """Set `decision`'s winner, runner-up, gain and default_as_good from `ranked` (best first) and return how.

    `spread`: the measured quantity of a config (its repeats); `noise`: the relative noise a config's figure
    carries, the larger of the two configs' counts; `higher`: whether more of the quantity is better.
    The message is the caller's: the rule decides, the objective words it."""
    top = ranked[0]
    decision.runner_up = next((t for t in ranked[1:] if t is not default), None)
    d = default if default in ranked else None
    if top is d:
        decision.winner = d
        return Named(Outcome.DEFAULT_BEST, top, d)
    if d is None:
        decision.winner = top
        return Named(Outcome.NO_DEFAULT, top, None)
    gain = Gain.between(spread(top), spread(d), higher)
    margin = max(noise(top), noise(d))
    decision.gain = gain
    if gain.real(margin):
        decision.winner = top
        return Named(Outcome.BEATS, top, d, gain, margin)
    if tie_break is not None and tie_break(top, d):
        decision.winner = top
        return Named(Outcome.TIE_BREAK, top, d, gain, margin)
    decision.winner = d
    decision.default_as_good = True
    decision.runner_up = top
    return Named(Outcome.AS_GOOD, top, d, gain, margin)


__all__ = ["Named", "Outcome", "name_winner"]
