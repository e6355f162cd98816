"""Stable tails count in the search (issue 55): a config whose p99 at one rate jumps between its searches (more than
TAIL_SPREAD) is ranked below a steady one of nearly the same capacity, and each finalist says how much its p99
varied."""
from __future__ import annotations

from types import SimpleNamespace

from deployment_toolkit.search.capacity import TAIL_SPREAD, CapacityMeasurement, _steadier_first
from deployment_toolkit.perf.openloop.capacity import OpenLoopCapacity, Search
from deployment_toolkit.perf.openloop.ratepoint import RatePoint
from deployment_toolkit.perf.openloop.ratestore import RateKey

SLO = 20.0


def _point(rate: float, p99: float, trial: int) -> RatePoint:
    row = {"answered": rate if p99 <= SLO else rate * 0.8, "p99_ms": p99, "queue_growing": p99 > SLO,
           "client_limited": False, "stable": True, "send_rate": rate}
    return RatePoint(RateKey("m", "poisson", rate, 1, "{}", trial), row)


def _config(slug: str, searches: list[list[tuple[float, float]]]):
    trials = [Search(SLO, 1, [_point(r, p, n) for r, p in points], 0.05) for n, points in enumerate(searches, 1)]
    return SimpleNamespace(candidate=SimpleNamespace(slug=slug),
                           capacity=CapacityMeasurement(OpenLoopCapacity(slug, "poisson", SLO, trials)))


def test_a_config_whose_tails_jump_is_ranked_below_a_steady_one_of_nearly_its_capacity():
    jumpy = _config("t_default", [[(100, 5.0), (120, 50.0)], [(100, 15.0)]])  # p99 at 100/s: 5 then 15 ms
    steady = _config("t1", [[(97, 6.0), (117, 40.0)], [(97, 7.0)]])
    assert abs(jumpy.capacity.p99_spread - 3.0) < 1e-9 and not jumpy.capacity.steady
    assert steady.capacity.steady and "varied x1.17" in steady.capacity.tail_text()
    reached = [jumpy, steady]
    said = _steadier_first(reached)
    assert reached == [steady, jumpy]
    assert said.startswith("t1 ranked above t_default of nearly the same capacity") and f"x{TAIL_SPREAD:g}" in said


def test_a_steady_config_far_below_keeps_its_place_and_unrepeated_rates_are_said():
    jumpy = _config("t_default", [[(100, 5.0), (120, 50.0)], [(100, 15.0)]])
    slow = _config("t1", [[(60, 6.0), (80, 40.0)], [(60, 7.0)]])
    reached = [jumpy, slow]
    assert _steadier_first(reached) == "" and reached == [jumpy, slow]  # 60 is not nearly 100
    once = _config("t2", [[(90, 6.0), (110, 40.0)]])
    assert once.capacity.p99_spread is None and once.capacity.steady
    assert once.capacity.tail_text() == "p99 at one rate: not repeated"
