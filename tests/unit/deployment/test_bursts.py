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
    from deployment_toolkit.perf.openloop.ratepoint import Target, arrival_band, point_key

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


def _burst_gaps(period_s: float = 5.0, per_period: int = 300, share: float = 0.6, periods: int = 60) -> np.ndarray:
    """1-second bursts every `period_s` seconds: `share` of each period's requests in its first second."""
    rng = np.random.default_rng(1)
    times = []
    for k in range(periods):
        burst = int(per_period * share)
        times += [k * period_s + rng.uniform(0, 1, burst), k * period_s + 1 + rng.uniform(0, period_s - 1,
                                                                                          per_period - burst)]
    return np.diff(np.sort(np.concatenate(times)))


def test_a_windows_count_varies_as_the_replayed_bursts_fall_in_it():
    from deployment_toolkit.perf.analyzer import window_dispersion

    gaps = _burst_gaps()  # 60/s on average at the log's own pace
    own = window_dispersion(gaps, 60.0, 1.0)
    assert own > 10  # 1-s windows at the log's pace: bursts and calm seconds
    assert window_dispersion(gaps, 300.0, 1.0) < own / 3  # 5x faster: each window holds a whole period, averaged
    assert window_dispersion(np.random.default_rng(0).exponential(0.01, 20_000), 100.0, 1.0) == 1.0  # Poisson
    assert window_dispersion(gaps[:5], 60.0, 1.0) == 1.0  # too short to say


def test_a_recorded_point_that_answered_what_its_windows_held_keeps_up():
    """A server that kept up with bursts fails no point on where they fell in its three reported windows: the
    allowance below KEEP_UP of what was sent is 2 sqrt(dispersion / count); Poisson points keep theirs."""
    import dataclasses

    from deployment_toolkit.perf.analyzer import PerfOptions
    from deployment_toolkit.perf.openloop.ratepoint import KEEP_UP, RatePoint, Target, point_key

    options = PerfOptions(measurement_mode="time_windows", measurement_interval_ms=1000)
    target = Target("cfg", "m", "localhost:8001", 1, None, options)
    bursty = dataclasses.replace(target, distribution="recorded", gaps=tuple(_burst_gaps()))
    key, plain = point_key(bursty, 60.0), point_key(target, 60.0)
    row = {"offered": 60.0, "answered": 0.9 * 60.0, "send_rate": 60.0, "queue_growing": False}
    assert RatePoint(key, dict(row)).kept_up  # 90% of sent, within a bursty window's allowance
    assert not RatePoint(plain, dict(row)).kept_up  # Poisson arrivals: 97% of what was sent
    assert RatePoint(plain, dict(row)).required == KEEP_UP * 60.0
    # at 5x the log's pace a window holds a whole burst period: little allowance, and a server behind fails
    fast = point_key(bursty, 300.0)
    assert not RatePoint(fast, {**row, "offered": 300.0, "send_rate": 300.0, "answered": 0.7 * 300.0}).kept_up
    assert RatePoint(fast, {**row, "offered": 300.0, "send_rate": 300.0, "answered": 0.95 * 300.0}).kept_up
    # where the windows are no longer than the bursts, their count says nothing (the p99 from the intended send
    # time still catches a server behind: its queue grows)
    assert RatePoint(key, {**row, "answered": 0.3 * 60.0}).required == 0.0
