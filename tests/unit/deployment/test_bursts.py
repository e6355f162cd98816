"""Bursts the traffic showed (issue 57, item 3): a request log whose per-second counts are over-dispersed is
confirmed with its own inter-arrival times, time-scaled to the planned rate; a Poisson log is not; perf_analyzer's
schedule keeps the log's bursts at the planned mean rate."""
from __future__ import annotations

import numpy as np

from deployment_toolkit.deployment.bursts import BURSTY, bursts_of, recorded
from deployment_toolkit.deployment.file import parse
from deployment_toolkit.perf.analyzer.schedule import make_schedule
from deployment_toolkit.traffic.stats import dispersion


def _log(path, arrivals, model):
    path.write_text("time,model\n" + "".join(f"{t:.6f},{model}\n" for t in arrivals))
    return path


def _bursty(rng, seconds=600, rate=50.0):
    """Requests in 1-s bursts: each second either quiet or a burst of 5x the mean rate."""
    out = []
    for s in range(seconds):
        if rng.random() < 0.2:
            out.extend(s + np.sort(rng.random(rng.poisson(5 * rate))))
    return np.asarray(out) + 1.7e9


def test_a_bursty_log_is_replayed_and_a_poisson_log_is_not(tmp_path):
    rng = np.random.default_rng(3)
    bursty = _bursty(rng)
    steady = 1.7e9 + np.cumsum(rng.exponential(1 / 50.0, 30_000))
    _log(tmp_path / "a.csv", bursty, "a")
    _log(tmp_path / "b.csv", steady, "b")
    deployment = parse({"name": "d", "models": [
        {"name": "a", "model": "resnet18", "traffic": "a.csv", "p99_ms": 100},
        {"name": "b", "model": "resnet18", "traffic": "b.csv", "p99_ms": 100}]}, tmp_path / "d.yaml")
    found = bursts_of(deployment)
    assert list(found) == ["a"] and found["a"].dispersion > BURSTY and len(found["a"].gaps) == len(bursty) - 1
    assert "a (index of dispersion" in found["a"].text()
    from deployment_toolkit.perf.analyzer import PerfOptions
    from deployment_toolkit.sizing.ratepoint import Target, arrival_band, point_key

    poisson = Target("mix[a]/a", "a", "localhost:8001", 1, None, PerfOptions(measurement_interval_ms=1000))
    replay = recorded(poisson, found["a"])
    assert replay.distribution == "recorded" and replay.gaps == found["a"].gaps
    assert point_key(replay, 40.0) != point_key(poisson, 40.0)  # stored apart from the Poisson points
    # its windows differ by its bursts: perf_analyzer's stability band is widened by sqrt(dispersion)
    band = lambda t: arrival_band(t, 40.0).options.stability_percentage  # noqa: E731
    assert band(replay) > band(poisson)


def test_a_recorded_schedule_keeps_the_bursts_at_the_planned_rate():
    rng = np.random.default_rng(5)
    gaps = np.diff(_bursty(rng))
    sched = make_schedule(400.0, 60.0, "recorded", seed=7, gaps=gaps)
    assert abs(sched.mean_rate - 400.0) / 400.0 < 0.1
    arrivals = np.cumsum(sched.intervals_us) / 1e6
    assert dispersion(arrivals) > 5 * BURSTY  # the bursts kept their shape, at eight times the log's rate
    poisson = np.cumsum(make_schedule(400.0, 60.0, "poisson", seed=7).intervals_us) / 1e6
    assert dispersion(poisson) < BURSTY
    other = make_schedule(400.0, 60.0, "recorded", seed=8, gaps=gaps)
    assert not np.array_equal(other.intervals_us[:100], sched.intervals_us[:100])  # another trial, another part
