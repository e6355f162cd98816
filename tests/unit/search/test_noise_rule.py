"""The one winner-within-noise rule (issue 56) that the closed-loop decision and the capacity ranking both apply: the
best config wins only beyond the noise with its whole spread, else the default is as good; a tie-break may still
favour the best config within the noise."""
from __future__ import annotations

import pytest

from deployment_toolkit.search.noise_rule import Outcome, name_winner
from deployment_toolkit.search.stats import Spread
from deployment_toolkit.search.trials import Decision

FIGURES = {"default": Spread.of([100, 101, 99]), "close": Spread.of([102, 103, 101]),
           "far": Spread.of([130, 131, 129]), "wide": Spread.of([140, 200, 90])}


def _named(ranked: list[str], default: str = "default", noise: float = 0.05, higher: bool = True, tie_break=None):
    decision = Decision(winner=None, default=default)  # type: ignore[arg-type]
    named = name_winner(decision, ranked, default, FIGURES.__getitem__, lambda t: noise, higher, tie_break)
    return decision, named


def test_the_best_config_wins_only_beyond_the_noise():
    decision, named = _named(["far", "close", "default"])
    assert named.outcome is Outcome.BEATS and decision.winner == "far" and decision.runner_up == "close"
    assert not decision.default_as_good and decision.gain is named.gain and named.gain.median == pytest.approx(0.3)
    decision, named = _named(["close", "default"])
    assert named.outcome is Outcome.AS_GOOD and decision.winner == "default" and decision.default_as_good
    assert decision.runner_up == "close" and named.noise == 0.05


def test_a_gain_whose_spread_reaches_a_loss_is_no_gain():
    decision, named = _named(["wide", "default"])  # median +40%, but its low sample is below the default's high
    assert named.outcome is Outcome.AS_GOOD and decision.winner == "default"


def test_the_default_first_or_absent_needs_no_comparison():
    decision, named = _named(["default", "far"])
    assert named.outcome is Outcome.DEFAULT_BEST and decision.winner == "default" and decision.runner_up == "far"
    assert decision.gain is None
    decision, named = _named(["close", "far"])
    assert named.outcome is Outcome.NO_DEFAULT and decision.winner == "close" and named.default is None


def test_lower_is_better_and_the_larger_noise_of_the_two_counts():
    decision, named = _named(["default", "far"], higher=False)  # as for p99: the default's is lower
    assert named.outcome is Outcome.DEFAULT_BEST
    decision = Decision(winner=None, default="default")  # type: ignore[arg-type]
    named = name_winner(decision, ["far", "default"], "default", FIGURES.__getitem__,
                        {"far": 0.01, "default": 0.4}.__getitem__)
    assert named.noise == 0.4 and named.outcome is Outcome.AS_GOOD


def test_a_tie_break_favours_the_best_config_within_the_noise_only():
    decision, named = _named(["close", "default"], tie_break=lambda top, d: True)
    assert named.outcome is Outcome.TIE_BREAK and decision.winner == "close" and not decision.default_as_good
    assert decision.runner_up is None  # no other challenger; the default is not a runner-up
    decision, named = _named(["far", "default"], tie_break=lambda top, d: False)
    assert named.outcome is Outcome.BEATS
